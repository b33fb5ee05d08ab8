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
