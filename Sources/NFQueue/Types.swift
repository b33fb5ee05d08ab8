import CQoSMapShim

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension NetfilterQueue {
    /// How much of each packet the kernel copies to user space
    /// (`NFQNL_COPY_NONE`, `NFQNL_COPY_META`, `NFQNL_COPY_PACKET` with a range).
    public enum CopyMode: Sendable, Equatable {
        /// Nothing (`NFQNL_COPY_NONE`).
        case none
        /// Metadata only, no payload (`NFQNL_COPY_META`).
        case metadata
        /// Up to `range` bytes of the packet (`NFQNL_COPY_PACKET`); a shorter
        /// copy than the packet sets ``QueuedPacket/capturedLength``.
        case packet(range: UInt32)
    }

    /// Queue flags (`NFQA_CFG_FLAGS`, all set through `NFQA_CFG_MASK`).
    public struct Flags: OptionSet, Sendable, Hashable {
        /// The raw `NFQA_CFG_F_*` bits.
        public let rawValue: UInt32
        /// Creates flags from raw `NFQA_CFG_F_*` bits.
        public init(rawValue: UInt32) { self.rawValue = rawValue }

        /// `NFQA_CFG_F_FAIL_OPEN`: accept packets instead of dropping them when the queue is full.
        public static let failOpen = Flags(rawValue: 1 << 0)
        /// `NFQA_CFG_F_CONNTRACK`: attach conntrack information.
        public static let conntrack = Flags(rawValue: 1 << 1)
        /// `NFQA_CFG_F_GSO`: deliver GSO packets unsegmented; their L4 checksum
        /// may be unfinished (``QueuedPacket/SKBInfo/checksumNotReady``).
        public static let gso = Flags(rawValue: 1 << 2)
        /// `NFQA_CFG_F_UID_GID`: attach the socket's uid and gid.
        public static let uidGid = Flags(rawValue: 1 << 3)
        /// `NFQA_CFG_F_SECCTX`: attach the security context.
        public static let securityContext = Flags(rawValue: 1 << 4)
        /// Every flag this wrapper knows, used as the `NFQA_CFG_MASK`.
        public static let all: Flags = [.failOpen, .conntrack, .gso, .uidGid, .securityContext]
    }

    /// What to bind and how (the `NFQNL_MSG_CONFIG` messages and socket options).
    public struct Configuration: Sendable, Equatable {
        /// The queue number, as in `-j NFQUEUE --queue-num N`.
        public var queueNumber: UInt16
        /// How much of each packet is copied.
        public var copyMode: CopyMode
        /// The queue flags.
        public var flags: Flags
        /// The kernel's queue length limit (`NFQA_CFG_QUEUE_MAXLEN`); 0 keeps the default (1024).
        public var maximumLength: UInt32
        /// The socket receive buffer in bytes (`SO_RCVBUFFORCE`); 0 keeps the default.
        public var receiveBufferSize: Int
        /// Whether to set `NETLINK_NO_ENOBUFS`, so an overrun does not report ENOBUFS.
        public var noENOBUFS: Bool
        /// How long ``NetfilterQueue/receive(_:)`` blocks before returning 0.
        public var receiveTimeoutMilliseconds: Int
        /// Whether consecutive verdicts of one ``NetfilterQueue/receive(_:)``
        /// with the same decision, mark and priority and no payload are sent
        /// as one `NFQNL_MSG_VERDICT_BATCH`. Off once any verdict is deferred.
        public var batchVerdicts: Bool

        /// Creates a configuration; the defaults copy whole packets, fail open
        /// and request GSO packets unsegmented.
        public init(
            queueNumber: UInt16, copyMode: CopyMode = .packet(range: 0xFFFF),
            flags: Flags = [.failOpen, .gso],
            maximumLength: UInt32 = 0, receiveBufferSize: Int = 8 << 20, noENOBUFS: Bool = true,
            receiveTimeoutMilliseconds: Int = 250, batchVerdicts: Bool = false
        ) {
            self.queueNumber = queueNumber
            self.copyMode = copyMode
            self.flags = flags
            self.maximumLength = maximumLength
            self.receiveBufferSize = receiveBufferSize
            self.noENOBUFS = noENOBUFS
            self.receiveTimeoutMilliseconds = receiveTimeoutMilliseconds
            self.batchVerdicts = batchVerdicts
        }
    }
}

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
        public static let checksumNotReady = SKBInfo(rawValue: 1 << 0)
        /// `NFQA_SKB_GSO`: a GSO packet, larger than the MTU.
        public static let gso = SKBInfo(rawValue: 1 << 1)
        /// `NFQA_SKB_CSUM_NOTVERIFIED`: the checksum was not verified on receive.
        public static let checksumNotVerified = SKBInfo(rawValue: 1 << 2)
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

