import QoSMapCore
import QoSMapTables
import Testing

/// The built-in profiles against the reference's tables 8-20 (with the
/// documented deviations) and against the primary standards.
struct ProfileTableTests {
    static let set = TableLoader.builtIn

    static func profile(_ name: String) -> Profile {
        guard let p = set.profiles[name] else {
            Issue.record("missing built-in profile \(name)")
            return Profile(name: name, rows: [])
        }
        return p
    }

    @Test func builtInProfilesLoadWithoutWarnings() {
        #expect(
            Self.set.profiles.names.sorted() == [
                "3gpp-5qi", "3gpp-qci", "gsma-ir34", "ieee-8021", "ieee-8021q-pcp", "mef-23.1", "rfc4594",
                "rfc5127", "rfc8325", "y1541",
            ])
        #expect(Self.set.warnings.isEmpty)
    }

    // Table 9 (RFC 4594 Figure 3) plus RFC 8622 LE and RFC 5865 VA.
    @Test(arguments: [
        ("Network Control", 48), ("Telephony", 46), ("Voice-Admit", 44), ("Signaling", 40),
        ("Multimedia Conferencing", 34), ("Real-Time Interactive", 32), ("Multimedia Streaming", 26),
        ("Broadcast Video", 24), ("Low-Latency Data", 18), ("OAM", 16), ("High-Throughput Data", 10),
        ("Standard", 0), ("Low-Priority Data", 1),
    ])
    func rfc4594FirstCodePoint(name: String, dscp: Int) {
        #expect(Self.profile("rfc4594").rows(named: name).first?["dscp"]?.integer == dscp)
    }

    @Test(arguments: [
        ("Multimedia Conferencing", [34, 36, 38]), ("Multimedia Streaming", [26, 28, 30]),
        ("Low-Latency Data", [18, 20, 22]), ("High-Throughput Data", [10, 12, 14]),
        ("Low-Priority Data", [1, 8]),
    ])
    func rfc4594AllCodePoints(name: String, dscps: [Int]) {
        #expect(Self.profile("rfc4594").rows(named: name).compactMap { $0["dscp"]?.integer } == dscps)
    }

    // Table 8 as RFC 4594 Figure 2 orders it: loss, delay, jitter.
    @Test(arguments: [
        ("Network Control", "Low", "Low", "Yes"), ("Telephony", "Very Low", "Very Low", "Very Low"),
        ("Signaling", "Low", "Low", "Yes"), ("Multimedia Conferencing", "Low-Medium", "Very Low", "Low"),
        ("Real-Time Interactive", "Low", "Very Low", "Low"),
        ("Multimedia Streaming", "Low-Medium", "Medium", "Yes"),
        ("Broadcast Video", "Very Low", "Medium", "Low"), ("Low-Latency Data", "Low", "Low-Medium", "Yes"),
        ("OAM", "Low", "Medium", "Yes"), ("High-Throughput Data", "Low", "Medium-High", "Yes"),
        ("Standard", "Not Specified", "Not Specified", "Not Specified"),
        ("Low-Priority Data", "High", "High", "Yes"),
    ])
    func rfc4594Tolerances(name: String, loss: String, delay: String, jitter: String) {
        let row = Self.profile("rfc4594").rows(named: name).first
        #expect(row?["lossTolerance"]?.text == loss)
        #expect(row?["delayTolerance"]?.text == delay)
        #expect(row?["jitterTolerance"]?.text == jitter)
    }

    // Table 10 (TS 23.203 Table 6.1.7) and table 11 with its two fixes (QCI 5 -> 46, OM FTP -> AF13).
    @Test(arguments: [
        (1, "GBR", 2, 100, 1e-2, 46, 5, "EF"), (2, "GBR", 4, 150, 1e-3, 26, 3, "AF31"),
        (3, "GBR", 3, 50, 1e-3, 34, 4, "AF41"), (4, "GBR", 5, 300, 1e-6, 26, 3, "AF31"),
        (5, "Non-GBR", 1, 100, 1e-6, 46, 5, "EF"), (6, "Non-GBR", 6, 300, 1e-6, 18, 2, "AF21"),
        (7, "Non-GBR", 7, 100, 1e-3, 18, 2, "AF21"), (8, "Non-GBR", 8, 300, 1e-6, 10, 1, "AF11"),
        (9, "Non-GBR", 9, 300, 1e-6, 0, 0, "BE"),
    ])
    func qci(qci: Int, type: String, priority: Int, pdb: Int, loss: Double, dscp: Int, pcp: Int, phb: String)
    {
        let row = Self.profile("3gpp-qci").row(where: "qci", is: qci)
        #expect(row?["resourceType"]?.text == type)
        #expect(row?["priority"]?.integer == priority)
        #expect(row?["packetDelayBudgetMs"]?.integer == pdb)
        #expect(row?["packetErrorLossRate"]?.rate == loss)
        #expect(row?["dscp"]?.integer == dscp)
        #expect(row?["pcp"]?.integer == pcp)
        #expect(row?["exp"]?.integer == pcp)
        #expect(row?["phb"]?.text == phb)
    }

    @Test(arguments: [
        ("Control Plane", 46, "EF"), ("OM MML", 46, "EF"), ("OM FTP", 14, "AF13"), ("IP Clock", 46, "EF"),
    ])
    func table11OtherRows(name: String, dscp: Int, phb: String) {
        let row = Self.profile("3gpp-qci").rows(named: name).first
        #expect(row?["dscp"]?.integer == dscp)
        #expect(row?["phb"]?.text == phb)
    }

    // Tables 12-13 (GSMA IR.34 Tables 6-7), application DSCPs through `via`.
    @Test(arguments: [
        ("Conversational", 46), ("Streaming", 34), ("Interactive THP 1", 26), ("Interactive THP 2", 18),
        ("Interactive THP 3", 10), ("Background", 0), ("Video Sharing", 46), ("VoIP", 46),
        ("Push-to-Talk", 34),
        ("Video Streaming", 34), ("Unknown GTP Traffic", 26), ("DNS", 26), ("Online Gaming", 26),
        ("Browsing", 18),
        ("Instant Messaging", 10), ("Remote Connection", 10), ("Email", 0), ("MMS", 0),
    ])
    func gsma(name: String, dscp: Int) {
        let p = Self.profile("gsma-ir34")
        let row = p.rows(named: name).first
        #expect(row.map { p.markingRow(for: $0).dscp?.rawValue } == UInt8(dscp))
    }

    // Table 14.
    @Test(arguments: [
        ("Network Control", 7), ("Internetwork Control", 6), ("Voice", 5), ("Video", 4),
        ("Critical Applications", 3), ("Excellent Effort", 2), ("Best Effort", 0), ("Background", 1),
    ])
    func ieee8021(name: String, pcp: Int) {
        #expect(Self.profile("ieee-8021").rows(named: name).first?["pcp"]?.integer == pcp)
    }

    // Table 17 (MEF 23.1 Table 4) and table 15 labels.
    @Test(arguments: [("H", 5, nil, 46), ("M", 3, 2, 26), ("L", 1, 0, 10)] as [(String, Int, Int?, Int)])
    func mefLabels(label: String, green: Int, yellow: Int?, dscp: Int) {
        let row = Self.profile("mef-23.1").rows(named: label).first
        #expect(row?["pcpGreen"]?.integer == green)
        #expect(row?["pcpYellow"]?.integer == yellow)
        #expect(row?["dscpGreen"]?.integer == dscp)
        #expect(row?["sTagPcpDei"]?.integer == green)
    }

    @Test func mefYellowDSCPs() {
        let p = Self.profile("mef-23.1")
        #expect(p.rows(named: "M").first?["dscpYellow"] == .list([.integer(28), .integer(30)]))
        #expect(p.rows(named: "L").first?["dscpYellow"] == .list([.integer(12), .integer(14), .integer(0)]))
    }

    @Test(arguments: [
        ("VoIP", "H"), ("VoIP & Videoconf Signaling", "M"), ("Streaming Media", "L"),
        ("Interactive Gaming", "H/M"),
        ("T.38 Fax over IP", "M"), ("Financial/Trading", "H"), ("Mobile BH L", "L"),
        ("Database Client/Server", "L"),
    ])
    func mefServices(name: String, label: String) {
        #expect(Self.profile("mef-23.1").rows(named: name).first?["cosLabel"]?.text == label)
    }

    // Tables 18-19 (Y.1541 Table 1).
    @Test(
        arguments: [
            (0, 100, 50, 1e-3), (1, 400, 50, 1e-3), (2, 100, nil, 1e-3), (3, 400, nil, 1e-3),
            (4, 1000, nil, 1e-3),
        ] as [(Int, Int, Int?, Double)])
    func y1541(qosClass: Int, iptd: Int, ipdv: Int?, iplr: Double) {
        let row = Self.profile("y1541").row(where: "qosClass", is: qosClass)
        #expect(row?["iptdMs"]?.integer == iptd)
        #expect(row?["ipdvMs"]?.integer == ipdv)
        #expect(row?["iplr"]?.rate == iplr)
        #expect(row?["iper"]?.rate == 1e-4)
    }

    // Table 20 realigned from RFC 5127 Figure 3.
    @Test(arguments: [
        (48, 6), (46, 4), (40, 4), (34, 4), (36, 4), (38, 4), (32, 4), (24, 4), (16, 2), (26, 2), (18, 2),
        (10, 2),
        (28, 3), (20, 3), (12, 3), (30, 3), (22, 3), (14, 3), (0, 0), (8, 1),
    ])
    func rfc5127(dscp: Int, exp: Int) {
        #expect(Self.profile("rfc5127").row(where: "dscp", is: dscp)?["exp"]?.integer == exp)
    }

    // RFC 8325 section 4 (CS7 and CS6 per section 4.1.1) with RFC 8622's LE amendment.
    @Test(arguments: [
        (56, 7), (48, 7), (46, 6), (44, 6), (40, 5), (34, 4), (32, 4), (26, 4), (24, 4), (18, 3), (16, 0),
        (10, 0),
        (0, 0), (8, 1), (1, 1),
    ])
    func rfc8325(dscp: Int, up: Int) {
        #expect(Self.profile("rfc8325").row(where: "dscp", is: dscp)?["up"]?.integer == up)
    }

    // TS 23.501 Table 5.7.4-1 spot values.
    @Test(
        arguments: [
            (82, "Delay-critical GBR", 19, 10, 1e-4, 255), (85, "Delay-critical GBR", 21, 5, 1e-5, 255),
            (1, "GBR", 20, 100, 1e-2, nil), (5, "Non-GBR", 10, 100, 1e-6, nil), (65, "GBR", 7, 75, 1e-2, nil),
            (80, "Non-GBR", 68, 10, 1e-6, nil), (90, "Delay-critical GBR", 25, 20, 1e-4, 63000),
        ] as [(Int, String, Int, Int, Double, Int?)])
    func fiveQI(fiveQI: Int, type: String, priority: Int, pdb: Int, per: Double, mdbv: Int?) {
        let row = Self.profile("3gpp-5qi").row(where: "5qi", is: fiveQI)
        #expect(row?["resourceType"]?.text == type)
        #expect(row?["priority"]?.integer == priority)
        #expect(row?["packetDelayBudgetMs"]?.integer == pdb)
        #expect(row?["packetErrorRate"]?.rate == per)
        #expect(row?["maxDataBurstBytes"]?.integer == mdbv)
    }

    @Test func fiveQISetIsTheStandardized() {
        let values = Self.profile("3gpp-5qi").rows.compactMap { $0["5qi"]?.integer }.sorted()
        #expect(values == Array(1...10) + [65, 66, 67, 69, 70, 71, 72, 73, 74, 76, 79, 80] + Array(82...90))
    }

    /// 5P3D in the PCP tables agrees with the built-in 5p3d domain, taking
    /// class BE..CS7 as priority 0..7 and yellow/red as drop-eligible.
    @Test(arguments: Treatment.allCells)
    func fiveP3DEncodeMatchesDomain(cell: Treatment) throws {
        let domain = try #require(Self.set.domains["5p3d"])
        let de = cell.color != .green
        let row = Self.profile("ieee-8021q-pcp").rows.first {
            $0["encoding"]?.text == "5P3D" && $0["direction"]?.text == "encode"
                && $0["priority"]?.integer == Int(cell.serviceClass.rawValue)
                && $0["dropEligible"]?.flag == de
        }
        #expect(row?["pcp"]?.integer == Int(domain.pcp(for: cell).rawValue))
    }

    @Test(arguments: 0..<8)
    func fiveP3DDecodeMatchesDomain(pcp: Int) throws {
        let domain = try #require(Self.set.domains["5p3d"])
        let p = Self.profile("ieee-8021q-pcp")
        let row = try #require(
            p.rows.first {
                $0["encoding"]?.text == "5P3D" && $0["direction"]?.text == "decode"
                    && $0["pcp"]?.integer == pcp
            })
        let t = domain.classify(pcp: PCP(truncating: UInt8(pcp)))
        let decoded = try #require(row["priority"]?.integer)
        // Decoded priority N is the class whose priority is N (BE=0 ... CS7=7).
        #expect(Int(t.serviceClass.rawValue) == decoded)
        #expect((t.color != .green) == row["dropEligible"]?.flag)
    }

    @Test(arguments: ["8P0D", "7P1D", "6P2D", "5P3D"])
    func encodingsRoundTrip(encoding: String) {
        let p = Self.profile("ieee-8021q-pcp")
        let decode = p.rows.filter { $0["encoding"]?.text == encoding && $0["direction"]?.text == "decode" }
        #expect(decode.count == 8)
        // Decoding then encoding a PCP gives the same PCP (Table 6-3 inverts Table 6-4).
        for d in decode {
            let enc = p.rows.first {
                $0["encoding"]?.text == encoding && $0["direction"]?.text == "encode"
                    && $0["priority"] == d["priority"] && $0["dropEligible"] == d["dropEligible"]
            }
            #expect(enc?["pcp"] == d["pcp"], "\(d.name)")
        }
    }

    @Test(arguments: ["Telephony", "telephony", "TELEPHONY"])
    func namesAreCaseInsensitive(name: String) {
        #expect(Self.profile("rfc4594").rows(named: name).count == 1)
    }

    @Test(arguments: ["low-priority data", "Low_Priority_Data", "low priority-data"])
    func separatorsAreEquivalent(name: String) {
        #expect(Self.profile("rfc4594").rows(named: name).count == 2)
    }
}
