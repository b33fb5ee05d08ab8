import QoSMapCore
import QoSMapPacket
import Testing

// The snooper's query tracker and TCP reassembly, fed hand-built IP packets.

let client4 = IPAddress(parsing: "198.18.1.2")!
let server4 = IPAddress(parsing: "198.19.0.53")!
let client6 = IPAddress(parsing: "fd00:1::2")!
let server6 = IPAddress(parsing: "fd00:53::53")!
let lan = DNSSnoopInterface(index: 7, name: "lan0")
let wan = DNSSnoopInterface(index: 8, name: "wan0")
let second: UInt64 = 1_000_000_000

func addressBytes(_ a: IPAddress) -> [UInt8] {
    if !a.isIPv6 { return (0..<4).map { UInt8(truncatingIfNeeded: a.low >> (24 - 8 * $0)) } }
    return (0..<8).map { UInt8(truncatingIfNeeded: a.high >> (56 - 8 * $0)) }
        + (0..<8).map { UInt8(truncatingIfNeeded: a.low >> (56 - 8 * $0)) }
}

func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
func be32(_ v: UInt32) -> [UInt8] {
    [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
}

/// An IP packet (v4 or v6 after the addresses) with `proto` and `l4`; `ext`
/// (IPv6 only) is a chain of extension headers whose first next-header is `firstNext`.
func ipPacket(
    _ src: IPAddress, _ dst: IPAddress, proto: UInt8, _ l4: [UInt8], ext: [UInt8] = [],
    firstNext: UInt8? = nil,
    fragment: UInt16 = 0
) -> [UInt8] {
    if !src.isIPv6 {
        return [0x45, 0] + be16(20 + l4.count) + [0, 1] + be16(Int(fragment)) + [64, proto, 0, 0]
            + addressBytes(src) + addressBytes(dst) + l4
    }
    return [0x60, 0, 0, 0] + be16(ext.count + l4.count) + [firstNext ?? proto, 64] + addressBytes(src)
        + addressBytes(dst) + ext + l4
}

func udp(_ src: IPAddress, _ sport: Int, _ dst: IPAddress, _ dport: Int, _ payload: [UInt8]) -> [UInt8] {
    ipPacket(src, dst, proto: 17, be16(sport) + be16(dport) + be16(8 + payload.count) + [0, 0] + payload)
}

func tcp(
    _ src: IPAddress, _ sport: Int, _ dst: IPAddress, _ dport: Int, seq: UInt32, flags: UInt8 = 0x18,
    _ payload: [UInt8] = []
) -> [UInt8] {
    ipPacket(
        src, dst, proto: 6,
        be16(sport) + be16(dport) + be32(seq) + be32(0) + [0x50, flags] + be16(65535) + [0, 0, 0, 0] + payload
    )
}

func dnsQuery(id: UInt16 = 0x1234, _ name: String, type: UInt16 = typeA) -> [UInt8] {
    dnsHeader(id: id, flags: 0x0100, an: 0) + question(wireName(name), type: type)
}

func dnsAnswer(id: UInt16 = 0x1234, _ name: String, type: UInt16 = typeA, _ addresses: [[UInt8]]) -> [UInt8] {
    var m = dnsHeader(id: id, an: addresses.count) + question(wireName(name), type: type)
    for a in addresses { m += rr(pointer(12), type: a.count == 4 ? typeA : typeAAAA, ttl: 60, a) }
    return m
}

func framed(_ m: [UInt8]) -> [UInt8] { be16(m.count) + m }

/// Feeds frames to a snooper and keeps what it delivers.
struct Snoop {
    var snooper: DNSSnooper
    var delivered: [DNSObservedReply] = []

    init(_ limits: DNSSnoopLimits = DNSSnoopLimits()) { snooper = DNSSnooper(limits: limits) }

    mutating func feed(
        _ frame: [UInt8], on interface: DNSSnoopInterface = lan, at now: UInt64 = 0,
        format: PacketFormat = .ip
    ) {
        var out: [DNSObservedReply] = []
        snooper.frame(frame, format: format, interface: interface, now: now) { out.append($0) }
        delivered += out
    }

    var c: DNSSnoopCounters { snooper.counters }
}

@Suite struct DNSSnooperUDPTests {
    @Test(arguments: [(client4, server4), (client6, server6)])
    func answersAQuerySeenOnTheSameInterface(_ client: IPAddress, _ server: IPAddress) throws {
        var s = Snoop()
        s.feed(udp(client, 40000, server, 53, dnsQuery("www.Example.com")))
        #expect(s.c.queriesSeen == 1)
        s.feed(udp(server, 53, client, 40000, dnsAnswer("www.example.COM", [[198, 18, 7, 7]])), at: second)
        let r = try #require(s.delivered.first)
        #expect(s.delivered.count == 1)
        #expect(r.interface == "lan0" && r.server == server && r.client == client && r.transport == 17)
        #expect(r.reply.addresses.map(\.address) == [IPAddress(parsing: "198.18.7.7")!])
        #expect(s.c.repliesDelivered == 1 && s.c.repliesParsed == 1)
        // The query is consumed: the same reply again answers nothing.
        s.feed(udp(server, 53, client, 40000, dnsAnswer("www.example.com", [[198, 18, 6, 6]])), at: second)
        #expect(s.delivered.count == 1)
        #expect(s.c.repliesUnsolicited == 1)
        #expect(s.snooper.liveQueries == 0)
    }

    /// Replies that do not answer the live query: each is refused, and the
    /// real reply afterwards is still delivered.
    @Test(arguments: [
        (
            "no query at all",
            udp(server4, 53, client4, 40001, dnsAnswer("www.example.com", [[1, 2, 3, 4]])), lan
        ),
        (
            "wrong ID",
            udp(server4, 53, client4, 40000, dnsAnswer(id: 0x1235, "www.example.com", [[1, 2, 3, 4]])), lan
        ),
        (
            "wrong client port",
            udp(server4, 53, client4, 40002, dnsAnswer("www.example.com", [[1, 2, 3, 4]])), lan
        ),
        (
            "wrong server port",
            udp(server4, 5353, client4, 40000, dnsAnswer("www.example.com", [[1, 2, 3, 4]])), lan
        ),
        (
            "wrong server",
            udp(
                IPAddress(parsing: "198.19.0.54")!, 53, client4, 40000,
                dnsAnswer("www.example.com", [[1, 2, 3, 4]])),
            lan
        ),
        (
            "wrong client",
            udp(
                server4, 53, IPAddress(parsing: "198.18.1.3")!, 40000,
                dnsAnswer("www.example.com", [[1, 2, 3, 4]])), lan
        ),
        (
            "other interface",
            udp(server4, 53, client4, 40000, dnsAnswer("www.example.com", [[1, 2, 3, 4]])), wan
        ),
        (
            "over TCP",
            tcp(server4, 53, client4, 40000, seq: 1, framed(dnsAnswer("www.example.com", [[1, 2, 3, 4]]))),
            lan
        ),
    ])
    func spoofedRepliesAreRefused(_ label: String, _ spoof: [UInt8], _ interface: DNSSnoopInterface) throws {
        var s = Snoop()
        s.feed(udp(client4, 40000, server4, 53, dnsQuery("www.example.com")))
        s.feed(spoof, on: interface)
        #expect(s.delivered.isEmpty, "\(label)")
        #expect(s.c.repliesParsed == 0, "\(label): parsed before the tracker said no")
        s.feed(udp(server4, 53, client4, 40000, dnsAnswer("www.example.com", [[198, 18, 7, 7]])))
        #expect(
            s.delivered.map { $0.reply.addresses.map(\.address) } == [[IPAddress(parsing: "198.18.7.7")!]])
    }

    @Test func anotherQuestionIsMismatchedAndLeavesTheQuery() throws {
        var s = Snoop()
        s.feed(udp(client4, 40000, server4, 53, dnsQuery("www.example.com")))
        s.feed(udp(server4, 53, client4, 40000, dnsAnswer("evil.example.com", [[1, 2, 3, 4]])))
        s.feed(
            udp(server4, 53, client4, 40000, dnsAnswer("www.example.com", type: typeAAAA, [[1, 2, 3, 4]])))
        #expect(s.delivered.isEmpty)
        #expect(s.c.repliesMismatched == 2 && s.c.repliesParsed == 2)
        s.feed(udp(server4, 53, client4, 40000, dnsAnswer("www.example.com", [[198, 18, 7, 7]])))
        #expect(s.delivered.count == 1)
    }

    @Test func aLateReplyIsUnsolicited() {
        var limits = DNSSnoopLimits()
        limits.queryTimeout = 10 * second
        var s = Snoop(limits)
        s.feed(udp(client4, 40000, server4, 53, dnsQuery("www.example.com")), at: 5 * second)
        s.feed(
            udp(server4, 53, client4, 40000, dnsAnswer("www.example.com", [[1, 2, 3, 4]])), at: 15 * second)
        #expect(s.delivered.isEmpty)
        #expect(s.c.queriesExpired == 1 && s.c.repliesUnsolicited == 1)
        // A retransmitted query restarts the clock.
        s.feed(udp(client4, 40000, server4, 53, dnsQuery("www.example.com")), at: 16 * second)
        s.feed(udp(client4, 40000, server4, 53, dnsQuery("www.example.com")), at: 25 * second)
        s.feed(
            udp(server4, 53, client4, 40000, dnsAnswer("www.example.com", [[1, 2, 3, 4]])), at: 34 * second)
        #expect(s.delivered.count == 1)
        #expect(s.snooper.liveQueries == 0)
    }

    @Test func theOldestQueryIsEvictedWhenFull() {
        var limits = DNSSnoopLimits()
        limits.maxQueries = 3
        var s = Snoop(limits)
        for port in 40000..<40005 { s.feed(udp(client4, port, server4, 53, dnsQuery("q\(port).example"))) }
        #expect(s.c.queriesSeen == 5 && s.c.queriesEvicted == 2)
        #expect(s.snooper.liveQueries == 3)
        for port in 40000..<40005 {
            s.feed(
                udp(
                    server4, 53, client4, port,
                    dnsAnswer("q\(port).example", [[1, 2, 3, UInt8(port & 0xFF)]])))
        }
        #expect(
            s.delivered.map(\.reply.question.description) == [
                "q40002.example", "q40003.example", "q40004.example",
            ])
        #expect(s.c.repliesUnsolicited == 2)
    }

    @Test func expireDropsTimedOutQueries() {
        var s = Snoop()
        for port in 40000..<40010 { s.feed(udp(client4, port, server4, 53, dnsQuery("x.example"))) }
        s.snooper.expire(now: 9 * second)
        #expect(s.snooper.liveQueries == 10)
        s.snooper.expire(now: 10 * second)
        #expect(s.snooper.liveQueries == 0 && s.c.queriesExpired == 10)
    }

    /// Malformed replies to a live query: counted by kind, nothing delivered,
    /// the query still waits for a good reply.
    @Test(arguments: [
        (
            "truncated", Array(dnsAnswer("www.example.com", [[1, 2, 3, 4]]).dropLast(2)),
            DNSReplyError.truncated
        ),
        ("header only", Array(dnsAnswer("www.example.com", [[1, 2, 3, 4]]).prefix(11)), .truncated),
        (
            "compression loop",
            dnsHeader(an: 1) + question(wireName("www.example.com"), type: typeA)
                + [3, 0x61, 0x62, 0x63] + pointer(33) + [0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 1, 2, 3, 4],
            .pointerLoop
        ),
        (
            "forward pointer",
            dnsHeader(an: 1) + question(wireName("www.example.com"), type: typeA) + pointer(200)
                + [0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 1, 2, 3, 4], .forwardPointer
        ),
        (
            "huge answer count", dnsHeader(an: 65535) + question(wireName("www.example.com"), type: typeA),
            .truncated
        ),
        (
            "bad A length",
            dnsHeader(an: 1) + question(wireName("www.example.com"), type: typeA)
                + rr(pointer(12), type: typeA, [1, 2, 3]), .badRecordData
        ),
    ])
    func malformedRepliesAreCounted(_ label: String, _ reply: [UInt8], _ error: DNSReplyError) {
        var s = Snoop()
        s.feed(udp(client4, 40000, server4, 53, dnsQuery("www.example.com")))
        s.feed(udp(server4, 53, client4, 40000, reply))
        #expect(s.delivered.isEmpty, "\(label)")
        #expect(s.c.malformed(error) == 1, "\(label)")
        s.feed(udp(server4, 53, client4, 40000, dnsAnswer("www.example.com", [[198, 18, 7, 7]])))
        #expect(s.delivered.count == 1, "\(label)")
    }

    @Test func manyAnswersAreCapped() throws {
        var s = Snoop()
        s.feed(udp(client4, 40000, server4, 53, dnsQuery("many.example")))
        let addresses = (0..<200).map { [198, 18, UInt8($0 >> 8), UInt8($0 & 0xFF)] }
        s.feed(udp(server4, 53, client4, 40000, dnsAnswer("many.example", addresses)))
        let r = try #require(s.delivered.first)
        #expect(r.reply.addresses.count == DNSReplyParser.defaultMaxAnswers)
        #expect(r.reply.answersSkipped == 200 - DNSReplyParser.defaultMaxAnswers)
    }

    @Test func ipv6ExtensionHeadersAndFragments() {
        var s = Snoop()
        let hopByHop: [UInt8] = [17, 0, 1, 4, 0, 0, 0, 0]  // next UDP, PadN
        let q = dnsQuery("v6.example", type: typeAAAA)
        let qUDP = be16(40000) + be16(53) + be16(8 + q.count) + [0, 0] + q
        s.feed(ipPacket(client6, server6, proto: 17, qUDP, ext: hopByHop, firstNext: 0))
        #expect(s.c.queriesSeen == 1)
        let a = dnsAnswer(
            "v6.example", type: typeAAAA, [[0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]])
        let aUDP = be16(53) + be16(40000) + be16(8 + a.count) + [0, 0] + a
        // A first fragment (M set): the rest of the message is elsewhere.
        let fragment: [UInt8] = [17, 0, 0, 1, 0, 0, 0, 9]
        s.feed(ipPacket(server6, client6, proto: 17, aUDP, ext: fragment, firstNext: 44))
        #expect(s.delivered.isEmpty && s.c.framesIgnored == 1)
        s.feed(ipPacket(server6, client6, proto: 17, aUDP, ext: hopByHop, firstNext: 0))
        #expect(s.delivered.count == 1)
    }

    @Test func ipv4FragmentsAndShortHeadersAreIgnored() {
        var s = Snoop()
        s.feed(udp(client4, 40000, server4, 53, dnsQuery("www.example.com")))
        let a = dnsAnswer("www.example.com", [[1, 2, 3, 4]])
        let l4 = be16(53) + be16(40000) + be16(8 + a.count) + [0, 0] + a
        s.feed(ipPacket(server4, client4, proto: 17, l4, fragment: 0x2000))  // MF
        s.feed(ipPacket(server4, client4, proto: 17, l4, fragment: 0x0010))  // offset 128
        s.feed(Array(udp(server4, 53, client4, 40000, a).prefix(24)))  // cut inside UDP
        s.feed(ipPacket(server4, client4, proto: 17, be16(53) + be16(40000) + be16(4000) + [0, 0] + a))
        #expect(s.delivered.isEmpty && s.c.framesIgnored == 4)
    }

    @Test func ethernetFrames() {
        var s = Snoop()
        s.feed(ether(0x0800, udp(client4, 40000, server4, 53, dnsQuery("e.example"))), format: .ethernet)
        s.feed(
            ether(
                0x0800, udp(server4, 53, client4, 40000, dnsAnswer("e.example", [[1, 2, 3, 4]])) + [0, 0, 0]),
            format: .ethernet)
        #expect(s.delivered.count == 1)
    }
}

