import QoSMapCore

// A DNS reply reader for learning name → address from replies that cross the
// router (issue 24). Everything in a reply is attacker-controlled (a spoofed
// reply needs no query), so every read is bounds-checked, compression pointers
// must go strictly backwards, and the work per reply is bounded by the answer
// cap. It allocates only the names and addresses it returns.

/// An address from an A or AAAA record of the reply's final name.
public struct DNSAddressAnswer: Hashable, Sendable {
    /// The address (IPv4 from A, IPv6 from AAAA).
    public var address: IPAddress
    /// The record's TTL in seconds; a TTL with the top bit set counts as 0 (RFC 2181 §8).
    public var ttl: UInt32

    /// An answer.
    public init(address: IPAddress, ttl: UInt32) {
        self.address = address
        self.ttl = ttl
    }
}

/// What a parsed DNS reply says about its question.
public struct DNSReply: Hashable, Sendable {
    /// The message ID (to pair with a query, for callers that track queries).
    public var id: UInt16
    /// The response code (RCODE, 0 = NOERROR, 3 = NXDOMAIN).
    public var rcode: UInt8
    /// The question name.
    public var question: DNSName
    /// The question type (1 = A, 28 = AAAA).
    public var questionType: UInt16
    /// The CNAME targets followed from the question name, in order; the last
    /// one is the final name. Empty when the question name has no CNAME.
    public var chain: [DNSName]
    /// The A and AAAA records owned by the final name, in message order;
    /// records for any other name are ignored.
    public var addresses: [DNSAddressAnswer]
    /// The answer records not examined because the reply has more than the cap.
    public var answersSkipped: Int

    /// The name the addresses belong to: the end of the CNAME chain, or the question.
    public var finalName: DNSName { chain.last ?? question }
}

/// Why a DNS message was not read as a reply; one case per counter label.
public enum DNSReplyError: Error, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// The message is a query (QR = 0), not a reply: not malformed, just not learned from.
    case notAReply
    /// The opcode is not QUERY or the question count is not 1: not learned from.
    case unsupported
    /// The message ends inside the header, a name, a record or its data.
    case truncated
    /// A label length byte uses the reserved 0x40 or 0x80 forms.
    case badLabelType
    /// A name is longer than 255 bytes in wire form.
    case nameTooLong
    /// A compression pointer points at or after itself.
    case forwardPointer
    /// A compression pointer points into the part of the name already walked (a loop).
    case pointerLoop
    /// An A record's data is not 4 bytes, an AAAA record's not 16, or a
    /// CNAME's name does not end where its data ends.
    case badRecordData
    /// A TCP DNS message's 2-byte length prefix runs past the segment.
    case tcpLength

    /// The counter label, as in `qosmapd_dns_replies_malformed_total{reason}`.
    public var description: String {
        switch self {
        case .notAReply: "not-a-reply"
        case .unsupported: "unsupported"
        case .truncated: "truncated"
        case .badLabelType: "bad-label-type"
        case .nameTooLong: "name-too-long"
        case .forwardPointer: "forward-pointer"
        case .pointerLoop: "pointer-loop"
        case .badRecordData: "bad-record-data"
        case .tcpLength: "tcp-length"
        }
    }

    /// Whether the message is broken (counted as malformed), as opposed to a
    /// well-formed message that is simply not learned from.
    public var isMalformed: Bool { self != .notAReply && self != .unsupported }
}

/// Reads DNS replies: the question, the CNAME chain from it, and the final
/// name's A/AAAA records.
public enum DNSReplyParser {
    /// The default answer cap: replies past it are read up to it and say how
    /// many records were skipped. Real replies carry a handful; this bounds the
    /// work a hostile reply with ANCOUNT 65535 can cause.
    public static let defaultMaxAnswers = 64

    /// The longest CNAME chain followed: each step rescans the answers, so the
    /// work is at most this times the answer cap. Resolvers stop near here too
    /// (BIND follows 16, Unbound 11 by default).
    public static let maxChain = 16

    static let typeA: UInt16 = 1
    static let typeCNAME: UInt16 = 5
    static let typeAAAA: UInt16 = 28
    static let classIN: UInt16 = 1

    /// Parses a DNS message carried in UDP (the whole UDP payload).
    public static func parse(
        _ message: UnsafeRawBufferPointer, maxAnswers: Int = defaultMaxAnswers
    ) -> Result<DNSReply, DNSReplyError> {
        var r = Reader(message)
        do throws(DNSReplyError) {
            return .success(try r.reply(maxAnswers: max(0, maxAnswers)))
        } catch {
            return .failure(error)
        }
    }

    /// Parses a DNS message carried in UDP from an array.
    public static func parse(_ message: [UInt8], maxAnswers: Int = defaultMaxAnswers) -> Result<
        DNSReply, DNSReplyError
    > {
        message.withUnsafeBytes { parse($0, maxAnswers: maxAnswers) }
    }

