import Foundation
import QoSMapCore
import QoSMapDevices
import QoSMapTables
import Testing

// Vendor pages the IOS-XR statement shapes below were checked against:
// [CRS]  Cisco IOS XR Modular QoS Command Reference for the CRS Router, Release 4.0
//        (class-map, match dscp p.44-45, match discard-class p.47-48, match mpls
//        experimental topmost p.54, match qos-group p.62-63, set discard-class
//        p.106, set mpls experimental {imposition|topmost} p.110):
//        https://easymanua.ls/cisco/crs/manual/176553?p=50 (and ?p=47, 54, 62, 106, 110)
// [NCS]  Modular QoS Command Reference for Cisco NCS 5500 and NCS 540, QoS
//        Classification Commands (class, match dscp: 64 values, ingress only;
//        match mpls experimental topmost: ingress only):
//        https://cisco.com/content/en/us/td/docs/iosxr/ncs5500/qos/b-ncs5500-qos-cli-reference/b-ncs5500-qos-cli-reference_chapter_0101.html
//        https://www.easymanua.ls/cisco/ncs-5500-series/manual/234197?p=22
// [NCSCG] Modular QoS Configuration Guide for NCS 5500, 7.2.x, Packet Classification
//        (egress: match qos-group 1-7 only, class-default is qos-group 0; CoS/DEI):
//        https://cisco.com/c/en/us/td/docs/iosxr/ncs5500/qos/72x/b-qos-cg-ncs5500-72x/b-qos-cg-ncs5500-72x_chapter_010.html
// [NCSTS] QoS troubleshooting guide for NCS 5500 (class-map match-any with match
//        precedence / match mpls experimental topmost; set qos-group; set discard-class):
//        https://cisco.com/c/en/us/support/docs/routers/network-convergence-system-5500-series/217222-qos-troubleshooting-guide-for-ncs-5500-s.html
// [ASR]  ASR 9000 Modular QoS Configuration Guide 5.1.x, Packet Classification
//        (match discard-class egress only; match dscp [ipv4|ipv6]; match precedence;
//        match mpls experimental topmost; classification based on DEI):
//        http://www.cisco.com/c/en/us/td/docs/routers/asr9000/software/asr9k_r5-1/qos/configuration/guide/b_qos_cg51xasr/b_qos_cg51xasr_chapter_0101.html
//        https://www.easymanua.ls/cisco/asr-9000-series/manual/47144?p=35
// [DEI]  NCS 5500/540 Modular QoS Command Reference, set dei (value 0 or 1, policy
//        map class configuration, Release 6.1.2):
//        https://manualshive.com/ru/manual/cisco/ncs-540-series/2608868?page=36
// [R37]  Cisco IOS XR Modular QoS Command Reference 3.7 (index: match cos, set cos,
//        set dscp, set mpls experimental, service-policy (interface)):
//        http://www.cisco.com/en/US/docs/ios_xr_sw/iosxr_r3.7/qos/command/reference/qr37qos.html

/// Shared fixtures of the IOS-XR and Linux export tests.
enum XRFixtures {
    static var dataDirectory: URL { DeviceFixtures.dataDirectory }
    static func tables() throws -> TableSet { try DeviceFixtures.tables() }
    static func domain(_ name: String) throws -> DSDomain { try DeviceFixtures.domain(name) }
    static func configRequest(_ format: String) throws -> ExportRequest {
        try DeviceFixtures.configRequest(format)
    }
    static func expectGolden(
        _ actual: String, _ name: String, sourceLocation: SourceLocation = #_sourceLocation
    )
        throws
    { try DeviceFixtures.expectGolden(actual, name, sourceLocation: sourceLocation) }
}

/// A parsed IOS-XR export: class-maps and policy-maps by name.
struct XRConfig {
    struct ClassMap {
        var matchAll: Bool
        var matches: [String: [Int]] = [:]  // statement (without values) -> values
    }
    struct PolicyClass {
        var name: String
        var sets: [String: Int] = [:]  // statement (without value) -> value
    }
    var classMaps: [String: ClassMap] = [:]
    var policies: [String: [PolicyClass]] = [:]
    var bindings: [String: [String: String]] = [:]  // interface -> input/output -> policy

