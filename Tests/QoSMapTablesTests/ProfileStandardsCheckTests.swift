import QoSMapCore
import QoSMapTables
import Testing

/// Issue 14: the cells a check against the standards' texts corrected, the
/// rows it found missing, and the marks for qosmap's own choices. Each
/// asserted value is also checked to carry its citation in the table file.
struct ProfileStandardsCheckTests {
    static let set = TableLoader.builtIn

    static func profile(_ name: String) throws -> Profile {
        try #require(set.profiles[name], "missing built-in profile \(name)")
    }

    /// The text of a built-in table file, as compiled in.
    static func fileText(_ path: String) throws -> String {
        try #require(EmbeddedTables.files.first { $0.path == path }?.text, "no embedded \(path)")
    }

    // 1. RFC 8325 section 4.1.1: CS7 and CS6 are Network Control, RECOMMENDED UP 7.
    @Test(arguments: [56, 48])
    func rfc8325NetworkControlIsUP7(dscp: Int) throws {
        let row = try #require(try Self.profile("rfc8325").row(where: "dscp", is: dscp))
        #expect(row.name == "Network Control")
        #expect(row["up"]?.integer == 7)
        #expect(row["accessCategory"]?.text == "AC_VO")
        // The section 8 alternative is stated, not shipped.
        #expect(row["note"]?.text?.contains("section 8") == true)
        let text = try Self.fileText("profiles/rfc8325.yaml")
        #expect(text.contains("Section 4.1.1") || text.contains("section 4.1.1"))
        #expect(text.contains("\"are RECOMMENDED to\n#   be mapped to UP 7\""))
        #expect(!text.contains("Section 4.2.1"))
    }

    @Test func rfc8325HasNoInternetworkControlRow() throws {
        #expect(try Self.profile("rfc8325").rows(named: "Internetwork Control").isEmpty)
    }

    // 2. Section numbers.
    @Test(arguments: [
        ("rfc8325", "RFC 8622 section 11"), ("rfc4594", "RFC 4594 section 2.3"),
        ("rfc4594", "RFC 8622 section 10"), ("rfc5127", "RFC 5127 section 4.1 (Figure 2;"),
        ("rfc5127", "aggregate tolerances Figure 1"),
        ("rfc5127", "Appendix A (Figure 3)"),
    ])
    func sourceCitesTheRightSection(profile: String, citation: String) throws {
        #expect(try Self.profile(profile).source.contains(citation))
    }

    @Test(arguments: [("rfc4594", "section 3"), ("rfc5127", "section 3"), ("rfc8325", "RFC 8622 section 8")])
    func wrongSectionsAreGone(profile: String, wrong: String) throws {
        #expect(try !Self.profile(profile).source.contains(wrong))
    }

    @Test(arguments: [("rfc4594", "RFC 8622 section 10"), ("rfc8325", "RFC 8622 section 11")])
    func leRowsCiteTheirUpdate(profile: String, citation: String) throws {
        let le = try #require(try Self.profile(profile).row(where: "dscp", is: 1))
        #expect(le["source"]?.text?.contains(citation) == true)
    }

    // 3. 5QI 10, releases, and the majority values where sources conflict.
    @Test func fiveQI10() throws {
        let row = try #require(try Self.profile("3gpp-5qi").row(where: "5qi", is: 10))
        #expect(row["resourceType"]?.text == "Non-GBR")
        #expect(row["priority"]?.integer == 90)
        #expect(row["packetDelayBudgetMs"]?.integer == 1100)
        #expect(row["packetErrorRate"]?.rate == 1e-6)
        #expect(row["release"]?.integer == 17)
        let text = try Self.fileText("profiles/3gpp-5qi.yaml")
        #expect(text.contains("5g-ntn-quality-of-service"))
        #expect(text.contains("ocudu/ocudu"))
    }

    @Test func every5QIRowHasARelease() throws {
        let p = try Self.profile("3gpp-5qi")
        #expect(p.rows.count >= 30)
        for row in p.rows {
            #expect(row["release"]?.integer.map { (15...17).contains($0) } == true, "\(row.name)")
        }
        #expect(p.row(where: "5qi", is: 82)?["release"]?.integer == 15)
    }

