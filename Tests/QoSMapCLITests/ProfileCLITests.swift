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
        let rows = try Self.rows(["profile", "show", "3gpp-qci"])
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

    static func rows(_ args: [String]) throws -> [[String: Any]] {
        let r = try run(args + ["--json"])
        #expect(r.status == 0, "\(r.err)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any])
        return try #require(object["rows"] as? [[String: Any]])
    }

    // Issue 14: the release per 5QI row and the derived marks in JSON.
    @Test func fiveQIJSONCarriesReleaseAndDerived() throws {
        let rows = try Self.rows(["profile", "show", "3gpp-5qi"])
        let ten = try #require(rows.first { $0["5qi"] as? Int == 10 })
        #expect(ten["packetDelayBudgetMs"] as? Int == 1100)
        #expect(ten["release"] as? Int == 17)
        for row in rows {
            #expect(row["release"] is Int, "\(row["name"] ?? "?")")
            #expect((row["derived"] as? [String: Bool]) == ["dscp": true], "\(row["name"] ?? "?")")
            // The existing keys keep their plain values.
            #expect(row["dscp"] is Int)
        }
    }

    @Test func profilesWithoutChoicesHaveNoDerivedKey() throws {
        let rows = try Self.rows(["profile", "show", "rfc8325"])
        #expect(!rows.isEmpty)
        #expect(rows.allSatisfy { $0["derived"] == nil })
    }

    @Test func voiceAdmitDerivedInJSON() throws {
        let rows = try Self.rows(["profile", "show", "rfc4594"])
        let va = try #require(rows.first { $0["name"] as? String == "Voice-Admit" })
        #expect(
            (va["derived"] as? [String: Bool])
                == ["lossTolerance": true, "delayTolerance": true, "jitterTolerance": true])
        #expect(rows.first { $0["name"] as? String == "Telephony" }?["derived"] == nil)
    }

    @Test func showMarksDerivedCellsWithALegend() throws {
        let r = try Self.run(["profile", "show", "3gpp-5qi"])
        #expect(r.status == 0)
        let lines = r.out.split(separator: "\n")
        let row10 = try #require(lines.first { $0.hasPrefix("  5QI 10 ") })
        // Only the dscp cell (the last marked one) carries the mark; TS 23.501's cells do not.
        #expect(row10.filter { $0 == "\u{2020}" }.count == 1, "\(row10)")
        #expect(row10.contains("1100 "), "\(row10)")
        #expect(lines.contains { $0.hasPrefix("\u{2020} qosmap's choice") }, "\(r.out)")
        let plain = try Self.run(["profile", "show", "rfc8325"])
        #expect(!plain.out.contains("\u{2020}"))
    }

    // Issue 14: cells no readable copy of the standard confirmed are marked
    // apart from qosmap's choices, in text and in JSON.
    @Test func showMarksUnverifiedCells() throws {
        let r = try Self.run(["profile", "show", "y1541"])
        #expect(r.status == 0)
        let lines = r.out.split(separator: "\n")
        let six = try #require(lines.first { $0.hasPrefix("  Class 6 ") })
        #expect(six.contains("1e-06\u{2021}"), "\(six)")
        #expect(six.contains("true\u{2021}"), "\(six)")
        #expect(!six.contains("\u{2020}"))
        let zero = try #require(lines.first { $0.hasPrefix("  Class 0 ") })
        #expect(!zero.contains("\u{2021}"), "\(zero)")
        #expect(lines.last?.hasPrefix("\u{2021} not confirmed by a readable copy") == true, "\(r.out)")
        let plain = try Self.run(["profile", "show", "rfc8325"])
        #expect(!plain.out.contains("\u{2021}"))
    }

    // The applications column is left out of the text table: its marked
    // cells are named under it.
    @Test func showNamesMarkedCellsOfHiddenColumns() throws {
        let r = try Self.run(["profile", "show", "3gpp-qci"])
        #expect(r.status == 0)
        #expect(
            r.out.contains(
                "  applications\u{2021} (not shown; see --json): QCI 69, QCI 70, QCI 80, QCI 82, QCI 83, QCI 84, QCI 85\n"
            ), "\(r.out)")
        let y = try Self.run(["profile", "show", "y1541"])
        #expect(!y.out.contains("not shown"), "\(y.out)")
    }

    @Test func unverifiedInJSON() throws {
        let rows = try Self.rows(["profile", "show", "3gpp-5qi"])
        let ninety = try #require(rows.first { $0["5qi"] as? Int == 90 })
        #expect((ninety["unverified"] as? [String: Bool]) == ["release": true])
        #expect(ninety["release"] as? Int == 17)
        let one = try #require(rows.first { $0["5qi"] as? Int == 1 })
        #expect(one["unverified"] == nil)
    }

    @Test func lookupShowsUnverifiedMarks() throws {
        let r = try Self.run(["lookup", "5qi", "88"])
        #expect(r.status == 0)
        #expect(r.out.contains("release 17\u{2021}"), "\(r.out)")
        #expect(r.out.contains("\u{2021} not confirmed"), "\(r.out)")
        let q = try Self.run(["lookup", "5qi", "1"])
        #expect(!q.out.contains("\u{2021}"), "\(q.out)")
    }

    @Test func lookupMarksADerivedDSCP() throws {
        let r = try Self.run(["lookup", "5qi", "82"])
        #expect(r.status == 0)
        #expect(r.out.contains("recommended dscp EF(46)\u{2020}") || r.out.contains("\u{2020}\n"), "\(r.out)")
        #expect(r.out.contains("\u{2020} qosmap's choice"))
        let q = try Self.run(["lookup", "qci", "1"])
        #expect(!q.out.contains("\u{2020}"), "\(q.out)")
    }

    // Issue 14 item 8: PCP-only rows map their PCP through the domain's 802.1p table.
    @Test(arguments: [
        (["lookup", "app", "voice", "--profile", "ieee-8021"], 5),
        (["lookup", "service", "background", "--profile", "ieee-8021"], 1),
        (["lookup", "app", "5P3D decode PCP 2", "--profile", "ieee-8021q-pcp", "--domain", "5p3d"], 2),
    ])
    func pcpOnlyLookup(args: [String], pcp: Int) throws {
        let j = try Self.json(args)
        #expect(j["pcp"] as? Int == pcp)
        #expect(j["dscp"] == nil)
        let domainArgs = args.contains("--domain") ? ["--domain", "5p3d"] : []
        let direct = try Self.json(["lookup", "pcp", "\(pcp)"] + domainArgs)
        #expect(j["serviceClass"] as? String == direct["serviceClass"] as? String)
        #expect(j["color"] as? String == direct["color"] as? String)
        #expect((j["outbound"] as? [String: Int]) == (direct["outbound"] as? [String: Int]))
        let text = try Self.run(args)
        #expect(text.status == 0)
        #expect(text.out.contains("recommended 802.1p \(pcp)"), "\(text.out)")
        #expect(!text.out.contains("nothing to map"))
    }

    // Issue 14 item 9: applications match too, and near misses are listed.
    @Test func lookupAppMatchesAnApplication() throws {
        let j = try Self.json(["lookup", "app", "voice", "--profile", "3gpp-qci"])
        #expect(j["row"] as? String == "QCI 7")
        #expect(j["application"] as? String == "Voice")
        #expect(j["dscp"] as? Int == 18)
        let r = try Self.run(["lookup", "service", "ims signalling", "--profile", "3gpp-5qi"])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.hasPrefix("profile 3gpp-5qi: 5QI 5 (application \"IMS Signalling\")"), "\(r.out)")
    }

    @Test func unknownNameListsNearMisses() throws {
        let r = try Self.run(["lookup", "service", "telephon"])
        #expect(r.status == 64)
        #expect(r.err.contains("near misses: Telephony"), "\(r.err)")
        #expect(r.err.contains("allowed:"))
    }
}
