import Foundation
import Testing

/// Runs the built `qosmap` binary (next to the test bundle) for the profile commands.
struct ProfileCLITests {
    static func run(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
        try qosmap(args + ["--no-system-tables"])
    }

    static func json(_ args: [String]) throws -> [String: Any] {
        let r = try run(args + ["--json"])
        let object = try JSONSerialization.jsonObject(with: Data(r.out.utf8))
        return try #require(object as? [String: Any])
    }

    @Test(arguments: [
        (["lookup", "qci", "1"], 46, "EF", 5), (["lookup", "qci", "5"], 46, "EF", 5),
        (["lookup", "5qi", "82"], 46, "EF", 5),
        (["lookup", "app", "voip", "--profile", "gsma-ir34"], 46, "EF", 5),
        (["lookup", "app", "Browsing"], 18, "AF2", 2),
        (["lookup", "service", "telephony", "--profile", "rfc4594"], 46, "EF", 5),
        (["lookup", "service", "multimedia_conferencing"], 34, "AF4", 4),
    ])
    func chainedLookup(args: [String], dscp: Int, serviceClass: String, pcp: Int) throws {
        let j = try Self.json(args)
        #expect(j["dscp"] as? Int == dscp)
        #expect(j["serviceClass"] as? String == serviceClass)
        #expect((j["outbound"] as? [String: Int])?["8021p"] == pcp)
    }

    @Test(arguments: [
        ["lookup", "service", "nonsense"], ["lookup", "qci", "42"],
        ["lookup", "app", "voip", "--profile", "nope"],
        ["profile", "show", "nope"],
    ])
    func unknownNamesExit64(args: [String]) throws {
        let r = try Self.run(args)
        #expect(r.status == 64)
        #expect(r.err.contains("allowed:") || r.err.contains("known profiles:"), "\(r.err)")
    }

    @Test func profileShowJSON() throws {
        let r = try Self.run(["profile", "show", "3gpp-qci", "--json"])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [[String: Any]])
        #expect(rows.first?["name"] as? String == "QCI 1")
        #expect(rows.first?["qci"] as? Int == 1)
        #expect(rows.first?["priority"] as? Int == 2)
        #expect(rows.first?["dscp"] as? Int == 46)
    }

    @Test func profileListJSON() throws {
        let r = try Self.run(["profile", "list", "--json"])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [[String: Any]])
        #expect(rows.compactMap { $0["name"] as? String }.contains("rfc5127"))
    }
}
