import Logging
import Metrics
import NFQueue
import QoSMapCore
import QoSMapDaemon
import QoSMapPacket
import Testing

/// `dns:` rules in qosmapd: config errors, the learner, the mask table and
/// the nfqueue pipeline deciding with learned addresses.
@Suite("DNS learning in qosmapd")
struct DNSLearningTests {
    static let config = """
        interfaces:
          in1: {}
          out1: {}
        classify:
          dns:
            snoop: [in1]
            min-ttl: 30
          rules:
            - name: udp-video
              match: {protocol: udp, dns: ["*.zoom.us"]}
              set: {class: EF}
            - name: video
              match: {dns: ["*.zoom.us", teams.microsoft.com]}
              set: {class: AF4}
        """

    /// A reply to `q` (type A) with CNAMEs `chain` and A/AAAA records for the final name.
    static func reply(_ q: String, chain: [String] = [], _ addresses: [String], ttl: UInt32 = 300) throws
        -> DNSReply
    {
        func name(_ s: String) -> [UInt8] {
            s.split(separator: ".").flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } + [0]
        }
        func rr(_ owner: String, _ type: UInt16, _ data: [UInt8]) -> [UInt8] {
            name(owner) + [0, UInt8(type), 0, 1] + [24, 16, 8, 0].map { UInt8((ttl >> $0) & 0xFF) }
                + [UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data
        }
        var records: [[UInt8]] = []
        var owner = q
        for c in chain {
            records.append(rr(owner, 5, name(c)))
            owner = c
        }
        for s in addresses {
            let a = IPAddress(parsing: s)!
            if a.isIPv6 {
                records.append(
                    rr(
                        owner, 28,
                        (0..<16).map { i in
                            UInt8(truncatingIfNeeded: (i < 8 ? a.high : a.low) >> UInt64(56 - 8 * (i % 8)))
                        }))
            } else {
                records.append(rr(owner, 1, [24, 16, 8, 0].map { UInt8((UInt32(a.low) >> $0) & 0xFF) }))
            }
        }
        let header: [UInt8] = [0x12, 0x34, 0x81, 0x80, 0, 1, 0, UInt8(records.count), 0, 0, 0, 0]
        return try DNSReplyParser.parse(header + name(q) + [0, 1, 0, 1] + records.flatMap { $0 }).get()
    }

    static func names(_ i: UInt32) -> String? { ["", "in1", "out1"][safe: Int(i)] }

    static func dscp(_ pipeline: inout PacketPipeline, _ s: PolicySnapshot, _ p: FlowPacket, input: UInt32)
        -> UInt8
    {
        var bytes = ProbeFrame.packet(p, ecn: 0, payload: 10)
        bytes.withUnsafeMutableBytes { buf in
            var packet = QueuedPacket(id: 1, inputInterface: input, outputInterface: 2, payload: buf)
            _ = pipeline.decide(&packet, snapshot: s)
        }
        let tos = p.source.isIPv6 ? (bytes[0] & 0x0F) << 4 | bytes[1] >> 4 : bytes[1]
        return tos >> 2
    }

