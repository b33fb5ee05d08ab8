/// Completes transport-layer checksums of bare IP packets in place.
public enum TransportChecksum {
    /// Recomputes the TCP, UDP, UDP-Lite, ICMP or ICMPv6 checksum over a complete
    /// bare IPv4/IPv6 packet in place (pseudo-header included; IPv6 extension
    /// headers walked; the final destination of a routing header with segments
    /// left used). For callers like the daemon whose kernel hands over a partial
    /// (CHECKSUM_PARTIAL) L4 checksum.
    ///
    /// Returns false, leaving the packet untouched, when it cannot be completed:
    /// malformed headers, another protocol, ESP, IPv6 jumbograms, and every
    /// fragment (a fragmented datagram's checksum covers bytes that are in other
    /// fragments; IPv6 atomic fragments are complete and are handled).
    public static func complete(_ packet: UnsafeMutableRawBufferPointer) -> Bool {
        guard let p = packet.baseAddress, packet.count >= 1 else { return false }
        let count = packet.count
        var sum: UInt64 = 0
        var proto: UInt8
        var l4: Int
        var l4End: Int
        switch u8(p, 0) >> 4 {
        case 4:
            guard count >= 20 else { return false }
            let ihl = Int(u8(p, 0) & 0x0F) &* 4
            let total = Int(u16(p, 2))
            guard ihl >= 20, total >= ihl, total <= count else { return false }
            // MF set or a non-zero offset: not the whole datagram.
            guard u16(p, 6) & 0x3FFF == 0 else { return false }
            proto = u8(p, 9)
            l4 = ihl
            l4End = total
            if proto != 1 {
                sum = sumWords(p, 12, 20)  // source and destination
                sum &+= UInt64(proto) &+ UInt64(total &- ihl)
            }
        case 6:
            guard count >= 40 else { return false }
            let payload = Int(u16(p, 4))
            guard payload != 0, 40 &+ payload <= count, let chain = walkIPv6(p, 0, 40 &+ payload),
                !chain.fragmented
            else { return false }
            proto = chain.proto
            l4 = chain.offset
            l4End = 40 &+ payload
            sum = sumWords(p, 8, 24)  // source
            var dst = 24
            if chain.routing >= 0 {
                let r = chain.routing
                let type = u8(p, r &+ 2)
                let hdrLen = Int(u8(p, r &+ 1)) &* 8
                switch type {
                case 0, 2:  // address list; the last one is the final destination
                    guard hdrLen >= 16 else { return false }
                    dst = r &+ 8 &+ hdrLen &- 16
                case 4:  // segment routing header: segment list[0] is the final destination
                    guard hdrLen >= 16 else { return false }
                    dst = r &+ 8
                default:
                    return false
                }
            }
            sum = sumWords(p, dst, dst &+ 16, sum)
            sum &+= UInt64(l4End &- l4) &+ UInt64(proto)
        default:
            return false
        }

        let field: Int
        var covered = l4End
        switch proto {
        case 6:
            guard l4End &- l4 >= 20 else { return false }
            field = 16
        case 17:
            guard l4End &- l4 >= 8 else { return false }
            field = 6
        case 136:  // UDP-Lite (RFC 3828): checksum coverage in the length field, 0 = all
            guard l4End &- l4 >= 8 else { return false }
            let coverage = Int(u16(p, l4 &+ 4))
            if coverage != 0 {
                guard coverage >= 8, coverage <= l4End &- l4 else { return false }
                covered = l4 &+ coverage
            }
            field = 6
        case 1:
            guard u8(p, 0) >> 4 == 4, l4End &- l4 >= 8 else { return false }
            field = 2
        case 58:
            guard u8(p, 0) >> 4 == 6, l4End &- l4 >= 8 else { return false }
            field = 2
        default:
            return false
        }
        store16(p, l4 &+ field, 0)
        sum = sumWords(p, l4, covered, sum)
        var check = ~fold(sum)
        // UDP and UDP-Lite send a computed zero as all ones; zero means "no checksum".
        if check == 0, proto == 17 || proto == 136 { check = 0xFFFF }
        store16(p, l4 &+ field, check)
        return true
    }

    /// The transport protocol of a bare IPv4/IPv6 packet (after IPv6
    /// extension headers), or nil when the headers do not say.
    public static func transportProtocol(_ packet: UnsafeMutableRawBufferPointer) -> UInt8? {
        guard let p = packet.baseAddress, packet.count >= 1 else { return nil }
        switch u8(p, 0) >> 4 {
        case 4 where packet.count >= 20: return u8(p, 9)
        case 6 where packet.count >= 40:
            let payload = Int(u16(p, 4))
            let end = payload == 0 ? packet.count : min(40 &+ payload, packet.count)
            return walkIPv6(p, 0, end)?.proto
        default: return nil
        }
    }
}