@Suite struct DNSSnooperTCPTests {
    let q = framed(dnsQuery(id: 7, "tcp.example"))
    let a = framed(dnsAnswer(id: 7, "tcp.example", [[198, 18, 5, 5]]))

    /// The handshake, then `query` and `answer` split into segments at the given cuts.
    func exchange(_ s: inout Snoop, queryCuts: [Int] = [], answerCuts: [Int] = []) {
        s.feed(tcp(client4, 40000, server4, 53, seq: 1000, flags: 0x02))
        s.feed(tcp(server4, 53, client4, 40000, seq: 5000, flags: 0x12))
        for (from, to) in zip([0] + queryCuts, queryCuts + [q.count]) {
            s.feed(tcp(client4, 40000, server4, 53, seq: 1001 + UInt32(from), Array(q[from..<to])))
        }
        for (from, to) in zip([0] + answerCuts, answerCuts + [a.count]) {
            s.feed(tcp(server4, 53, client4, 40000, seq: 5001 + UInt32(from), Array(a[from..<to])))
        }
    }

    @Test(arguments: [[], [1], [2, 5], [1, 2, 3, 20]])
    func segmentedMessagesAreReassembled(_ cuts: [Int]) throws {
        var s = Snoop()
        exchange(&s, queryCuts: cuts, answerCuts: cuts)
        let r = try #require(s.delivered.first)
        #expect(r.transport == 6 && r.reply.addresses.map(\.address) == [IPAddress(parsing: "198.18.5.5")!])
        #expect(s.c.queriesSeen == 1 && s.c.tcpStreamsDropped == 0)
    }