    // The releases no readable source gives are marked, and the file cites
    // the bracket that is readable: not in ns-3's Release 15 map, in its
    // Release 18 map.
    @Test func uncitedReleasesAreMarkedUnverified() throws {
        let p = try Self.profile("3gpp-5qi")
        let marked = Set(p.rows.filter { $0.isUnverified("release") }.compactMap { $0["5qi"]?.integer })
        #expect(marked == [71, 72, 73, 74, 76, 86, 87, 88, 89, 90])
        for row in p.rows {
            #expect(row.unverified.allSatisfy { $0 == "release" }, "\(row.name)")
        }
        let text = try Self.fileText("profiles/3gpp-5qi.yaml")
        #expect(text.contains("commit\n# f6e1ee42827638eb57031c3e703dafa93e5ecc68"))
        #expect(text.contains("GetRequirementsRel18"))
        #expect(!text.contains("UNVERIFIED"))
    }

    @Test func fiveQIConflictsKeepTheMajority() throws {
        let p = try Self.profile("3gpp-5qi")
        #expect(p.row(where: "5qi", is: 79)?["packetDelayBudgetMs"]?.integer == 50)
        #expect(p.row(where: "5qi", is: 83)?["maxDataBurstBytes"]?.integer == 1354)
        for q in [71, 72, 73, 74, 76] {
            #expect(p.row(where: "5qi", is: q)?["averagingWindowMs"]?.integer == 2000, "5QI \(q)")
            #expect(p.row(where: "5qi", is: q)?["note"]?.text?.contains("ns-3 gives 0") == true, "5QI \(q)")
        }
        let text = try Self.fileText("profiles/3gpp-5qi.yaml")
        #expect(text.contains("5QI 79 PDB: ns-3 5 ms"))
        #expect(text.contains("5QI 83 MDBV: ns-3 1358"))
        #expect(text.contains("5QI 86-90 agree in both"))
    }

    // 4. TS 23.203 Table 6.1.7-A.
    @Test(
        arguments: [
            (65, "GBR", 0.7, 75, 1e-2, 46), (66, "GBR", 2, 100, 1e-2, 46), (67, "GBR", 1.5, 100, 1e-3, 34),
            (75, "GBR", 2.5, 50, 1e-2, 34), (69, "Non-GBR", 0.5, 60, 1e-6, 46),
            (70, "Non-GBR", 5.5, 200, 1e-6, 18),
            (79, "Non-GBR", 6.5, 50, 1e-2, 34), (80, "Non-GBR", 6.8, 10, 1e-6, 34),
            (82, "Delay-critical GBR", 1.9, 10, 1e-4, 46), (83, "Delay-critical GBR", 2.2, 10, 1e-4, 46),
            (84, "Delay-critical GBR", 2.4, 30, 1e-5, 46), (85, "Delay-critical GBR", 2.1, 5, 1e-5, 46),
            (71, "GBR", 5.6, 150, 1e-6, 26), (72, "GBR", 5.6, 300, 1e-4, 26), (73, "GBR", 5.6, 300, 1e-8, 26),
            (74, "GBR", 5.6, 500, 1e-8, 26), (76, "GBR", 5.6, 500, 1e-4, 26),
            (10, "Non-GBR", 9, 1100, 1e-6, 0),
        ] as [(Int, String, Double, Int, Double, Int)])
    func qciTable617A(qci: Int, type: String, priority: Double, pdb: Int, loss: Double, dscp: Int) throws {
        let row = try #require(try Self.profile("3gpp-qci").row(where: "qci", is: qci), "QCI \(qci)")
        #expect(row["resourceType"]?.text == type)
        #expect(row["priority"]?.rate == priority)
        #expect(row["packetDelayBudgetMs"]?.integer == pdb)
        #expect(row["packetErrorLossRate"]?.rate == loss)
        #expect(row["dscp"]?.integer == dscp)
        // Table 11 gives these no marking: the DSCP is qosmap's choice.
        #expect(row.isDerived("dscp"))
        let text = try Self.fileText("profiles/3gpp-qci.yaml")
        #expect(text.contains("tinv-3gpp-23-203_f.html"))
        #expect(text.contains("GetRequirementsRel15"))
    }

