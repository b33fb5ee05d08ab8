import NFQueue
import QoSMapCore
import QoSMapPacket

#if canImport(Glibc)
    import Glibc
#endif

/// Decides queued packets: classify with the ingress interface's trust and
/// inbound domain, remark with the egress interface's outbound domain, and
/// build the verdict (payload, mark, priority). One per queue thread.
public struct PacketPipeline {
    /// The counts since the last flush.
    public var counts = PacketCounts()
    private var generation = -1
    private var linkGeneration = 0
    private var policies: [UInt64: MarkingPolicy] = [:]
    private var names: [UInt32: String] = [:]
    /// The flow rules' ingress class by input ifindex.
    private var ingressClasses: [UInt32: UInt16] = [:]
    /// Egress MTUs by ifindex, for GSO packets' segment counts (`classify.flows`).
    private var mtus: [UInt32: Int] = [:]
    /// The queues' skb priority per service class by egress ifindex (empty:
    /// no queues there), cached as the policies are.
    private var queuePriorities: [UInt32: [UInt32]] = [:]
    private let interfaceName: (UInt32) -> String?
    private let links: (() -> Int)?

    /// Creates a pipeline; `interfaceName` maps an ifindex to its name
    /// (`if_indextoname` by default). `linkGeneration` (a ``LinkMonitor``'s)
    /// changes whenever a link is added, removed or renamed; the name and
    /// policy caches are dropped when it does.
    public init(
        interfaceName: @escaping (UInt32) -> String? = PacketPipeline.systemInterfaceName,
        linkGeneration: (() -> Int)? = nil
    ) {
        self.interfaceName = interfaceName
        links = linkGeneration
        self.linkGeneration = linkGeneration?() ?? 0
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
        // One relaxed atomic load per packet: a rename keeps the ifindex, so
        // only the link notifications tell that a cached name went stale.
        let links = self.links?() ?? linkGeneration
        if snapshot.generation != generation || links != linkGeneration {
            // A reload may rename domains; interface names may change too.
            policies.removeAll(keepingCapacity: true)
            names.removeAll(keepingCapacity: true)
            ingressClasses.removeAll(keepingCapacity: true)
            mtus.removeAll(keepingCapacity: true)
            queuePriorities.removeAll(keepingCapacity: true)
            if snapshot.generation != generation {
                counts.resetRules(snapshot.flows?.rules.map(\.name) ?? [])
            }
            generation = snapshot.generation
            linkGeneration = links
        }
        let key = UInt64(packet.inputInterface ?? 0) << 32 | UInt64(packet.outputInterface ?? 0)
        if let p = policies[key] { return p }
        let p = snapshot.policy(input: name(packet.inputInterface), output: name(packet.outputInterface))
        policies[key] = p
        return p
    }

    /// The flow rules' class for the packet's input interface (0: none of the rules' interfaces).
    private mutating func ingressClass(_ packet: QueuedPacket, _ flows: FlowRuntime) -> UInt16 {
        guard let index = packet.inputInterface, !flows.classifier.ingressClass.isEmpty else { return 0 }
        if let c = ingressClasses[index] { return c }
        let c = name(index).flatMap { flows.classifier.ingressClass[$0] } ?? 0
        ingressClasses[index] = c
        return c
    }

    /// The skb priority per service class (indexed by raw value) for the
    /// packet's egress interface, empty when it has no queues; cached.
    private mutating func queuePriorities(_ packet: QueuedPacket, _ snapshot: PolicySnapshot) -> [UInt32] {
        let index = packet.outputInterface ?? 0
        if let p = queuePriorities[index] { return p }
        let p = name(packet.outputInterface).flatMap { snapshot.config.queuePriorities(output: $0) } ?? []
        queuePriorities[index] = p
        return p
    }