    @Test func severalMessagesInOneSegmentAndRetransmissions() {
        var s = Snoop()
        s.feed(tcp(client4, 40000, server4, 53, seq: 1000, flags: 0x02))
        s.feed(tcp(server4, 53, client4, 40000, seq: 5000, flags: 0x12))
        let q2 = framed(dnsQuery(id: 8, "two.example"))
        s.feed(tcp(client4, 40000, server4, 53, seq: 1001, q + q2))
        s.feed(tcp(client4, 40000, server4, 53, seq: 1001, q))  // a retransmission
        let a2 = framed(dnsAnswer(id: 8, "two.example", [[198, 18, 5, 6]]))
        s.feed(tcp(server4, 53, client4, 40000, seq: 5001, Array(a.prefix(10))))
        // Overlaps what was read: only the new bytes count.
        s.feed(tcp(server4, 53, client4, 40000, seq: 5001, a + a2))
        #expect(s.delivered.map(\.reply.id) == [7, 8])
        #expect(s.c.queriesSeen == 2 && s.c.tcpStreamsDropped == 0)
    }

    @Test func aGapDropsTheStream() {
        var s = Snoop()
        s.feed(tcp(client4, 40000, server4, 53, seq: 1000, flags: 0x02))
        s.feed(tcp(server4, 53, client4, 40000, seq: 5000, flags: 0x12))
        s.feed(tcp(client4, 40000, server4, 53, seq: 1001, q))
        s.feed(tcp(server4, 53, client4, 40000, seq: 5002, Array(a.dropFirst())))  // one byte missing
        s.feed(tcp(server4, 53, client4, 40000, seq: 5001, a))  // too late: the stream is gone
        #expect(s.delivered.isEmpty)
        #expect(s.c.tcpStreamsDropped == 1 && s.c.tcpSegmentsUntracked == 1)
    }

