import Foundation
import QoSMapCore
import QoSMapPacket
import Testing

/// `qosmap classify`, `explain --config` with a described packet, and
/// `lint --config` on flow rules, run as the built binary.
@Suite("classify, explain and lint on flow rules")
struct ClassifyCLITests {
    static let config = """
        system-tables: false
        interfaces:
          in1: {}
          in2: {trust: none}
          out1: {}
        actions: {mark: true, priority: true}
        classify:
          sets:
            voip-servers: [198.18.2.0/24, fd00:2::/64]
          rules:
            - name: voip
              match:
                protocol: udp
                destination-port: [5060, 10000-20000]
                destination: [voip-servers]
              set: {class: EF}
            - name: backup
              match: {protocol: tcp, destination-port: 873}
              set: {class: AF1, color: yellow}
            - name: backup-dup
              match: {protocol: tcp, destination-port: 873, destination: 198.18.2.0/24}
              set: {class: AF2}
            - name: from-cameras
              match: {ingress: [in2], source: [198.18.3.0/24]}
              set: {dscp: AF41}
            - name: ef-anyway
              match: {dscp: EF, ingress: in1}
              set: {class: EF}
              connection: false
        """

    static func withConfig<T>(_ text: String = config, _ body: (String) throws -> T) throws -> T {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "qm-classify-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("q.yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return try body(path)
    }

    static func json(_ args: [String]) throws -> [String: Any] {
        let r = try qosmap(args + ["--json", "--no-system-tables"])
        #expect(r.status == 0, "\(r.err)")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any])
    }

    @Test(
        arguments: [
            ("198.18.1.2", "198.18.2.9", "udp", "5060", "in1", "voip", 46, "EF", "green"),
            ("fd00:1::2", "fd00:2::9", "udp", "15000", "in1", "voip", 46, "EF", "green"),
            ("198.18.1.2", "198.18.9.9", "tcp", "873", "in1", "backup", 12, "AF1", "yellow"),
            ("fd00:1::2", "fd00:9::9", "tcp", "873", "in1", "backup", 12, "AF1", "yellow"),
            ("198.18.3.7", "198.18.1.2", "udp", "5004", "in2", "from-cameras", 34, "AF4", "green"),
            // The same packet from in1: no rule; trust dscp gives BE for DSCP 0.
            ("198.18.3.7", "198.18.1.2", "udp", "5004", "in1", nil, 0, "BE", "green"),
        ] as [(String, String, String, String, String, String?, Int, String, String)])
    func describedPackets(
        src: String, dst: String, proto: String, port: String, ingress: String, rule: String?, dscp: Int,
        cls: String, color: String
    ) throws {
        try Self.withConfig { path in
            let j = try Self.json([
                "classify", "--config", path, "--protocol", proto, "--source", src, "--destination", dst,
                "--destination-port", port, "--source-port", "40000", "--ingress", ingress, "--egress",
                "out1",
            ])
            let r = j["rule"] as? [String: Any]
            #expect(r?["name"] as? String == rule)
            if rule != nil {
                #expect(r?["file"] as? String == path)
                #expect((r?["line"] as? Int ?? 0) > 10)
            }
            #expect(j["serviceClass"] as? String == cls)
            #expect(j["color"] as? String == color)
            #expect((j["leaves"] as? [String: Any])?["dscp"] as? Int == dscp)
        }
    }

    @Test func textNamesTheRuleAndItsLine() throws {
        try Self.withConfig { path in
            let r = try qosmap([
                "classify", "--config", path, "--protocol", "udp", "--source", "198.18.1.2", "--destination",
                "198.18.2.9", "--destination-port", "5060", "--ingress", "in1", "--egress", "out1",
                "--no-system-tables",
            ])
            #expect(r.status == 0)
            #expect(r.out.contains("rule: voip (\(path):11): set class EF color green"), "\(r.out)")
            #expect(r.out.contains("leaves: dscp 46 (EF), mark 0x34, priority 5"), "\(r.out)")
        }
    }

    /// A capture: the reply of a matched flow takes the rule through its connection.
    @Test func captureFollowsConnections() throws {
        let a = IPAddress(parsing: "198.18.1.2")!
        let b = IPAddress(parsing: "198.18.2.9")!
        let request = FlowPacket(
            protocolNumber: 17, source: a, destination: b, sourcePort: 40000, destinationPort: 5060)
        let other = FlowPacket(
            protocolNumber: 17, source: b, destination: a, sourcePort: 9, destinationPort: 9)
        // LINKTYPE_RAW (101) pcap: the reply before and after the request.
        var file: [UInt8] = [0xD4, 0xC3, 0xB2, 0xA1, 2, 0, 4, 0] + [UInt8](repeating: 0, count: 8)
        file += [0xFF, 0xFF, 0, 0, 101, 0, 0, 0]
        for p in [request.reversed, request, request.reversed, other] {
            let bytes = ProbeFrame.packet(p)
            let n = UInt32(bytes.count)
            file += [UInt8](repeating: 0, count: 8)
            for _ in 0..<2 { file += [UInt8(n & 0xFF), UInt8(n >> 8), 0, 0] }
            file += bytes
        }
        try Self.withConfig { path in
            let pcap = path + ".pcap"
            try Data(file).write(to: URL(fileURLWithPath: pcap))
            let j = try Self.json([
                "classify", "--config", path, "--in", pcap, "--ingress", "in1", "--egress", "out1",
            ])
            let packets = try #require(j["packets"] as? [[String: Any]])
            let rules = packets.map { ($0["rule"] as? [String: Any])?["name"] as? String }
            let via = packets.map { ($0["rule"] as? [String: Any])?["viaConnection"] as? Bool }
            #expect(rules == [nil, "voip", "voip", nil])
            #expect(via == [nil, false, true, nil])
            #expect(j["byRule"] as? [String: Int] == ["voip": 2])
            #expect(j["byTrust"] as? Int == 2)
        }
    }

