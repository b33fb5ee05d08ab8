import QoSMapCore
import Testing

/// A small deterministic generator (SplitMix64), so failures reproduce.
struct SplitMix {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
}

@Suite("Flow addresses")
struct FlowAddressTests {
    @Test(arguments: [
        ("198.18.2.0/24", "198.18.2.0/24"), ("198.18.2.7", "198.18.2.7/32"), ("fd00:2::/64", "fd00:2::/64"),
        ("FD00:0002:0:0:0:0:0:1", "fd00:2::1/128"), ("::/0", "::/0"), ("0.0.0.0/0", "0.0.0.0/0"),
        ("::ffff:198.18.0.1", "::ffff:c612:1/128"), ("fd00::1:0:0:1", "fd00::1:0:0:1/128"),
        ("1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8/128"), ("fd00:0:0:1::", "fd00:0:0:1::/128"),
    ])
    func parsesAndPrints(text: String, expected: String) throws {
        #expect(try IPPrefix(parsing: text).description == expected)
    }

    @Test(arguments: [
        "198.18.2.1/24", "198.18.2.0/33", "256.1.1.1", "1.2.3", "01.2.3.4", "fd00::2::1", "fd00:::1",
        "1:2:3:4:5:6:7:8:9", "fd00::/129", "fd00::1/64", "gg::1", "", "/24", "198.18.0.0/", "198.18.0.0/-1",
    ])
    func rejects(text: String) {
        #expect(throws: FlowRuleError.self) { try IPPrefix(parsing: text) }
    }

    @Test func hostBitsMessageNamesTheNetwork() {
        #expect(throws: FlowRuleError("prefix '198.18.2.1/24' has host bits set; allowed: 198.18.2.0/24")) {
            try IPPrefix(parsing: "198.18.2.1/24")
        }
    }

    @Test func containment() throws {
        let p = try IPPrefix(parsing: "fd00:2::/64")
        #expect(p.contains(IPAddress(parsing: "fd00:2::ffff")!))
        #expect(!p.contains(IPAddress(parsing: "fd00:3::1")!))
        #expect(!p.contains(IPAddress(parsing: "198.18.0.1")!))
        let v4 = try IPPrefix(parsing: "198.18.0.0/15")
        #expect(v4.contains(IPAddress(parsing: "198.19.255.255")!))
        #expect(!v4.contains(IPAddress(parsing: "198.20.0.0")!))
        #expect(v4.covers(try IPPrefix(parsing: "198.19.3.0/24")))
        #expect(!(try IPPrefix(parsing: "198.19.3.0/24")).covers(v4))
    }

    @Test(arguments: [("80", 80, 80), ("10000-20000", 10000, 20000), ("0x50", 80, 80)])
    func ports(text: String, lower: Int, upper: Int) throws {
        let r = try PortRange(parsing: text)
        #expect(Int(r.lower) == lower && Int(r.upper) == upper)
    }

    @Test(arguments: ["65536", "20-10", "-1", "a", "1-", ""])
    func badPorts(text: String) {
        #expect(throws: FlowRuleError.self) { try PortRange(parsing: text) }
    }
}

@Suite("Flow classifier")
struct FlowClassifierTests {
    static let v4Pool = [
        "198.18.0.0/15", "198.18.2.0/24", "198.18.2.128/25", "198.18.3.0/24", "198.18.2.7/32",
        "198.19.0.0/16",
    ]
    static let v6Pool = [
        "fd00::/8", "fd00:2::/64", "fd00:2::/96", "fd00:3::/64", "fd00:2::7/128", "fd00:2:0:1::/64",
    ]

