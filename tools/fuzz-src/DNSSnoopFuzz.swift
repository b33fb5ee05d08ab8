// libFuzzer entry point over the snooping path: frames -> DNSSnooper (query
// tracker, TCP reassembly) -> DNSReplyParser. Compiled by tools/fuzz-dns-snoop
// with the QoSMapCore and QoSMapPacket sources (not a SwiftPM target).
//
// An input is a sequence of records, each one frame fed to one snooper with
// small limits (so the ring, the stream table and the stream buffer fill):
//   byte 0: bit 0 IPv6, bit 1 TCP, bit 2 server->client, bit 3 raw (the
//           payload is the whole frame), bit 4 raw as Ethernet, bits 5-7 the
//           client port (40000 + n)
//   byte 1: TCP flags
//   byte 2: signed offset added to the TCP sequence number the harness expects
//   byte 3: time advance, in 100 ms steps (a multiple of 7 also runs expire)
//   bytes 4-5: payload length (cut to what is left), then the payload
//           (UDP payload, TCP payload, or the raw frame).

import QoSMapCore
import QoSMapPacket

let client4 = IPAddress(ipv4: 0xC612_0001)
let server4 = IPAddress(ipv4: 0xC613_0035)
let client6 = IPAddress(ipv6: true, high: 0xFD00_0000_0000_0000, low: 1)
let server6 = IPAddress(ipv6: true, high: 0xFD00_0000_0000_0000, low: 0x53)

func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }

func addressBytes(_ a: IPAddress) -> [UInt8] {
    if !a.isIPv6 { return (0..<4).map { UInt8(truncatingIfNeeded: a.low >> (24 - 8 * $0)) } }
    return (0..<8).map { UInt8(truncatingIfNeeded: a.high >> (56 - 8 * $0)) }
        + (0..<8).map { UInt8(truncatingIfNeeded: a.low >> (56 - 8 * $0)) }
}

func ipPacket(_ v6: Bool, _ src: IPAddress, _ dst: IPAddress, _ proto: UInt8, _ l4: [UInt8]) -> [UInt8] {
    if !v6 {
        return [0x45, 0] + be16(20 + l4.count) + [0, 1, 0x40, 0, 64, proto, 0, 0] + addressBytes(src)
            + addressBytes(dst) + l4
    }
    return [0x60, 0, 0, 0] + be16(l4.count) + [proto, 64] + addressBytes(src) + addressBytes(dst) + l4
}

/// libFuzzer calls this with each input; a trap (precondition) is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var limits = DNSSnoopLimits()
    limits.maxQueries = 8
    limits.maxStreams = 3
    limits.maxStreamBuffer = 600
    limits.queryTimeout = 2_000_000_000
    limits.streamTimeout = 3_000_000_000
    var snooper = DNSSnooper(limits: limits)
    var now: UInt64 = 1
    var nextSeq: [Int: UInt32] = [:]  // per direction and client port
    // (transport, client address, id) of every query-direction frame fed, the
    // oracle for what may be delivered.
    var asked: Set<[UInt8]> = []
    var delivered = 0
    var i = 0
    while size - i >= 6 {
        let kind = data[i]
        let flags = data[i + 1]
        let seqOffset = Int8(bitPattern: data[i + 2])
        now &+= UInt64(data[i + 3]) &* 100_000_000
        let length = min(Int(data[i + 4]) << 8 | Int(data[i + 5]), size - i - 6)
        let payload = Array(UnsafeBufferPointer(start: data + i + 6, count: length))
        i += 6 + length
        let v6 = kind & 1 != 0
        let tcp = kind & 2 != 0
        let toClient = kind & 4 != 0
        let port = 40000 + Int(kind >> 5)
        let interface = DNSSnoopInterface(index: 1, name: "in")
        var frame: [UInt8]
        var format = PacketFormat.ip
        if kind & 8 != 0 {
            frame = payload
            if kind & 16 != 0 { format = .ethernet }
        } else {
            let (c, s) = v6 ? (client6, server6) : (client4, server4)
            let (src, dst) = toClient ? (s, c) : (c, s)
            let (sport, dport) = toClient ? (53, port) : (port, 53)
            if tcp {
                let key = port << 1 | (toClient ? 1 : 0)
                let expected = nextSeq[key] ?? 1000
                let seq = expected &+ UInt32(bitPattern: Int32(seqOffset))
                nextSeq[key] = seq &+ UInt32(payload.count) &+ (flags & 2 != 0 ? 1 : 0)
                let l4 =
                    be16(sport) + be16(dport) + [
                        UInt8(seq >> 24), UInt8(seq >> 16 & 0xFF), UInt8(seq >> 8 & 0xFF),
                    ]
                    + [UInt8(seq & 0xFF), 0, 0, 0, 0, 0x50, flags, 0xFF, 0xFF, 0, 0, 0, 0] + payload
                frame = ipPacket(v6, src, dst, 6, l4)
            } else {
                frame = ipPacket(
                    v6, src, dst, 17, be16(sport) + be16(dport) + be16(8 + payload.count) + [0, 0] + payload)
                if !toClient, payload.count >= 2 {
                    asked.insert([17, v6 ? 6 : 4, payload[0], payload[1]])
                }
            }
        }
        // Any frame in the client->server direction may carry queries (TCP
        // carries several): for TCP the oracle only checks the address family.
        if tcp, !toClient, kind & 8 == 0 { asked.insert([6, v6 ? 6 : 4]) }
        // An exact-size heap copy so AddressSanitizer catches a read past the end.
        let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: max(frame.count, 1), alignment: 1)
        defer { buf.deallocate() }
        buf.copyBytes(from: frame)
        snooper.frame(
            UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buf)[0..<frame.count]), format: format,
            interface: interface, now: now
        ) { r in
            delivered += 1
            precondition(r.transport == 6 || r.transport == 17)
            if r.transport == 17 {
                // Raw frames may ask anything: only harness-built UDP replies are checked.
                if kind & 8 == 0 {
                    precondition(
                        asked.contains([
                            17, r.client.isIPv6 ? 6 : 4, UInt8(r.reply.id >> 8), UInt8(r.reply.id & 0xFF),
                        ]),
                        "a UDP reply delivered without a query with its ID")
                }
            } else if kind & 8 == 0 {
                precondition(asked.contains([6, r.client.isIPv6 ? 6 : 4]), "a TCP reply without a TCP query")
            }
            precondition(r.reply.addresses.count <= limits.maxAnswers)
        }
        if Int(data[i &- length &- 3]) % 7 == 0 { snooper.expire(now: now) }
        let c = snooper.counters
        precondition(snooper.liveQueries <= limits.maxQueries, "more queries than the ring")
        precondition(c.tcpStreams <= UInt64(limits.maxStreams), "more streams than the table")
        precondition(c.repliesDelivered == UInt64(delivered), "delivered count")
        precondition(
            c.repliesDelivered + c.repliesMismatched == c.repliesParsed, "parsed = delivered + mismatched")
    }
    return 0
}
