import QoSMapCore

/// The fields flow rules read, from a packet in place (no allocation).
public struct FlowFields: Sendable, Equatable {
    /// The upper-layer protocol; nil when the IPv6 extension headers run past
    /// the buffer or number more than ``PacketFlow/maxExtensionHeaders``.
    public var protocolNumber: UInt8?
    /// Source address.
    public var source: IPAddress
    /// Destination address.
    public var destination: IPAddress
    /// Source port: nil without one (see ``FlowPacket/sourcePort``).
    public var sourcePort: UInt16?
    /// Destination port.
    public var destinationPort: UInt16?
    /// The DSCP as received.
    public var dscp: UInt8
    /// The IP packet's length as the buffer holds it from the IP header on
    /// (what the per-rule byte counters add).
    public var ipLength: Int

    /// The fields as a ``FlowPacket`` received on `ingress`.
    public func packet(ingress: String?) -> FlowPacket {
        FlowPacket(
            protocolNumber: protocolNumber, source: source, destination: destination, sourcePort: sourcePort,
            destinationPort: destinationPort, ingress: ingress, dscp: dscp)
    }

    /// The key of the packet's flow.
    @inlinable
    public var flowKey: FlowKey {
        FlowKey(
            protocolNumber: protocolNumber, source: source, destination: destination, sourcePort: sourcePort,
            destinationPort: destinationPort)
    }
}

/// Reads ``FlowFields`` from packets with the packet engine's parser.
public enum PacketFlow {
    /// IPv6 extension headers walked at most (hop-by-hop, routing, fragment,
    /// destination options, AH); the ebpf classifier walks as many
    /// (`QM_MAX_EXT`), so both give up on the same packets.
    public static let maxExtensionHeaders = 6

    /// The flow fields of an IPv4 or IPv6 packet (bare, or in an Ethernet frame
    /// with tags or labels), or nil when it has no valid fixed IP header.
    public static func fields(_ buffer: UnsafeRawBufferPointer, format: PacketFormat) -> FlowFields? {
        guard let base = buffer.baseAddress else { return nil }
        let p = UnsafeMutableRawPointer(mutating: base)  // only read
        let end = buffer.count
        var frame = ParsedFrame()
        guard parse(p, end, format, &frame), frame.l3 >= 0 else { return nil }
        let l3 = frame.l3
        var f = FlowFields(
            protocolNumber: nil, source: IPAddress(ipv4: 0), destination: IPAddress(ipv4: 0), sourcePort: nil,
            destinationPort: nil, dscp: frame.tos >> 2, ipLength: end &- l3)
        var l4 = -1
        var proto: UInt8 = 0
        var later = false
        if frame.ipVersion == 4 {
            f.source = IPAddress(ipv4: u32(p, l3 &+ 12))
            f.destination = IPAddress(ipv4: u32(p, l3 &+ 16))
            proto = u8(p, l3 &+ 9)
            f.protocolNumber = proto
            later = u16(p, l3 &+ 6) & 0x1FFF != 0
            l4 = l3 &+ Int(u8(p, l3) & 0x0F) &* 4
        } else {
            f.source = IPAddress(ipv6: true, high: u64(p, l3 &+ 8), low: u64(p, l3 &+ 16))
            f.destination = IPAddress(ipv6: true, high: u64(p, l3 &+ 24), low: u64(p, l3 &+ 32))
            var next = u8(p, l3 &+ 6)
            var off = l3 &+ 40
            var n = 0
            walk: while true {
                switch next {
                case 0, 43, 60, 51, 44:
                    guard n < maxExtensionHeaders, off &+ 8 <= end else { return f }  // protocol unknown
                    n &+= 1
                    if next == 44 {
                        if u16(p, off &+ 2) >> 3 != 0 { later = true }
                        next = u8(p, off)
                        off &+= 8
                        if later { break walk }
                    } else {
                        let len =
                            next == 51 ? (Int(u8(p, off &+ 1)) &+ 2) &* 4 : (Int(u8(p, off &+ 1)) &+ 1) &* 8
                        next = u8(p, off)
                        off &+= len
                    }
                default: break walk
                }
            }
            proto = next
            f.protocolNumber = proto
            l4 = off
        }
        if !later, TransportProtocol.hasPorts(proto), l4 &+ 4 <= end {
            f.sourcePort = u16(p, l4)
            f.destinationPort = u16(p, l4 &+ 2)
        }
        return f
    }
}

@inline(__always)
func u32(_ p: UnsafeMutableRawPointer, _ i: Int) -> UInt32 {
    UInt32(u16(p, i)) << 16 | UInt32(u16(p, i &+ 2))
}

@inline(__always)
func u64(_ p: UnsafeMutableRawPointer, _ i: Int) -> UInt64 {
    UInt64(u32(p, i)) << 32 | UInt64(u32(p, i &+ 4))
}
