import Testing

@testable import QoSMapCore

/// The u32 plan that classifies downloads on the IFB without the ebpf
/// classifier: its keys, its order, what it leaves out, and (by running the
/// filters on packet headers built here) that it agrees with the reference
/// first-match semantics and trust for what it claims to express.
@Suite("Download classifier plan")
struct DownloadClassifierTests {
    /// DSCP 46 is EF, 32-39 AF4 (one aligned block), 10 AF1, the rest BE.
    static func domain() throws -> DSDomain {
        var b = DomainBuilder(name: "test")
        for f in Field.allCases {
            for v in 0..<f.valueCount { b.setInbound(f, UInt8(v), .bestEffort) }
            for t in Treatment.allCells { b.setOutbound(f, t, 0) }
        }
        b.setInbound(.dscp, 46, Treatment(.ef, .green))
        for v in 32...39 { b.setInbound(.dscp, UInt8(v), Treatment(.af4, .green)) }
        b.setInbound(.dscp, 10, Treatment(.af1, .green))
        b.setInbound(.ipPrecedence, 5, Treatment(.ef, .green))
        return try b.build()
    }

    static func plan() throws -> HTBPlan {
        try #require(
            try QueueConfig(
                rate: Rate(bitsPerSecond: 100_000_000), ingressRate: Rate(bitsPerSecond: 20_000_000)
            ).htbPlan(.ingress, major: 0x7173))
    }

    static func prefix(_ text: String) throws -> IPPrefix { try IPPrefix(parsing: text) }

    @Test func trustDSCPGivesOneFilterPerBlockAndFamily() throws {
        let p = DownloadClassifierPlan(
            interface: "wan0", trust: .dscp, domain: try Self.domain(), rules: FlowRuleSet(),
            plan: try Self.plan())
        // AF1 {10}, AF4 {32-39} as one block, EF {46}; v4 and v6 each; BE is HTB's default.
        #expect(p.filters.count == 6)
        #expect(p.ignored.isEmpty)
        #expect(p.notice(interface: "wan0", ifb: "qmi-wan0") == nil)
        #expect(p.defaultClass == TCHandle(major: 0x7173, minor: 0x10))
        let ef = p.filters.filter { $0.serviceClass == .ef }
        #expect(ef.map(\.family) == [.ipv4, .ipv6])
        #expect(ef[0].keys == [U32Key(value: 0x00B8_0000, mask: 0x00FC_0000, offset: 0)])
        #expect(ef[1].keys == [U32Key(value: 0x0B80_0000, mask: 0x0FC0_0000, offset: 0)])
        #expect(ef[0].classID == TCHandle(major: 0x7173, minor: 0x15))
        let af4 = p.filters.filter { $0.serviceClass == .af4 }
        #expect(af4[0].keys == [U32Key(value: 0x0080_0000, mask: 0x00E0_0000, offset: 0)])
        #expect(af4[1].keys == [U32Key(value: 0x0800_0000, mask: 0x0E00_0000, offset: 0)])
        #expect(p.filters.map(\.priority) == Array(1...6))
    }

    @Test func keyTextIsWhatTcTakes() {
        #expect(
            U32Key(value: 0x00B8_0000, mask: 0x00FC_0000, offset: 0).description
                == "match u32 0x00b80000 0x00fc0000 at 0")
        // The value is masked: no key that can never hold.
        #expect(U32Key(value: 0xFFFF_FFFF, mask: 0xFF, offset: 4).value == 0xFF)
    }

    @Test func trustPrecedenceNoneAnd8021p() throws {
        let d = try Self.domain()
        let prec = DownloadClassifierPlan(
            interface: "w", trust: .ipPrecedence, domain: d, rules: FlowRuleSet(), plan: try Self.plan())
        #expect(
            prec.filters.map(\.keys) == [
                [U32Key(value: 0x00A0_0000, mask: 0x00E0_0000, offset: 0)],
                [U32Key(value: 0x0A00_0000, mask: 0x0E00_0000, offset: 0)],
            ])
        let none = DownloadClassifierPlan(
            interface: "w", trust: .none, domain: d, rules: FlowRuleSet(), plan: try Self.plan())
        #expect(none.filters.isEmpty && none.ignored.isEmpty)
        let dot1p = DownloadClassifierPlan(
            interface: "w", trust: .dot1p, domain: d, rules: FlowRuleSet(), plan: try Self.plan())
        #expect(dot1p.filters.isEmpty)
        #expect(dot1p.ignored == ["trust 8021p (not in the IP header; only rules classify)"])
    }

    @Test func ruleKeysV4AndV6() throws {
        let rules = FlowRuleSet(rules: [
            FlowRule(
                name: "game",
                match: FlowMatch(
                    protocols: [17],
                    sources: [try Self.prefix("198.18.5.0/24"), try Self.prefix("fd00:1::/64")],
                    destinationPorts: [PortRange(5303, 5303)]),
                action: .treatment(Treatment(.af4, .green)), connection: false)
        ])
        let p = DownloadClassifierPlan(
            interface: "w", trust: .none, domain: try Self.domain(), rules: rules, plan: try Self.plan())
        #expect(p.filters.count == 2)
        #expect(p.ignored.isEmpty)
        #expect(p.filters[0].family == .ipv4)
        #expect(
            p.filters[0].keys == [
                U32Key(value: 0x0500_0000, mask: 0x0F00_0000, offset: 0),  // IHL 5
                U32Key(value: 0, mask: 0x1FFF, offset: 4),  // not a later fragment
                U32Key(value: 0x0011_0000, mask: 0x00FF_0000, offset: 8),  // UDP
                U32Key(value: 0xC612_0500, mask: 0xFFFF_FF00, offset: 12),  // 198.18.5.0/24
                U32Key(value: 5303, mask: 0xFFFF, offset: 20),  // destination port
            ])
        #expect(p.filters[1].family == .ipv6)
        #expect(
            p.filters[1].keys == [
                U32Key(value: 0x1100, mask: 0xFF00, offset: 4),  // next header UDP
                U32Key(value: 0xFD00_0001, mask: 0xFFFF_FFFF, offset: 8),  // fd00:1::/64
                U32Key(value: 0, mask: 0xFFFF_FFFF, offset: 12),
                U32Key(value: 5303, mask: 0xFFFF, offset: 40),
            ])
        #expect(p.filters.allSatisfy { $0.classID == TCHandle(major: 0x7173, minor: 0x14) })
    }

    @Test func portRangesAreExactAlignedBlocks() {
        let blocks = DownloadClassifierPlan.portBlocks(PortRange(1000, 1010)).map { [$0.value, $0.mask] }
        #expect(blocks == [[1000, 0xFFF8], [1008, 0xFFFE], [1010, 0xFFFF]])
        #expect(
            DownloadClassifierPlan.portBlocks(PortRange(0, 65535)).map { [$0.value, $0.mask] } == [[0, 0]])
    }

    @Test func whatU32CannotSeeIsListedAndRulesForOtherInterfacesDropped() throws {
        let rules = FlowRuleSet(rules: [
            FlowRule(
                name: "lan", match: FlowMatch(protocols: [6], ingress: ["lan0"]),
                action: .treatment(Treatment(.ef, .green))),
            FlowRule(
                name: "web", match: FlowMatch(dns: [try DNSNamePattern(parsing: "example.com")]),
                action: .treatment(Treatment(.af2, .green))),
            FlowRule(
                name: "voice", match: FlowMatch(protocols: [6], destinationPorts: [PortRange(5304, 5304)]),
                action: .treatment(Treatment(.ef, .green))),
            FlowRule(
                name: "wide",
                match: FlowMatch(sourcePorts: [PortRange(1, 65534)], destinationPorts: [PortRange(1, 65534)]),
                action: .treatment(Treatment(.af1, .green)), connection: false),
        ])
        let p = DownloadClassifierPlan(
            interface: "wan0", trust: .none, domain: try Self.domain(), rules: rules, plan: try Self.plan())
        #expect(p.filters.allSatisfy { $0.origin == .rule("voice") })
        #expect(p.filters.count == 2)
        #expect(
            p.ignored == [
                "rule web (dns: names)", "rule wide (more than 256 u32 filters)",
                "the replies of connection rules (voice)",
            ])
        let line = try #require(p.notice(interface: "wan0", ifb: "qmi-wan0"))
        #expect(!line.contains("\n") && line.contains("rule web (dns: names)"))
        // On lan0, rule lan holds for every download: it comes first.
        let lan = DownloadClassifierPlan(
            interface: "lan0", trust: .none, domain: try Self.domain(), rules: rules, plan: try Self.plan())
        #expect(lan.filters.first?.origin == .rule("lan"))
    }

    // MARK: The filters run on headers, against the reference

    /// What the kernel's u32 does with the plan on one header: the first
    /// filter (by priority) of the packet's family whose keys all hold.
    static func run(_ plan: DownloadClassifierPlan, v6: Bool, header: [UInt8]) -> TCHandle {
        func word(_ at: Int32) -> UInt32 {
            let i = Int(at)
            guard i + 4 <= header.count else { return 0 }
            return header[i..<i + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }
        for f in plan.filters.sorted(by: { $0.priority < $1.priority }) where (f.family == .ipv6) == v6 {
            if f.keys.allSatisfy({ word($0.offset) & $0.mask == $0.value }) { return f.classID }
        }
        return plan.defaultClass
    }

    static func header(_ p: FlowPacket) -> [UInt8] {
        func be32(_ v: UInt32) -> [UInt8] {
            [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
        }
        func be64(_ v: UInt64) -> [UInt8] { be32(UInt32(v >> 32)) + be32(UInt32(v & 0xFFFF_FFFF)) }
        let ports = be32(UInt32(p.sourcePort ?? 0) << 16 | UInt32(p.destinationPort ?? 0))
        if p.source.isIPv6 {
            var h = be32(6 << 28 | UInt32(p.dscp) << 22) + be32(UInt32(p.protocolNumber ?? 59) << 8 | 64)
            h += be64(p.source.high) + be64(p.source.low) + be64(p.destination.high) + be64(p.destination.low)
            return h + ports
        }
        var h =
            be32(0x4500_0000 | UInt32(p.dscp) << 18) + be32(0)
            + be32(64 << 24 | UInt32(p.protocolNumber ?? 0) << 16)
        h += be32(UInt32(p.source.low)) + be32(UInt32(p.destination.low))
        return h + ports
    }

    @Test func filtersAgreeWithFirstMatchThenTrust() throws {
        let d = try Self.domain()
        let plan = try Self.plan()
        let rules = FlowRuleSet(rules: [
            FlowRule(
                name: "game", match: FlowMatch(protocols: [17], destinationPorts: [PortRange(5300, 5310)]),
                action: .treatment(Treatment(.af4, .green))),
            FlowRule(
                name: "nets",
                match: FlowMatch(
                    sources: [try Self.prefix("198.18.0.0/15"), try Self.prefix("fd00:2::/48")],
                    dscp: [0, 8]),
                action: .dscp(.ef)),
            FlowRule(
                name: "bulk",
                match: FlowMatch(protocols: [6], sourcePorts: [PortRange(80, 80), PortRange(443, 443)]),
                action: .treatment(Treatment(.be, .green))),
        ])
        let p = DownloadClassifierPlan(interface: "wan0", trust: .dscp, domain: d, rules: rules, plan: plan)
        #expect(p.ignored == ["the replies of connection rules (game, nets, bulk)"])
        let addresses = [
            "198.18.1.1", "198.19.255.1", "203.0.113.9", "fd00:2::1", "fd00:2:1::1", "fd00:3::1",
        ].map {
            IPAddress(parsing: $0)!
        }
        var checked = 0
        for source in addresses {
            let destination = IPAddress(parsing: source.isIPv6 ? "fd00:9::9" : "198.51.100.1")!
            for proto: UInt8 in [6, 17, 1] {
                for (sp, dp) in [(80, 5305), (443, 22), (1234, 5300), (5310, 5311), (1, 1)]
                    as [(UInt16, UInt16)]
                {
                    for dscp: UInt8 in [0, 8, 10, 33, 46, 63] {
                        let hasPorts = proto != 1
                        let packet = FlowPacket(
                            protocolNumber: proto, source: source, destination: destination,
                            sourcePort: hasPorts ? sp : nil, destinationPort: hasPorts ? dp : nil,
                            ingress: "wan0",
                            dscp: dscp)
                        let want: ServiceClass =
                            rules.firstMatch(packet).map {
                                rules.rules[$0].action.treatment(ingress: d).serviceClass
                            }
                            ?? d.classify(.dscp, dscp).serviceClass
                        let got = Self.run(p, v6: source.isIPv6, header: Self.header(packet))
                        #expect(got == plan.leaf(want).id, "\(packet) wants \(want)")
                        checked += 1
                    }
                }
            }
        }
        #expect(checked == 6 * 3 * 5 * 6)
    }
}
