import QoSMapCore
import QoSMapPacket

#if canImport(Glibc)
    import Glibc
#endif

// `qosmap-bench dns [PAIRS]`: DNS learning throughput on one core. Each round
// feeds the snooper a UDP query frame and then its reply frame (IPv4 and
// IPv6 alternately; A, AAAA and a CNAME chain), so every reply is tracked,
// matched, parsed and delivered. The peer, in the same run: the same reply
// payloads through DNSReplyParser.parse alone (no frame, no tracking).

/// A query and reply frame pair, and the reply's DNS payload.
struct DNSBenchPair {
    var query: [UInt8]
    var reply: [UInt8]
    var payload: [UInt8]
}

func dnsBenchPairs(_ count: Int) -> [DNSBenchPair] {
    func name(_ text: String) -> [UInt8] {
        text.split(separator: ".").flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } + [0]
    }
    func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    func ip(_ v6: Bool, _ src: UInt8, _ dst: UInt8, _ l4: [UInt8]) -> [UInt8] {
        if !v6 {
            return [0x45, 0] + be16(20 + l4.count) + [
                0, 1, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, src, 198, 18, 0, dst,
            ]
                + l4
        }
        let a: (UInt8) -> [UInt8] = { [0xFD] + [UInt8](repeating: 0, count: 14) + [$0] }
        return [0x60, 0, 0, 0] + be16(l4.count) + [17, 64] + a(src) + a(dst) + l4
    }
    func udp(_ sport: Int, _ dport: Int, _ payload: [UInt8]) -> [UInt8] {
        be16(sport) + be16(dport) + be16(8 + payload.count) + [0, 0] + payload
    }
    var out: [DNSBenchPair] = []
    for i in 0..<count {
        let v6 = i & 1 == 1
        let id = (i &* 40503) & 0xFFFF
        let port = 1024 + (i &* 7919) % 60000
        let qname = name("host\(i).cdn\(i % 97).example.com")
        let qtype = v6 ? 28 : 1
        let question = qname + be16(qtype) + [0, 1]
        let query = be16(id) + [0x01, 0x00] + be16(1) + be16(0) + be16(0) + be16(0) + question
        var answers: [UInt8] = []
        var ancount = 0
        var owner: [UInt8] = [0xC0, 12]
        if i % 3 == 0 {
            // A CNAME to an edge name, whose addresses follow.
            let target = name("edge\(i % 13).example.net")
            answers += owner + be16(5) + [0, 1, 0, 0, 1, 44] + be16(target.count) + target
            owner = [0xC0, UInt8(12 + question.count + 12)]
            ancount += 1
        }
        for k in 0..<2 {
            let data: [UInt8] =
                v6
                ? [0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, UInt8(k), UInt8(i >> 8 & 0xFF), UInt8(i & 0xFF)]
                : [198, 18 + UInt8(k), UInt8(i >> 8 & 0xFF), UInt8(i & 0xFF)]
            answers += owner + be16(qtype) + [0, 1, 0, 0, 0, 60] + be16(data.count) + data
            ancount += 1
        }
        let reply =
            be16(id) + [0x81, 0x80] + be16(1) + be16(ancount) + be16(0) + be16(0) + question + answers
        out.append(
            DNSBenchPair(
                query: ip(v6, 1, 53, udp(port, 53, query)), reply: ip(v6, 53, 1, udp(53, port, reply)),
                payload: reply))
    }
    return out
}

func runDNSBenchmark(pairs: Int, rounds: Int) {
    let set = dnsBenchPairs(pairs)
    let lan = DNSSnoopInterface(index: 2, name: "lan0")
    var bestSnoop = Double.infinity
    var bestParse = Double.infinity
    var delivered = 0
    var addresses = 0
    for _ in 0..<7 {
        var snooper = DNSSnooper()
        var now: UInt64 = 1
        var got = 0
        var n = 0
        let start = nowNanoseconds()
        for _ in 0..<rounds {
            for p in set {
                now &+= 1000
                snooper.frame(p.query, format: .ip, interface: lan, now: now) { _ in }
                snooper.frame(p.reply, format: .ip, interface: lan, now: now) {
                    got &+= 1
                    n &+= $0.reply.addresses.count
                }
            }
        }
        bestSnoop = min(bestSnoop, Double(nowNanoseconds() - start) / Double(rounds * set.count))
        delivered = got
        addresses = n
        var parsed = 0
        let start2 = nowNanoseconds()
        for _ in 0..<rounds {
            for p in set {
                if case .success(let r) = DNSReplyParser.parse(p.payload) { parsed &+= r.addresses.count }
            }
        }
        bestParse = min(bestParse, Double(nowNanoseconds() - start2) / Double(rounds * set.count))
        precondition(parsed == addresses)
    }
    let total = rounds * set.count
    print(
        "dns: \(set.count) query/reply pairs x \(rounds) rounds, best of 7; \(delivered)/\(total) delivered, \(addresses) addresses"
    )
    print(
        "snooper (query frame + reply frame: tracked, matched, parsed): \(format2(bestSnoop)) ns/reply, \(Int(1e9 / bestSnoop)) replies/s"
    )
    print(
        "peer DNSReplyParser.parse (reply payload only): \(format2(bestParse)) ns/reply, \(Int(1e9 / bestParse)) replies/s"
    )
    print("ratio snooper/peer: \(format2(bestSnoop / bestParse))x")
}

/// Writes the benchmark's 4,096 frame pairs, `rounds` times over, to a pcap
/// file (LINKTYPE_RAW) for the tshark peer of tools/bench/dns.
func writeDNSPcap(_ path: String, rounds: Int) -> Bool {
    guard let f = fopen(path, "wb") else { return false }
    defer { fclose(f) }
    func put32(_ v: UInt32, _ out: inout [UInt8]) { withUnsafeBytes(of: v.littleEndian) { out += $0 } }
    var header: [UInt8] = []
    put32(0xA1B2_C3D4, &header)
    header += [2, 0, 4, 0]
    put32(0, &header)
    put32(0, &header)
    put32(65535, &header)
    put32(101, &header)  // LINKTYPE_RAW
    var ok = fwrite(header, 1, header.count, f) == header.count
    let set = dnsBenchPairs(4096)
    var t: UInt32 = 0
    for _ in 0..<rounds {
        for p in set {
            for frame in [p.query, p.reply] {
                t &+= 1
                var rec: [UInt8] = []
                put32(1_700_000_000 + t / 1_000_000, &rec)
                put32(t % 1_000_000, &rec)
                put32(UInt32(frame.count), &rec)
                put32(UInt32(frame.count), &rec)
                rec += frame
                ok = ok && fwrite(rec, 1, rec.count, f) == rec.count
            }
        }
    }
    return ok
}
