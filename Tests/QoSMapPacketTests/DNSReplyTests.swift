import QoSMapCore
import QoSMapPacket
import Testing

// DNS messages built byte by byte (RFC 1035 §4.1).

/// Uncompressed wire form of a dotted name.
func wireName(_ text: String) -> [UInt8] {
    var out: [UInt8] = []
    for label in text.split(separator: ".") {
        out.append(UInt8(label.utf8.count))
        out += Array(label.utf8)
    }
    return out + [0]
}

/// A compression pointer to `offset`.
func pointer(_ offset: Int) -> [UInt8] { [0xC0 | UInt8(offset >> 8), UInt8(offset & 0xFF)] }

/// A DNS header: a reply (QR, RD, RA) unless `flags` says otherwise.
func dnsHeader(id: UInt16 = 0x1234, flags: UInt16 = 0x8180, qd: Int = 1, an: Int, ns: Int = 0, ar: Int = 0)
    -> [UInt8]
{
    [UInt8(id >> 8), UInt8(id & 0xFF), UInt8(flags >> 8), UInt8(flags & 0xFF)]
        + [qd, an, ns, ar].flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
}

/// A question entry (class IN).
func question(_ name: [UInt8], type: UInt16) -> [UInt8] {
    name + [UInt8(type >> 8), UInt8(type & 0xFF), 0, 1]
}

