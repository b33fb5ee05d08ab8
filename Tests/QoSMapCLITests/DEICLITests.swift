import Foundation
import Testing

/// Issue 13 item 5: DEI is shown and echoed wherever it matters.
@Suite("qosmap DEI")
struct DEICLITests {
    func object(_ args: [String]) throws -> [String: Any] {
        let result = try qosmap(args)
        #expect(result.status == 0, "\(result.err)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any])
    }

    @Test func item5_inboundJSONEchoesTheDEIInput() throws {
        let set = try object(["lookup", "8021p", "3", "--dei", "--domain", "5p3d", "--json"])
        #expect(set["dei"] as? Bool == true)
        #expect(set["color"] as? String == "yellow")
        let clear = try object(["lookup", "8021p", "3", "--domain", "5p3d", "--json"])
        #expect(clear["dei"] as? Bool == false)
        #expect(try object(["lookup", "dscp", "46", "--json"])["dei"] == nil)
    }

    @Test func item5_outboundJSONCarriesDEIWhenTheDomainDoes() throws {
        let yellow = try object(["lookup", "class", "AF4", "--color", "yellow", "--domain", "5p3d", "--json"])
        #expect(yellow["dei"] as? Int == 1)
        let inbound = try object(["lookup", "8021p", "3", "--dei", "--domain", "5p3d", "--json"])
        #expect((inbound["outbound"] as? [String: Int])?["dei"] == 1)
        let plain = try object(["lookup", "class", "AF4", "--color", "yellow", "--json"])
        #expect(plain["dei"] == nil)
    }

    @Test func item5_showHasTheDEITables() throws {
        let result = try qosmap(["show", "5p3d", "--field", "8021p"])
        #expect(
            result.out.contains("  8021P  Service  Color   Color (DEI 1)\n  0      BE       yellow  yellow\n")
        )
        #expect(result.out.contains("outbound service class and color -> S-tag DEI\n"))
        #expect(result.out.contains("  AF4      0      1       1\n"))
        let plain = try qosmap(["show", "default", "--field", "8021p"])
        #expect(!plain.out.contains("DEI"))
    }

    @Test func item5_deiOnADomainThatIgnoresItIsReported() throws {
        let result = try qosmap(["lookup", "8021p", "3", "--dei"])
        #expect(result.status == 0)
        #expect(
            result.err
                == "qosmap: warning: domain 'default' ignores DEI (dei: ignore); --dei changes nothing\n")
        let colored = try qosmap(["lookup", "8021p", "3", "--dei", "--domain", "5p3d"])
        #expect(colored.err == "")
    }
}