    /// The egress interface's MTU (``FlowBehaviourTable/assumedMTU`` when unknown), cached.
    private mutating func mtu(_ packet: QueuedPacket) -> Int {
        guard let index = packet.outputInterface else { return FlowBehaviourTable.assumedMTU }
        if let m = mtus[index] { return m }
        let m = name(index).flatMap(FlowBehaviourTable.systemMTU) ?? FlowBehaviourTable.assumedMTU
        mtus[index] = m
        return m
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
        let truncated = packet.isTruncated
        let rewrite = config.rewriteDSCP && !config.markOnly && !truncated
        // Flow rules first (docs/CLASSIFY.md), then trust.
        var ruled: Treatment?
        if let flows = snapshot.flows,
            let fields = PacketFlow.fields(UnsafeRawBufferPointer(payload), format: .ip),
            let (index, _) = flows.rule(fields, ingress: ingressClass(packet, flows))
        {
            ruled = flows.rules[index].action.treatment(ingress: policy.ingress)
            // The packet's length as sent, not the copy's (mark-only queues 128 bytes).
            counts.countRule(index, bytes: Int(packet.capturedLength ?? UInt32(payload.count)))
        }
        // Flow behaviour (classify.flows) replaces the class rules or trust gave.
        if let table = snapshot.behaviour,
            let fields = PacketFlow.fields(UnsafeRawBufferPointer(payload), format: .ip)
        {
            let base =
                ruled
                ?? PacketMarker.classify(UnsafeRawBufferPointer(payload), format: .ip, policy: policy)
                .treatment
            let length = Int(packet.capturedLength ?? UInt32(payload.count))
            let gso = packet.skbInfo?.contains(.gso) ?? false
            let segments = FlowBehaviourTable.segments(
                UnsafeRawBufferPointer(payload), length: length, gso: gso, mtu: gso ? mtu(packet) : 0)
            if let t = table.treatment(
                fields, base: base, length: length, segments: segments, counts: &counts.flows)
            {
                ruled = t
            }
        }
        let result: RemarkResult
        if let ruled {
            result =
                rewrite
                ? PacketMarker.remark(payload, format: .ip, policy: policy, treatment: ruled)
                : PacketMarker.classify(
                    UnsafeRawBufferPointer(payload), format: .ip, policy: policy, treatment: ruled)
        } else {
            result =
                rewrite
                ? PacketMarker.remark(payload, format: .ip, policy: policy)
                : PacketMarker.classify(UnsafeRawBufferPointer(payload), format: .ip, policy: policy)
        }
        var outcome: PacketOutcome
        var returned: UnsafeRawBufferPointer?
        switch result.status {
        case .malformed, .unsupported:
            counts.count(.bestEffort, .malformed)
            return .accept
        case .rewritten where rewrite:
            outcome = .rewritten
            returned = UnsafeRawBufferPointer(payload)
            switch Self.checksumAction(packet.skbInfo ?? [], hook: packet.hook, payload) {
            case .none: break
            case .keepOriginal:
                outcome = .gsoLocalUnmarked
                returned = nil
            case .leavePartial: counts.gsoPartialChecksums &+= 1
            case .complete:
                if TransportChecksum.complete(payload) {
                    counts.checksumCompletions &+= 1
                } else if !result.tailMalformed {
                    // An L4 the kernel would finish itself (SCTP's CRC, say):
                    // returning it would ship an unfinished checksum.
                    outcome = .checksumFailed
                    returned = nil
                }
            // A malformed tail has no checksum to finish; its DSCP is what matters.
            }
        default:
            outcome = config.markOnly ? .markOnly : (truncated ? .truncated : .unchanged)
        }
        // A truncated copy always looks cut short; only a whole packet can have a bad tail.
        if result.tailMalformed, !truncated { counts.malformedTails &+= 1 }
        let treatment = result.treatment
        counts.count(treatment, outcome)
        var verdict = Verdict(.accept, payload: returned)
        if let encoding = config.mark {
            verdict.mark = encoding.apply(treatment, to: packet.mark ?? 0)
        }
        // Queues on the egress interface win over `priority: true`: the
        // field holds one value, and the queue's class id is what the
        // interface's qdisc reads (a VLAN egress-qos-map can turn it into PCP).
        let queued = queuePriorities(packet, snapshot)
        if !queued.isEmpty {
            verdict.priority = queued[Int(treatment.serviceClass.rawValue)]
        } else if config.priority {
            verdict.priority = UInt32(policy.egress.pcp(for: treatment).rawValue)
        }
        return verdict
    }

    /// What a returned payload's L4 checksum needs.
    enum ChecksumAction: Equatable {
        /// The checksum is final already (`CHECKSUM_NONE`/`UNNECESSARY` on the way in).
        case none
        /// Finish it: the kernel sets `CHECKSUM_NONE` on a payload verdict
        /// (`nfqnl_mangle`), so nothing later computes it.
        case complete
        /// Keep the pseudo-header sum the stack left there: a GSO packet that
        /// is still to be segmented gets its per-segment checksums from it
        /// (`__udp_gso_segment` adjusts that sum for each segment's length;
        /// `tcp4/6_gso_segment` rebuild it), and a checksum completed over
        /// the whole super-packet would make every UDP segment's wrong.
        case leavePartial
        /// Return no payload: a UDP GSO packet at `NF_INET_LOCAL_IN` is
        /// segmented for its socket after the hook, and that fails for a
        /// `CHECKSUM_NONE` packet whatever its checksum field holds (seen on
        /// 6.18: every segment in `UdpInErrors`), so the original goes on.
        case keepOriginal
    }

    /// `NF_INET_LOCAL_IN`: a packet queued there is delivered whole, not segmented.
    static let localInHook: UInt8 = 1

    /// Chooses the checksum treatment from `NFQA_SKB_INFO` and the hook.
    static func checksumAction(
        _ info: QueuedPacket.SKBInfo, hook: UInt8?, _ packet: UnsafeMutableRawBufferPointer
    ) -> ChecksumAction {
        if info.contains(.gso), hook == localInHook {
            let proto = TransportChecksum.transportProtocol(packet)
            if proto == 17 || proto == 136 { return .keepOriginal }
        }
        guard info.contains(.checksumNotReady) else { return .none }
        // Locally delivered GSO (GRO) TCP packets are checked whole, so they
        // need the full sum; everything else is segmented on its way out.
        if info.contains(.gso), hook != localInHook { return .leavePartial }
        return .complete
    }
}