    /// Learned addresses are classified, others not; replies follow the
    /// connection; expiry removes the address from the set; v4 and v6.
    @Test(arguments: [false, true])
    func learnedAddressesAreClassified(v6: Bool) throws {
        let learning = DNSLearning()
        let s = try PolicySnapshot(
            config: DaemonConfig.parse(Self.config, file: "t.yaml"), generation: 1, dns: learning)
        let table = try #require(s.flows?.dns)
        var pipeline = PacketPipeline(interfaceName: Self.names)
        let client = IPAddress(parsing: v6 ? "fd00:1::2" : "198.18.1.2")!
        let zoom = v6 ? "fd00:5::1" : "198.18.5.1"
        let cdn = v6 ? "fd00:5::2" : "198.18.5.2"
        let other = v6 ? "fd00:5::3" : "198.18.5.3"
        func tcp(_ dst: String) -> FlowPacket {
            FlowPacket(
                protocolNumber: 6, source: client, destination: IPAddress(parsing: dst)!, sourcePort: 40000,
                destinationPort: 443)
        }
        // Nothing learned yet: trust (0).
        #expect(Self.dscp(&pipeline, s, tcp(zoom), input: 1) == 0)
        learning.observe(
            try Self.reply("eu01.zoom.us", [zoom], ttl: 5), server: nil, client: client, interface: "in1")
        learning.observe(
            try Self.reply("x.example.org", chain: ["teams.microsoft.com", "edge.cdn.net"], [cdn]),
            server: nil,
            client: client, interface: "in1")
        learning.observe(
            try Self.reply("other.zoom.us.evil", [other]), server: nil, client: client, interface: "in1")
        #expect(table.mask(IPAddress(parsing: zoom)!) == 3)  // both lists hold *.zoom.us
        #expect(table.mask(IPAddress(parsing: cdn)!) == 2)
        #expect(table.mask(IPAddress(parsing: other)!) == 0)
        // AF4 green is AF41 (34); UDP to the zoom address is EF (46); replies follow.
        #expect(Self.dscp(&pipeline, s, tcp(zoom), input: 1) == 34)
        #expect(Self.dscp(&pipeline, s, tcp(zoom).reversed, input: 2) == 34)
        var udp = tcp(zoom)
        udp.protocolNumber = 17
        #expect(Self.dscp(&pipeline, s, udp, input: 1) == 46)
        #expect(Self.dscp(&pipeline, s, tcp(cdn), input: 1) == 34)
        var udpCDN = tcp(cdn)
        udpCDN.protocolNumber = 17
        #expect(Self.dscp(&pipeline, s, udpCDN, input: 1) == 34)
        #expect(Self.dscp(&pipeline, s, tcp(other), input: 1) == 0)
        // min-ttl 30 keeps the TTL-5 address past 5 s; it expires at 30.
        let now = DNSLearning.now()
        learning.sweep(now: now + 29)
        #expect(table.mask(IPAddress(parsing: zoom)!) == 3)
        learning.sweep(now: now + 31)
        #expect(table.mask(IPAddress(parsing: zoom)!) == 0)
        #expect(table.mask(IPAddress(parsing: cdn)!) == 2)
        var fresh = tcp(zoom)
        fresh.sourcePort = 40001
        #expect(Self.dscp(&pipeline, s, fresh, input: 1) == 0)
        #expect(learning.store.expired == 2)
    }

    /// A reload keeps the addresses of lists still in the config.
    @Test func reloadKeepsLearnedAddresses() throws {
        let learning = DNSLearning()
        let s1 = try PolicySnapshot(
            config: DaemonConfig.parse(Self.config, file: "t.yaml"), generation: 1, dns: learning)
        learning.observe(
            try Self.reply("a.zoom.us", ["198.18.5.1"]), server: nil, client: nil, interface: nil)
        #expect(s1.flows?.dns?.mask(IPAddress(parsing: "198.18.5.1")!) == 3)
        let changed = Self.config.replacing("teams.microsoft.com", with: "x.org")
        let s2 = try PolicySnapshot(
            config: DaemonConfig.parse(changed, file: "t.yaml"), generation: 2, dns: learning)
        // The second list changed (a new group, empty); the first is kept.
        #expect(s2.flows?.dns?.mask(IPAddress(parsing: "198.18.5.1")!) == 1)
    }

