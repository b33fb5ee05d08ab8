/// How a buffer handed to ``PacketMarker/remark(_:format:policy:)`` or
/// ``PacketMarker/classify(_:format:policy:)`` starts.
public enum PacketFormat: Sendable, Hashable {
    /// An Ethernet II frame (pcap LINKTYPE_ETHERNET), without FCS.
    case ethernet
    /// A bare IPv4 or IPv6 packet, as nfqueue delivers it (pcap LINKTYPE_RAW, IPV4, IPV6).
    case ip
}
