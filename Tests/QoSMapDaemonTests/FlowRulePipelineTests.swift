import NFQueue
import QoSMapCore
import QoSMapDaemon
import QoSMapPacket
import Testing

/// The nfqueue datapath with `classify:` rules: packets built with the flow
/// fields, decided by the pipeline, checked against the rules' meaning.
@Suite("Flow rules on nfqueue")
struct FlowRulePipelineTests {
    static let config = """
        interfaces:
          in1: {}
          in2: {}
          out1: {}
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
            - name: from-cameras
              match: {ingress: [in2], source: [198.18.3.0/24, fd00:3::/64]}
              set: {dscp: AF41}
              connection: false
        """

    static func snapshot(_ text: String = config) throws -> PolicySnapshot {
        try PolicySnapshot(config: DaemonConfig.parse(text, file: "t.yaml"), generation: 1)
    }

    /// Decides `p` arriving on ifindex `input` (1 in1, 2 in2, 3 out1) and
    /// returns the DSCP it leaves with and its ECN bits.
    static func decide(
        _ pipeline: inout PacketPipeline, _ snapshot: PolicySnapshot, _ p: FlowPacket, input: UInt32,
        ecn: UInt8 = 0
    ) -> (dscp: UInt8, ecn: UInt8) {
        var bytes = ProbeFrame.packet(p, ecn: ecn, payload: 10)
        bytes.withUnsafeMutableBytes { buf in
            var packet = QueuedPacket(id: 1, inputInterface: input, outputInterface: 3, payload: buf)
            _ = pipeline.decide(&packet, snapshot: snapshot)
        }
        let tos = p.source.isIPv6 ? (bytes[0] & 0x0F) << 4 | bytes[1] >> 4 : bytes[1]
        return (tos >> 2, tos & 3)
    }

    static func names(_ i: UInt32) -> String? { ["", "in1", "in2", "out1"][safe: Int(i)] }

    @Test(arguments: [false, true])
    func matchedAndUnmatchedAndReplies(v6: Bool) throws {
        let s = try Self.snapshot()
        var pipeline = PacketPipeline(interfaceName: Self.names)
        let client = IPAddress(parsing: v6 ? "fd00:1::2" : "198.18.1.2")!
        let server = IPAddress(parsing: v6 ? "fd00:2::9" : "198.18.2.9")!
        let other = IPAddress(parsing: v6 ? "fd00:9::9" : "198.18.9.9")!
        let voip = FlowPacket(
            protocolNumber: 17, source: client, destination: server, sourcePort: 40000, destinationPort: 15000
        )
        // Matched: EF (46) whatever it arrived with; ECN kept.
        #expect(Self.decide(&pipeline, s, voip, input: 1, ecn: 2) == (46, 2))
        // Its reply from the server: EF by the connection.
        #expect(Self.decide(&pipeline, s, voip.reversed, input: 3, ecn: 1) == (46, 1))
        // The same ports to another address: trust (DSCP 0 stays 0).
        var miss = voip
        miss.destination = other
        #expect(Self.decide(&pipeline, s, miss, input: 1) == (0, 0))
        #expect(Self.decide(&pipeline, s, miss.reversed, input: 3) == (0, 0))
        // TCP to 873: AF1 yellow is AF12 (12) in the default domain.
        let rsync = FlowPacket(
            protocolNumber: 6, source: client, destination: other, sourcePort: 50000, destinationPort: 873)
        #expect(Self.decide(&pipeline, s, rsync, input: 1) == (12, 0))
        #expect(Self.decide(&pipeline, s, rsync.reversed, input: 3) == (12, 0))
        // Trust still rules a packet no rule matches: AF31 stays AF31 (26).
        var marked = miss
        marked.sourcePort = 1
        marked.dscp = 26
        #expect(Self.decide(&pipeline, s, marked, input: 1) == (26, 0))
        let names = pipeline.counts.ruleNames
        #expect(names == ["voip", "backup", "from-cameras"])
        #expect(pipeline.counts.rulePackets == [2, 2, 0])
        let voipBytes = UInt64(ProbeFrame.packet(voip, payload: 10).count)
        #expect(pipeline.counts.ruleBytes[0] == 2 * voipBytes)
    }

    @Test(arguments: [false, true])
    func ingressRuleWithoutConnection(v6: Bool) throws {
        let s = try Self.snapshot()
        var pipeline = PacketPipeline(interfaceName: Self.names)
        let camera = IPAddress(parsing: v6 ? "fd00:3::5" : "198.18.3.5")!
        let nvr = IPAddress(parsing: v6 ? "fd00:1::2" : "198.18.1.2")!
        let stream = FlowPacket(
            protocolNumber: 17, source: camera, destination: nvr, sourcePort: 5004, destinationPort: 5004)
        // From in2: AF41 (34). From in1 the ingress key fails: trust.
        #expect(Self.decide(&pipeline, s, stream, input: 2) == (34, 0))
        #expect(Self.decide(&pipeline, s, stream, input: 1) == (0, 0))
        // connection: false: the reply is classified by trust.
        #expect(Self.decide(&pipeline, s, stream.reversed, input: 3) == (0, 0))
        // A host-originated packet (no input interface) never matches `ingress`.
        #expect(Self.decide(&pipeline, s, stream, input: 0) == (0, 0))
    }