    @Test func segmentsWithoutASynAreUntracked() {
        var s = Snoop()
        s.feed(tcp(client4, 40000, server4, 53, seq: 1001, q))
        s.feed(tcp(server4, 53, client4, 40000, seq: 5001, a))
        #expect(s.delivered.isEmpty && s.c.tcpSegmentsUntracked == 2 && s.c.queriesSeen == 0)
    }

    @Test func aStreamThatNeverEndsIsBounded() {
        var limits = DNSSnoopLimits()
        limits.maxStreamBuffer = 1000
        var s = Snoop(limits)
        s.feed(tcp(client4, 40000, server4, 53, seq: 1000, flags: 0x02))
        // A length prefix of 65535, then bytes that never complete it.
        var seq: UInt32 = 1001
        for i in 0..<10 {
            let chunk =
                i == 0 ? [0xFF, 0xFF] + [UInt8](repeating: 0, count: 198) : [UInt8](repeating: 0, count: 200)
            s.feed(tcp(client4, 40000, server4, 53, seq: seq, chunk))
            seq += UInt32(chunk.count)
        }
        #expect(s.c.tcpStreamsDropped == 1 && s.c.tcpStreams == 0)
        #expect(s.c.tcpSegmentsUntracked == 4)  // 5 chunks fill the 1000 bytes, the 6th drops it
        // Idle streams time out.
        s.feed(tcp(client4, 40001, server4, 53, seq: 1000, flags: 0x02), at: 0)
        #expect(s.c.tcpStreams == 1)
        s.snooper.expire(now: 29 * second)
        #expect(s.c.tcpStreams == 1)
        s.snooper.expire(now: 30 * second)
        #expect(s.c.tcpStreams == 0 && s.c.tcpStreamsDropped == 2)
    }

    @Test func theStreamTableIsBounded() {
        var limits = DNSSnoopLimits()
        limits.maxStreams = 4
        var s = Snoop(limits)
        for port in 0..<10 {
            s.feed(tcp(client4, 41000 + port, server4, 53, seq: 1, flags: 0x02), at: UInt64(port))
        }
        #expect(s.c.tcpStreams == 4 && s.c.tcpStreamsDropped == 6)
        // The newest four are the ones kept.
        s.feed(tcp(client4, 41009, server4, 53, seq: 2, q), at: 20)
        s.feed(tcp(client4, 41000, server4, 53, seq: 2, q), at: 21)
        #expect(s.c.queriesSeen == 1 && s.c.tcpSegmentsUntracked == 1)
    }

    @Test func finAndResetCloseTheStream() {
        var s = Snoop()
        exchange(&s)
        s.feed(tcp(client4, 40000, server4, 53, seq: 1001 + UInt32(q.count), flags: 0x11))
        s.feed(tcp(server4, 53, client4, 40000, seq: 5001 + UInt32(a.count), flags: 0x04))
        #expect(s.c.tcpStreams == 0 && s.c.tcpStreamsDropped == 0 && s.delivered.count == 1)
    }
}
