import QoSMapCore
import QoSMapPacket
import Testing

@Suite("DNS learned-address store")
struct DNSAddressStoreTests {
    static func p(_ s: String) -> DNSNamePattern { try! DNSNamePattern(parsing: s) }
    static func a(_ s: String) -> IPAddress { IPAddress(parsing: s)! }

    /// A parsed reply: question `q`, CNAMEs `chain`, then A/AAAA records of the final name.
    static func reply(_ q: String, chain: [String] = [], _ records: [(String, UInt32)]) throws -> DNSReply {
        var answers: [[UInt8]] = []
        var owner = q
        for c in chain {
            answers.append(rr(wireName(owner), type: 5, wireName(c)))
            owner = c
        }
        for (addr, ttl) in records {
            let ip = a(addr)
            var bytes: [UInt8] = []
            if ip.isIPv6 {
                for k in 0..<16 {
                    let word: UInt64 = k < 8 ? ip.high : ip.low
                    bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(56 - 8 * (k % 8))))
                }
            } else {
                let v = UInt32(ip.low)
                for shift: UInt32 in [24, 16, 8, 0] { bytes.append(UInt8((v >> shift) & 0xFF)) }
            }
            answers.append(rr(wireName(owner), type: ip.isIPv6 ? 28 : 1, ttl: ttl, bytes))
        }
        let msg = dnsHeader(an: answers.count) + question(wireName(q), type: 1) + answers.flatMap { $0 }
        return try DNSReplyParser.parse(msg).get()
    }

    static let groups = [[p("*.zoom.us")], [p("cdn.example.net"), p("teams.microsoft.com")]]

    @Test func learnsV4AndV6WithMinTTLAndExpires() throws {
        var s = DNSAddressStore(groups: Self.groups, settings: DNSLearningSettings(snoop: ["x"], minTTL: 60))
        let changes = s.learn(
            try Self.reply("eu01.ZOOM.us", [("198.18.5.1", 10), ("fd00:5::1", 300)]),
            server: Self.a("198.18.0.53"),
            now: 1000)
        #expect(changes.map(\.mask) == [1, 1])
        #expect(s.mask(of: Self.a("198.18.5.1")) == 1)
        #expect(s.mask(of: Self.a("fd00:5::1")) == 1)
        let e = try #require(s.entries(of: Self.a("198.18.5.1")).first)
        #expect(e.expires == 1060)  // TTL 10 raised to min-ttl 60
        #expect(e.source.name.description == "eu01.zoom.us")
        #expect(e.source.server == Self.a("198.18.0.53"))
        #expect(s.entries(of: Self.a("fd00:5::1")).first?.expires == 1300)
        #expect(s.learned == 2)
        #expect(s.sweep(now: 1059).isEmpty)
        #expect(s.sweep(now: 1060) == [DNSMaskChange(address: Self.a("198.18.5.1"), mask: 0)])
        #expect(s.mask(of: Self.a("198.18.5.1")) == 0)
        #expect(s.mask(of: Self.a("fd00:5::1")) == 1)
        #expect(s.sweep(now: 1300).count == 1)
        #expect(s.count == 0)
        #expect(s.expired == 2)
    }

    @Test func unmatchedNamesLearnNothing() throws {
        var s = DNSAddressStore(groups: Self.groups, settings: DNSLearningSettings())
        #expect(s.learn(try Self.reply("zoom.us", [("198.18.5.1", 300)]), now: 0).isEmpty)
        #expect(s.learn(try Self.reply("evil.org", [("198.18.5.2", 300)]), now: 0).isEmpty)
        #expect(s.count == 0)
    }

    /// `*.zoom.us` CNAME'd to a CDN name learns the CDN's address; a name in
    /// the middle of the chain counts as well as the question and the end.
    @Test func cnameChains() throws {
        var s = DNSAddressStore(groups: Self.groups, settings: DNSLearningSettings())
        _ = s.learn(
            try Self.reply(
                "us04web.zoom.us", chain: ["zoom.cdn.org", "edge.cdn.org"], [("198.18.6.1", 300)]), now: 0)
        #expect(s.mask(of: Self.a("198.18.6.1")) == 1)
        #expect(s.entries(of: Self.a("198.18.6.1")).first?.source.question.description == "us04web.zoom.us")
        _ = s.learn(
            try Self.reply(
                "www.other.org", chain: ["cdn.example.net", "e1.akamai.net"], [("198.18.6.2", 300)]),
            now: 0)
        #expect(s.mask(of: Self.a("198.18.6.2")) == 2)
        #expect(s.entries(of: Self.a("198.18.6.2")).first?.source.name.description == "cdn.example.net")
        // Both groups.
        _ = s.learn(
            try Self.reply("a.zoom.us", chain: ["teams.microsoft.com"], [("198.18.6.3", 300)]), now: 0)
        #expect(s.mask(of: Self.a("198.18.6.3")) == 3)
    }

    @Test func refreshKeepsTheLaterExpiryAndMaxTTLCaps() throws {
        var s = DNSAddressStore(groups: Self.groups, settings: DNSLearningSettings(minTTL: 0, maxTTL: 1000))
        _ = s.learn(try Self.reply("a.zoom.us", [("198.18.5.1", 500)]), now: 0)
        _ = s.learn(try Self.reply("a.zoom.us", [("198.18.5.1", 100)]), now: 10)
        #expect(s.entries(of: Self.a("198.18.5.1")).first?.expires == 500)
        _ = s.learn(try Self.reply("a.zoom.us", [("198.18.5.1", 0x7FFF_FFFF)]), now: 20)
        #expect(s.entries(of: Self.a("198.18.5.1")).first?.expires == 1020)
        #expect(s.refreshed == 1)
        // The stale heap items of the refreshes expire nothing.
        #expect(s.sweep(now: 600).isEmpty)
        #expect(s.sweep(now: 1020).count == 1)
    }

    @Test func fullStoreEvictsTheSoonestToExpire() throws {
        var s = DNSAddressStore(
            groups: Self.groups, settings: DNSLearningSettings(maxAddresses: 3, minTTL: 0))
        _ = s.learn(try Self.reply("a.zoom.us", [("198.18.5.1", 300)]), now: 0)
        _ = s.learn(try Self.reply("b.zoom.us", [("198.18.5.2", 100)]), now: 0)
        _ = s.learn(try Self.reply("c.zoom.us", [("198.18.5.3", 200)]), now: 0)
        let changes = s.learn(try Self.reply("d.zoom.us", [("198.18.5.4", 50)]), now: 0)
        #expect(
            changes == [
                .init(address: Self.a("198.18.5.2"), mask: 0), .init(address: Self.a("198.18.5.4"), mask: 1),
            ])
        #expect(s.count == 3)
        #expect(s.evicted == 1)
        // Refreshing a held address evicts nothing.
        _ = s.learn(try Self.reply("a.zoom.us", [("198.18.5.1", 400)]), now: 0)
        #expect(s.evicted == 1)
        _ = s.learn(try Self.reply("e.zoom.us", [("198.18.5.5", 50)]), now: 0)
        #expect(s.mask(of: Self.a("198.18.5.4")) == 0)
        #expect(s.evicted == 2)
    }

    @Test func regroupKeepsListsStillPresent() throws {
        var s = DNSAddressStore(groups: Self.groups, settings: DNSLearningSettings())
        _ = s.learn(
            try Self.reply("a.zoom.us", chain: ["teams.microsoft.com"], [("198.18.5.1", 300)]), now: 0)
        let r = s.regrouped([[Self.p("x.org")], Self.groups[1]], settings: DNSLearningSettings())
        #expect(r.mask(of: Self.a("198.18.5.1")) == 2)
        #expect(r.entries(of: Self.a("198.18.5.1")).map(\.group) == [1])
        #expect(r.learned == s.learned)
    }

    /// Many random learns and sweeps: the store's masks equal a brute-force model.
    @Test func randomAgainstModel() throws {
        var s = DNSAddressStore(
            groups: Self.groups, settings: DNSLearningSettings(maxAddresses: 1000, minTTL: 0))
        var model: [IPAddress: [Int: Int64]] = [:]
        var rng: UInt64 = 7
        func next(_ n: Int) -> Int {
            rng = rng &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((rng >> 33) % UInt64(n))
        }
        let names = ["a.zoom.us", "teams.microsoft.com", "no.org"]
        for step in 0..<2000 {
            let now = Int64(step)
            let addr = "198.18.7.\(next(200))"
            let n = names[next(3)]
            let ttl = UInt32(next(50))
            _ = s.learn(try Self.reply(n, [(addr, ttl)]), now: now)
            let g = n == "a.zoom.us" ? 0 : n == "teams.microsoft.com" ? 1 : nil
            if let g {
                let e = now + Int64(ttl)
                model[Self.a(addr), default: [:]][g] = max(model[Self.a(addr)]?[g] ?? 0, e)
            }
            if step % 7 == 0 {
                _ = s.sweep(now: now)
                for (k, v) in model {
                    let kept = v.filter { $0.value > now }
                    model[k] = kept.isEmpty ? nil : kept
                }
                for (k, v) in model {
                    let m = v.keys.reduce(UInt16(0)) { $0 | 1 << UInt16($1) }
                    #expect(s.mask(of: k) == m)
                }
                #expect(s.count == model.count)
            }
        }
    }
}