    @Test func explainShowsTheRule() throws {
        try Self.withConfig { path in
            let r = try qosmap([
                "explain", "0", "--config", path, "--ingress", "in1", "--egress", "out1", "--protocol", "udp",
                "--source", "198.18.1.2", "--destination", "198.18.2.9", "--destination-port", "5060",
                "--hop", "P=dscp:exp", "--no-system-tables",
            ])
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out.contains("classified  EF/green      by rule voip (\(path):11)"), "\(r.out)")
            #expect(r.out.contains("leaves: dscp 46 (EF), ip-precedence 5, exp 5"), "\(r.out)")
            // in2 trusts none: without a rule there would be nothing to trace.
            let cam = try qosmap([
                "explain", "0", "--config", path, "--ingress", "in2", "--egress", "out1", "--protocol", "udp",
                "--source", "198.18.3.1", "--destination", "198.18.1.2", "--no-system-tables",
            ])
            #expect(cam.status == 0, "\(cam.err)")
            #expect(cam.out.contains("AF4/green       by rule from-cameras"), "\(cam.out)")
            #expect(
                cam.out.contains(
                    "hop 1 in2->out1: trusts none (flow rules classify, else BE/green), writes dscp"),
                "\(cam.out)")
            #expect(!cam.out.contains("trusts dscp"), "\(cam.out)")
        }
    }

    @Test func lintFindsShadowedAndRedundantRules() throws {
        try Self.withConfig { path in
            let r = try qosmap(["lint", "--config", path, "--no-system-tables"])
            #expect(r.status == 1)
            #expect(
                r.out.contains(
                    "\(path):20: warning: rule 'backup-dup' can never match: rule 'backup' (\(path):17) matches every packet it does, first [shadowed]"
                ), "\(r.out)")
            #expect(
                r.out.contains(
                    "\(path):26: warning: rule 'ef-anyway' sets what trust gives anyway (EF/green) for every packet it matches [same-as-trust]"
                ), "\(r.out)")
            #expect(r.out.hasSuffix("\(path): 5 rule(s), 2 finding(s)\n"))
        }
        // Rules that each do something: clean, exit 0.
        let clean = """
            classify:
              rules:
                - {name: a, match: {protocol: udp, destination-port: 5060}, set: {class: EF}}
                - {name: b, match: {protocol: udp}, set: {class: AF1}}
                - {name: c, match: {dscp: EF, ingress: in1}, set: {class: AF4}}
            """
        try Self.withConfig(clean) { path in
            let r = try qosmap(["lint", "--config", path, "--no-system-tables"])
            #expect(r.status == 0, "\(r.out)")
        }
    }

    @Test(arguments: [
        (["--source", "198.18.1.2"], "a packet needs --source and --destination"),
        (["--source", "198.18.1.2", "--destination", "fd00::1"], "are of different families"),
        (
            ["--source", "198.18.1.2", "--destination", "198.18.1.3", "--destination-port", "80"],
            "ports need --protocol"
        ),
        (
            ["--source", "198.18.1.2", "--destination", "1.2.3.x", "--protocol", "udp"],
            "invalid --destination '1.2.3.x'"
        ),
        (
            ["--source", "198.18.1.2", "--destination", "198.18.1.3", "--protocol", "udpx"],
            "invalid protocol 'udpx'"
        ),
    ])
    func badPacketsExit64(args: [String], message: String) throws {
        try Self.withConfig { path in
            let r = try qosmap(["classify", "--config", path, "--no-system-tables"] + args)
            #expect(r.status == 64)
            #expect(r.err.contains(message), "\(r.err)")
        }
    }

    @Test func badRuleExits65WithItsPosition() throws {
        try Self.withConfig(
            "classify:\n  rules:\n    - {name: a, match: {protocol: udpp}, set: {class: EF}}\n"
        ) {
            path in
            let r = try qosmap([
                "classify", "--config", path, "--source", "198.18.1.2", "--destination", "198.18.1.3",
                "--no-system-tables",
            ])
            #expect(r.status == 65)
            #expect(r.err.contains("\(path):3:35: invalid protocol 'udpp'"), "\(r.err)")
        }
    }
}