    /// A reload that fails after building its snapshot (never committed)
    /// leaves the learner on the old snapshot's lists and table.
    @Test func uncommittedSnapshotChangesNothing() throws {
        let learning = DNSLearning()
        let s1 = try PolicySnapshot(
            config: DaemonConfig.parse(Self.config, file: "t.yaml"), generation: 1, dns: learning)
        let changed = Self.config.replacing("\"*.zoom.us\", teams", with: "x.org, teams")
        let config2 = try DaemonConfig.parse(changed, file: "t.yaml")
        let s2 = try PolicySnapshot(config: config2, generation: 2, dns: learning)
        learning.observe(
            try Self.reply("a.zoom.us", ["198.18.5.1"]), server: nil, client: nil, interface: nil)
        #expect(s1.flows?.dns?.mask(IPAddress(parsing: "198.18.5.1")!) == 3)
        #expect(s2.flows?.dns?.mask(IPAddress(parsing: "198.18.5.1")!) == 0)
        #expect(learning.store.groups.count == 2)
        // Committed: the store is regrouped and s2's table follows, with what
        // was learned after it was built.
        learning.committed(config2, table: s2.flows?.dns, logger: Logger(label: "test"))
        #expect(s2.flows?.dns?.mask(IPAddress(parsing: "198.18.5.1")!) == 1)
        learning.observe(
            try Self.reply("teams.microsoft.com", ["198.18.5.2"]), server: nil, client: nil, interface: nil)
        #expect(s2.flows?.dns?.mask(IPAddress(parsing: "198.18.5.2")!) == 2)
        #expect(s1.flows?.dns?.mask(IPAddress(parsing: "198.18.5.2")!) == 0)
    }

    /// The open-addressing table against a dictionary, with deletions that
    /// exercise the backward shift (a small table, colliding addresses).
    @Test func maskTableAgainstDictionary() {
        let t = DNSMaskTable(capacity: 300)
        var model: [IPAddress: UInt16] = [:]
        var x: UInt64 = 1
        for _ in 0..<20000 {
            x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let v6 = x >> 63 == 1
            let a = IPAddress(ipv6: v6, high: v6 ? 0xFD00_0000_0000_0000 : 0, low: (x >> 20) % 400)
            let mask = UInt16((x >> 40) % 4)
            t.set(a, mask: mask)
            model[a] = mask == 0 ? nil : mask
            #expect(t.mask(a) == mask)
        }
        #expect(t.count == model.count)
        for hi in [UInt64(0), 0xFD00_0000_0000_0000] {
            for low in UInt64(0)..<400 {
                let a = IPAddress(ipv6: hi != 0, high: hi, low: low)
                #expect(t.mask(a) == model[a] ?? 0)
            }
        }
    }

    @Test(arguments: [
        (
            "classify:\n  rules:\n    - {name: a, match: {dns: [\"*.zoom.us\"]}, set: {class: EF}}\n",
            "t.yaml:3:30: dns: rule without dns.snoop interfaces: no address could ever be learned; allowed: classify: {dns: {snoop: [IFACE, ...]}}"
        ),
        (
            "classify:\n  dns: {snoop: [in1]}\n  rules:\n    - {name: a, match: {dns: [\"a.*.us\"]}, set: {class: EF}}\n",
            "t.yaml:4:31: bad dns pattern 'a.*.us': '*' only as the whole first label, '*.'; allowed: a name such as 'teams.microsoft.com' or '*.zoom.us' (ASCII, IDNA names in xn-- form)"
        ),
        (
            "classify:\n  dns: {snoop: [in1], min-ttl: 600, max-ttl: 60}\n",
            "t.yaml:2:32: min-ttl 600 is above max-ttl 60; allowed: min-ttl <= max-ttl"
        ),
        (
            "classify:\n  dns: {snoop: [in1], max-addresses: 0}\n",
            "t.yaml:2:38: invalid max-addresses '0'; allowed: 1-4000000"
        ),
        (
            "classify:\n  dns: {snoop: [in1], ttl: 5}\n",
            "t.yaml:2:23: unknown key 'ttl' in classify.dns; allowed: snoop, max-addresses, min-ttl, max-ttl"
        ),
    ])
    func configErrorsArePositioned(text: String, message: String) {
        do {
            _ = try DaemonConfig.parse(text, file: "t.yaml")
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.description == message)
        }
    }

    @Test func tooManyListsIsOneLine() {
        let rules = (0...12).map { "    - {name: r\($0), match: {dns: [n\($0).org]}, set: {class: EF}}\n" }
            .joined()
        do {
            _ = try DaemonConfig.parse("classify:\n  dns: {snoop: [in1]}\n  rules:\n" + rules, file: "t.yaml")
            Issue.record("accepted")
        } catch {
            #expect(error.description.hasPrefix("t.yaml:4:5: 13 distinct dns: lists; allowed: at most 12"))
        }
    }
}
