import QoSMapCore

/// What a remark found and did.
public struct RemarkResult: Sendable, Hashable {
    /// The outcome of a remark.
    public enum Status: Sendable, Hashable {
        /// At least one byte was changed.
        case rewritten
        /// A field to write was present, but every one already had its value.
        case unchanged
        /// The link-layer stack or the fixed IP header is truncated or inconsistent
        /// (see ``PacketMarker/remark(_:format:policy:)``); nothing was classified
        /// and the buffer was not touched. A bad tail after a valid fixed header is
        /// not this status but ``RemarkResult/tailMalformed``.
        case malformed
        /// Parsed fine, but none of the fields to write is present (for example ARP
        /// with `--rewrite dscp`); the buffer was not touched.
        case unsupported
    }

    /// The outcome.
    public var status: Status
    /// The ingress class and color: BE/green when trust is none, the packet is
    /// malformed, or the trusted field is absent.
    public var treatment: Treatment
    /// 4 or 6 when an IP header was found.
    public var ipVersion: UInt8?
    /// The offset of the IP header in the buffer.
    public var l3Offset: Int?
    /// The DSCP received, when an IP header was found.
    public var originalDSCP: DSCP?
    /// The DSCP the packet carries afterwards, when an IP header was found.
    public var newDSCP: DSCP?
    /// The number of 802.1Q/802.1ad tags.
    public var tagCount: Int
    /// The number of MPLS labels.
    public var labelCount: Int
    /// Whether the fixed IP header was valid but what follows it is not: IPv4
    /// options or total length beyond the buffer or below the header length, an
    /// IPv6 payload length beyond the buffer, or an IPv6 extension header that
    /// overruns the packet. Such a packet is still classified and its markings
    /// written (the kernel forwards it, so skipping it would let a sender keep
    /// its DSCP through a trust boundary); counters should report it apart.
    /// Work that needs the transport header, such as
    /// ``TransportChecksum/complete(_:)``, refuses it.
    public var tailMalformed: Bool

    /// Whether the trusted field was absent (trust `8021p` on an untagged
    /// frame, `dscp` on a non-IP one…): the treatment is then the policy's
    /// fallback (``MarkingPolicy/untrusted``). False with trust `none`.
    public var trustedFieldAbsent = false
    /// The fields whose bytes were changed (a subset of the policy's rewrite set).
    public var changedFields: RewriteFields = []

    /// Creates a result.
    public init(
        status: Status, treatment: Treatment = .bestEffort, ipVersion: UInt8? = nil, l3Offset: Int? = nil,
        originalDSCP: DSCP? = nil, newDSCP: DSCP? = nil, tagCount: Int = 0, labelCount: Int = 0,
        tailMalformed: Bool = false
    ) {
        self.status = status
        self.treatment = treatment
        self.ipVersion = ipVersion
        self.l3Offset = l3Offset
        self.originalDSCP = originalDSCP
        self.newDSCP = newDSCP
        self.tagCount = tagCount
        self.labelCount = labelCount
        self.tailMalformed = tailMalformed
    }
}