    @Test func orderDecidesOverlaps() throws {
        let s = try Self.snapshot(
            """
            classify:
              rules:
                - {name: narrow, match: {destination: 198.18.2.9}, set: {class: CS6}}
                - {name: wide, match: {destination: 198.18.2.0/24}, set: {class: AF3}}
            """)
        var pipeline = PacketPipeline(interfaceName: Self.names)
        let a = IPAddress(parsing: "198.18.1.1")!
        let p9 = FlowPacket(protocolNumber: 17, source: a, destination: IPAddress(parsing: "198.18.2.9")!)
        let p8 = FlowPacket(protocolNumber: 17, source: a, destination: IPAddress(parsing: "198.18.2.8")!)
        #expect(Self.decide(&pipeline, s, p9, input: 1).dscp == 48)
        #expect(Self.decide(&pipeline, s, p8, input: 1).dscp == 26)
    }

    @Test func noClassifySectionMeansNoRules() throws {
        let s = try Self.snapshot("trust: dscp\n")
        #expect(s.flows == nil)
    }

    @Test(arguments: [
        (
            "classify:\n  rules:\n    - {name: a, match: {protocol: udpp}, set: {class: EF}}\n",
            "t.yaml:3:35: invalid protocol 'udpp'; allowed: tcp, udp, icmp, icmpv6, sctp, dccp, udplite, gre, esp, ah, or a number 0-255"
        ),
        (
            "classify:\n  rules:\n    - {name: a, match: {destination: [servers]}, set: {class: EF}}\n",
            "t.yaml:3:39: unknown set 'servers'; allowed: an IPv4 or IPv6 address or prefix, or a set of classify.sets (none defined)"
        ),
        (
            "classify:\n  rules:\n    - {name: a, match: {protocol: icmp, destination-port: 1}, set: {class: EF}}\n",
            "t.yaml:3:59: ports need a protocol with ports; 'icmp' has none; allowed: tcp, udp, sctp, dccp, udplite"
        ),
        (
            "classify:\n  rules:\n    - {name: a, set: {class: XX}}\n",
            "t.yaml:3:30: invalid service class 'XX'; allowed: BE, AF1, AF2, AF3, AF4, EF, CS6, CS7"
        ),
        (
            "classify:\n  rules:\n    - {name: a, set: {class: EF, dscp: 46}}\n",
            "t.yaml:3:22: set takes class (and color) or dscp, not both; allowed: {class: C, color: K} or {dscp: D}"
        ),
        (
            "classify:\n  rules:\n    - {name: a, match: {destination-port: 70000}, set: {class: EF}}\n",
            "t.yaml:3:43: invalid port '70000'; allowed: a port 0-65535 or a range N-M with N <= M"
        ),
        (
            "classify:\n  rules:\n    - {name: a, match: {source: 198.18.2.1/24}, set: {class: EF}}\n",
            "t.yaml:3:33: prefix '198.18.2.1/24' has host bits set; allowed: 198.18.2.0/24"
        ),
        (
            "classify:\n  rules:\n    - {name: a, match: {colour: red}, set: {class: EF}}\n",
            "t.yaml:3:25: unknown key 'colour' in match; allowed: protocol, source, destination, source-port, destination-port, ingress, dscp, dns"
        ),
        (
            "classify:\n  rules:\n    - {name: a, set: {class: EF}}\n    - {name: a, set: {class: AF1}}\n",
            "t.yaml:4:7: duplicate rule name 'a' (first at line 3, column 7); allowed: unique names"
        ),
        (
            "classify:\n  rules:\n    - {match: {protocol: udp}, set: {class: EF}}\n",
            "t.yaml:3:7: rule without a name; allowed keys: name, match, set, connection (name and set required)"
        ),
        (
            "classify:\n  rules:\n    - {name: a, match: {dscp: [EF, 64]}, set: {class: EF}}\n",
            "t.yaml:3:36: dscp value 64 is out of range; allowed: 0-63"
        ),
        (
            "classify:\n  rules:\n    - {name: a, match: {destination-port: []}, set: {class: EF}}\n",
            "t.yaml:3:43: empty list of ports matches nothing; allowed: one or more"
        ),
    ])
    func ruleErrorsArePositioned(text: String, message: String) {
        do {
            _ = try DaemonConfig.parse(text, file: "t.yaml")
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.description == message)
        }
    }

    @Test func reloadForgetsConnections() throws {
        let s1 = try Self.snapshot()
        var pipeline = PacketPipeline(interfaceName: Self.names)
        let voip = FlowPacket(
            protocolNumber: 17, source: IPAddress(parsing: "198.18.1.2")!,
            destination: IPAddress(parsing: "198.18.2.9")!, sourcePort: 40000, destinationPort: 5060)
        #expect(Self.decide(&pipeline, s1, voip, input: 1).dscp == 46)
        #expect(Self.decide(&pipeline, s1, voip.reversed, input: 3).dscp == 46)
        let s2 = try PolicySnapshot(config: DaemonConfig.parse(Self.config, file: "t.yaml"), generation: 2)
        #expect(Self.decide(&pipeline, s2, voip.reversed, input: 3).dscp == 0)
        #expect(pipeline.counts.rulePackets == [0, 0, 0])
    }
}

extension Array {
    subscript(safe i: Int) -> Element? { indices.contains(i) ? self[i] : nil }
}