    /// Parses the DNS messages in a TCP segment's payload: each one has a
    /// 2-byte length prefix (RFC 1035 §4.2.2), several may share a segment.
    /// A segment that does not start at a message boundary or cuts a message
    /// reports `.tcpLength` for the rest (segments are not reassembled), and
    /// nothing after it is read. Calls `body` once per message.
    public static func parseTCP(
        _ payload: UnsafeRawBufferPointer, maxAnswers: Int = defaultMaxAnswers,
        _ body: (Result<DNSReply, DNSReplyError>) -> Void
    ) {
        var i = 0
        while i < payload.count {
            guard payload.count - i >= 2 else {
                body(.failure(.tcpLength))
                return
            }
            let len = Int(payload[i]) << 8 | Int(payload[i + 1])
            guard len <= payload.count - i - 2 else {
                body(.failure(.tcpLength))
                return
            }
            let msg = UnsafeRawBufferPointer(rebasing: payload[(i + 2)..<(i + 2 + len)])
            body(parse(msg, maxAnswers: maxAnswers))
            i += 2 + len
        }
    }

    /// Parses the DNS messages of a TCP segment's payload held in an array.
    public static func parseTCP(
        _ payload: [UInt8], maxAnswers: Int = defaultMaxAnswers
    ) -> [Result<DNSReply, DNSReplyError>] {
        var out: [Result<DNSReply, DNSReplyError>] = []
        payload.withUnsafeBytes { parseTCP($0, maxAnswers: maxAnswers) { out.append($0) } }
        return out
    }
}

/// One answer record's fixed fields, with offsets into the message.
private struct Record {
    var owner: Int
    var type: UInt16
    var rrClass: UInt16
    var ttl: UInt32
    var data: Int
    var dataLength: Int
}

private struct Reader {
    let m: UnsafeRawBufferPointer

    init(_ m: UnsafeRawBufferPointer) { self.m = m }

    func u16(_ i: Int) throws(DNSReplyError) -> UInt16 {
        guard i >= 0, i <= m.count - 2 else { throw .truncated }
        return UInt16(m[i]) << 8 | UInt16(m[i + 1])
    }

    func u32(_ i: Int) throws(DNSReplyError) -> UInt32 {
        UInt32(try u16(i)) << 16 | UInt32(try u16(i + 2))
    }

    /// Walks the name at `start`; returns the offset just past it in the
    /// message (after its first pointer, or its root label). Each pointer must
    /// point before the start of the run of labels that holds it, so offsets
    /// strictly decrease at every jump and the walk ends.
    func skipName(_ start: Int) throws(DNSReplyError) -> Int {
        var i = start
        var segment = start
        var end = -1
        var length = 0
        while true {
            guard i < m.count else { throw .truncated }
            let b = m[i]
            switch b & 0xC0 {
            case 0x00:
                length += Int(b) + 1
                guard length <= 255 else { throw .nameTooLong }
                if b == 0 { return end >= 0 ? end : i + 1 }
                i += Int(b) + 1
            case 0xC0:
                guard i + 1 < m.count else { throw .truncated }
                let target = Int(b & 0x3F) << 8 | Int(m[i + 1])
                guard target < i else { throw .forwardPointer }
                guard target < segment else { throw .pointerLoop }
                if end < 0 { end = i + 2 }
                i = target
                segment = target
            default:
                throw .badLabelType
            }
        }
    }

    /// The name at `start` (already walked by `skipName`), uncompressed and folded.
    func name(_ start: Int) throws(DNSReplyError) -> DNSName {
        var out: [UInt8] = []
        var i = start
        var n = 0
        while n < 256 {
            n += 1
            guard i < m.count else { throw .truncated }
            let b = m[i]
            if b & 0xC0 == 0xC0 {
                guard i + 1 < m.count else { throw .truncated }
                i = Int(b & 0x3F) << 8 | Int(m[i + 1])
                continue
            }
            guard b & 0xC0 == 0 else { throw .badLabelType }
            let len = Int(b)
            guard i + 1 + len <= m.count, out.count + len + 1 <= 255 else { throw .truncated }
            out.append(b)
            if len == 0 { return DNSName(uncheckedWire: out) }
            for j in (i + 1)...(i + len) { out.append(foldCase(m[j])) }
            i += len + 1
        }
        throw .pointerLoop
    }

    /// Whether the names at `a` and `b` (both already walked) are equal, ignoring ASCII case.
    func sameName(_ a: Int, _ b: Int) -> Bool {
        var a = a
        var b = b
        // Bounded: each side moves forward or jumps strictly backwards, at
        // most 255 bytes of labels and 128 jumps each.
        for _ in 0..<1024 {
            guard let x = resolve(&a), let y = resolve(&b) else { return false }
            let la = Int(m[x])
            guard la == Int(m[y]), x + la < m.count, y + la < m.count else { return false }
            if la == 0 { return true }
            for k in 1...la where foldCase(m[x + k]) != foldCase(m[y + k]) { return false }
            a = x + la + 1
            b = y + la + 1
        }
        return false
    }

