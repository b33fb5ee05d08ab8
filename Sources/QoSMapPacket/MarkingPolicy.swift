import QoSMapCore

/// What a remark reads, how it maps it and what it writes.
public struct MarkingPolicy: Sendable {
    /// The received field that decides class and color.
    public var trust: TrustMode
    /// The domain that maps the trusted field to class and color.
    public var ingress: DSDomain
    /// The domain that maps class and color to the written fields.
    public var egress: DSDomain
    /// The fields written.
    public var rewrite: RewriteFields
    /// What happens to a packet that lacks the trusted field.
    public var untrusted: UntrustedFallback = .bestEffort
    /// Which 802.1Q/802.1ad tags of a stack 802.1p trust reads and rewrite writes.
    public var tags: TagSelection = .all

    /// Creates a policy; the egress domain defaults to the ingress domain.
    public init(
        trust: TrustMode = .dscp, ingress: DSDomain, egress: DSDomain? = nil, rewrite: RewriteFields = .dscp
    ) {
        self.trust = trust
        self.ingress = ingress
        self.egress = egress ?? ingress
        self.rewrite = rewrite
    }
}

/// What ``PacketMarker`` does with a packet that lacks the trusted field
/// (trust `8021p` and an untagged frame, say).
public enum UntrustedFallback: String, Sendable, Hashable, CaseIterable {
    /// Classify it BE/green and write the fields present (the default).
    case bestEffort = "default"
    /// Leave it unchanged: status ``RemarkResult/Status/unchanged``, nothing written.
    case keep
}

/// Which tags of a VLAN stack (QinQ) 802.1p trust reads and rewrite writes.
public enum TagSelection: String, Sendable, Hashable, CaseIterable {
    /// Trust the outer tag; write the PCP of every tag (the default).
    case all
    /// Trust and write the outer tag only (the S-tag of a QinQ frame).
    case outer
    /// Trust and write the innermost tag only (the customer's C-tag).
    case inner
}