/// A resource record (class IN unless given).
func rr(_ owner: [UInt8], type: UInt16, ttl: UInt32 = 300, rrClass: UInt16 = 1, _ data: [UInt8]) -> [UInt8] {
    owner + [UInt8(type >> 8), UInt8(type & 0xFF), UInt8(rrClass >> 8), UInt8(rrClass & 0xFF)]
        + [UInt8(ttl >> 24), UInt8((ttl >> 16) & 0xFF), UInt8((ttl >> 8) & 0xFF), UInt8(ttl & 0xFF)]
        + [UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data
}

let typeA: UInt16 = 1
let typeCNAME: UInt16 = 5
let typeAAAA: UInt16 = 28

/// example.com A → 93.184.216.34, the answer owner compressed to the question.
let simpleA: [UInt8] =
    dnsHeader(an: 1) + question(wireName("example.com"), type: typeA)
    + rr(pointer(12), type: typeA, ttl: 3600, [93, 184, 216, 34])

/// www.zoom.us → CNAME zoom.cdn.example.net → CNAME edge7.cdn.example.net → A ×2,
/// compression inside the CNAME data, plus records that are not on the chain
/// (an A for an intermediate name, an A for an unrelated name, a TXT).
let cnameChain: [UInt8] = {
    var m = dnsHeader(an: 7) + question(wireName("www.zoom.us"), type: typeA)
    // 12: www.zoom.us (13 bytes) + 4 → answers start at 29.
    let cdn1 = m.count + 12  // where the first CNAME's data starts
    m += rr(
        pointer(12), type: typeCNAME,
        [4] + Array("zoom".utf8) + [3] + Array("cdn".utf8) + wireName("example.net"))
    // zoom.cdn.example.net at cdn1; "cdn.example.net" at cdn1 + 5.
    let cdn2 = m.count + 12
    m += rr(pointer(cdn1), type: typeCNAME, [5] + Array("EDGE7".utf8) + pointer(cdn1 + 5))
    m += rr(pointer(cdn1), type: typeA, [198, 18, 9, 9])  // not the final name: ignored
    m += rr(pointer(cdn2), type: typeA, ttl: 20, [198, 18, 0, 1])
    m += rr(wireName("other.example"), type: typeA, [198, 18, 9, 10])  // unrelated: ignored
    m += rr(pointer(cdn2), type: 16, [3] + Array("txt".utf8))
    m += rr(wireName("edge7.CDN.example.NET"), type: typeA, ttl: 30, [198, 18, 0, 2])
    return m
}()

/// dual.example AAAA and A in one reply (as some resolvers add both).
let dualStack: [UInt8] =
    dnsHeader(an: 2, ar: 1) + question(wireName("Dual.Example"), type: typeAAAA)
    + rr(
        pointer(12), type: typeAAAA, ttl: 0x8000_0001, [0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x42])
    + rr(wireName("DUAL.example"), type: typeA, ttl: 7, [198, 19, 255, 254])
    // An EDNS OPT record in the additional section.
    + rr([0], type: 41, ttl: 0, rrClass: 1232, [])

/// The answers come before the CNAME that leads to them, and the chain is listed backwards.
let outOfOrder: [UInt8] = {
    var m = dnsHeader(an: 3) + question(wireName("a.example"), type: typeA)
    m += rr(wireName("c.example"), type: typeA, [198, 18, 1, 3])
    m += rr(wireName("b.example"), type: typeCNAME, wireName("c.example"))
    m += rr(pointer(12), type: typeCNAME, wireName("b.example"))
    return m
}()

/// Replies captured with tcpdump from dnsmasq 2.90 (Debian, `--local-ttl=300`,
/// `--cname=www.Zoom.us,zoom.cdn.example.net`,
/// `--cname=zoom.cdn.example.net,edge7.cdn.example.net`,
/// `--host-record=edge7.cdn.example.net,198.18.0.1,fd00::7`,
/// `--host-record=dual.example,198.19.0.2,fd00::2`) answering dig 9.18 in a
/// network namespace, 2026-11-26: `www.zoom.us A` (UDP), `WWW.ZOOM.US AAAA +tcp`
/// (the TCP segment, length prefix included), `dual.example AAAA` (UDP).
/// Each carries an EDNS OPT record.
let dnsmasqChainA = hex(
    "885a8580000100030000000103777777047a6f6f6d0275730000010001c00c000500010000012c0016047a6f6f6d0363646e076578616d706c65036e657400c029000500010000012c00170565646765370363646e076578616d706c65036e657400c04b000100010000012c0004c612000100002904d0000000000000"
)
let dnsmasqChainAAAATCP = hex(
    "008927398580000100030000000103575757045a4f4f4d02555300001c0001c00c000500010000012c0016047a6f6f6d0363646e076578616d706c65036e657400c029000500010000012c00170565646765370363646e076578616d706c65036e657400c04b001c00010000012c0010fd00000000000000000000000000000700002904d0000000000000"
)
let dnsmasqDualAAAA = hex(
    "caf785800001000100000001046475616c076578616d706c6500001c0001c00c001c00010000012c0010fd00000000000000000000000000000200002904d0000000000000"
)

struct ValidReply: Sendable, CustomTestStringConvertible {
    var label: String
    var id: UInt16 = 0x1234
    var bytes: [UInt8]
    var question: String
    var chain: [String]
    var addresses: [String]
    var ttls: [UInt32]
    var testDescription: String { label }
}

let validReplies: [ValidReply] = [
    ValidReply(
        label: "simpleA", bytes: simpleA, question: "example.com", chain: [], addresses: ["93.184.216.34"],
        ttls: [3600]),
    ValidReply(
        label: "cnameChain", bytes: cnameChain, question: "www.zoom.us",
        chain: ["zoom.cdn.example.net", "edge7.cdn.example.net"], addresses: ["198.18.0.1", "198.18.0.2"],
        ttls: [20, 30]),
    ValidReply(
        label: "dualStack", bytes: dualStack, question: "dual.example", chain: [],
        addresses: ["fd00::42", "198.19.255.254"],
        ttls: [0, 7]),
    ValidReply(
        label: "outOfOrder", bytes: outOfOrder, question: "a.example", chain: ["b.example", "c.example"],
        addresses: ["198.18.1.3"], ttls: [300]),
    ValidReply(
        label: "dnsmasqChainA", id: 0x885A, bytes: dnsmasqChainA, question: "www.zoom.us",
        chain: ["zoom.cdn.example.net", "edge7.cdn.example.net"], addresses: ["198.18.0.1"], ttls: [300]),
    ValidReply(
        label: "dnsmasqChainAAAA (TCP, prefix removed)", id: 0x2739,
        bytes: Array(dnsmasqChainAAAATCP.dropFirst(2)),
        question: "www.zoom.us", chain: ["zoom.cdn.example.net", "edge7.cdn.example.net"],
        addresses: ["fd00::7"],
        ttls: [300]),
    ValidReply(
        label: "dnsmasqDualAAAA", id: 0xCAF7, bytes: dnsmasqDualAAAA, question: "dual.example", chain: [],
        addresses: ["fd00::2"], ttls: [300]),
]

@Suite struct DNSReplyTests {
    @Test(arguments: validReplies)
    func validReply(_ v: ValidReply) throws {
        let reply = try DNSReplyParser.parse(v.bytes).get()
        #expect(reply.id == v.id)
        #expect(reply.rcode == 0)
        #expect(reply.question.description == v.question)
        #expect(reply.chain.map(\.description) == v.chain)
        #expect(reply.finalName.description == (v.chain.last ?? v.question))
        #expect(reply.addresses.map(\.address.description) == v.addresses)
        #expect(reply.addresses.map(\.ttl) == v.ttls)
        #expect(reply.answersSkipped == 0)
    }

    /// Every proper prefix of a valid reply is an error, never a trap and never a partial answer.
    @Test(arguments: validReplies)
    func truncatedAtEveryOffset(_ v: ValidReply) {
        for n in 0..<v.bytes.count {
            let r = DNSReplyParser.parse(Array(v.bytes[0..<n]))
            #expect(r == .failure(.truncated), "cut at \(n) of \(v.bytes.count)")
        }
    }

    /// Over TCP: several length-prefixed messages in one segment, then one cut short.
    @Test(arguments: validReplies)
    func tcpSegments(_ v: ValidReply) throws {
        func framed(_ m: [UInt8]) -> [UInt8] { [UInt8(m.count >> 8), UInt8(m.count & 0xFF)] + m }
        let segment = framed(v.bytes) + framed(simpleA) + framed(v.bytes)
        let results = DNSReplyParser.parseTCP(segment)
        #expect(results.count == 3)
        #expect(results.allSatisfy { (try? $0.get()) != nil })
        #expect(try results[1].get().addresses.map(\.address.description) == ["93.184.216.34"])
        // Cut anywhere inside the second message: the first parses, the rest is a length error.
        let first = framed(v.bytes).count
        for cut in first..<(first + framed(simpleA).count) {
            let r = DNSReplyParser.parseTCP(Array(segment[0..<cut]))
            #expect(r.count == (cut == first ? 1 : 2), "cut at \(cut)")
            if cut > first { #expect(r.last == .failure(.tcpLength)) }
        }
    }

    /// The captured TCP segment as it came off the wire.
    @Test func dnsmasqTCPSegment() throws {
        let results = DNSReplyParser.parseTCP(dnsmasqChainAAAATCP)
        #expect(results.count == 1)
        let reply = try #require(results.first).get()
        #expect(reply.questionType == 28)
        #expect(reply.finalName.description == "edge7.cdn.example.net")
        #expect(reply.addresses == [DNSAddressAnswer(address: IPAddress(parsing: "fd00::7")!, ttl: 300)])
    }

    @Test func caseInsensitiveOwnerMatch() throws {
        let m =
            dnsHeader(an: 1) + question(wireName("WWW.Example.COM"), type: typeA)
            + rr(wireName("www.example.com"), type: typeA, [198, 18, 0, 7])
        let reply = try DNSReplyParser.parse(m).get()
        #expect(reply.question.description == "www.example.com")
        #expect(reply.addresses.map(\.address.description) == ["198.18.0.7"])
    }

    /// Nothing for a name the question does not lead to, even in a well-formed reply.
    @Test func unrelatedAnswersIgnored() throws {
        let m =
            dnsHeader(an: 2) + question(wireName("asked.example"), type: typeA)
            + rr(wireName("victim.example"), type: typeA, [198, 18, 6, 6])
            + rr(wireName("asked.example.evil"), type: typeA, [198, 18, 6, 7])
        let reply = try DNSReplyParser.parse(m).get()
        #expect(reply.addresses.isEmpty)
        #expect(reply.chain.isEmpty)
    }

    /// a → b → a: the chain stops at the loop; no trap, no addresses.
    @Test func cnameLoop() throws {
        var m = dnsHeader(an: 3) + question(wireName("a.example"), type: typeA)
        m += rr(pointer(12), type: typeCNAME, wireName("b.example"))
        m += rr(wireName("b.example"), type: typeCNAME, pointer(12))
        m += rr(wireName("b.example"), type: typeCNAME, wireName("B.example"))
        let reply = try DNSReplyParser.parse(m).get()
        #expect(reply.chain.map(\.description) == ["b.example"])
        #expect(reply.addresses.isEmpty)
    }

    /// A chain of 20 CNAMEs is followed for `maxChain` (16) steps; the 16th
    /// target has no address, so none is learned.
    @Test func longChainStops() throws {
        var m = dnsHeader(an: 21) + question(wireName("c0.example"), type: typeA)
        for k in 0..<20 { m += rr(wireName("c\(k).example"), type: typeCNAME, wireName("c\(k + 1).example")) }
        m += rr(wireName("c20.example"), type: typeA, [198, 18, 2, 20])
        let reply = try DNSReplyParser.parse(m).get()
        #expect(reply.chain.count == DNSReplyParser.maxChain)
        #expect(reply.finalName.description == "c16.example")
        #expect(reply.addresses.isEmpty)
        // With 16 links the address is reached.
        var short = dnsHeader(an: 17) + question(wireName("c0.example"), type: typeA)
        for k in 0..<16 {
            short += rr(wireName("c\(k).example"), type: typeCNAME, wireName("c\(k + 1).example"))
        }
        short += rr(wireName("c16.example"), type: typeA, [198, 18, 2, 16])
        #expect(try DNSReplyParser.parse(short).get().addresses.map(\.address.description) == ["198.18.2.16"])
    }

    /// NXDOMAIN with an SOA in the authority section: no addresses, rcode kept.
    @Test func nxdomain() throws {
        let soa = wireName("ns.example") + wireName("host.example") + [UInt8](repeating: 0, count: 20)
        let m =
            dnsHeader(flags: 0x8183, an: 0, ns: 1) + question(wireName("nope.example"), type: typeA)
            + rr(wireName("example"), type: 6, soa)
        let reply = try DNSReplyParser.parse(m).get()
        #expect(reply.rcode == 3)
        #expect(reply.addresses.isEmpty)
    }

    static let malformed: [(String, [UInt8], DNSReplyError)] = {
        let q = question(wireName("x.example"), type: typeA)
        return [
            ("query, not a reply", dnsHeader(flags: 0x0100, an: 0) + q, .notAReply),
            ("two questions", dnsHeader(qd: 2, an: 0) + q + q, .unsupported),
            ("opcode STATUS", dnsHeader(flags: 0x9000, an: 0) + q, .unsupported),
            ("empty", [], .truncated),
            (
                "forward pointer in question",
                dnsHeader(an: 0) + pointer(20) + [0, 1, 0, 1] + [0, 0, 0, 0, 0, 0], .forwardPointer
            ),
            ("pointer to itself", dnsHeader(an: 0) + pointer(12) + [0, 1, 0, 1], .forwardPointer),
            // 12: "a" then a pointer back to 12 (the start of its own run): a loop.
            ("pointer loop", dnsHeader(an: 0) + [1, 0x61] + pointer(12) + [0, 1, 0, 1], .pointerLoop),
            // 27: "c" then a pointer to 31, where a pointer leads back to 27: the
            // cycle needs one jump that is not backwards, and that jump is refused.
            (
                "two-pointer cycle",
                dnsHeader(an: 1) + q + [1, 0x63] + pointer(31) + pointer(27) + [
                    0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4,
                ],
                .forwardPointer
            ),
            // The answer's owner: "b", "c", then a pointer back into its own labels.
            (
                "pointer into its own name",
                dnsHeader(an: 1) + q + [1, 0x62, 1, 0x63] + pointer(29) + [
                    0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4,
                ],
                .pointerLoop
            ),
            ("label type 0x40", dnsHeader(an: 0) + [0x41, 0x61, 0] + [0, 1, 0, 1], .badLabelType),
            ("label type 0x80", dnsHeader(an: 0) + [0x81, 0x61, 0] + [0, 1, 0, 1], .badLabelType),
            (
                "name of 321 bytes",
                dnsHeader(an: 0) + (0..<5).flatMap { _ in [63] + [UInt8](repeating: 0x61, count: 63) } + [
                    0, 0, 1, 0, 1,
                ],
                .nameTooLong
            ),
            (
                "name too long through pointers",
                dnsHeader(an: 1) + [63] + [UInt8](repeating: 0x61, count: 63) + [63]
                    + [UInt8](repeating: 0x62, count: 63)
                    + [0, 0, 1, 0, 1]
                    + [63] + [UInt8](repeating: 0x63, count: 63) + [63] + [UInt8](repeating: 0x64, count: 63)
                    + pointer(12) + [0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4],
                .nameTooLong
            ),
            (
                "A with 5 bytes", dnsHeader(an: 1) + q + rr(pointer(12), type: typeA, [1, 2, 3, 4, 5]),
                .badRecordData
            ),
            (
                "AAAA with 4 bytes", dnsHeader(an: 1) + q + rr(pointer(12), type: typeAAAA, [1, 2, 3, 4]),
                .badRecordData
            ),
            (
                "CNAME data longer than its name",
                dnsHeader(an: 1) + q + rr(pointer(12), type: typeCNAME, wireName("y.example") + [0]),
                .badRecordData
            ),
            (
                "CNAME name past its data",
                dnsHeader(an: 1) + q + rr(pointer(12), type: typeCNAME, [1, 0x79]) + [0], .badRecordData
            ),
            (
                "answer count 65535, one record",
                dnsHeader(an: 65535) + q + rr(pointer(12), type: typeA, [1, 2, 3, 4]), .truncated
            ),
            (
                "additional count past the end",
                dnsHeader(an: 1, ar: 3) + q + rr(pointer(12), type: typeA, [1, 2, 3, 4]), .truncated
            ),
        ]
    }()

    @Test(arguments: malformed)
    func malformedReply(_ label: String, _ bytes: [UInt8], _ error: DNSReplyError) {
        #expect(DNSReplyParser.parse(bytes) == .failure(error), "\(label)")
        #expect(error.isMalformed == (error != .notAReply && error != .unsupported))
    }

    /// More answers than the cap: the first `cap` are read, the rest counted as skipped.
    @Test(arguments: [(100, 100, 64), (70, 65535, 64), (10, 10, 4), (3, 3, 0)])
    func answerCap(_ records: Int, _ count: Int, _ cap: Int) throws {
        var m = dnsHeader(an: count) + question(wireName("many.example"), type: typeA)
        for k in 0..<records { m += rr(pointer(12), type: typeA, [198, 18, UInt8(k >> 8), UInt8(k & 0xFF)]) }
        let reply = try DNSReplyParser.parse(m, maxAnswers: cap).get()
        #expect(reply.addresses.count == min(records, cap))
        #expect(reply.answersSkipped == count - min(count, cap))
        #expect(
            reply.addresses.last?.address.description
                == (cap == 0 ? nil : "198.18.0.\(min(records, cap) - 1)"))
    }

    @Test func nameDescriptionEscapes() throws {
        // A label holding a dot stays one label and prints escaped, as dig does.
        let m =
            dnsHeader(an: 0) + [5] + Array("a.b\\C".utf8) + [1, 0x20] + wireName("example") + [0, 1, 0, 1]
        let reply = try DNSReplyParser.parse(m).get()
        #expect(reply.question.description == "a\\046b\\092c.\\032.example")
        #expect(reply.question.labelCount == 3)
        #expect(
            try DNSReplyParser.parse(dnsHeader(an: 0) + [0, 0, 1, 0, 1]).get().question.description == ".")
    }

    @Test func errorLabels() {
        #expect(Set(DNSReplyError.allCases.map(\.description)).count == DNSReplyError.allCases.count)
    }
}

