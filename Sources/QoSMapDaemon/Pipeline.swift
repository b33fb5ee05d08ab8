import NFQueue
import QoSMapCore
import QoSMapPacket

#if canImport(Glibc)
    import Glibc
#endif

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
        }
    }
}

/// Counts kept by one queue thread between flushes to swift-metrics, so the
/// per-packet path touches no shared state.
public struct PacketCounts: Sendable {
    /// Packets by class (8) × color (3) × outcome.
    public var byTreatment = [Int](repeating: 0, count: 24 * PacketOutcome.allCases.count)
    /// Partial checksums completed.
    public var checksumCompletions = 0

    /// Creates zero counts.
    public init() {}

    /// Adds one packet.
    @inlinable
    public mutating func count(_ t: Treatment, _ outcome: PacketOutcome) {
        byTreatment[t.cellIndex &* PacketOutcome.caseCount &+ outcome.rawValue] &+= 1
    }

    /// The count for a cell and outcome.
    public func count(of t: Treatment, _ outcome: PacketOutcome) -> Int {
        byTreatment[t.cellIndex * PacketOutcome.allCases.count + outcome.rawValue]
    }

    /// The total for an outcome.
    public func total(_ outcome: PacketOutcome) -> Int {
        Treatment.allCells.reduce(0) { $0 + count(of: $1, outcome) }
    }
}

/// Decides queued packets: classify with the ingress interface's trust and
/// inbound domain, remark with the egress interface's outbound domain, and
/// build the verdict (payload, mark, priority). One per queue thread.
public struct PacketPipeline {
    /// The counts since the last flush.
    public var counts = PacketCounts()
    private var generation = -1
    private var policies: [UInt64: MarkingPolicy] = [:]
    private var names: [UInt32: String] = [:]
    private let interfaceName: (UInt32) -> String?

    /// Creates a pipeline; `interfaceName` maps an ifindex to its name
    /// (`if_indextoname` by default).
    public init(interfaceName: @escaping (UInt32) -> String? = PacketPipeline.systemInterfaceName) {
        self.interfaceName = interfaceName
    }

    /// `if_indextoname`.
    public static func systemInterfaceName(_ index: UInt32) -> String? {
        var buf = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
        guard if_indextoname(index, &buf) != nil else { return nil }
        let bytes = buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self)
    }

    private mutating func name(_ index: UInt32?) -> String? {
        guard let index else { return nil }
        if let n = names[index] { return n }
        let n = interfaceName(index)
        if let n { names[index] = n }
        return n
    }

    private mutating func policy(_ packet: QueuedPacket, _ snapshot: PolicySnapshot) -> MarkingPolicy {
        if snapshot.generation != generation {
            // A reload may rename domains; interface names may change too.
            policies.removeAll(keepingCapacity: true)
            names.removeAll(keepingCapacity: true)
            generation = snapshot.generation
        }
        let key = UInt64(packet.inputInterface ?? 0) << 32 | UInt64(packet.outputInterface ?? 0)
        if let p = policies[key] { return p }
        let p = snapshot.policy(input: name(packet.inputInterface), output: name(packet.outputInterface))
        policies[key] = p
        return p
    }

    /// Decides one packet; may rewrite its payload in place. With `rules:
    /// install` every verdict clears the rules' pending bit (other mark bits
    /// kept), so the counting rule sees only packets that got no verdict.
    public mutating func decide(_ packet: inout QueuedPacket, snapshot: PolicySnapshot) -> Verdict {
        var verdict = decideTreatment(&packet, snapshot: snapshot)
        if let bit = snapshot.config.rules.verdictClearBit {
            verdict.mark = (verdict.mark ?? packet.mark ?? 0) & ~bit
        }
        return verdict
    }

    private mutating func decideTreatment(_ packet: inout QueuedPacket, snapshot: PolicySnapshot) -> Verdict {
        let config = snapshot.config
        guard let payload = packet.payload, payload.count > 0 else {
            counts.count(.bestEffort, .malformed)
            return .accept
        }
        let policy = policy(packet, snapshot)
        var treatment: Treatment
        var outcome: PacketOutcome
        var returned: UnsafeRawBufferPointer?
        if config.rewriteDSCP && !config.markOnly && !packet.isTruncated {
            let result = PacketMarker.remark(payload, format: .ip, policy: policy)
            treatment = result.treatment
            switch result.status {
            case .rewritten:
                outcome = .rewritten
                returned = UnsafeRawBufferPointer(payload)
                if packet.skbInfo?.contains(.checksumNotReady) == true {
                    // The kernel treats a returned payload's checksum as final.
                    if TransportChecksum.complete(payload) {
                        counts.checksumCompletions &+= 1
                    } else {
                        outcome = .checksumFailed
                        returned = nil
                    }
                }
            case .unchanged: outcome = .unchanged
            case .malformed, .unsupported:
                counts.count(.bestEffort, .malformed)
                return .accept
            }
        } else {
            guard let t = Self.classifyHeader(payload, policy) else {
                counts.count(.bestEffort, .malformed)
                return .accept
            }
            treatment = t
            outcome = config.markOnly ? .markOnly : (packet.isTruncated ? .truncated : .unchanged)
        }
        counts.count(treatment, outcome)
        var verdict = Verdict(.accept, payload: returned)
        if let encoding = config.mark {
            verdict.mark = encoding.apply(treatment, to: packet.mark ?? 0)
        }
        if config.priority {
            verdict.priority = UInt32(policy.egress.pcp(for: treatment).rawValue)
        }
        return verdict
    }

    /// Classifies from the IP header alone (mark-only mode, truncated copies):
    /// reads the TOS / Traffic Class octet, writes nothing.
    static func classifyHeader(_ p: UnsafeMutableRawBufferPointer, _ policy: MarkingPolicy) -> Treatment? {
        let tos: UInt8
        switch p[0] >> 4 {
        case 4 where p.count >= 20: tos = p[1]
        case 6 where p.count >= 40: tos = (p[0] & 0x0F) << 4 | p[1] >> 4
        default: return nil
        }
        switch policy.trust {
        case .dscp: return policy.ingress.classify(.dscp, tos >> 2)
        case .ipPrecedence: return policy.ingress.classify(.ipPrecedence, tos >> 5)
        default: return .bestEffort
        }
    }
}