    /// Parses and checks every line against the documented statement shapes;
    /// each problem is one `line N: …` string.
    static func parse(_ text: String) -> (XRConfig, [String]) {
        var c = XRConfig()
        var problems: [String] = []
        enum Block { case top, classMap(String), policy(String), policyClass(String), interface(String) }
        var block = Block.top
        func values(_ s: Substring, max: Int) -> [Int]? {
            let v = s.split(separator: " ").map { Int($0) }
            guard !v.isEmpty, v.count <= IOSXRFormat.valuesPerMatch,
                v.allSatisfy({ $0 != nil && $0! <= max && $0! >= 0 })
            else { return nil }
            return v.map { $0! }
        }
        // Statement shapes inside a class-map: the statement and its largest value.
        // [CRS] match dscp p.44, [ASR] match precedence / cos, [CRS] topmost p.54,
        // [CRS] match qos-group p.62, [CRS] match discard-class p.47, [NCSCG] match dei (CoS, DEI).
        let matchShapes: [(String, Int)] = [
            ("match dscp", 63), ("match precedence", 7), ("match cos", 7), ("match dei", 1),
            ("match mpls experimental topmost", 7), ("match qos-group", 7), ("match discard-class", 7),
        ]
        // Inside a policy-map class: [CRS] set qos-group p.108, set discard-class p.106,
        // [R37] set dscp, set cos, [CRS] set mpls experimental imposition p.110, [DEI] set dei.
        let setShapes: [(String, Int)] = [
            ("set qos-group", 7), ("set discard-class", 7), ("set dscp", 63), ("set cos", 7), ("set dei", 1),
            ("set mpls experimental imposition", 7),
        ]
        for (i, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let n = i + 1
            func bad(_ why: String) { problems.append("line \(n): \(why): \(line)") }
            switch block {
            case .top:
                if line.isEmpty || line == "!" || line.hasPrefix("! ") { continue }
                if let m = line.wholeMatch(of: #/class-map match-(any|all) (?<n>[A-Za-z][A-Za-z0-9_-]*)/#) {
                    let key = String(m.n)
                    if c.classMaps[key] != nil { bad("class-map defined twice") }
                    c.classMaps[key] = ClassMap(matchAll: m.1 == "all")
                    block = .classMap(key)
                } else if let m = line.wholeMatch(of: #/policy-map (?<n>[A-Za-z][A-Za-z0-9_-]*)/#) {
                    if c.policies[String(m.n)] != nil { bad("policy-map defined twice") }
                    c.policies[String(m.n)] = []
                    block = .policy(String(m.n))
                } else if let m = line.wholeMatch(of: #/interface (?<n>\S+)/#) {
                    c.bindings[String(m.n)] = [:]
                    block = .interface(String(m.n))
                } else {
                    bad("not a top-level statement")
                }
            case .classMap(let key):
                if line == " end-class-map" {
                    if c.classMaps[key]!.matches.isEmpty { bad("class-map without match") }
                    block = .top
                    continue
                }
                guard let shape = matchShapes.first(where: { line.hasPrefix(" \($0.0) ") }),
                    let v = values(line.dropFirst(shape.0.count + 2), max: shape.1)
                else {
                    bad("not a class-map match statement")
                    continue
                }
                c.classMaps[key]!.matches[shape.0, default: []] += v
            case .policy(let key), .policyClass(let key):
                if line == " end-policy-map" {
                    block = .top
                } else if let m = line.wholeMatch(of: #/ class (?<n>[A-Za-z][A-Za-z0-9_-]*)/#) {
                    let cls = String(m.n)
                    if cls != "class-default", c.classMaps[cls] == nil { bad("class before its class-map") }
                    c.policies[key]!.append(PolicyClass(name: cls))
                    block = .policyClass(key)
                } else if line == " !", case .policyClass = block {
                    block = .policy(key)
                } else if case .policyClass = block,
                    let shape = setShapes.first(where: { line.hasPrefix("  \($0.0) ") }),
                    let v = Int(line.dropFirst(shape.0.count + 3)), (0...shape.1).contains(v)
                {
                    let last = c.policies[key]!.count - 1
                    if c.policies[key]![last].sets[shape.0] != nil { bad("set twice") }
                    c.policies[key]![last].sets[shape.0] = v
                } else {
                    bad("not a policy-map statement")
                }
            case .interface(let ifname):
                if line == "!" {
                    block = .top
                } else if let m = line.wholeMatch(of: #/ service-policy (?<d>input|output) (?<p>\S+)/#) {
                    if c.policies[String(m.p)] == nil { bad("service-policy names an undefined policy-map") }
                    c.bindings[ifname]![String(m.d)] = String(m.p)
                } else {
                    bad("not an interface statement")
                }
            }
        }
        if case .top = block {} else { problems.append("unterminated block at the end") }
        return (c, problems)
    }