    /// Follows pointers from `i` to the next length byte.
    private func resolve(_ i: inout Int) -> Int? {
        for _ in 0..<128 {
            guard i >= 0, i < m.count else { return nil }
            let b = m[i]
            if b & 0xC0 == 0 { return i }
            guard b & 0xC0 == 0xC0, i + 1 < m.count else { return nil }
            i = Int(b & 0x3F) << 8 | Int(m[i + 1])
        }
        return nil
    }

    /// The record at `i`; returns it and the offset of the next record.
    func record(_ i: Int) throws(DNSReplyError) -> (Record, Int) {
        let fixed = try skipName(i)
        let type = try u16(fixed)
        let rrClass = try u16(fixed + 2)
        var ttl = try u32(fixed + 4)
        if ttl & 0x8000_0000 != 0 { ttl = 0 }
        let len = Int(try u16(fixed + 8))
        let data = fixed + 10
        guard len <= m.count - data else { throw .truncated }
        let r = Record(owner: i, type: type, rrClass: rrClass, ttl: ttl, data: data, dataLength: len)
        if rrClass == DNSReplyParser.classIN {
            switch type {
            case DNSReplyParser.typeA: guard len == 4 else { throw .badRecordData }
            case DNSReplyParser.typeAAAA: guard len == 16 else { throw .badRecordData }
            case DNSReplyParser.typeCNAME:
                guard try skipName(data) == data + len else { throw .badRecordData }
            default: break
            }
        }
        return (r, data + len)
    }

    mutating func reply(maxAnswers: Int) throws(DNSReplyError) -> DNSReply {
        guard m.count >= 12 else { throw .truncated }
        let id = try u16(0)
        let flags = try u16(2)
        guard flags & 0x8000 != 0 else { throw .notAReply }
        guard (flags >> 11) & 0xF == 0, try u16(4) == 1 else { throw .unsupported }
        let answerCount = Int(try u16(6))
        let qname = 12
        let qEnd = try skipName(qname)
        let qtype = try u16(qEnd)
        _ = try u16(qEnd + 2)
        let first = qEnd + 4
        let examined = min(answerCount, maxAnswers)

        // Pass 1: every examined record is well formed (so later passes cannot fail).
        var i = first
        for _ in 0..<examined { i = try record(i).1 }
        // The authority and additional records are not used, but a reply cut
        // inside them is still malformed; they share the cap with the answers.
        if examined == answerCount {
            let rest = Int(try u16(8)) + Int(try u16(10))
            for _ in 0..<min(rest, maxAnswers - examined) { i = try record(i).1 }
        }

        // Pass 2: follow CNAMEs from the question name, at most `maxChain`
        // steps; a CNAME loop stops where it would revisit a name.
        let question = try name(qname)
        var chain: [DNSName] = []
        var current = qname
        var steps = 0
        following: while steps < min(examined, DNSReplyParser.maxChain) {
            steps += 1
            i = first
            for _ in 0..<examined {
                let (r, next) = try record(i)
                i = next
                if r.type == DNSReplyParser.typeCNAME, r.rrClass == DNSReplyParser.classIN,
                    sameName(r.owner, current)
                {
                    let target = try name(r.data)
                    if target == question || chain.contains(target) { break following }
                    chain.append(target)
                    current = r.data
                    continue following
                }
            }
            break
        }

        // Pass 3: the final name's addresses.
        var addresses: [DNSAddressAnswer] = []
        i = first
        for _ in 0..<examined {
            let (r, next) = try record(i)
            i = next
            guard r.rrClass == DNSReplyParser.classIN,
                r.type == DNSReplyParser.typeA || r.type == DNSReplyParser.typeAAAA,
                sameName(r.owner, current)
            else { continue }
            let address: IPAddress
            if r.type == DNSReplyParser.typeA {
                address = IPAddress(ipv4: try u32(r.data))
            } else {
                var high: UInt64 = 0
                var low: UInt64 = 0
                for k in 0..<8 {
                    high = high << 8 | UInt64(m[r.data + k])
                    low = low << 8 | UInt64(m[r.data + 8 + k])
                }
                address = IPAddress(ipv6: true, high: high, low: low)
            }
            addresses.append(DNSAddressAnswer(address: address, ttl: r.ttl))
        }

        return DNSReply(
            id: id, rcode: UInt8(flags & 0xF), question: question, questionType: qtype, chain: chain,
            addresses: addresses, answersSkipped: answerCount - examined)
    }
}

/// ASCII upper case to lower case (RFC 4343); every other byte unchanged
/// (a copy of QoSMapCore's, inlined here on the parser's byte loop).
@inline(__always)
func foldCase(_ b: UInt8) -> UInt8 {
    b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z") ? b | 0x20 : b
}
