import Foundation
import Testing

/// Issue 13 item 11: the same keys for the same things in every JSON output.
@Suite("qosmap JSON keys")
struct JSONKeysTests {
    func json(_ args: [String]) throws -> Any {
        let result = try qosmap(args)
        #expect(result.status == 0, "\(result.err)")
        return try JSONSerialization.jsonObject(with: Data(result.out.utf8))
    }

    @Test func item11_domainsNameTheDomainAsDomain() throws {
        let rows = try #require(try json(["domains", "--json"]) as? [[String: Any]])
        #expect(rows.map { $0["domain"] as? String } == ["default", "5p3d", "edge-cake"])
        #expect(
            rows.map { $0["name"] as? String } == ["default", "5p3d", "edge-cake"], "the documented key stays"
        )
    }

    @Test func item11_showHasTheDescription() throws {
        let object = try #require(try json(["show", "5p3d", "--json"]) as? [String: Any])
        #expect((object["description"] as? String)?.hasPrefix("IEEE 802.1ad 5P3D") == true)
    }

    @Test func item11_profileLookupsEchoFieldAndValue() throws {
        let qci = try #require(try json(["lookup", "qci", "1", "--json"]) as? [String: Any])
        #expect(qci["field"] as? String == "qci")
        #expect(qci["value"] as? Int == 1)
        let app = try #require(try json(["lookup", "app", "voip", "--json"]) as? [String: Any])
        #expect(app["field"] as? String == "app")
        #expect(app["value"] as? String == "voip")
    }
}

/// Issue 13 item 11: a profile column that is a list in one row is a list in every row.
@Test func item11_profileColumnsHaveOneType() throws {
    let result = try qosmap(["profile", "show", "mef-23.1", "--json"])
    #expect(result.status == 0)
    let object = try #require(try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any])
    let rows = try #require(object["rows"] as? [[String: Any]])
    for key in ["pcpGreen", "dscpGreen"] {
        let cells = rows.compactMap { $0[key] }
        #expect(!cells.isEmpty)
        #expect(cells.allSatisfy { $0 is [Any] }, "\(key): \(cells)")
    }
}

/// Issue 13 item 11: `profile show --json` carries what the text prints above
/// the table: the source and every deviation line.
@Test func item11_profileShowJSONCarriesSourceAndDeviations() throws {
    let json = try qosmap(["profile", "show", "rfc5127", "--json"])
    let text = try qosmap(["profile", "show", "rfc5127"])
    #expect(json.status == 0 && text.status == 0)
    let object = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any])
    #expect(object["profile"] as? String == "rfc5127")
    let source = try #require(object["source"] as? String)
    #expect(text.out.contains("source: \(source)"))
    let deviations = try #require(object["deviations"] as? [String])
    #expect(!deviations.isEmpty)
    for d in deviations { #expect(text.out.contains("deviation: \(d)"), "\(d)") }
    #expect((object["rows"] as? [Any])?.isEmpty == false)
}
