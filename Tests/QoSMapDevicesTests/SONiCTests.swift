import Foundation
import QoSMapCore
import QoSMapDevices
import QoSMapTables
import Testing

/// This test file's Data directory.
private let sonicData = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
    "Data")

/// Compares with Data/golden/NAME, or rewrites it under QOSMAP_UPDATE_GOLDEN=1.
private func sonicGolden(_ actual: String, _ name: String, sourceLocation: SourceLocation = #_sourceLocation)
    throws
{ try DeviceFixtures.expectGolden(actual, name, sourceLocation: sourceLocation) }

/// The built-in domains plus `site` (Data/tables/site.yaml).
private func sonicDomains() throws -> DomainSet { try DeviceFixtures.tables().domains }

/// What Data/config/qosmapd.yaml gives `qosmap export --config`.
private func sonicConfigRequest() throws -> ExportRequest { try DeviceFixtures.configRequest("sonic") }

/// The JSON as Foundation reads it: an independent check of the writer.
private func foundationJSON(_ text: String) throws -> [String: [String: [String: String]]] {
    let object = try JSONSerialization.jsonObject(with: Data(text.utf8))
    return try #require(object as? [String: [String: [String: String]]])
}

@Suite("SONiC config_db export and import")
struct SONiCTests {
    // MARK: Export goldens

    /// One domain each: the built-ins and the derived `site`.
    @Test(arguments: ["default", "5p3d", "site"])
    func exportGolden(domain: String) throws {
        let d = try #require(try sonicDomains()[domain])
        let export = try SONiCFormat.export(ExportRequest(domains: [d]))
        try sonicGolden(export.text, "sonic-\(domain).json")
        try sonicGolden(
            export.losses.map(\.description).joined(separator: "\n") + "\n", "sonic-\(domain)-losses.txt")
        // Foundation reads the same cells the domain holds.
        let json = try foundationJSON(export.text)
        #expect(
            Set(json.keys) == [
                "DSCP_TO_TC_MAP", "DOT1P_TO_TC_MAP", "MPLS_TC_TO_TC_MAP", "TC_TO_DSCP_MAP", "TC_TO_DOT1P_MAP",
            ])
        let dscp = try #require(json["DSCP_TO_TC_MAP"]?[domain])
        #expect(dscp.count == 64)
        for v in 0..<64 {
            #expect(dscp[String(v)] == String(d.classify(.dscp, UInt8(v)).serviceClass.rawValue))
        }
        let out = try #require(json["TC_TO_DOT1P_MAP"]?[domain])
        for c in ServiceClass.allCases {
            #expect(out[String(c.rawValue)] == String(d.pcp(for: Treatment(c, .green)).rawValue))
        }
    }

    /// The qosmapd config's bindings: PORT_QOS_MAP follows each interface's trust and domains.
    @Test func exportWithBindingsGolden() throws {
        let export = try SONiCFormat.export(try sonicConfigRequest())
        try sonicGolden(export.text, "sonic-config.json")
        try sonicGolden(
            export.losses.map(\.description).joined(separator: "\n") + "\n", "sonic-config-losses.txt")
        let ports = try #require(try foundationJSON(export.text)["PORT_QOS_MAP"])
        #expect(
            ports["Ethernet0"]
                == ["dscp_to_tc_map": "site", "tc_to_dscp_map": "default", "tc_to_dot1p_map": "default"])
        #expect(
            ports["Ethernet4"]
                == ["dscp_to_tc_map": "default", "tc_to_dscp_map": "5p3d", "tc_to_dot1p_map": "5p3d"])
        // trust none: no ingress map at all, so SONiC's port default TC 0 (BE).
        #expect(ports["Ethernet8"] == ["tc_to_dscp_map": "default", "tc_to_dot1p_map": "default"])
        // Each domain once, with every table.
        #expect(
            Set(try foundationJSON(export.text)["TC_TO_DSCP_MAP"]?.keys.map { $0 } ?? []) == [
                "default", "site", "5p3d",
            ])
    }

    /// Trust ip-precedence binds a DSCP map derived from the precedence map;
    /// rewrite-dscp false leaves tc_to_dscp_map unbound; 8021p and exp bind their maps.
    @Test func otherTrustsAndNoRewrite() throws {
        let d = try #require(try sonicDomains()["site"])
        let export = try SONiCFormat.export(
            ExportRequest(
                domains: [d],
                bindings: [
                    DeviceBinding(
                        interface: "Ethernet12", trust: .ipPrecedence, inboundDomain: "site",
                        outboundDomain: "site",
                        rewrite: false),
                    DeviceBinding(
                        interface: "Ethernet16", trust: .dot1p, inboundDomain: "site", outboundDomain: "site"),
                    DeviceBinding(
                        interface: "Ethernet20", trust: .exp, inboundDomain: "site", outboundDomain: "site"),
                ]))
        let json = try foundationJSON(export.text)
        #expect(
            json["PORT_QOS_MAP"]?["Ethernet12"] == ["dscp_to_tc_map": "site_prec", "tc_to_dot1p_map": "site"])
        #expect(json["PORT_QOS_MAP"]?["Ethernet16"]?["dot1p_to_tc_map"] == "site")
        #expect(json["PORT_QOS_MAP"]?["Ethernet20"]?["mpls_tc_to_tc_map"] == "site")
        let prec = try #require(json["DSCP_TO_TC_MAP"]?["site_prec"])
        for v in 0..<64 {
            #expect(prec[String(v)] == String(d.classify(.ipPrecedence, UInt8(v >> 3)).serviceClass.rawValue))
        }
        // The derived map carries the precedence classes: no inbound precedence loss.
        #expect(!export.losses.contains { $0.what == "inbound ip-precedence" })
    }

    // MARK: Losses

    /// The summaries name each field's count of yellow/red values, the classes
    /// whose egress value differs by color, EXP egress and DEI; counted here
    /// from the domain, not from the exporter.
    @Test(arguments: ["default", "5p3d", "site"])
    func lossSummaries(domain: String) throws {
        let d = try #require(try sonicDomains()[domain])
        let losses = try SONiCFormat.export(ExportRequest(domains: [d])).losses
        #expect(losses.allSatisfy { $0.domain == domain })
        let colorLine = losses.first { $0.what == "inbound color" }?.detail ?? ""
        for f in [Field.dscp, .dot1p, .exp] {
            let n = (0..<f.valueCount).filter { d.classify(f, UInt8($0)).color != .green }.count
            #expect(
                colorLine.contains("\(f.name) \(n) of \(f.valueCount)") == (n > 0),
                "\(f.name): \(n) in '\(colorLine)'")
        }
        let outLine = losses.first { $0.what == "outbound color" }?.detail ?? ""
        for c in ServiceClass.allCases {
            let differs =
                d.pcp(for: Treatment(c, .yellow)) != d.pcp(for: Treatment(c, .green))
                || d.pcp(for: Treatment(c, .red)) != d.pcp(for: Treatment(c, .green))
            let part = outLine.components(separatedBy: "8021p for ").dropFirst().first ?? ""
            #expect(
                part.contains("\(c.name) (TC \(c.rawValue))") == differs, "8021p \(c.name) in '\(outLine)'")
        }
        #expect(losses.contains { $0.what == "outbound exp" })
        #expect(losses.contains { $0.what == "dei" } == (d.dropEligibility == .color))
        // One summary line per kind, never one per cell.
        #expect(Set(losses.map(\.what)).count == losses.count)
    }

    /// The site domain's per-color PCP of AF2 is reported; its DSCP map (AF1x
    /// per color) too.
    @Test func siteLossesNameItsChanges() throws {
        let d = try #require(try sonicDomains()["site"])
        let losses = try SONiCFormat.export(ExportRequest(domains: [d])).losses
        let out = try #require(losses.first { $0.what == "outbound color" })
        #expect(out.detail.contains("8021p for AF2 (TC 2)"))
        #expect(out.detail.contains("dscp for AF1 (TC 1)"))
        #expect(losses.contains { $0.what == "dei" })
    }

    /// A domain name SONiC cannot hold is refused, not truncated.
    @Test func longNameRefused() throws {
        let d = try #require(try sonicDomains()["default"])
        var b = d.derive(name: "a-domain-name-longer-than-thirty-two")
        b.dropEligibility = d.dropEligibility
        let long = try b.build()
        #expect(throws: DeviceFormatError.self) { try SONiCFormat.export(ExportRequest(domains: [long])) }
    }

    // MARK: Round trip

    /// export → import → complete from a different random domain: every cell
    /// SONiC holds is the original's, every other cell the base's.
    @Test(arguments: RandomDomain.seeds)
    func roundTrip(seed: UInt64) throws {
        let original = RandomDomain.make(name: "r\(seed)", seed: seed)
        let base = RandomDomain.make(name: "base", seed: seed &+ 0x5EED)
        let text = try SONiCFormat.export(ExportRequest(domains: [original])).text
        let imported = try SONiCFormat.parse(text, file: "rt.json")
        #expect(imported.map(\.name) == [original.name])
        let one = try #require(imported.first)
        #expect(one.unmapped.isEmpty)
        let back = one.completed(base: base).domain
        for f in Field.allCases {
            let held = f != .ipPrecedence
            for v in 0..<f.valueCount {
                let got = back.classify(f, UInt8(v))
                let want =
                    held
                    ? original.classify(f, UInt8(v)).serviceClass : base.classify(f, UInt8(v)).serviceClass
                #expect(got.serviceClass == want, "seed \(seed) inbound \(f.name) \(v)")
                #expect(
                    got.color == base.classify(f, UInt8(v)).color, "seed \(seed) inbound color \(f.name) \(v)"
                )
            }
            for t in Treatment.allCells {
                let outHeld = (f == .dscp || f == .dot1p) && t.color == .green
                let want = outHeld ? original.mark(f, for: t) : base.mark(f, for: t)
                #expect(back.mark(f, for: t) == want, "seed \(seed) outbound \(f.name) \(t)")
            }
        }
        #expect(back.dropEligibility == base.dropEligibility)
    }

    // MARK: Import

    /// Maps of one name across the tables are one domain; other tables are skipped.
    @Test func importGroupsByName() throws {
        let text = """
            {
                "DEVICE_METADATA": {"localhost": {"hostname": "leaf1"}},
                "DSCP_TO_TC_MAP": {"AZURE": {"46": "5", "0": "0"}, "OTHER": {"8": "1"}},
                "TC_TO_DSCP_MAP": {"AZURE": {"5": "46"}},
                "TC_TO_DOT1P_MAP": {"AZURE": {"5": "5"}},
                "DOT1P_TO_TC_MAP": {"AZURE": {"3": "3"}},
                "MPLS_TC_TO_TC_MAP": {"AZURE": {"7": "7"}},
                "PORT_QOS_MAP": {"Ethernet0": {"dscp_to_tc_map": "AZURE"}}
            }
            """
        let all = try SONiCFormat.parse(text, file: "leaf1.json")
        #expect(all.map(\.name) == ["AZURE", "OTHER"])
        let azure = all[0]
        #expect(azure.inbound[.dscp]?[46] == .init(.ef, nil))
        #expect(azure.inbound[.dscp]?.count == 2)
        #expect(azure.inbound[.dot1p]?[3] == .init(.af3, nil))
        #expect(azure.inbound[.exp]?[7] == .init(.cs7, nil))
        #expect(azure.outbound[.dscp] == [Treatment(.ef, .green): 46])
        #expect(azure.outbound[.dot1p] == [Treatment(.ef, .green): 5])
        #expect(all[1].inbound[.dscp] == [8: .init(.af1, nil)])
    }

    /// The DSCP_TO_TC_MAP example of SONiC's Configuration.md
    /// (sonic-buildimage src/sonic-yang-models/doc/Configuration.md): ten
    /// values; the other 54 come from the base, and completion says so.
    @Test func importConfigurationMdExample() throws {
        let text = """
            {
            "DSCP_TO_TC_MAP": {
                "AZURE": {
                    "1": "1",
                    "0": "1",
                    "3": "3",
                    "2": "1",
                    "5": "2",
                    "4": "4",
                    "7": "1",
                    "6": "1",
                    "9": "1",
                    "8": "0"
                }
              }
            }
            """
        let azure = try #require(try SONiCFormat.parse(text, file: "c.json").first)
        let base = try #require(try sonicDomains()["default"])
        let (d, notes) = azure.completed(base: base)
        #expect(d.classify(.dscp, 5).serviceClass == .af2)
        #expect(d.classify(.dscp, 8).serviceClass == .be)
        #expect(d.classify(.dscp, 46) == base.classify(.dscp, 46))
        #expect(notes.contains("inbound dscp: 54 of 64 values not in the file; taken from default"))
    }

    /// TC 8–15 is valid SONiC but no qosmap class: an unmapped line with file:line.
    @Test func trafficClassBeyondSevenIsUnmapped() throws {
        let text = """
            {
                "DSCP_TO_TC_MAP": {
                    "X": {
                        "10": "9",
                        "12": "1"
                    }
                },
                "TC_TO_DSCP_MAP": {
                    "X": {
                        "12": "46"
                    }
                }
            }
            """
        let x = try #require(try SONiCFormat.parse(text, file: "t.json").first)
        #expect(x.inbound[.dscp] == [12: .init(.af1, nil)])
        #expect(x.unmapped.count == 2)
        #expect(x.unmapped[0].hasPrefix("t.json:4: DSCP_TO_TC_MAP \"X\": DSCP 10 -> TC 9: "))
        #expect(x.unmapped[1].hasPrefix("t.json:10: TC_TO_DSCP_MAP \"X\": TC 12 -> DSCP 46: "))
    }

    /// Broken files: one line, `file:line:column: message`, naming the bad token.
    @Test(arguments: [
        (
            "{\n  \"DSCP_TO_TC_MAP\": {\"A\": {\"1\": \"1\",}}\n}",
            "e.json:2:37: invalid JSON: expected a string key, found '}'"
        ),
        (
            "{\n  \"DSCP_TO_TC_MAP\": {\"A\": {\"1\": \"16\"}}\n}",
            "e.json:2:33: DSCP_TO_TC_MAP \"A\" DSCP 1: invalid TC \"16\"; allowed: 0-15"
        ),
        (
            "{\n  \"DSCP_TO_TC_MAP\": {\"A\": {\"64\": \"1\"}}\n}",
            "e.json:2:28: DSCP_TO_TC_MAP \"A\": invalid DSCP key \"64\"; allowed: 0-63"
        ),
        (
            "{\n  \"DOT1P_TO_TC_MAP\": {\"A\": {\"x\": \"1\"}}\n}",
            "e.json:2:29: DOT1P_TO_TC_MAP \"A\": invalid DOT1P key \"x\"; allowed: 0-7"
        ),
        (
            "{\n  \"TC_TO_DSCP_MAP\": {\"A\": {\"1\": \"64\"}}\n}",
            "e.json:2:33: TC_TO_DSCP_MAP \"A\" TC 1: invalid DSCP \"64\"; allowed: 0-63"
        ),
        (
            "{\n  \"TC_TO_DOT1P_MAP\": {\"A\": {\"16\": \"1\"}}\n}",
            "e.json:2:29: TC_TO_DOT1P_MAP \"A\": invalid TC key \"16\"; allowed: 0-15"
        ),
        ("{\"DSCP_TO_TC_MAP\": []}", "e.json:1:20: DSCP_TO_TC_MAP must be an object of maps, found an array"),
        ("[1]", "e.json:1:1: config_db JSON must be an object of tables, found an array"),
        (
            "{\"DSCP_TO_TC_MAP\": {\"A\": {\"1\": \"1\"}, \"A\": {}}}",
            "e.json:1:38: invalid JSON: duplicate key \"A\""
        ),
        ("", "e.json:1:1: invalid JSON: expected a JSON value, found end of file"),
        ("{\"a\": \"\u{00e9}\" x", "e.json:1:11: invalid JSON: expected ',' or '}', found 'x'"),
    ])
    func importErrors(text: String, message: String) {
        #expect(throws: DeviceFormatError(message)) { try SONiCFormat.parse(text, file: "e.json") }
    }

    /// Deep nesting is an error, not a stack overflow.
    @Test func deepNestingRefused() {
        let text = String(repeating: "[", count: 100_000)
        #expect(throws: DeviceFormatError.self) { try SONiCFormat.parse(text, file: "deep.json") }
    }
}
