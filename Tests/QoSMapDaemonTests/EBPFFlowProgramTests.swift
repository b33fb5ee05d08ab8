import BPFClassifier
import NFQueue
import QoSMapCore
import QoSMapPacket
import Testing

@testable import QoSMapDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// Flow rules in the kernel classifier (`BPF_PROG_TEST_RUN`) against the
/// nfqueue pipeline (``PacketPipeline`` with its ``FlowRuntime``) as the
/// oracle: thousands of random IPv4 and IPv6 packets, matched and unmatched,
/// with replies, ingress interfaces, DSCPs, IPv4 options, IPv6 extension
/// headers and fragments, run through both in the same order; untagged and
/// with VLAN tags in the data (802.1Q, VID 0, QinQ), whose copies of the
/// classifier call the rule code that the untagged copy inlines. Every frame
/// must leave byte for byte as the pipeline leaves it, with the same mark and
/// priority, and the per-rule packet and byte counters must be equal.
@Suite(.enabled(if: getuid() == 0, "loading BPF needs CAP_BPF"))
struct EBPFFlowProgramTests {
    static let config = """
        datapath: ebpf
        interfaces:
          in1: {trust: none}
          in2: {}
          in3: {trust: ip-precedence}
          out1: {outbound-domain: 5p3d}
        actions: {mark: {mask: 0xff00}, priority: true}
        classify:
          sets:
            voip-servers: [198.18.2.0/24, fd00:2::/64]
            cameras: [198.18.3.0/24, fd00:3::/64]
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
              match: {ingress: [in2], source: [cameras]}
              set: {dscp: AF41}
              connection: false
            - name: dns
              match: {protocol: [udp, tcp], destination-port: 53, source: [198.18.0.0/17, fd00::/16]}
              set: {class: AF2}
            - name: scavenger
              match: {dscp: [CS1, 10, 11, 12], ingress: [in1, in3]}
              set: {class: BE, color: red}
            - name: pings
              match: {protocol: [icmp, icmpv6]}
              set: {dscp: CS6}
            - name: high-source-ports
              match: {protocol: sctp, source-port: 30000-39999}
              set: {class: AF3, color: yellow}
              connection: false
            - name: sip-anywhere
              match: {protocol: udp, destination-port: 5060}
              set: {class: CS7}
        """

    /// Interfaces as the run gives them: ifindex → name (5000 is in the hash).
    static let interfaces: [UInt32: String] = [1: "out1", 5: "in1", 6: "in2", 5000: "in3", 7: "other"]
    static let ingressChoices: [UInt32] = [0, 5, 6, 5000, 7]

    /// The daemon's snapshot of config `yaml` (no system tables).
    static func snapshot(_ yaml: String) throws -> PolicySnapshot {
        try PolicySnapshot(
            config: DaemonConfig.parse(yaml, file: "x.yaml"), generation: 0, systemDirectory: "/nonexistent")
    }

    /// Loads the object and writes `snapshot`'s tables and rules into slot 0,
    /// as ``EBPFDatapath`` does (interface words included).
    static func load(_ snapshot: PolicySnapshot) throws -> (EBPFDatapath.Maps, EBPFTables) {
        let tables = try EBPFTables(snapshot)
        let maps = try EBPFDatapath.loadObject()
        let keys = tables.entries.keys.sorted()
        try maps.table.update(keys: keys.map { UInt32($0) }, values: keys.map { tables.entries[$0]! })
        let flows = try #require(tables.flows)
        try EBPFDatapath.writeFlows(flows, slot: 0, epoch: 1, maps)
        try maps.gen.update(UInt32(0), UInt32(0) | EBPFFlowLayout.genRules)
        for (ifindex, name) in interfaces {
            var slots = EBPFPolicySlots()
            slots.slots = (
                (tables.ingress[name] ?? 0) | UInt32(flows.ingressClass[name] ?? 0) << 16, 0
            )
            try (ifindex < EBPFLayout.ifindexArray ? maps.ingress : maps.ingressHash).update(ifindex, slots)
            var out = EBPFPolicySlots()
            out.slots = (tables.egress[name] ?? 0, 0)
            if ifindex == 1 { try maps.egress.update(ifindex, out) }
        }
        return (maps, tables)
    }

