import QoSMapCore

/// Which marking fields a remark writes.
public struct RewriteFields: OptionSet, Sendable, Hashable {
    /// The bit set.
    public let rawValue: UInt8

    /// Creates a set from its bits.
    @inlinable
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The DSCP of the IPv4 TOS or IPv6 Traffic Class octet (ECN bits are never written).
    public static let dscp = RewriteFields(rawValue: 1)
    /// The PCP of every 802.1Q/802.1ad tag, and the DEI of S-tags when the egress domain carries color in DEI.
    public static let dot1p = RewriteFields(rawValue: 2)
    /// The EXP (Traffic Class) of the top MPLS label.
    public static let exp = RewriteFields(rawValue: 4)
    /// Every field.
    public static let all: RewriteFields = [.dscp, .dot1p, .exp]
}