    static func randomRules(_ g: inout SplitMix, count: Int) -> FlowRuleSet {
        var rules: [FlowRule] = []
        func prefixes(_ g: inout SplitMix) -> [IPPrefix] {
            (0...g.below(2)).map { _ in
                let pool = g.chance(50) ? v4Pool : v6Pool
                return try! IPPrefix(parsing: pool[g.below(pool.count)])
            }
        }
        func ports(_ g: inout SplitMix) -> [PortRange] {
            (0...g.below(2)).map { _ in
                let a = UInt16(g.below(40) * 50)
                return PortRange(a, a + UInt16(g.below(3) * 100))
            }
        }
        for i in 0..<count {
            var m = FlowMatch()
            if g.chance(50) { m.protocols = g.chance(50) ? [17] : [6, 17] }
            if g.chance(40) { m.sources = prefixes(&g) }
            if g.chance(40) { m.destinations = prefixes(&g) }
            if g.chance(30) { m.sourcePorts = ports(&g) }
            if g.chance(40) { m.destinationPorts = ports(&g) }
            if g.chance(20) { m.ingress = g.chance(50) ? ["in1"] : ["in1", "in2"] }
            if g.chance(20) { m.dscp = [0, UInt8(g.below(64))] }
            if m.sourcePorts != nil || m.destinationPorts != nil, m.protocols == nil, g.chance(50) {
                m.protocols = [6]
            }
            rules.append(FlowRule(name: "r\(i)", match: m, action: .treatment(.bestEffort)))
        }
        return FlowRuleSet(rules: rules)
    }

    static func randomPacket(_ g: inout SplitMix) -> FlowPacket {
        let v6 = g.chance(50)
        func addr(_ g: inout SplitMix) -> IPAddress {
            if v6 {
                let hi: UInt64 = [
                    0xFD00_0002_0000_0000, 0xFD00_0003_0000_0000, 0xFD00_0002_0000_0001,
                    0xFE80_0000_0000_0000,
                ][g.below(4)]
                return IPAddress(ipv6: true, high: hi, low: UInt64(g.below(9)))
            }
            let base: UInt32 = [0xC612_0200, 0xC612_0300, 0xC613_0000, 0xC614_0000][g.below(4)]
            return IPAddress(ipv4: base + UInt32(g.below(256)))
        }
        let proto: UInt8? = g.chance(5) ? nil : [6, 17, 1, 58, 132][g.below(5)]
        let hasPorts = proto.map { TransportProtocol.hasPorts($0) } ?? false
        return FlowPacket(
            protocolNumber: proto, source: addr(&g), destination: addr(&g),
            sourcePort: hasPorts ? UInt16(g.below(2100)) : nil,
            destinationPort: hasPorts ? UInt16(g.below(2100)) : nil,
            ingress: [nil, "in1", "in2", "in3"][g.below(4)], dscp: UInt8(g.below(64)))
    }