    /// A small deterministic generator (xorshift64*), so a failure repeats.
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            return state &* 0x2545_F491_4F6C_DD1D
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
        mutating func pick<T>(_ a: [T]) -> T { a[below(a.count)] }
    }

    static func address(_ r: inout Random, v6: Bool) -> IPAddress {
        if v6 {
            let prefix = r.pick(
                [0xFD00_0002_0000_0000, 0xFD00_0003_0000_0000, 0xFD00_0009_0000_0000] as [UInt64])
            let high = r.below(4) == 0 ? 0xFD00_0000_0000_0000 | (r.next() & 0x00FF_FFFF_FFFF_FFFF) : prefix
            return IPAddress(ipv6: true, high: high, low: UInt64(r.below(8)))
        }
        let net = r.pick([0xC612_0200, 0xC612_0300, 0xC612_0100, 0xC613_0400] as [UInt32])
        let a = r.below(4) == 0 ? 0xC612_0000 | UInt32(r.below(1 << 17)) : net | UInt32(r.below(8))
        return IPAddress(ipv4: a)
    }

    /// A random packet description and its frame variant (0 plain, 1 IPv4
    /// options or an IPv6 hop-by-hop header, 2 a later fragment).
    /// `pool`: the addresses to pick from instead (by family).
    static func packet(_ r: inout Random, pool: [IPAddress]? = nil) -> (FlowPacket, Int) {
        let v6 = r.below(2) == 1
        let proto: UInt8 = r.pick([17, 17, 6, 6, v6 ? 58 : 1, 132, 47])
        func pick() -> IPAddress {
            guard let pool else { return address(&r, v6: v6) }
            return r.pick(pool.filter { $0.isIPv6 == v6 })
        }
        var p = FlowPacket(
            protocolNumber: proto, source: pick(), destination: pick(),
            dscp: UInt8(r.pick([0, 0, 8, 10, 11, 12, 26, 46, r.below(64)])))
        if TransportProtocol.hasPorts(proto) {
            p.sourcePort = UInt16(r.pick([40000, 53, 873, 5060, 30000 + r.below(12000), r.below(65536)]))
            p.destinationPort = UInt16(r.pick([5060, 10000 + r.below(10001), 873, 53, 443, r.below(65536)]))
        }
        return (p, r.pick([0, 0, 0, 0, 1, 2]))
    }

    /// The IP packet of `p` in `variant`, with `payload` bytes of data.
    static func ipPacket(_ p: FlowPacket, variant: Int, ecn: UInt8, payload: Int) -> [UInt8] {
        var b = ProbeFrame.packet(p, ecn: ecn, payload: payload)
        if p.source.isIPv6 {
            if variant == 1 {  // hop-by-hop (8 bytes of padding options) before the transport header
                b.insert(contentsOf: [b[6], 0, 1, 4, 0, 0, 0, 0], at: 40)
                b[6] = 0
            } else if variant == 2 {  // a fragment header, offset 8 (not the first)
                b.insert(contentsOf: [b[6], 0, 0, 0x40, 0, 0, 0, 7], at: 40)
                b[6] = 44
            }
            let len = b.count - 40
            b[4] = UInt8(len >> 8)
            b[5] = UInt8(len & 0xFF)
            return b
        }
        if variant == 1 {  // one 4-byte option word (NOPs)
            b.insert(contentsOf: [1, 1, 1, 1], at: 20)
            b[0] = 0x46
        } else if variant == 2 {
            b[6] = 0x00
            b[7] = 0x10  // offset 128 bytes
        }
        let len = b.count
        b[2] = UInt8(len >> 8)
        b[3] = UInt8(len & 0xFF)
        let ihl = Int(b[0] & 0x0F) * 4
        b[10] = 0
        b[11] = 0
        let sum = ~EBPFProgramTests.onesComplementSum(Array(b[0..<ihl]))
        b[10] = UInt8(sum >> 8)
        b[11] = UInt8(sum & 0xFF)
        return b
    }

    struct Tally {
        var checked = 0, ruled = 0, replies = 0, rewritten = 0, mismatches = 0
        var first: String?
        /// Tagged frames (``Tagging``): how many by tagging, how many a rule
        /// matched, how many the program changed, and replies that a rule
        /// matched (by connection or by itself) tagged unlike their request.
        var byTagging = [Int](repeating: 0, count: Tagging.allCases.count)
        var taggedRuled = 0, taggedRewritten = 0, crossTaggedReplies = 0
    }

    /// How a frame carries its IP packet: the tagged copies of the classifier's
    /// `mark_ip` call the rule code (`qm_step4`, `qm_step6`) that the untagged
    /// copy inlines, so each must be run.
    enum Tagging: Int, CaseIterable {
        case untagged, dot1Q, priorityTagged, qinq, doubleDot1Q

        /// The Ethernet header, tags included, for `ipv6` (PCP and VID from `r`).
        func header(ipv6: Bool, _ r: inout Random) -> [UInt8] {
            func tag(_ tpid: UInt16, vid: UInt16) -> [UInt8] {
                let tci = UInt16(r.below(8)) << 13 | vid
                return [UInt8(tpid >> 8), UInt8(tpid & 0xFF), UInt8(tci >> 8), UInt8(tci & 0xFF)]
            }
            var h: [UInt8] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]
            switch self {
            case .untagged: break
            case .dot1Q: h += tag(0x8100, vid: UInt16(1 + r.below(4094)))
            case .priorityTagged: h += tag(0x8100, vid: 0)  // VID 0: the PCP alone
            case .qinq:
                h += tag(0x88A8, vid: UInt16(1 + r.below(4094))) + tag(0x8100, vid: UInt16(1 + r.below(4094)))
            case .doubleDot1Q: h += tag(0x8100, vid: UInt16(1 + r.below(4094))) + tag(0x8100, vid: 100)
            }
            return h + (ipv6 ? [0x86, 0xDD] : [8, 0])
        }
    }

    /// Runs `count` packets through the kernel program and the pipeline.
    /// `tagged`: each frame (request and reply drawn apart) untagged or with
    /// one or two VLAN tags in the data, four in five tagged; else untagged
    /// (and the same random draws as before tagging was added).
    static func compare(
        _ maps: EBPFDatapath.Maps, _ snapshot: PolicySnapshot, _ pipeline: inout PacketPipeline, seed: UInt64,
        count: Int, tagged: Bool = false, pool: [IPAddress]? = nil
    ) throws -> Tally {
        var r = Random(state: seed)
        var t = Tally()
        var seen: [(FlowPacket, Int, Tagging)] = []
        for _ in 0..<count {
            var (p, variant) = packet(&r, pool: pool)
            let tagging = tagged ? r.pick(Tagging.allCases) : Tagging.untagged
            var reply = false
            var requestTagging = tagging
            if !seen.isEmpty, r.below(3) == 0 {
                (p, variant, requestTagging) = r.pick(seen)
                p = p.reversed
                p.dscp = UInt8(r.below(64))
                reply = true
            } else {
                seen.append((p, variant, tagging))
            }
            let ingress = r.pick(ingressChoices)
            let ip = ipPacket(p, variant: variant, ecn: UInt8(r.below(4)), payload: r.below(200))
            let mark = UInt32(truncatingIfNeeded: r.next()) & 0xFFFF_00FF
            // The oracle: the nfqueue pipeline on the IP packet.
            var expected = ip
            let before = pipeline.counts.rulePackets.reduce(0, +)
            let verdict = expected.withUnsafeMutableBytes { buf in
                var q = QueuedPacket(
                    id: 1, mark: mark, inputInterface: ingress == 0 ? nil : ingress, outputInterface: 1,
                    payload: buf)
                return pipeline.decide(&q, snapshot: snapshot)
            }
            let ruled = pipeline.counts.rulePackets.reduce(0, +) != before
            let frame: [UInt8] =
                tagged
                ? tagging.header(ipv6: p.source.isIPv6, &r)
                : [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1] + (p.source.isIPv6 ? [0x86, 0xDD] : [8, 0])
            let run = try maps.program.testRun(
                packet: frame + ip, ifindex: 1, ingressIfindex: ingress, mark: mark)
            let got = Array(run.packet.dropFirst(frame.count))
            t.checked += 1
            if ruled { t.ruled += 1 }
            if ruled && reply { t.replies += 1 }
            if got != ip { t.rewritten += 1 }
            t.byTagging[tagging.rawValue] += 1
            if tagging != .untagged {
                if ruled { t.taggedRuled += 1 }
                if got != ip { t.taggedRewritten += 1 }
            }
            if ruled && reply && tagging != requestTagging { t.crossTaggedReplies += 1 }
            // The tags are the program's to leave alone.
            if got != expected || Array(run.packet.prefix(frame.count)) != frame
                || run.mark != (verdict.mark ?? mark) || run.priority != (verdict.priority ?? 0)
            {
                t.mismatches += 1
                if t.first == nil {
                    t.first =
                        "\(p) variant \(variant) \(tagging) ingress \(ingress) reply \(reply): got \(Array(got.prefix(2))) mark \(run.mark) prio \(run.priority), want \(Array(expected.prefix(2))) mark \(verdict.mark ?? mark) prio \(verdict.priority ?? 0)"
                }
            }
        }
        return t
    }

    /// 6,000 random packets (``compare``) through a fresh load of `config`
    /// and through the pipeline: no mismatch, and the per-rule counters
    /// exact (packets and bytes) with every rule having classified something.
    static func matchPipeline(seed: UInt64, tagged: Bool) throws -> Tally {
        let snapshot = try Self.snapshot(config)
        let (maps, tables) = try load(snapshot)
        var pipeline = PacketPipeline(interfaceName: { interfaces[$0] })
        let t = try compare(maps, snapshot, &pipeline, seed: seed, count: 6000, tagged: tagged)
        #expect(t.mismatches == 0, "\(t.mismatches) of \(t.checked); first: \(t.first ?? "")")
        let names = try #require(tables.flows?.names)
        let counts = try EBPFDatapath.ruleCounts(maps, slot: 0, count: names.count)
        #expect(counts.map(\.packets) == pipeline.counts.rulePackets, "packets by rule \(names)")
        #expect(counts.map(\.bytes) == pipeline.counts.ruleBytes)
        #expect(counts.allSatisfy { $0.packets > 0 }, "\(counts.map(\.packets))")
        // The packets by class × color cell and outcome (qm_counters; a rule's
        // cell taken from the rule, not the entry) as the pipeline counts them.
        for cell in 0..<24 {
            for outcome in [PacketOutcome.rewritten, .unchanged] {
                let key = UInt32(cell * EBPFLayout.outcomesPerCell + outcome.rawValue)
                let program = try maps.counters.perCPUCounters(key).reduce(0, &+)
                let expected = pipeline.counts.byTreatment[cell * PacketOutcome.caseCount + outcome.rawValue]
                #expect(program == UInt64(expected), "cell \(cell) \(outcome)")
            }
        }
        return t
    }

    @Test(arguments: [1 as UInt64, 0x5EED])
    func programMatchesThePipeline(seed: UInt64) throws {
        let t = try Self.matchPipeline(seed: seed, tagged: false)
        // The run exercised rules, replies by connection and rewriting.
        #expect(t.ruled > 1000)
        #expect(t.replies > 100)
        #expect(t.rewritten > 1000)
    }

    /// The same with VLAN tags in the data: 802.1Q, priority-tagged (VID 0),
    /// QinQ (an 0x88a8 S-tag over a C-tag) and two 802.1Q tags, a reply
    /// tagged unlike its request. The tagged copies of `mark_ip` call
    /// `qm_step4`/`qm_step6` rather than inline them; the untagged fifth of the
    /// frames shares the connection table with them.
    @Test(arguments: [3 as UInt64, 0x7A66])
    func taggedFramesMatchThePipeline(seed: UInt64) throws {
        let t = try Self.matchPipeline(seed: seed, tagged: true)
        // Every tagging was run, and tagged frames hit rules and were rewritten.
        #expect(t.byTagging.allSatisfy { $0 > 800 }, "\(t.byTagging)")
        #expect(t.taggedRuled > 1000)
        #expect(t.taggedRewritten > 1000)
        #expect(t.crossTaggedReplies > 100)
    }

    /// One connection, request and reply tagged differently: the reply takes
    /// the request's rule by connection (its DSCP rewritten as the request's,
    /// not as the same reply leaves before the request was seen), CIDR and
    /// port hits and misses, and the rule's packet and byte counters exact.
    @Test(arguments: [
        (false, 17 as UInt8, Tagging.dot1Q, Tagging.qinq),
        (true, 17, .qinq, .dot1Q),
        (true, 6, .priorityTagged, .doubleDot1Q),
        (false, 6, .doubleDot1Q, .priorityTagged),
        (true, 17, .untagged, .priorityTagged),
        (false, 17, .qinq, .untagged),
    ])
    func aConnectionTaggedDifferentlyEachWay(v6: Bool, proto: UInt8, request: Tagging, reply: Tagging) throws
    {
        let snapshot = try Self.snapshot(Self.config)
        let (maps, tables) = try Self.load(snapshot)
        var pipeline = PacketPipeline(interfaceName: { Self.interfaces[$0] })
        var r = Random(state: 11)
        let names = try #require(tables.flows?.names)
        // UDP to a voip server's port range (CIDR and port): EF; TCP to 873: AF1 yellow.
        let rule = try #require(names.firstIndex(of: proto == 17 ? "voip" : "backup"))
        let client = IPAddress(parsing: v6 ? "fd00:1::2" : "198.18.1.2")!
        let server = IPAddress(parsing: v6 ? "fd00:2::9" : "198.18.2.9")!
        let other = IPAddress(parsing: v6 ? "fd00:9::9" : "198.19.4.9")!
        let port: UInt16 = proto == 17 ? 15000 : 873
        let flow = FlowPacket(
            protocolNumber: proto, source: client, destination: server, sourcePort: 40000,
            destinationPort: port)
        /// The DSCP the program leaves; the pipeline must leave the same bytes.
        func send(_ p: FlowPacket, _ tagging: Tagging) throws -> (dscp: UInt8, ipLength: Int) {
            let ip = Self.ipPacket(p, variant: 0, ecn: 1, payload: 40)
            var expected = ip
            _ = expected.withUnsafeMutableBytes { buf in
                var q = QueuedPacket(id: 1, inputInterface: 6, outputInterface: 1, payload: buf)
                return pipeline.decide(&q, snapshot: snapshot)
            }
            let frame = tagging.header(ipv6: v6, &r)
            let run = try maps.program.testRun(packet: frame + ip, ifindex: 1, ingressIfindex: 6)
            #expect(Array(run.packet.prefix(frame.count)) == frame, "tags kept")
            let got = Array(run.packet.dropFirst(frame.count))
            #expect(got == expected, "\(p) \(tagging)")
            return (v6 ? (got[0] & 0x0F) << 2 | got[1] >> 6 : got[1] >> 2, ip.count)
        }
        // Before the request: the reply has no connection and leaves by trust (DSCP 0 kept: in2 trusts DSCP).
        let early = try send(flow.reversed, reply)
        #expect(try EBPFDatapath.ruleCounts(maps, slot: 0, count: names.count).allSatisfy { $0.packets == 0 })
        // Misses: the wrong port, and (UDP) an address outside the servers' CIDR.
        var wrongPort = flow
        wrongPort.destinationPort = 9999
        _ = try send(wrongPort, request)
        if proto == 17 {
            var wrongAddress = flow
            wrongAddress.destination = other
            _ = try send(wrongAddress, request)
        }
        #expect(try EBPFDatapath.ruleCounts(maps, slot: 0, count: names.count).allSatisfy { $0.packets == 0 })
        let sent = try send(flow, request)
        #expect(sent.dscp != 0, "rewritten by the rule")
        let back = try send(flow.reversed, reply)
        #expect(back.dscp == sent.dscp, "the reply takes its request's rule")
        #expect(back.dscp != early.dscp)
        let counts = try EBPFDatapath.ruleCounts(maps, slot: 0, count: names.count)
        var packets = [UInt64](repeating: 0, count: names.count)
        packets[rule] = 2
        #expect(counts.map(\.packets) == packets)
        #expect(counts[rule].bytes == UInt64(sent.ipLength + back.ipLength))
        #expect(counts.map(\.packets) == pipeline.counts.rulePackets)
        #expect(counts.map(\.bytes) == pipeline.counts.ruleBytes)
    }

    /// IPv6 prefixes longer than /64: the program's search over the starts'
    /// high halves then meets starts that differ only in the low half, and
    /// finishes with the full 128-bit search (qm_addr6_full).
    @Test func longIPv6PrefixesMatchThePipeline() throws {
        let text = Self.config.replacingOccurrences(of: "fd00:2::/64", with: "fd00:2::4/126, fd00:2::1/128")
            .replacingOccurrences(of: "fd00:3::/64", with: "fd00:3::/125")
        let snapshot = try Self.snapshot(text)
        let (maps, _) = try Self.load(snapshot)
        var pipeline = PacketPipeline(interfaceName: { Self.interfaces[$0] })
        let t = try Self.compare(maps, snapshot, &pipeline, seed: 0x6128, count: 6000)
        #expect(t.mismatches == 0, "\(t.mismatches) of \(t.checked); first: \(t.first ?? "")")
        // The random IPv6 addresses in fd00:2::/64 and fd00:3::/64 are ::0 to
        // ::7: inside and outside the long prefixes, before and after their starts.
        #expect(t.ruled > 1000)
    }

    /// 300 rules of random prefixes (IPv4 /17 to /30 in 198.18.0.0/15, IPv6
    /// /9 to /64 in fd00::/8 and around the test's /64s, a few longer than
    /// /64), one in ten by source, the rest by destination: the address index's
    /// buckets (``EBPFAddressIndex``) cut through prefixes and hold several
    /// starts, so the searches start mid-table with 0 to 12 steps, and
    /// addresses fall below, in and above the index's window. `field`: every
    /// rule by that field instead (the other then has one class, and the
    /// address stage is folded into this one's classes).
    static func packedConfig(seed: UInt64, field only: String? = nil) -> String {
        var r = Random(state: seed)
        var rules = ""
        for i in 0..<300 {
            let len4 = 17 + r.below(14)
            let a4 = (0xC612_0000 | UInt32(r.below(1 << 17))) & (UInt32.max << UInt32(32 - len4))
            let v4 = "\(a4 >> 24).\(a4 >> 16 & 0xFF).\(a4 >> 8 & 0xFF).\(a4 & 0xFF)/\(len4)"
            var v6: String
            if r.below(20) == 0 {
                let len = 125 + r.below(4)
                v6 = "fd00:\(r.pick(["2", "3"]))::\(r.below(8) & ~((1 << (128 - len)) - 1))/\(len)"
            } else {
                let len6 = 9 + r.below(56)
                let near = r.pick(
                    [0xFD00_0002_0000_0000, 0xFD00_0003_0000_0000, 0xFD00_0009_0000_0000] as [UInt64])
                let random = 0xFD00_0000_0000_0000 | (r.next() & 0x00FF_FFFF_FFFF_FFFF)
                let high =
                    (r.below(2) == 0 ? near ^ (r.next() & 0xFFFF) : random)
                    & (UInt64.max << UInt64(64 - len6))
                let groups = (0..<4).map { String(high >> UInt64(48 - 16 * $0) & 0xFFFF, radix: 16) }
                v6 = groups.joined(separator: ":") + "::/\(len6)"
            }
            let field = only ?? (i % 10 == 0 ? "source" : "destination")
            rules +=
                "    - {name: net\(i), match: {\(field): [\(v4), \(v6)]}, set: {class: \(r.pick(["AF1", "AF2", "AF3", "AF4", "EF"]))}}\n"
        }
        let head = config[..<config.range(of: "classify:")!.lowerBound]
        return head + "classify:\n  rules:\n" + rules
    }

    @Test(arguments: [3 as UInt64, 0xB0C4])
    func packedPrefixesMatchThePipeline(seed: UInt64) throws {
        let snapshot = try Self.snapshot(Self.packedConfig(seed: seed))
        let (maps, tables) = try Self.load(snapshot)
        var pipeline = PacketPipeline(interfaceName: { Self.interfaces[$0] })
        let t = try Self.compare(maps, snapshot, &pipeline, seed: seed, count: 6000)
        #expect(t.mismatches == 0, "\(t.mismatches) of \(t.checked); first: \(t.first ?? "")")
        #expect(t.ruled > 1000)
        // The destination indexes have buckets that search (some steps) and
        // buckets of one class (no search, the class in the entry).
        let flows = try #require(tables.flows)
        for b in [flows.addresses4[1], flows.addresses6[1]] {
            let steps = Self.indexEntries(b).map { $0 >> 12 & 15 }
            #expect(steps.contains { (2...12).contains($0) } && steps.contains(EBPFFlowLayout.indexOneClass))
        }
    }

    /// The index entries of a `qm_faddr4`/`qm_faddr6` value (at its end).
    static func indexEntries(_ b: [UInt8]) -> [UInt32] {
        let from = b.count - 4 * EBPFFlowLayout.indexEntries
        return (0..<EBPFFlowLayout.indexEntries).map { i in
            (0..<4).reduce(UInt32(0)) { $0 | UInt32(b[from + 4 * i + $1]) << UInt32(8 * $1) }
        }
    }

    /// Writes index entry `i` of a `qm_faddr4`/`qm_faddr6` value (``indexEntries(_:)``'s layout).
    static func setIndexEntry(_ b: inout [UInt8], _ i: Int, _ v: UInt32) {
        let at = b.count - 4 * EBPFFlowLayout.indexEntries + 4 * i
        for k in 0..<4 { b[at + k] = UInt8(truncatingIfNeeded: v >> UInt32(8 * k)) }
    }

    /// The packed comparison can fail: with the destination index's steps
    /// cut by one (the search stops a step short), the classes differ.
    @Test func aWrongIndexIsCaught() throws {
        let snapshot = try Self.snapshot(Self.packedConfig(seed: 3))
        let (maps, tables) = try Self.load(snapshot)
        var flows = try #require(tables.flows)
        func cut(_ b: [UInt8]) -> [UInt8] {
            var b = b
            for (i, e) in Self.indexEntries(b).enumerated() where (1...12).contains(e >> 12 & 15) {
                Self.setIndexEntry(&b, i, e - (1 << 12))
            }
            return b
        }
        flows.addresses4[1] = cut(flows.addresses4[1])
        flows.addresses6[1] = cut(flows.addresses6[1])
        try EBPFDatapath.writeFlows(flows, slot: 0, epoch: 1, maps)
        var pipeline = PacketPipeline(interfaceName: { Self.interfaces[$0] })
        let t = try Self.compare(maps, snapshot, &pipeline, seed: 3, count: 3000)
        #expect(t.mismatches > 0)
    }

    /// Sparse prefixes, each at the start of a bucket with a gap after it
    /// (IPv4 /26 every 512 addresses, IPv6 /64 at the start of each fd00:N::/32,
    /// as operators list them): the index's buckets hold two classes, split
    /// where the prefix ends (``EBPFFlowLayout/indexTwoClass``). The addresses
    /// are those around each split (the last before it, the split itself and
    /// after) and around each prefix's start.
    static func splitConfig(field: String) -> (String, [IPAddress]) {
        var rules = ""
        var pool: [IPAddress] = []
        for i in 0..<200 {
            let a4 = 0xC612_0000 + UInt32(i) * 512
            let v4 = "\(a4 >> 24).\(a4 >> 16 & 0xFF).\(a4 >> 8 & 0xFF).0/26"
            let h6 = 0xFD00_0000_0000_0000 | UInt64(i) << 32
            rules +=
                "    - {name: net\(i), match: {\(field): [\(v4), fd00:\(String(i, radix: 16))::/64]}, set: {class: \(["AF1", "AF2", "AF3", "AF4", "EF"][i % 5])}}\n"
            for d: UInt32 in [0, 1, 63, 64, 65, 511] { pool.append(IPAddress(ipv4: a4 + d)) }
            pool.append(IPAddress(ipv4: a4 &- 1))
            for (h, l) in [
                (h6, 0), (h6, UInt64.max), (h6 + 1, 0), (h6 + 1, 7), (h6 - 1, .max), (h6 + 0xFFFF, 3),
            ] {
                pool.append(IPAddress(ipv6: true, high: h, low: l))
            }
        }
        let head = config[..<config.range(of: "classify:")!.lowerBound]
        return (head + "classify:\n  rules:\n" + rules, pool)
    }

    @Test(arguments: ["source", "destination"])
    func splitBucketsMatchThePipeline(field: String) throws {
        let (yaml, pool) = Self.splitConfig(field: field)
        let snapshot = try Self.snapshot(yaml)
        let (maps, tables) = try Self.load(snapshot)
        let flows = try #require(tables.flows)
        let i = field == "source" ? 0 : 1
        for b in [flows.addresses4[i], flows.addresses6[i]] {
            #expect(
                Self.indexEntries(b).filter { $0 >> 12 & 15 == EBPFFlowLayout.indexTwoClass }.count >= 150)
        }
        var pipeline = PacketPipeline(interfaceName: { Self.interfaces[$0] })
        let t = try Self.compare(maps, snapshot, &pipeline, seed: 5, count: 4000, pool: pool)
        #expect(t.mismatches == 0, "\(t.mismatches) of \(t.checked); first: \(t.first ?? "")")
        #expect(t.ruled > 1000)
    }

    /// The split comparison can fail: with each two-class entry's classes
    /// swapped, or its split one key later.
    @Test(arguments: [false, true])
    func aWrongSplitIsCaught(later: Bool) throws {
        let (yaml, pool) = Self.splitConfig(field: "destination")
        let snapshot = try Self.snapshot(yaml)
        let (maps, tables) = try Self.load(snapshot)
        var flows = try #require(tables.flows)
        for family in 0..<2 {
            var b = family == 0 ? flows.addresses4[1] : flows.addresses6[1]
            // The splits (u64 by bucket) end where the entries start.
            let splits = b.count - 4 * EBPFFlowLayout.indexEntries - 8 * EBPFFlowLayout.indexBuckets
            for (i, e) in Self.indexEntries(b).enumerated() where e >> 12 & 15 == EBPFFlowLayout.indexTwoClass
            {
                if later {
                    let at = splits + 8 * i
                    let k = (0..<8).reduce(UInt64(0)) { $0 | UInt64(b[at + $1]) << UInt64(8 * $1) } + 1
                    for j in 0..<8 { b[at + j] = UInt8(truncatingIfNeeded: k >> UInt64(8 * j)) }
                } else {
                    Self.setIndexEntry(&b, i, (e & 0xFFF) << 16 | (e >> 16) & 0xFFF | e & 0xF000)
                }
            }
            if family == 0 { flows.addresses4[1] = b } else { flows.addresses6[1] = b }
        }
        try EBPFDatapath.writeFlows(flows, slot: 0, epoch: 1, maps)
        var pipeline = PacketPipeline(interfaceName: { Self.interfaces[$0] })
        let t = try Self.compare(maps, snapshot, &pipeline, seed: 5, count: 2000, pool: pool)
        #expect(t.mismatches > 0)
    }

    /// Rules by one address field only: the address stage is folded into that
    /// field's classes (and its index's one-class entries), and the program
    /// still decides every packet as the pipeline does.
    @Test(arguments: [("source", 1 as UInt32), ("destination", 2)])
    func foldedPrefixesMatchThePipeline(field: String, fold: UInt32) throws {
        let snapshot = try Self.snapshot(Self.packedConfig(seed: 11, field: field))
        let (maps, tables) = try Self.load(snapshot)
        let flows = try #require(tables.flows)
        let shift = EBPFFlowLayout.foldShift
        #expect(flows.config.skip >> shift.v4 & 3 == fold && flows.config.skip >> shift.v6 & 3 == fold)
        let i = field == "source" ? 0 : 1
        for b in [flows.addresses4[i], flows.addresses6[i]] {
            #expect(Self.indexEntries(b).contains { $0 >> 12 & 15 == EBPFFlowLayout.indexOneClass })
        }
        var pipeline = PacketPipeline(interfaceName: { Self.interfaces[$0] })
        let t = try Self.compare(maps, snapshot, &pipeline, seed: 11, count: 6000)
        #expect(t.mismatches == 0, "\(t.mismatches) of \(t.checked); first: \(t.first ?? "")")
        #expect(t.ruled > 1000)
    }

    /// The folded comparison can fail: with the fold naming the other field
    /// (the source, whose one class is then every packet's), or with the
    /// index's one-class entries all giving class 0.
    @Test(arguments: [false, true])
    func aWrongFoldIsCaught(oneClass: Bool) throws {
        let snapshot = try Self.snapshot(Self.packedConfig(seed: 11, field: "destination"))
        let (maps, tables) = try Self.load(snapshot)
        var flows = try #require(tables.flows)
        if oneClass {
            for family in 0..<2 {
                var b = family == 0 ? flows.addresses4[1] : flows.addresses6[1]
                for (i, e) in Self.indexEntries(b).enumerated()
                where e >> 12 & 15 == EBPFFlowLayout.indexOneClass {
                    Self.setIndexEntry(&b, i, e & 0xFFFF)  // class 0
                }
                if family == 0 { flows.addresses4[1] = b } else { flows.addresses6[1] = b }
            }
        } else {
            flows.config.skip ^= 3 << EBPFFlowLayout.foldShift.v4 | 3 << EBPFFlowLayout.foldShift.v6
        }
        try EBPFDatapath.writeFlows(flows, slot: 0, epoch: 1, maps)
        var pipeline = PacketPipeline(interfaceName: { Self.interfaces[$0] })
        let t = try Self.compare(maps, snapshot, &pipeline, seed: 11, count: 3000)
        #expect(t.mismatches > 0)
    }

    /// Port rules that record no connection: the cells are carried with
    /// `track` 0.
    static let unconnectedConfig: String = {
        portConfig.split(separator: "\n", omittingEmptySubsequences: false).map {
            $0.contains("- {name:") ? $0.dropLast() + ", connection: false}" : $0
        }.joined(separator: "\n")
    }()

    /// The final stage carries the rule's cell (``EBPFFlowLayout/cellBit``)
    /// where every rule has one cell for all ingress policies and every rule
    /// keeps its connection or none does; the program reads it from there
    /// and agrees with the pipeline. Self.config mixes `connection: false`
    /// and `dscp:` actions that the ingress domains classify apart: not
    /// carried. (Port rules and the fused configuration, both carried, are
    /// compared in portRulesMatchThePipeline and fusedStagesMatchThePipeline.)
    @Test(arguments: [2, 3])
    func carriedCellsMatchThePipeline(which: Int) throws {
        let yaml = which == 2 ? Self.unconnectedConfig : Self.config
        let snapshot = try Self.snapshot(yaml)
        let (maps, tables) = try Self.load(snapshot)
        let flows = try #require(tables.flows)
        #expect(flows.config.skip >> EBPFFlowLayout.cellBit & 1 == (which == 3 ? 0 : 1))
        #expect(flows.config.track == (which == 2 ? 0 : 1))
        var pipeline = PacketPipeline(interfaceName: { Self.interfaces[$0] })
        let t = try Self.compare(maps, snapshot, &pipeline, seed: 0xCE11 + UInt64(which), count: 4000)
        #expect(t.mismatches == 0, "\(t.mismatches) of \(t.checked); first: \(t.first ?? "")")
        // Fewer without connections: replies are then classified by trust.
        #expect(t.ruled > 800)
    }

    /// The comparison can fail: carried cells read as a rule's byte (the
    /// bit cleared), and a rule's byte read as carried (the bit set).
    @Test(arguments: [true, false])
    func aWrongCellBitIsCaught(carried: Bool) throws {
        let snapshot = try Self.snapshot(carried ? Self.fusedConfig() : Self.config)
        let (maps, tables) = try Self.load(snapshot)
        var flows = try #require(tables.flows)
        flows.config.skip ^= 1 << EBPFFlowLayout.cellBit
        try EBPFDatapath.writeFlows(flows, slot: 0, epoch: 1, maps)
        var pipeline = PacketPipeline(interfaceName: { Self.interfaces[$0] })
        let t = try Self.compare(maps, snapshot, &pipeline, seed: 0xCE11, count: 2000)
        #expect(t.mismatches > 0)
    }

    /// Port rules only (protocol and destination port): the ports stage (no
    /// source-port class) and the ports × arrival stage (no ingress or DSCP
    /// class) are identities, and so are the constant address and arrival stages.
    static let portConfig: String = {
        let head = config[..<config.range(of: "classify:")!.lowerBound]
        return head + """
            classify:
              rules:
                - {name: sip, match: {protocol: udp, destination-port: [5060, 10000-20000]}, set: {class: EF}}
                - {name: rsync, match: {protocol: tcp, destination-port: 873}, set: {class: AF1, color: yellow}}
                - {name: dns, match: {protocol: [udp, tcp], destination-port: 53}, set: {class: AF2}}
                - {name: https, match: {protocol: tcp, destination-port: 443}, set: {class: AF3}}
            """
    }()

    /// `yaml`'s flow tables for ebpf, and its classifier's cross tables.
    static func flowTables(_ yaml: String) throws -> (EBPFFlowTables, [CrossTable]) {
        let snapshot = try Self.snapshot(yaml)
        let flows = try #require(snapshot.flows)
        return (try #require(try EBPFTables(snapshot).flows), flows.classifier.crossTables)
    }

    /// The skip bits are set exactly for the stages whose table is the
    /// identity in its row (one column, `table[i] == i`): for port rules the
    /// ports stage (1) and ports × arrival (4), with the constant address and
    /// arrival stages (2, 3, one entry: 0); with source ports, addresses and
    /// ingress in the rules, none of those.
    @Test func identityStagesAreFlagged() throws {
        for yaml in [Self.portConfig, Self.config, Self.packedConfig(seed: 3)] {
            let (flows, tables) = try Self.flowTables(yaml)
            for (k, t) in tables.enumerated() {
                let identity = t.width == 1 && (0..<t.rows).allSatisfy { Int(t.table[$0]) == $0 }
                #expect((flows.config.skip >> UInt32(k)) & 1 == (identity ? 1 : 0), "stage \(k)")
            }
        }
        let port = try Self.flowTables(Self.portConfig).0.config.skip
        #expect(port & 0b1_1111 == 0b1_1110, "\(String(port, radix: 2))")
        #expect(try Self.flowTables(Self.config).0.config.skip & 0b1_1110 == 0)
        // qosmap-bench-ebpf's 100 port rules (one rule per port class): the
        // final stage too (pa class i + 1 is rule i + 1); stage 0 not.
        let head = Self.config[..<Self.config.range(of: "classify:")!.lowerBound]
        let bench = (0..<100).map {
            "    - {name: port\($0), match: {protocol: udp, destination-port: \(10000 + $0 * 7)}, set: {class: EF}}\n"
        }
        // No address in the rules: both families' address stage folded into
        // the destination's one class (QM_FOLD4, QM_FOLD6: 2); every rule
        // keeps its connection and has one cell: carried (QM_RCELL).
        let benchSkip = try Self.flowTables(head + "classify:\n  rules:\n" + bench.joined()).0.config.skip
        #expect(benchSkip == 0b1010_1011_1110, "\(String(benchSkip, radix: 2))")
    }

    /// Port rules, then packed destination prefixes (as qosmap-bench-ebpf's
    /// 1,000 CIDR + 100 port rules): no source-port, ingress or DSCP class,
    /// so stages 0 and 5 are one table (``EBPFFlowLayout/fuseBit``).
    static func fusedConfig() -> String {
        let packed = packedConfig(seed: 7, field: "destination")
        return portConfig + "\n" + packed[packed.range(of: "  rules:\n")!.upperBound...]
    }

    @Test func fusedStagesMatchThePipeline() throws {
        let snapshot = try Self.snapshot(Self.fusedConfig())
        let (maps, tables) = try Self.load(snapshot)
        let flows = try #require(tables.flows)
        #expect(flows.config.skip >> EBPFFlowLayout.fuseBit & 1 == 1 && flows.config.skip & 0b10_0001 == 0)
        // The cells carried too (carriedCellsMatchThePipeline).
        #expect(flows.config.skip >> EBPFFlowLayout.cellBit & 1 == 1 && flows.config.track == 1)
        var pipeline = PacketPipeline(interfaceName: { Self.interfaces[$0] })
        let t = try Self.compare(maps, snapshot, &pipeline, seed: 0xF05E, count: 6000)
        #expect(t.mismatches == 0, "\(t.mismatches) of \(t.checked); first: \(t.first ?? "")")
        #expect(t.ruled > 1000)
    }

    /// The fused comparison can fail: with the fused table read one entry on.
    @Test func aWrongFusionIsCaught() throws {
        let snapshot = try Self.snapshot(Self.fusedConfig())
        let (maps, tables) = try Self.load(snapshot)
        var flows = try #require(tables.flows)
        flows.config.fbase += 1
        try EBPFDatapath.writeFlows(flows, slot: 0, epoch: 1, maps)
        var pipeline = PacketPipeline(interfaceName: { Self.interfaces[$0] })
        let t = try Self.compare(maps, snapshot, &pipeline, seed: 0xF05E, count: 2000)
        #expect(t.mismatches > 0)
    }

    /// Port rules, the identity stages skipped, against the pipeline.
    @Test func portRulesMatchThePipeline() throws {
        let snapshot = try Self.snapshot(Self.portConfig)
        let (maps, tables) = try Self.load(snapshot)
        let flows = try #require(tables.flows)
        #expect(flows.config.skip & 0b1_0010 == 0b1_0010)
        // The cells carried too (carriedCellsMatchThePipeline).
        #expect(flows.config.skip >> EBPFFlowLayout.cellBit & 1 == 1 && flows.config.track == 1)
        var pipeline = PacketPipeline(interfaceName: { Self.interfaces[$0] })
        let t = try Self.compare(maps, snapshot, &pipeline, seed: 0x5_7A6E, count: 4000)
        #expect(t.mismatches == 0, "\(t.mismatches) of \(t.checked); first: \(t.first ?? "")")
        #expect(t.ruled > 1000)
    }

    /// The comparison can fail: with the ports stage (1) flagged where it is
    /// not the identity (a source-port rule), the program and the pipeline disagree.
    @Test func aWrongSkipIsCaught() throws {
        let snapshot = try Self.snapshot(Self.config)
        let (maps, tables) = try Self.load(snapshot)
        var flows = try #require(tables.flows)
        #expect(flows.config.skip & 0b10 == 0)
        flows.config.skip |= 0b10
        try EBPFDatapath.writeFlows(flows, slot: 0, epoch: 1, maps)
        var pipeline = PacketPipeline(interfaceName: { Self.interfaces[$0] })
        let t = try Self.compare(maps, snapshot, &pipeline, seed: 7, count: 3000)
        #expect(t.mismatches > 0)
    }

    /// The comparison can fail: with one rule's treatment written wrong in
    /// the maps, the program and the pipeline disagree.
    @Test func aWrongTableIsCaught() throws {
        let snapshot = try Self.snapshot(Self.config)
        let (maps, tables) = try Self.load(snapshot)
        var flows = try #require(tables.flows)
        flows.rules[1].cell = [UInt8](
            repeating: UInt8(Treatment.bestEffort.cellIndex), count: EBPFLayout.maxIngress)
        try EBPFDatapath.writeFlows(flows, slot: 0, epoch: 1, maps)  // "backup" now leaves as BE green
        var pipeline = PacketPipeline(interfaceName: { Self.interfaces[$0] })
        let t = try Self.compare(maps, snapshot, &pipeline, seed: 7, count: 3000)
        #expect(t.mismatches > 0)
    }

    /// The program files a connection in the slot ``FlowKey/hash32`` gives
    /// and with ``FlowKey``'s words (what keeps the two datapaths' tables
    /// alike when flows collide), for both families and both orders of the ends.
    @Test(arguments: [false, true])
    func connectionsSitWhereFlowKeyPutsThem(v6: Bool) throws {
        let snapshot = try Self.snapshot(Self.config)
        let (maps, _) = try Self.load(snapshot)
        var r = Random(state: v6 ? 0xF10 : 0xF4)
        for _ in 0..<200 {
            // "backup" (rule 1, tcp 873) keeps its connection; either end may be the lower.
            let a = Self.address(&r, v6: v6)
            let b = Self.address(&r, v6: v6)
            let p = FlowPacket(
                protocolNumber: 6, source: a, destination: b, sourcePort: UInt16(r.below(65536)),
                destinationPort: 873)
            let frame: [UInt8] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1] + (v6 ? [0x86, 0xDD] : [8, 0])
            let ip = Self.ipPacket(p, variant: 0, ecn: 0, payload: 8)
            _ = try maps.program.testRun(packet: frame + ip, ifindex: 1, ingressIfindex: 0)
            let key = FlowKey(p)
            let slot = key.hash32 & UInt32(ConnectionTable.slots - 1)
            typealias Entry = (
                UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32
            )
            let e = try #require(try maps.flows.lookup(slot, as: Entry.self))
            let words = [e.0, e.1, e.2, e.3, e.4, e.5, e.6, e.7, e.8, e.9]
            #expect(words == key.words, "\(p) in slot \(slot)")
            #expect(e.10 & 0xFFFF == 2, "\(p): rule + 1 of backup")
        }
    }

    /// A reload forgets connections (a new epoch), as nfqueue's new table does.
    @Test func aNewEpochForgetsConnections() throws {
        let snapshot = try Self.snapshot(Self.config)
        let (maps, tables) = try Self.load(snapshot)
        let client = IPAddress(parsing: "198.18.1.2")!
        let server = IPAddress(parsing: "198.18.2.9")!
        let voip = FlowPacket(
            protocolNumber: 17, source: client, destination: server, sourcePort: 40000, destinationPort: 15000
        )
        let frame: [UInt8] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0]
        func dscp(_ p: FlowPacket) throws -> UInt8 {
            let run = try maps.program.testRun(
                packet: frame + Self.ipPacket(p, variant: 0, ecn: 0, payload: 4), ifindex: 1,
                ingressIfindex: 5)
            return run.packet[15] >> 2
        }
        _ = try dscp(voip)
        // The reply leaves as EF in out1's domain (5p3d): the connection's rule.
        let ef = try dscp(voip.reversed)
        #expect(ef != 0)
        try EBPFDatapath.writeFlows(try #require(tables.flows), slot: 0, epoch: 2, maps)
        #expect(try dscp(voip.reversed) == 0)
    }
}
