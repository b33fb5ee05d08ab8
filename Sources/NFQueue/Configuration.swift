import CQoSMapShim

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
        public static let failOpen = Flags(rawValue: CQoSMapShim_NFQA_CFG_F_FAIL_OPEN)
        /// `NFQA_CFG_F_CONNTRACK`: attach conntrack information.
        public static let conntrack = Flags(rawValue: CQoSMapShim_NFQA_CFG_F_CONNTRACK)
        /// `NFQA_CFG_F_GSO`: deliver GSO packets unsegmented; their L4 checksum
        /// may be unfinished (``QueuedPacket/SKBInfo/checksumNotReady``).
        public static let gso = Flags(rawValue: CQoSMapShim_NFQA_CFG_F_GSO)
        /// `NFQA_CFG_F_UID_GID`: attach the socket's uid and gid.
        public static let uidGid = Flags(rawValue: CQoSMapShim_NFQA_CFG_F_UID_GID)
        /// `NFQA_CFG_F_SECCTX`: attach the security context.
        public static let securityContext = Flags(rawValue: CQoSMapShim_NFQA_CFG_F_SECCTX)
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