    // tech-invite's copy of Table 6.1.7-A words QCI 71-76 and 10 so.
    @Test func qciLiveUplinkAndSatelliteServices() throws {
        let p = try Self.profile("3gpp-qci")
        for q in [71, 72, 73, 74, 76] {
            #expect(
                p.row(where: "qci", is: q)?.applications == ["\"Live\" Uplink Streaming (e.g. TS 26.238)"])
        }
        let ten = try #require(p.row(where: "qci", is: 10))
        #expect(
            ten.applications.last
                == "Any service that can be used over satellite access with these characteristics")
        let text = try Self.fileText("profiles/3gpp-qci.yaml")
        #expect(text.contains("any service that can be\n#   used over satellite access"))
        #expect(text.contains("150ms (1,16)"))
    }

    // The example services whose TS 23.203 wording was not read are marked.
    @Test func qciUnreadServiceTextsAreMarked() throws {
        let p = try Self.profile("3gpp-qci")
        let marked = Set(p.rows.filter { $0.isUnverified("applications") }.compactMap { $0["qci"]?.integer })
        #expect(marked == [69, 70, 80, 82, 83, 84, 85])
        #expect(p.rows.allSatisfy { $0.unverified.allSatisfy { $0 == "applications" } })
        let text = try Self.fileText("profiles/3gpp-qci.yaml")
        #expect(text.contains("scribd.com/document/689805337"))
        #expect(!text.contains("UNVERIFIED"))
    }

    @Test func qci1To9KeepTheReferenceMarking() throws {
        let p = try Self.profile("3gpp-qci")
        for q in 1...9 {
            #expect(p.row(where: "qci", is: q)?.derived == [], "QCI \(q)")
        }
    }

    // 5. Y.1541 provisional classes.
    @Test(arguments: [(6, 100), (7, 400)])
    func y1541ProvisionalClasses(qosClass: Int, iptd: Int) throws {
        let row = try #require(try Self.profile("y1541").row(where: "qosClass", is: qosClass))
        #expect(row["provisional"]?.flag == true)
        #expect(row["iptdMs"]?.integer == iptd)
        #expect(row["ipdvMs"]?.integer == 50)
        #expect(row["iplr"]?.rate == 1e-5)
        #expect(row["iper"]?.rate == 1e-6)
        #expect(try Self.fileText("profiles/y1541.yaml").contains("RFC 5976"))
    }

    // RFC 5976 section 2.1 summarizes all eight classes: "Mean delay <= 100
    // ms, delay variation <= 50 ms, and loss ratio <= 10^-3" (class 0), ...,
    // "Mean delay <= 400 ms, delay variation <= 50 ms, and loss ratio <=
    // 10^-5" (class 7). nil: the RFC says "unspecified".
    @Test(
        arguments: [
            (0, 100, 50, 1e-3), (1, 400, 50, 1e-3), (2, 100, nil, 1e-3), (3, 400, nil, 1e-3),
            (4, 1000, nil, 1e-3), (5, nil, nil, nil), (6, 100, 50, 1e-5), (7, 400, 50, 1e-5),
        ] as [(Int, Int?, Int?, Double?)])
    func y1541MatchesRFC5976(qosClass: Int, iptd: Int?, ipdv: Int?, iplr: Double?) throws {
        let row = try #require(try Self.profile("y1541").row(where: "qosClass", is: qosClass))
        #expect(row["iptdMs"]?.integer == iptd)
        #expect(row["ipdvMs"]?.integer == ipdv)
        #expect(row["iplr"]?.rate == iplr)
        let text = try Self.fileText("profiles/y1541.yaml")
        #expect(text.contains("https://www.rfc-editor.org/rfc/rfc5976#section-2.1"))
        #expect(
            text.contains("khamidou/rfc-czar rfc5976.html (commit 8383012b4055b3ce1259610454ea46d073bfb5ae)"))
    }

    // RFC 5976 section 2.1: classes 6 and 7 serve "television transport,
    // high-capacity TCP transfers, and ... (TDM) circuit emulation".
    @Test(arguments: [6, 7])
    func y1541ProvisionalApplications(qosClass: Int) throws {
        let row = try #require(try Self.profile("y1541").row(where: "qosClass", is: qosClass))
        #expect(row.applications.count == 1)
        for use in ["television transport", "high-capacity TCP transfers", "TDM circuit emulation"] {
            #expect(row.applications.first?.contains(use) == true, "\(use)")
        }
    }

    // What stays unverified in y1541.yaml is only the IPER of classes 6-7
    // (RFC 5976 gives no IPER) and which two classes are provisional, and
    // those cells are marked in the data, not only in comments.
    @Test(arguments: 0...7)
    func y1541OnlyIPERAndProvisionalityAreUnverified(qosClass: Int) throws {
        let row = try #require(try Self.profile("y1541").row(where: "qosClass", is: qosClass))
        #expect(row.unverified == (qosClass >= 6 ? ["iper", "provisional"] : []))
        let text = try Self.fileText("profiles/y1541.yaml")
        #expect(!text.contains("UNVERIFIED"))
        #expect(text.contains("\"Two of the classes contain provisional performance objectives\""))
        #expect(text.contains("rec.aspx?lang=en&rec=8677"))
        #expect(text.contains("stavnstrup/nisp-yaml standard/itu-t-y.1541.md"))
    }

    @Test(arguments: 0...5)
    func y1541ClassesZeroToFiveAreNotProvisional(qosClass: Int) throws {
        let row = try #require(try Self.profile("y1541").row(where: "qosClass", is: qosClass))
        #expect(row["provisional"] == nil)
    }

    // 6. qosmap's choices are marked.
    @Test func fiveQIDSCPIsDerivedEverywhere() throws {
        let p = try Self.profile("3gpp-5qi")
        for row in p.rows {
            #expect(row.isDerived("dscp"), "\(row.name)")
            #expect(!row.isDerived("packetDelayBudgetMs"), "\(row.name)")
        }
    }

    @Test func voiceAdmitTolerancesAreDerived() throws {
        let p = try Self.profile("rfc4594")
        let va = try #require(p.rows(named: "Voice-Admit").first)
        #expect(va.derived == ["lossTolerance", "delayTolerance", "jitterTolerance"])
        #expect(!va.isDerived("dscp"))
        #expect(p.rows(named: "Telephony").first?.derived == [])
    }

    // RFC 5865 section 4 registers VOICE-ADMIT as 101100 (44).
    @Test func voiceAdmitCitesRFC5865Section4() throws {
        let va = try #require(try Self.profile("rfc4594").rows(named: "Voice-Admit").first)
        #expect(va["dscp"]?.integer == 0b101100)
        #expect(va["source"]?.text == "RFC 5865 section 4")
        let text = try Self.fileText("profiles/rfc4594.yaml")
        #expect(text.contains("\"VOICE-ADMIT  101100   [RFC5865]\""))
        #expect(!text.contains("section unverified"))
    }

    @Test func rfc5127ToleranceCopiesAreDerived() throws {
        let p = try Self.profile("rfc5127")
        for row in p.rows {
            #expect(row.derived == ["lossTolerance", "delayTolerance", "jitterTolerance"], "\(row.name)")
        }
        #expect(
            try Self.fileText("profiles/rfc5127.yaml").contains("RFC 4594 give Signaling Low/Low/Yes"))
    }

    // RFC 5127 section 4.1, Figure 1: each treatment aggregate's tolerance
    // to loss, delay and jitter, which every member row copies.
    @Test(
        arguments: [
            ("Network Control", "Low", "Low", "Yes"),
            ("Real-Time", "Very Low", "Very Low", "Very Low"),
            ("Assured Elastic", "Low", "Low-Medium", "Yes"),
            ("Elastic", "Not Specified", "Not Specified", "Not Specified"),
        ] as [(String, String, String, String)])
    func rfc5127AggregateTolerances(aggregate: String, loss: String, delay: String, jitter: String) throws {
        let rows = try Self.profile("rfc5127").rows.filter { $0["treatmentAggregate"]?.text == aggregate }
        #expect(rows.count >= 1)
        for row in rows {
            #expect(row["lossTolerance"]?.text == loss, "\(row.name)")
            #expect(row["delayTolerance"]?.text == delay, "\(row.name)")
            #expect(row["jitterTolerance"]?.text == jitter, "\(row.name)")
        }
        let text = try Self.fileText("profiles/rfc5127.yaml")
        #expect(
            text.contains("Figure 1 (\"Treatment\n# Aggregate and Service Class Performance Requirements\")"))
        #expect(text.contains("text/rfc5127.txt"))
        #expect(!text.contains("UNVERIFIED"))
    }

    // RFC 7222 Appendix A.1 quotes IR.34's QCI -> traffic class -> PHB -> DSCP.
    @Test(arguments: [
        ("Conversational", 46), ("Streaming", 34), ("Interactive THP 1", 26), ("Background", 0),
    ])
    func gsmaTrafficClassesMatchRFC7222(name: String, dscp: Int) throws {
        let row = try #require(try Self.profile("gsma-ir34").rows(named: name).first)
        #expect(row["dscp"]?.integer == dscp)
        let text = try Self.fileText("profiles/gsma-ir34.yaml")
        #expect(text.contains("text/rfc7222.txt"))
        #expect(text.contains("\"QCI/DSCP Mapping\n# Table\""))
    }

    @Test func gsmaInteractiveUsesTheAFClassesOfRFC7222() throws {
        let p = try Self.profile("gsma-ir34")
        let interactive = Set(
            p.rows.filter { $0["thp"] != nil }.compactMap { $0["dscp"]?.integer })
        // RFC 7222: Interactive takes AF31 (26), AF21 (18), AF11 (10) (and AF32 for QCI 6).
        #expect(interactive == [26, 18, 10])
    }

    @Test func onlyTheMarkedProfilesHaveDerivedCells() throws {
        let marked = Set(
            Self.set.profiles.profiles.filter { $0.rows.contains { !$0.derived.isEmpty } }.map(\.name))
        #expect(marked == ["3gpp-5qi", "3gpp-qci", "rfc4594", "rfc5127"])
    }

    // 7. The 5p3d domain's comments state Table 6-4's decoding.
    @Test func fiveP3DCommentsMatchTheDecodingTable() throws {
        let text = try Self.fileText("domains/5p3d.yaml")
        let p = try Self.profile("ieee-8021q-pcp")
        var checked = 0
        for line in text.split(separator: "\n") {
            // `    N: [CLASS, color]    # 5P3D: priority P[, drop-eligible]`
            guard let hash = line.firstIndex(of: "#"), line[hash...].hasPrefix("# 5P3D: priority "),
                let colon = line.firstIndex(of: ":"), colon < hash,
                let pcp = Int(String(line[..<colon].filter { $0 != " " }))
            else { continue }
            let comment = line[line.index(hash, offsetBy: "# 5P3D: priority ".count)...]
            let priority = Int(comment.prefix { $0.isNumber })
            let de = comment.contains("drop-eligible")
            let row = try #require(
                p.rows.first {
                    $0["encoding"]?.text == "5P3D" && $0["direction"]?.text == "decode"
                        && $0["pcp"]?.integer == pcp
                })
            #expect(row["priority"]?.integer == priority, "\(line)")
            #expect(row["dropEligible"]?.flag == de, "\(line)")
            checked += 1
        }
        #expect(checked == 8)
    }

    // 9. Application matching and near misses.
    @Test func rowsMatchingFallsBackToApplications() throws {
        let p = try Self.profile("3gpp-qci")
        #expect(p.rows(named: "voice").isEmpty)
        #expect(p.rows(matching: "voice").map(\.name) == ["QCI 7"])
        // A row name wins over applications (ieee-8021's Voice row).
        #expect(try Self.profile("ieee-8021").rows(matching: "voice").map(\.name) == ["Voice"])
    }

    @Test(arguments: [
        ("rfc4594", "telephon", "Telephony"), ("rfc4594", "Signalng", "Signaling"),
        ("3gpp-qci", "gaming", "QCI 3 (application \"Real Time Gaming\")"),
    ])
    func nearMisses(profile: String, query: String, expected: String) throws {
        let p = try Self.profile(profile)
        #expect(p.rows(matching: query).isEmpty)
        #expect(p.nearMisses(query).contains(expected), "\(p.nearMisses(query))")
    }

    @Test func nearMissesOfNonsenseAreEmpty() throws {
        #expect(try Self.profile("rfc4594").nearMisses("zzzzqqq").isEmpty)
    }

    // "Now confirmed": the UNVERIFIED marks are gone where the check confirmed the values.
    @Test func confirmedTablesCiteTheirSources() throws {
        let pcp = try Self.fileText("profiles/ieee-8021q-pcp.yaml")
        #expect(!pcp.contains("UNVERIFIED"))
        #expect(pcp.contains("TR-181"))
        let rfc5127 = try Self.fileText("profiles/rfc5127.yaml")
        #expect(rfc5127.contains("all 20 EXP values"))
        #expect(!rfc5127.contains("EXP values and aggregate tolerances below are from memory"))
    }

    // RFC 8325: every row's UP, cross-checked against two implementations of
    // section 4 (MediaTek's qosMapSetInit, Linux cfg80211_classify8021d), and
    // its access category from IEEE 802.11's UP-to-AC table.
    @Test(
        arguments: [
            (56, 7, "AC_VO"), (48, 7, "AC_VO"), (46, 6, "AC_VO"), (44, 6, "AC_VO"), (40, 5, "AC_VI"),
            (34, 4, "AC_VI"), (36, 4, "AC_VI"), (38, 4, "AC_VI"), (32, 4, "AC_VI"), (26, 4, "AC_VI"),
            (28, 4, "AC_VI"), (30, 4, "AC_VI"), (24, 4, "AC_VI"), (18, 3, "AC_BE"), (20, 3, "AC_BE"),
            (22, 3, "AC_BE"), (16, 0, "AC_BE"), (10, 0, "AC_BE"), (12, 0, "AC_BE"), (14, 0, "AC_BE"),
            (0, 0, "AC_BE"), (8, 1, "AC_BK"), (1, 1, "AC_BK"),
        ] as [(Int, Int, String)])
    func rfc8325EveryRow(dscp: Int, up: Int, ac: String) throws {
        let row = try #require(try Self.profile("rfc8325").row(where: "dscp", is: dscp), "DSCP \(dscp)")
        #expect(row["up"]?.integer == up)
        #expect(row["accessCategory"]?.text == ac)
    }

    @Test func rfc8325CitesItsCrossChecks() throws {
        let p = try Self.profile("rfc8325")
        #expect(p.rows.count == 23)
        let text = try Self.fileText("profiles/rfc8325.yaml")
        #expect(!text.contains("UNVERIFIED"))
        #expect(text.contains("mgmt/qosmap.c, commit 03290963a4f1025b88ff5058016112e75edbfec1"))
        #expect(text.contains("wifi: cfg80211: Update the default DSCP-to-UP mapping"))
        #expect(text.contains("\"802.11-2007 table\n# 9-1\""))
    }

    // IEEE 802.1Q Table I-2 as copied by Zephyr and Linux: traffic type ->
    // priority, acronym and (for voice and video) delay wording.
    @Test(
        arguments: [
            ("Background", "BK", 1), ("Best Effort", "BE", 0), ("Excellent Effort", "EE", 2),
            ("Critical Applications", "CA", 3), ("Video", "VI", 4), ("Voice", "VO", 5),
            ("Internetwork Control", "IC", 6), ("Network Control", "NC", 7),
        ] as [(String, String, Int)])
    func ieee8021TableI2(name: String, acronym: String, pcp: Int) throws {
        let row = try #require(try Self.profile("ieee-8021").rows(named: name).first, "\(name)")
        #expect(row["pcp"]?.integer == pcp)
        #expect(row.aliases.contains(acronym))
    }

    @Test func ieee8021DelayWordingAndCitations() throws {
        let p = try Self.profile("ieee-8021")
        #expect(
            p.rows(named: "Voice").first?["trafficCharacteristics"]?.text
                == "Voice, < 10 ms latency and jitter")
        #expect(
            p.rows(named: "Video").first?["trafficCharacteristics"]?.text
                == "Video, < 100 ms latency and jitter")
        let text = try Self.fileText("profiles/ieee-8021.yaml")
        #expect(!text.contains("UNVERIFIED"))
        #expect(text.contains("subsys/net/ip/net_tc_mapping.h"))
        #expect(text.contains("include/net/ieee8021q.h"))
    }

    // 10. MEF 23.1 and IR.34: the search for a source is recorded.
    @Test func mefSearchForASourceIsRecorded() throws {
        let text = try Self.fileText("profiles/mef-23.1.yaml")
        #expect(text.contains("Searched\n# for a source beyond the reference (issue 14)"))
        #expect(text.contains("A second"))
        #expect(text.contains("No source beyond the reference was found."))
    }

    @Test func gsmaSearchForTheRestIsRecorded() throws {
        let text = try Self.fileText("profiles/gsma-ir34.yaml")
        #expect(text.contains("Not verified (reference only): which THP takes which AF class"))
        #expect(text.contains("(issue 14, three times)"))
    }
}