    /// The class and color a policy gives a packet whose fields are `fields`
    /// (statement -> value): the first class whose class-map matches, else
    /// class-default. Nil when the policy sets no qos-group there.
    func classify(policy: String, _ fields: [String: Int]) -> (Int, Int)? {
        for pc in policies[policy] ?? [] {
            let hit: Bool
            if pc.name == "class-default" {
                hit = true
            } else {
                let cm = classMaps[pc.name]!
                let each = cm.matches.map { stmt, vals in fields[stmt].map { vals.contains($0) } ?? false }
                hit = cm.matchAll ? each.allSatisfy { $0 } : each.contains(true)
            }
            if hit {
                guard let q = pc.sets["set qos-group"], let d = pc.sets["set discard-class"] else {
                    return nil
                }
                return (q, d)
            }
        }
        return nil
    }

    /// The policy class an egress packet of qos-group/discard-class lands in.
    func egressClass(policy: String, _ t: Treatment) -> PolicyClass? {
        let f = [
            "match qos-group": Int(t.serviceClass.rawValue), "match discard-class": Int(t.color.rawValue),
        ]
        return (policies[policy] ?? []).first { pc in
            guard pc.name != "class-default" else { return true }
            let cm = classMaps[pc.name]!
            let each = cm.matches.map { stmt, vals in f[stmt].map { vals.contains($0) } ?? false }
            return cm.matchAll ? each.allSatisfy { $0 } : each.contains(true)
        }
    }
}

@Suite("IOS-XR export")
struct IOSXRTests {
    static let goldens: [(String, String)] = [
        ("default", "iosxr-default.txt"), ("5p3d", "iosxr-5p3d.txt"), ("site", "iosxr-site.txt"),
    ]

    @Test(arguments: goldens)
    func domainGolden(domain: String, file: String) throws {
        let d = try XRFixtures.domain(domain)
        let e = try IOSXRFormat.export(
            ExportRequest(domains: [d], command: "qosmap export iosxr --domain \(domain)"))
        try XRFixtures.expectGolden(e.text, file)
    }

