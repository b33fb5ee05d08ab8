import QoSMapCore

/// Minimal packets that the datapaths compiled from the tables (qosmapd's
/// eBPF tables, `qosmap export nft --config`) run through ``PacketMarker``, so
/// that every entry is the engine's own decision.
public enum ProbeFrame {
    /// An IPv4 or IPv6 header plus a UDP header, with `dscp` and ECN 0.
    public static func ip(ipv6: Bool, dscp: UInt8) -> [UInt8] {
        let tc = dscp << 2
        var h: [UInt8]
        if ipv6 {
            h = [0x60 | tc >> 4, (tc & 0xF) << 4, 0, 0, 0, 8, 17, 64]
            h += [0xFD] + [UInt8](repeating: 0, count: 14) + [1]
            h += [0xFD] + [UInt8](repeating: 0, count: 14) + [2]
        } else {
            h = [0x45, tc, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 19, 0, 1]
        }
        return h + [0, 1, 0, 2, 0, 8, 0, 0]
    }

    /// An Ethernet frame with one priority tag (VID 0) carrying `pcp` and
    /// `dei`, then ``ip(ipv6:dscp:)`` with DSCP 0. DEI 1 goes in an 802.1ad
    /// S-tag, the only tag whose DEI means drop eligibility to the engine.
    public static func tagged(pcp: UInt8, dei: Bool, ipv6: Bool) -> [UInt8] {
        let tci = UInt16(pcp & 7) << 13 | (dei ? 0x1000 : 0)
        var frame: [UInt8] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, dei ? 0x88 : 0x81, dei ? 0xA8 : 0x00]
        frame += [UInt8(tci >> 8), UInt8(tci & 0xFF)] + (ipv6 ? [0x86, 0xDD] : [0x08, 0x00])
        return frame + ip(ipv6: ipv6, dscp: 0)
    }
}

extension ProbeFrame {
    /// A bare IP packet with the flow fields of `p` (protocol, addresses,
    /// ports, DSCP) and ECN `ecn`: an IPv4 header with a valid checksum or an
    /// IPv6 header, then a transport header of the protocol's size (TCP 20
    /// bytes, UDP and others with ports 8, ICMP 8) and `payload` zero bytes.
    /// `qosmap classify` marks it to show what a described packet leaves with.
    public static func packet(_ p: FlowPacket, ecn: UInt8 = 0, payload: Int = 0) -> [UInt8] {
        let proto = p.protocolNumber ?? 59  // no next header
        var l4: [UInt8]
        switch proto {
        case 6:
            l4 = [UInt8](repeating: 0, count: 20)
            l4[12] = 0x50  // data offset 5
            l4[13] = 0x10  // ACK
        case 1, 58: l4 = [8, 0, 0, 0, 0, 0, 0, 0]
        default: l4 = [UInt8](repeating: 0, count: TransportProtocol.hasPorts(proto) ? 8 : 0)
        }
        if TransportProtocol.hasPorts(proto) {
            let sp = p.sourcePort ?? 0
            let dp = p.destinationPort ?? 0
            l4[0] = UInt8(sp >> 8)
            l4[1] = UInt8(sp & 0xFF)
            l4[2] = UInt8(dp >> 8)
            l4[3] = UInt8(dp & 0xFF)
            if proto == 17 || proto == 136 {
                let len = l4.count + payload
                l4[4] = UInt8(len >> 8 & 0xFF)
                l4[5] = UInt8(len & 0xFF)
            }
        }
        l4 += [UInt8](repeating: 0, count: payload)
        let tc = (p.dscp & 63) << 2 | (ecn & 3)
        func bytes(_ v: UInt64, _ n: Int) -> [UInt8] {
            (0..<n).map { UInt8(truncatingIfNeeded: v >> UInt64(8 * (n - 1 - $0))) }
        }
        if p.source.isIPv6 {
            var h: [UInt8] = [0x60 | tc >> 4, (tc & 0xF) << 4, 0, 0]
            h += [UInt8(l4.count >> 8 & 0xFF), UInt8(l4.count & 0xFF), proto, 64]
            h += bytes(p.source.high, 8) + bytes(p.source.low, 8)
            h += bytes(p.destination.high, 8) + bytes(p.destination.low, 8)
            return h + l4
        }
        let total = 20 + l4.count
        var h: [UInt8] = [
            0x45, tc, UInt8(total >> 8 & 0xFF), UInt8(total & 0xFF), 0, 0, 0x40, 0, 64, proto, 0, 0,
        ]
        h += bytes(p.source.low, 4) + bytes(p.destination.low, 4)
        var sum: UInt32 = 0
        for i in stride(from: 0, to: 20, by: 2) { sum += UInt32(h[i]) << 8 | UInt32(h[i + 1]) }
        while sum > 0xFFFF { sum = (sum & 0xFFFF) + (sum >> 16) }
        h[10] = UInt8(~sum >> 8 & 0xFF)
        h[11] = UInt8(~sum & 0xFF)
        return h + l4
    }
}