/// The `derived` key and decimal numbers in user profile files.
struct ProfileDerivedFormatTests {
    @Test func topLevelDerivedMarksEveryRowThatHasTheColumn() throws {
        let set = try loadUserTable(
            "profile: m\nderived: [dscp]\nrows:\n  - {name: A, dscp: EF, pcp: 5}\n  - {name: B, pcp: 1}\n"
        ).get()
        let p = try #require(set.profiles["m"])
        #expect(p.rows[0].derived == ["dscp"])
        #expect(p.rows[1].derived == [])
    }

    @Test func rowDerivedAddsToTopLevel() throws {
        let set = try loadUserTable(
            "profile: m\nderived: dscp\nrows:\n  - {name: A, dscp: EF, pcp: 5, derived: [pcp, dscp]}\n"
        ).get()
        #expect(set.profiles["m"]?.rows.first?.derived == ["pcp", "dscp"])
    }

    @Test func unverifiedCellsAreRead() throws {
        let set = try loadUserTable(
            "profile: m\nrows:\n  - {name: A, dscp: EF, iper: 1e-6, unverified: [iper]}\n"
        )
        .get()
        let row = try #require(set.profiles["m"]?.rows.first)
        #expect(row.unverified == ["iper"])
        #expect(row.isUnverified("iper") && !row.isUnverified("dscp") && !row.isDerived("iper"))
    }