    @Test func configGolden() throws {
        let e = try IOSXRFormat.export(try XRFixtures.configRequest("iosxr"))
        try XRFixtures.expectGolden(e.text, "iosxr-config.txt")
        let (c, problems) = XRConfig.parse(e.text)
        #expect(problems == [])
        #expect(c.bindings["Ethernet0"] == ["input": "qosmap-site-dscp-in", "output": "qosmap-default-out"])
        #expect(c.bindings["Ethernet4"] == ["input": "qosmap-default-dscp-in", "output": "qosmap-5p3d-out"])
        #expect(c.bindings["Ethernet8"] == ["input": "qosmap-untrusted-in", "output": "qosmap-default-out"])
        // Only what the bindings use: two DSCP ingress policies, untrusted, two egress.
        #expect(
            Set(c.policies.keys) == [
                "qosmap-site-dscp-in", "qosmap-default-dscp-in", "qosmap-untrusted-in", "qosmap-default-out",
                "qosmap-5p3d-out",
            ])
        #expect(
            c.classify(policy: "qosmap-untrusted-in", ["match dscp": 46]).map { [$0.0, $0.1] } == [0, 0])
    }

    /// Every golden line is one of the documented statement shapes, in its block.
    @Test(arguments: goldens.map(\.1) + ["iosxr-config.txt"])
    func goldenSyntax(file: String) throws {
        let text = try String(
            contentsOf: XRFixtures.dataDirectory.appendingPathComponent("golden/\(file)"), encoding: .utf8)
        let (c, problems) = XRConfig.parse(text)
        #expect(problems == [])
        #expect(!c.policies.isEmpty)
    }

    /// The parser rejects what IOS-XR would: it is not a rubber stamp.
    @Test(arguments: [
        "class-map match-any x\n match dscp 64\n end-class-map\n!\n",
        "class-map match-any x\n match dscp 1 2 3 4 5 6 7 8 9\n end-class-map\n!\n",
        "class-map match-any x\n match exp 1\n end-class-map\n!\n",
        "policy-map p\n class nope\n  set qos-group 1\n !\n end-policy-map\n!\n",
        "policy-map p\n class class-default\n  set mpls experimental 1\n !\n end-policy-map\n!\n",
        "interface Gi0/0/0/0\n service-policy input missing\n!\n",
        "class-map match-any x\n match cos 1\n",
    ])
    func syntaxCheckRejects(text: String) {
        #expect(!XRConfig.parse(text).1.isEmpty)
    }

    /// The loss summaries, exactly: default's precedence map is the DSCP's top
    /// bits except where the table says otherwise.
    @Test func lossSummaries() throws {
        for name in ["default", "5p3d", "site"] {
            let d = try XRFixtures.domain(name)
            let e = try IOSXRFormat.export(ExportRequest(domains: [d]))
            let differ = Treatment.allCells.filter {
                d.precedence(for: $0).rawValue != d.dscp(for: $0).rawValue >> 3
            }
            let expected: [ExportLoss] =
                differ.isEmpty
                ? []
                : [
                    ExportLoss(
                        domain: name, what: "outbound ip-precedence",
                        detail:
                            "\(differ.count) of 24 cells differ from the precedence bits of their DSCP (first \(differ[0])); "
                            + "set dscp writes the precedence, so they are sent as the DSCP's")
                ]
            #expect(e.losses == expected, "\(name)")
        }
        let config = try IOSXRFormat.export(try XRFixtures.configRequest("iosxr"))
        #expect(config.losses.map(\.domain).allSatisfy { ["default", "5p3d"].contains($0) })
    }

    /// A precedence map that departs from the DSCP in exactly two cells is
    /// reported as two cells, naming the first.
    @Test func precedenceLossCounts() throws {
        var b = try XRFixtures.domain("default").derive(name: "prec2")
        b.setOutbound(.ipPrecedence, Treatment(.ef, .green), 0)
        b.setOutbound(.ipPrecedence, Treatment(.af1, .red), 7)
        let e = try IOSXRFormat.export(ExportRequest(domains: [try b.build()]))
        #expect(
            e.losses == [
                ExportLoss(
                    domain: "prec2", what: "outbound ip-precedence",
                    detail:
                        "2 of 24 cells differ from the precedence bits of their DSCP (first AF1/red); "
                        + "set dscp writes the precedence, so they are sent as the DSCP's")
            ])
    }

    /// A binding that keeps the DSCP gets a policy without set dscp, and no precedence loss.
    @Test func keepDSCP() throws {
        let d = RandomDomain.make(name: "r", seed: 7)
        let e = try IOSXRFormat.export(
            ExportRequest(
                domains: [d],
                bindings: [
                    DeviceBinding(
                        interface: "Gi0/0/0/1", trust: .dot1p, inboundDomain: "r", outboundDomain: "r",
                        rewrite: false)
                ]))
        let (c, problems) = XRConfig.parse(e.text)
        #expect(problems == [])
        let policy = try #require(c.policies["qosmap-r-keep-dscp-out"])
        #expect(policy.count == 24)
        #expect(policy.allSatisfy { $0.sets["set dscp"] == nil && $0.sets["set cos"] != nil })
        #expect(e.losses == [])
    }

    @Test func badInterfaceAndUnknownDomain() throws {
        let d = try XRFixtures.domain("default")
        #expect(throws: DeviceFormatError.self) {
            try IOSXRFormat.export(
                ExportRequest(
                    domains: [d],
                    bindings: [
                        DeviceBinding(
                            interface: "Gi 0", trust: .dscp, inboundDomain: "default",
                            outboundDomain: "default")
                    ]))
        }
        #expect(
            throws: DeviceFormatError("export iosxr: interface x names domain 'nope', which is not loaded")
        ) {
            try IOSXRFormat.export(
                ExportRequest(
                    domains: [d],
                    bindings: [
                        DeviceBinding(
                            interface: "x", trust: .dscp, inboundDomain: "nope", outboundDomain: "default")
                    ]))
        }
    }

    /// Not silently lossy: every (class, color) of the domain has its DSCP,
    /// PCP, EXP (and DEI) in the egress policy, and every received value of
    /// every field classifies to the domain's class and color.
    @Test(arguments: RandomDomain.seeds)
    func everyCellRoundTrips(seed: UInt64) throws {
        let d = RandomDomain.make(name: "r\(seed)", seed: seed)
        let e = try IOSXRFormat.export(ExportRequest(domains: [d]))
        let (c, problems) = XRConfig.parse(e.text)
        #expect(problems == [])
        let out = IOSXRFormat.egressPolicyName(domain: d.name)
        var precedenceDiffers = 0
        for t in Treatment.allCells {
            let pc = try #require(c.egressClass(policy: out, t))
            #expect(pc.name == (IOSXRFormat.egressClassName(t) ?? "class-default"))
            #expect(pc.sets["set dscp"] == Int(d.dscp(for: t).rawValue), "\(t)")
            #expect(pc.sets["set cos"] == Int(d.pcp(for: t).rawValue), "\(t)")
            #expect(pc.sets["set mpls experimental imposition"] == Int(d.exp(for: t).rawValue), "\(t)")
            #expect(pc.sets["set dei"] == (d.dei(for: t) ? 1 : nil), "\(t)")
            if let dscp = pc.sets["set dscp"], dscp >> 3 != Int(d.precedence(for: t).rawValue) {
                precedenceDiffers += 1
            }
        }
        let loss = e.losses.first { $0.what == "outbound ip-precedence" }
        #expect(loss?.detail.hasPrefix("\(precedenceDiffers) of 24 cells") ?? (precedenceDiffers == 0))
        #expect(e.losses.count == (precedenceDiffers == 0 ? 0 : 1))
        let statement: [Field: String] = [
            .dscp: "match dscp", .ipPrecedence: "match precedence", .dot1p: "match cos",
            .exp: "match mpls experimental topmost",
        ]
        for field in Field.allCases {
            let policy = IOSXRFormat.ingressPolicyName(domain: d.name, field: field)
            for v in 0..<field.valueCount {
                let want = d.classify(field, UInt8(v))
                var fields = [statement[field]!: v]
                if field == .dot1p { fields["match dei"] = 0 }
                let got = try #require(c.classify(policy: policy, fields))
                #expect(
                    got.0 == Int(want.serviceClass.rawValue) && got.1 == Int(want.color.rawValue),
                    "\(field) \(v)")
                if field == .dot1p {
                    fields["match dei"] = 1
                    let withDEI = d.classify(pcp: PCP(truncating: UInt8(v)), dei: true)
                    let got1 = try #require(c.classify(policy: policy, fields))
                    #expect(
                        got1.0 == Int(withDEI.serviceClass.rawValue) && got1.1 == Int(withDEI.color.rawValue))
                }
            }
        }
    }
}