/// A decision on a queued packet, with options (in the style of go-nfqueue's
/// `SetVerdictWithOption`): a new mark, a new priority, a modified payload.
public struct Verdict {
    /// The netfilter verdict (`NF_ACCEPT`, `NF_DROP`, `NF_REPEAT`).
    public struct Decision: RawRepresentable, Hashable, Sendable {
        /// The raw `NF_*` value.
        public let rawValue: UInt32
        /// Creates a decision from a raw `NF_*` value.
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// `NF_DROP`.
        public static let drop = Decision(rawValue: 0)
        /// `NF_ACCEPT`: continue traversal.
        public static let accept = Decision(rawValue: 1)
        /// `NF_REPEAT`: run the hook again.
        public static let `repeat` = Decision(rawValue: 4)
        /// No verdict now: the caller sends one later with ``NetfilterQueue/verdict(_:for:)``.
        public static let none = Decision(rawValue: .max)
    }

    /// The decision.
    public var decision: Decision
    /// A new skb mark (`nfq_nlmsg_verdict_put_mark`), or nil to keep it.
    public var mark: UInt32?
    /// A new skb priority (`NFQA_PRIORITY`), or nil to keep it.
    public var priority: UInt32?
    /// Replacement packet bytes (`nfq_nlmsg_verdict_put_pkt`), or nil to keep the packet.
    /// Must be complete: never a truncated copy, and with a finished L4 checksum.
    public var payload: UnsafeRawBufferPointer?

    /// Creates a verdict with options.
    public init(
        _ decision: Decision, mark: UInt32? = nil, priority: UInt32? = nil,
        payload: UnsafeRawBufferPointer? = nil
    ) {
        self.decision = decision
        self.mark = mark
        self.priority = priority
        self.payload = payload
    }

    /// Accept unchanged.
    public static var accept: Verdict { Verdict(.accept) }
    /// Drop.
    public static var drop: Verdict { Verdict(.drop) }
}

/// A POSIX error number, as swift-system's `Errno`.
public struct Errno: RawRepresentable, Error, Hashable, Sendable, CustomStringConvertible {
    /// The raw errno value.
    public let rawValue: Int32
    /// Creates an errno from its raw value.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// `ENOBUFS`: the kernel dropped netlink messages (socket buffer overrun).
    public static let noBufferSpace = Errno(rawValue: ENOBUFS)
    /// `EPERM`: the process lacks CAP_NET_ADMIN.
    public static let notPermitted = Errno(rawValue: EPERM)
    /// `EBUSY`: another socket has bound the queue.
    public static let busy = Errno(rawValue: EBUSY)
    /// `EINVAL`: an argument the kernel rejects.
    public static let invalidArgument = Errno(rawValue: EINVAL)
    /// `ETIMEDOUT`: no answer in time.
    public static let timedOut = Errno(rawValue: ETIMEDOUT)
    /// `EBADMSG`: a datagram that does not parse as netlink messages.
    public static let badMessage = Errno(rawValue: EBADMSG)
    /// `ENOENT`: for a verdict, the packet id is unknown (already decided or dropped).
    public static let noSuchEntry = Errno(rawValue: ENOENT)

    /// The `strerror` text and the number.
    public var description: String { String(cString: strerror(rawValue)) + " (errno \(rawValue))" }
}

/// A failed queue operation and its errno.
public struct NetfilterQueueError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The step that failed.
    public enum Operation: String, Sendable, Hashable {
        /// `mnl_socket_open`.
        case open
        /// `mnl_socket_bind`.
        case bind
        /// `setsockopt` (`NETLINK_NO_ENOBUFS`, `SO_RCVBUFFORCE`, `SO_RCVTIMEO`).
        case setSocketOption = "setsockopt"
        /// `NFQNL_CFG_CMD_BIND`.
        case bindQueue = "bind queue"
        /// `NFQNL_CFG_CMD_UNBIND`.
        case unbindQueue = "unbind queue"
        /// Copy mode, flags and maxlen.
        case configureQueue = "configure queue"
        /// `mnl_socket_recvfrom`.
        case receive
        /// Sending a verdict, or the kernel rejecting one.
        case verdict
    }

    /// The step that failed.
    public var operation: Operation
    /// Why.
    public var errno: Errno

    /// Creates an error.
    public init(operation: Operation, errno: Errno) {
        self.operation = operation
        self.errno = errno
    }

    /// `nfqueue <operation>: <strerror> (errno N)`.
    public var description: String { "nfqueue \(operation.rawValue): \(errno)" }
}
