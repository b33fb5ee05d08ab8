/// What happened to one packet, for the counters.
public enum PacketOutcome: Int, CaseIterable, Sendable {
    /// DSCP rewritten and the payload returned.
    case rewritten
    /// Already carrying the right DSCP (or rewriting is off): accepted as is.
    case unchanged
    /// Classified from the header only, in mark-only mode.
    case markOnly
    /// Not a parsable IPv4/IPv6 packet: accepted unchanged.
    case malformed
    /// Copied short of its length: accepted without a payload.
    case truncated
    /// Its partial L4 checksum could not be completed: accepted unmarked.
    case checksumFailed
    /// A UDP GSO packet queued at `NF_INET_LOCAL_IN`: the kernel cannot
    /// segment it for the socket once a payload verdict made it
    /// `CHECKSUM_NONE` (every segment counts in `UdpInErrors`), so it is
    /// accepted unmarked (its mark and priority are still set).
    case gsoLocalUnmarked

    /// The number of outcomes, without building `allCases` on the per-packet path.
    public static let caseCount = allCases.count

    /// The metric label value.
    public var label: String {
        switch self {
        case .rewritten: "rewritten"
        case .unchanged: "unchanged"
        case .markOnly: "mark_only"
        case .malformed: "malformed"
        case .truncated: "truncated"
        case .checksumFailed: "checksum_failed"
        case .gsoLocalUnmarked: "gso_local_unmarked"
        }
    }
}