@Suite struct DNSNamePatternTests {
    /// Names as the parser returns them (folded wire form).
    static func name(_ text: String) -> DNSName {
        let m = dnsHeader(an: 0) + question(wireName(text), type: typeA)
        return try! DNSReplyParser.parse(m).get().question
    }

    @Test(arguments: [
        ("*.zoom.us", "a.zoom.us", true),
        ("*.zoom.us", "A.B.Zoom.US", true),
        ("*.zoom.us", "zoom.us", false),
        ("*.zoom.us", "notzoom.us", false),
        ("*.zoom.us", "zoom.us.evil", false),
        ("*.Zoom.US.", "x.zoom.us", true),
        ("zoom.us", "zoom.us", true),
        ("zoom.us", "ZOOM.us", true),
        ("zoom.us", "a.zoom.us", false),
        ("teams.microsoft.com", "teams.microsoft.co", false),
        ("*.xn--bcher-kva.example", "www.xn--bcher-kva.example", true),
        ("xn--bcher-kva.example", "XN--BCHER-KVA.example", true),
        ("*.us", "zoom.us", true),
    ])
    func matches(_ pattern: String, _ candidate: String, _ expected: Bool) throws {
        let p = try DNSNamePattern(parsing: pattern)
        #expect(p.matches(Self.name(candidate)) == expected)
    }

    /// A label with a `.` byte inside cannot pose as two labels.
    @Test func labelWithDotIsOneLabel() throws {
        let m = dnsHeader(an: 0) + [7] + Array("a.zoom".utf8) + [1] + wireName("us") + [0, 1, 0, 1]
        let n = try DNSReplyParser.parse(m).get().question
        #expect(!(try DNSNamePattern(parsing: "*.zoom.us")).matches(n))
    }

    @Test(arguments: [
        "", "*.", ".", "a..b", "*a.b", "a.*.b", "**.b", "a b.c", "bücher.example", "a\\046b.example",
        String(repeating: "a", count: 64) + ".x",
    ])
    func rejected(_ text: String) {
        #expect(throws: DNSPatternError.self) { try DNSNamePattern(parsing: text) }
        do {
            _ = try DNSNamePattern(parsing: text)
        } catch {
            #expect(error.description.contains("'\(text)'"))
            #expect(!error.description.contains("\n"))
        }
    }

    @Test func description() throws {
        #expect(try DNSNamePattern(parsing: "*.Zoom.US.").description == "*.zoom.us")
        #expect(try DNSNamePattern(parsing: "teams.microsoft.com").description == "teams.microsoft.com")
    }
}