    @Test func filesWithoutDerivedHaveNone() throws {
        let set = try loadUserTable("profile: m\nrows:\n  - {name: A, dscp: EF}\n").get()
        #expect(set.profiles["m"]?.rows.first?.derived == [])
    }

    @Test func decimalPriority() throws {
        let set = try loadUserTable(
            "profile: m\nrows:\n  - {name: A, priority: 0.7}\n  - {name: B, priority: 7}\n"
        )
        .get()
        let p = try #require(set.profiles["m"])
        #expect(p.rows[0]["priority"] == .rate(0.7))
        #expect(p.rows[1]["priority"] == .integer(7))
    }

    @Test(arguments: [
        ("profile: m\nderived: [colour]\nrows: []\n", 2, 11, "unknown column 'colour' in 'derived'"),
        (
            "profile: m\nrows:\n  - {name: A, dscp: EF, derived: [pcp]}\n", 3, 35,
            "derived column 'pcp' is not a column of row 'A'"
        ),
        (
            "profile: m\nrows:\n  - {name: A, dscp: EF, unverified: [pcp]}\n", 3, 38,
            "unverified column 'pcp' is not a column of row 'A'"
        ),
        (
            "profile: m\nrows:\n  - {name: A, dscp: EF, derived: [dscp], unverified: [dscp]}\n", 3, 55,
            "column 'dscp' of row 'A' is both derived and unverified"
        ),
        ("profile: m\nrows:\n  - {name: A, dscp: EF, unverified: {a: 1}}\n", 3, 37, "expected unverified"),
        ("profile: m\nrows:\n  - {name: A, priority: 0.7x}\n", 3, 25, "invalid priority value '0.7x'"),
        ("profile: m\nrows:\n  - {name: A, priority: 128}\n", 3, 25, "allowed: a number from 0 to 127"),
    ])
    func errorsArePositioned(text: String, line: Int, column: Int, message: String) throws {
        guard case .failure(let error) = loadUserTable(text) else {
            Issue.record("expected an error for \(text)")
            return
        }
        let d = try #require(error.diagnostics.first { $0.severity == .error })
        #expect(d.line == line && d.column == column, "\(d)")
        #expect(d.message.contains(message), "\(d)")
    }
}
