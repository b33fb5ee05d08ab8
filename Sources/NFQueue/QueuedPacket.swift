import CQoSMapShim

/// A packet handed to user space. Every attribute is optional: the kernel sends
/// only those that apply (wraps `NFQA_*` attributes parsed by `nfq_nlmsg_parse`).
public struct QueuedPacket {
    /// Skb flags from `NFQA_SKB_INFO`.
    public struct SKBInfo: OptionSet, Sendable, Hashable {
        /// The raw `NFQA_SKB_*` bits.
        public let rawValue: UInt32
        /// Creates flags from raw bits.
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// `NFQA_SKB_CSUMNOTREADY`: the L4 checksum is not yet computed; a
        /// returned payload must carry a complete one.
        public static let checksumNotReady = SKBInfo(rawValue: CQoSMapShim_NFQA_SKB_CSUMNOTREADY)
        /// `NFQA_SKB_GSO`: a GSO packet, larger than the MTU.
        public static let gso = SKBInfo(rawValue: CQoSMapShim_NFQA_SKB_GSO)
        /// `NFQA_SKB_CSUM_NOTVERIFIED`: the checksum was not verified on receive.
        public static let checksumNotVerified = SKBInfo(rawValue: CQoSMapShim_NFQA_SKB_CSUM_NOTVERIFIED)
    }

    /// The packet id to answer with (`nfqnl_msg_packet_hdr.packet_id`).
    public var id: UInt32?
    /// The link-layer protocol, an EtherType such as 0x0800 (`hw_protocol`).
    public var hardwareProtocol: UInt16?
    /// The netfilter hook the packet was queued from (`hook`).
    public var hook: UInt8?
    /// The skb mark (`NFQA_MARK`).
    public var mark: UInt32?
    /// The input interface index (`NFQA_IFINDEX_INDEV`).
    public var inputInterface: UInt32?
    /// The output interface index (`NFQA_IFINDEX_OUTDEV`).
    public var outputInterface: UInt32?
    /// The packet's full length when the payload was truncated to the copy range (`NFQA_CAP_LEN`).
    public var capturedLength: UInt32?
    /// Skb flags (`NFQA_SKB_INFO`).
    public var skbInfo: SKBInfo?
    /// The skb priority (`NFQA_PRIORITY`).
    public var priority: UInt32?
    /// The sending socket's uid (`NFQA_UID`).
    public var uid: UInt32?
    /// The sending socket's gid (`NFQA_GID`).
    public var gid: UInt32?
    /// The copied packet bytes, from the network header (`NFQA_PAYLOAD`); valid
    /// only while the receive handler runs.
    public var payload: UnsafeMutableRawBufferPointer?

    /// Whether the payload is shorter than the packet, so it must not be returned.
    public var isTruncated: Bool {
        guard let capturedLength else { return false }
        return Int(capturedLength) > (payload?.count ?? 0)
    }

    /// Creates a packet from attributes, for tests and replay.
    public init(
        id: UInt32? = nil, hardwareProtocol: UInt16? = nil, hook: UInt8? = nil, mark: UInt32? = nil,
        inputInterface: UInt32? = nil, outputInterface: UInt32? = nil, capturedLength: UInt32? = nil,
        skbInfo: SKBInfo? = nil, priority: UInt32? = nil, payload: UnsafeMutableRawBufferPointer? = nil
    ) {
        self.id = id
        self.hardwareProtocol = hardwareProtocol
        self.hook = hook
        self.mark = mark
        self.inputInterface = inputInterface
        self.outputInterface = outputInterface
        self.capturedLength = capturedLength
        self.skbInfo = skbInfo
        self.priority = priority
        self.payload = payload
    }

    init(_ c: cqosmap_nfq_packet) {
        let has = { (bit: Int) in c.present & UInt32(bit) != 0 }
        if has(CQOSMAP_NFQ_HAS_HDR) {
            id = c.id
            hardwareProtocol = c.hw_protocol
            hook = c.hook
        }
        if has(CQOSMAP_NFQ_HAS_MARK) { mark = c.mark }
        if has(CQOSMAP_NFQ_HAS_INDEV) { inputInterface = c.indev }
        if has(CQOSMAP_NFQ_HAS_OUTDEV) { outputInterface = c.outdev }
        if has(CQOSMAP_NFQ_HAS_CAPLEN) { capturedLength = c.cap_len }
        if has(CQOSMAP_NFQ_HAS_SKBINFO) { skbInfo = SKBInfo(rawValue: c.skb_info) }
        if has(CQOSMAP_NFQ_HAS_PRIORITY) { priority = c.priority }
        if has(CQOSMAP_NFQ_HAS_UID) { uid = c.uid }
        if has(CQOSMAP_NFQ_HAS_GID) { gid = c.gid }
        if has(CQOSMAP_NFQ_HAS_PAYLOAD), let p = c.payload {
            payload = UnsafeMutableRawBufferPointer(start: p, count: Int(c.payload_len))
        }
    }
}