    /// The compiled tables agree with the reference first-match scan.
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8])
    func compiledEqualsReference(seed: UInt64) throws {
        var g = SplitMix(state: seed)
        let set = Self.randomRules(&g, count: 1 + g.below(40))
        let c = try FlowClassifier(set)
        var matched = 0
        for _ in 0..<4000 {
            let p = Self.randomPacket(&g)
            let want = set.firstMatch(p)
            #expect(c.classify(p) == want, "packet \(p)")
            if want != nil { matched += 1 }
        }
        // The packets must exercise matches, or the comparison proves little.
        #expect(matched > 100)
    }

    @Test func firstMatchWinsAndKeysAnd() throws {
        let voip = FlowRule(
            name: "voip",
            match: FlowMatch(
                protocols: [17], destinations: [try IPPrefix(parsing: "198.18.2.0/24")],
                destinationPorts: [PortRange(5060, 5060), PortRange(10000, 20000)]),
            action: .treatment(Treatment(.ef, .green)))
        let backup = FlowRule(
            name: "backup", match: FlowMatch(protocols: [6], destinationPorts: [PortRange(873, 873)]),
            action: .treatment(Treatment(.af1, .yellow)))
        let wide = FlowRule(
            name: "wide", match: FlowMatch(destinations: [try IPPrefix(parsing: "198.18.0.0/15")]),
            action: .treatment(Treatment(.af2, .green)))
        let set = FlowRuleSet(rules: [voip, backup, wide])
        let c = try FlowClassifier(set)
        let server = IPAddress(parsing: "198.18.2.9")!
        let client = IPAddress(parsing: "198.18.1.2")!
        func p(_ proto: UInt8, _ dst: IPAddress, _ port: UInt16) -> FlowPacket {
            FlowPacket(
                protocolNumber: proto, source: client, destination: dst, sourcePort: 40000,
                destinationPort: port)
        }
        #expect(c.classify(p(17, server, 5060)) == 0)
        #expect(c.classify(p(17, server, 15000)) == 0)
        #expect(c.classify(p(6, server, 5060)) == 2)  // TCP: not voip; the wide rule
        #expect(c.classify(p(6, server, 873)) == 1)
        #expect(c.classify(p(17, IPAddress(parsing: "203.0.113.1")!, 5060)) == nil)
        #expect(c.classify(p(17, server, 9999)) == 2)
    }

    @Test func connectionKeyIsTheSameBothWays() throws {
        var g = SplitMix(state: 99)
        for _ in 0..<200 {
            let p = Self.randomPacket(&g)
            #expect(FlowKey(p) == FlowKey(p.reversed))
            #expect(FlowKey(p).hash32 == FlowKey(p.reversed).hash32)
        }
    }

    @Test func connectionTableRecordsAndEvicts() {
        let t = ConnectionTable()
        let a = FlowPacket(
            protocolNumber: 6, source: IPAddress(ipv4: 1), destination: IPAddress(ipv4: 2), sourcePort: 3,
            destinationPort: 4)
        #expect(t.lookup(FlowKey(a), epoch: 0) == nil)
        #expect(!t.record(FlowKey(a), rule: 5, epoch: 0))
        #expect(t.lookup(FlowKey(a.reversed), epoch: 0) == 5)
        #expect(t.lookup(FlowKey(a), epoch: 1) == nil)
        // Find another flow in the same slot: it replaces the first.
        var g = SplitMix(state: 7)
        var other: FlowPacket?
        for _ in 0..<2_000_000 {
            let b = FlowPacket(
                protocolNumber: 17, source: IPAddress(ipv4: UInt32(truncatingIfNeeded: g.next())),
                destination: IPAddress(ipv4: 2), sourcePort: 1, destinationPort: 1)
            if FlowKey(b).hash32 & 0xFFFF == FlowKey(a).hash32 & 0xFFFF { other = b; break }
        }
        guard let other else { Issue.record("no colliding flow found"); return }
        #expect(t.record(FlowKey(other), rule: 1, epoch: 0))
        #expect(t.lookup(FlowKey(a), epoch: 0) == nil)
        #expect(t.lookup(FlowKey(other), epoch: 0) == 1)
    }

    @Test func limitsAreRefusedWithAMessage() {
        let many = FlowRuleSet(
            rules: (0...FlowClassifier.maxRules).map {
                FlowRule(name: "r\($0)", match: FlowMatch(), action: .treatment(.bestEffort))
            })
        #expect(throws: FlowRuleError("4097 rules; allowed: at most 4096")) { try FlowClassifier(many) }
    }

    @Test func coversIsExact() throws {
        let wide = FlowMatch(
            protocols: [6, 17], destinations: [try IPPrefix(parsing: "198.18.0.0/15")],
            destinationPorts: [PortRange(1, 100), PortRange(101, 200)])
        let narrow = FlowMatch(
            protocols: [17], destinations: [try IPPrefix(parsing: "198.18.2.0/24")],
            destinationPorts: [PortRange(50, 150)])
        #expect(wide.covers(narrow))
        #expect(!narrow.covers(wide))
        var gap = wide
        gap.destinationPorts = [PortRange(1, 100), PortRange(102, 200)]
        #expect(!gap.covers(narrow))
        #expect(FlowMatch().covers(narrow))
        #expect(!narrow.covers(FlowMatch()))
    }
}
