import CQoSMapShim

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
        public static let drop = Decision(rawValue: CQoSMapShim_NF_DROP)
        /// `NF_ACCEPT`: continue traversal.
        public static let accept = Decision(rawValue: CQoSMapShim_NF_ACCEPT)
        /// `NF_REPEAT`: run the hook again.
        public static let `repeat` = Decision(rawValue: CQoSMapShim_NF_REPEAT)
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
