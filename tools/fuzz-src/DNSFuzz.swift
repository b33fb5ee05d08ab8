// libFuzzer entry point over DNSReplyParser and DNSNamePattern. Compiled by
// tools/fuzz-dns together with the QoSMapCore and QoSMapPacket sources
// (not a SwiftPM target: -sanitize=fuzzer would break `swift build`).

import QoSMapCore
import QoSMapPacket

/// Checks what every parsed reply promises.
func check(_ reply: DNSReply, cap: Int) {
    precondition(reply.addresses.count <= cap, "more addresses than the cap")
    precondition(
        reply.chain.count <= min(cap, DNSReplyParser.maxChain), "chain longer than the records or maxChain")
    precondition(reply.answersSkipped >= 0)
    for n in [reply.question] + reply.chain {
        let w = n.wire
        precondition(w.count <= 255 && w.last == 0, "name too long or unterminated")
        var i = 0
        while w[i] != 0 {
            precondition(w[i] <= 63, "label longer than 63")
            for b in w[(i + 1)...(i + Int(w[i]))] { precondition(!(65...90).contains(b), "upper case kept") }
            i += Int(w[i]) + 1
        }
        precondition(i == w.count - 1, "bytes after the root label")
        // A name matches itself as an exact pattern, and `*.` its parent's pattern.
        if let p = try? DNSNamePattern(parsing: n.description) {
            precondition(p.matches(n), "\(n) does not match its own pattern")
        }
    }
    for a in reply.addresses { precondition(a.ttl < 0x8000_0000, "TTL with the top bit set") }
    // The chain never revisits a name nor returns to the question.
    precondition(
        Set(reply.chain).count == reply.chain.count && !reply.chain.contains(reply.question), "chain loops")
}

/// libFuzzer calls this with each input; a trap (precondition) is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    // First byte: bit 7 = TCP framing, low bits = answer cap (0...63, or the default).
    let selector = data[0]
    let cap = selector & 0x40 != 0 ? Int(selector & 0x3F) : DNSReplyParser.defaultMaxAnswers
    let count = size - 1
    // An exact-size heap copy so AddressSanitizer catches a read past the end.
    let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 1)
    defer { buf.deallocate() }
    let message = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buf)[0..<count])
    if count > 0 { buf.baseAddress!.copyMemory(from: data + 1, byteCount: count) }
    if selector & 0x80 != 0 {
        var n = 0
        DNSReplyParser.parseTCP(message, maxAnswers: cap) { r in
            n += 1
            if case .success(let reply) = r { check(reply, cap: cap) }
        }
        precondition(n <= count / 2 + 1, "more TCP messages than length prefixes")
    } else {
        let r = DNSReplyParser.parse(message, maxAnswers: cap)
        // Deterministic, and the same message framed for TCP reads the same.
        precondition(DNSReplyParser.parse(message, maxAnswers: cap) == r)
        if count <= 0xFFFF {
            let framed = [UInt8(count >> 8), UInt8(count & 0xFF)] + Array(message)
            precondition(
                DNSReplyParser.parseTCP(framed, maxAnswers: cap) == [r], "TCP framing changes the result")
        }
        if case .success(let reply) = r {
            check(reply, cap: cap)
        }
    }
    return 0
}
