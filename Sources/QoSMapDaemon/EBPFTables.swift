import QoSMapCore
import QoSMapPacket
import QoSMapTables

#if canImport(Glibc)
    import Glibc
#endif

/// The layout shared with `Bpf/qosmap.bpf.c` (its `QM_*` constants); a test
/// compares it with the loaded object's maps.
public enum EBPFLayout {
    /// `QM_IFINDEX_ARRAY`: interfaces below this ifindex have their policies in
    /// the `qm_ingress`/`qm_egress` arrays, the others in the `_hash` maps.
    public static let ifindexArray: UInt32 = 4096
    /// The map libbpf makes of the global `qm_gen` (section `.data.qm_gen`):
    /// one u32, the active slot and the `QM_GEN_*` bits.
    public static let genMap = ".data.qm_gen"
    /// The map of the global `qm_config` (section `.data.qm_config`): the
    /// carry mask and shift (``EBPFCarry``).
    public static let configMap = ".data.qm_config"
    /// Distinct ingress policies (trust × inbound domain), `local` included.
    public static let maxIngress = 16
    /// Distinct egress policies (outbound domains).
    public static let maxEgress = 16
    /// Entries per (ingress, egress) pair: one per DSCP, then one per PCP × DEI
    /// (`PCP << 1 | DEI`, used for ingress policies that trust 802.1p), then
    /// one per class × color cell (a flow rule's treatment, at
    /// ``EBPFFlowLayout/ruleBase``).
    public static let entriesPerPair = 104
    /// Where the PCP × DEI entries of a pair start.
    public static let pcpBase = 64
    /// Entries per slot of `qm_table`.
    public static let slotEntries = maxIngress * maxEgress * entriesPerPair
    /// Counter slots per class × color cell (``PacketOutcome`` raw values fit).
    public static let outcomesPerCell = 8
    /// `qm_counters` entries: 24 cells × 8 outcomes, plus one for malformed packets.
    public static let counterEntries = 24 * outcomesPerCell + 1
    /// `QM_F_DSCP`, `QM_F_MARK`, `QM_F_PRIORITY`.
    public static let flagDSCP: UInt8 = 1
    /// Set `skb->mark`.
    public static let flagMark: UInt8 = 2
    /// Set `skb->priority`.
    public static let flagPriority: UInt8 = 4
}

/// `struct qm_config`: the skb mark bits that carry PCP and DEI from the
/// ingress classifier to egress.
public struct EBPFCarry: BitwiseCopyable, Equatable, Sendable {
    /// `carry_mask`.
    public var mask: UInt32
    /// `carry_shift`: the mask's lowest bit.
    public var shift: UInt32

    /// Creates the value.
    public init(mask: UInt32, shift: UInt32) {
        self.mask = mask
        self.shift = shift
    }
}

/// `struct qm_entry`: what a packet with one DSCP gets for one (ingress,
/// egress) pair.
public struct EBPFEntry: BitwiseCopyable, Equatable, Sendable {
    /// The DSCP written (when ``flags`` has ``EBPFLayout/flagDSCP``).
    public var dscp: UInt8
    /// `QM_F_*`.
    public var flags: UInt8
    /// The class × color cell (``Treatment/cellIndex``), for the counters.
    public var cell: UInt8
    var pad: UInt8 = 0
    /// The mark bits set.
    public var markValue: UInt32
    /// The mark bits replaced.
    public var markMask: UInt32
    /// The skb priority set.
    public var priority: UInt32
}

/// `struct qm_policy`: an interface's policy number in each table slot.
public struct EBPFPolicySlots: BitwiseCopyable, Equatable, Sendable {
    /// Slot 0 and slot 1.
    public var slots: (UInt32, UInt32) = (0, 0)
    /// Creates slots (both 0: the default policy).
    public init() {}
    /// The value for slot `s`.
    public subscript(_ s: Int) -> UInt32 {
        get { s == 0 ? slots.0 : slots.1 }
        set { if s == 0 { slots.0 = newValue } else { slots.1 = newValue } }
    }
    /// Equal slots.
    public static func == (a: Self, b: Self) -> Bool { a.slots == b.slots }
}

/// One `qm_shape` value (`struct qm_shape` in qosmap.bpf.c): the IFB that
/// holds an interface's download queues, and each service class's skb
/// priority there (by raw value).
public struct EBPFShape: BitwiseCopyable, Equatable, Sendable {
    /// The IFB's ifindex.
    public var ifb: UInt32
    /// BE to CS7.
    public var priorities: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)
    /// A value from an ifindex and eight priorities (missing ones 0).
    public init(ifb: UInt32, priorities p: [UInt32]) {
        self.ifb = ifb
        let q = p + [UInt32](repeating: 0, count: max(0, 8 - p.count))
        priorities = (q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7])
    }
    /// The priorities as an array.
    public var priorityList: [UInt32] {
        let p = priorities
        return [p.0, p.1, p.2, p.3, p.4, p.5, p.6, p.7]
    }
    /// Equal fields.
    public static func == (a: Self, b: Self) -> Bool { a.ifb == b.ifb && a.priorityList == b.priorityList }
}

/// A ``PolicySnapshot`` compiled for the classifier: every IP trust mode
/// reduces to a function of the 6 DSCP bits, so each (ingress policy, egress
/// policy) pair is 64 entries. Ingress policy 0 is the default one, used for
/// `local` (host-originated packets, ingress ifindex 0) and every interface
/// without settings of its own, as in the nfqueue path.
public struct EBPFTables: Sendable {
    /// Ingress policy number by interface name (only names whose policy is not 0).
    public var ingress: [String: UInt32] = [:]
    /// Egress policy number by interface name.
    public var egress: [String: UInt32] = [:]
    /// Ingress policies used (at least 1).
    public var ingressCount = 1
    /// Egress policies used (at least 1).
    public var egressCount = 1
    /// `entries[(i * maxEgress + o) * 64 + dscp]` for `i < ingressCount`, `o < egressCount`
    /// (other pairs are left as default entries).
    public var entries: [Int: EBPFEntry] = [:]
    /// The `classify:` rules compiled for the `qm_f*` maps; nil without rules.
    var flows: EBPFFlowTables?

    /// Compiles `snapshot`; throws when it needs more policies than the maps hold.
    public init(_ snapshot: PolicySnapshot) throws(ConfigError) {
        let config = snapshot.config
        var ins: [MarkingPolicy] = [snapshot.policy(input: nil, output: nil)]
        // An egress policy is an outbound domain with or without queues (the
        // queues' skb priority per class): an interface with queues gets the
        // class id where `priority: true` would put the PCP.
        var outs: [(domain: DSDomain, queues: [UInt32]?)] = [(ins[0].egress, nil)]
        for name in config.interfaces.keys.sorted() {
            let i = snapshot.policy(input: name, output: nil)
            let o = (
                domain: snapshot.policy(input: nil, output: name).egress,
                queues: config.queuePriorities(output: name)
            )
            let inIndex =
                ins.firstIndex { $0.trust == i.trust && $0.ingress.name == i.ingress.name }
                ?? {
                    ins.append(i)
                    return ins.count - 1
                }()
            let outIndex =
                outs.firstIndex { $0.domain.name == o.domain.name && $0.queues == o.queues }
                ?? {
                    outs.append(o)
                    return outs.count - 1
                }()
            if inIndex != 0 { ingress[name] = UInt32(inIndex) }
            if outIndex != 0 { egress[name] = UInt32(outIndex) }
        }
        guard ins.count <= EBPFLayout.maxIngress, outs.count <= EBPFLayout.maxEgress else {
            throw ConfigError(
                at: config.interfacesPosition,
                "datapath ebpf: \(ins.count) ingress and \(outs.count) egress policies; allowed: at most \(EBPFLayout.maxIngress) and \(EBPFLayout.maxEgress) distinct (trust, domain) pairs and outbound domains"
            )
        }
        ingressCount = ins.count
        egressCount = outs.count
        if let f = snapshot.flows { flows = EBPFFlowTables(f, ingress: ins) }
        for (i, inPolicy) in ins.enumerated() {
            for (o, (outDomain, queues)) in outs.enumerated() {
                let policy = MarkingPolicy(
                    trust: inPolicy.trust, ingress: inPolicy.ingress, egress: outDomain)
                let base = (i * EBPFLayout.maxEgress + o) * EBPFLayout.entriesPerPair
                // Under trust 8021p these are for untagged packets, which the
                // engine gives its untrusted fallback.
                for dscp in 0..<64 {
                    entries[base + dscp] = try Self.entry(UInt8(dscp), policy, config, queues: queues)
                }
                // A flow rule's treatment: the packet leaves as one that trust
                // classified to that cell.
                for t in Treatment.allCells {
                    entries[base + EBPFFlowLayout.ruleBase + t.cellIndex] = try Self.entry(
                        t, policy, config, queues: queues)
                }
                guard inPolicy.trust == .dot1p else { continue }
                for pcp in 0..<8 {
                    for dei in 0..<2 {
                        entries[base + EBPFLayout.pcpBase + (pcp << 1 | dei)] = try Self.entry(
                            pcp: UInt8(pcp), dei: dei == 1, policy, config, queues: queues)
                    }
                }
            }
        }
    }

    /// The entry for a packet a flow rule classified as `t`: ``PacketMarker``
    /// remarks a probe with the rule's treatment in place of trust's.
    static func entry(
        _ t: Treatment, _ policy: MarkingPolicy, _ config: DaemonConfig, queues: [UInt32]? = nil
    ) throws(ConfigError) -> EBPFEntry {
        var header = ProbeFrame.ip(ipv6: false, dscp: 0)
        let result = PacketMarker.remark(&header, format: .ip, policy: policy, treatment: t)
        guard result.status == .rewritten || result.status == .unchanged else {
            throw ConfigError(file: config.file, "datapath ebpf: \(t) cannot be marked")
        }
        return entry(result.treatment, newDSCP: header[1] >> 2, policy, config, queues: queues)
    }

    /// One entry, decided by the same engine as the nfqueue path: a minimal
    /// IPv4 header with this DSCP is remarked by ``PacketMarker``.
    static func entry(
        _ dscp: UInt8, _ policy: MarkingPolicy, _ config: DaemonConfig, queues: [UInt32]? = nil
    ) throws(ConfigError) -> EBPFEntry {
        var header = ProbeFrame.ip(ipv6: false, dscp: dscp)
        let result = PacketMarker.remark(&header, format: .ip, policy: policy)
        guard result.status == .rewritten || result.status == .unchanged else {
            throw ConfigError(file: config.file, "datapath ebpf: DSCP \(dscp) cannot be classified")
        }
        return entry(result.treatment, newDSCP: header[1] >> 2, policy, config, queues: queues)
    }

    /// The entry for a frame tagged with this PCP and DEI under a trust-8021p
    /// policy: ``PacketMarker`` remarks ``ProbeFrame/tagged(pcp:dei:ipv6:)``
    /// (the classifier, like the engine, carries DEI only from S-tags), and
    /// the DSCP it writes is the entry's.
    static func entry(
        pcp: UInt8, dei: Bool, _ policy: MarkingPolicy, _ config: DaemonConfig, queues: [UInt32]? = nil
    )
        throws(ConfigError)
        -> EBPFEntry
    {
        var frame = ProbeFrame.tagged(pcp: pcp, dei: dei, ipv6: false)
        let result = PacketMarker.remark(&frame, format: .ethernet, policy: policy)
        guard result.status == .rewritten || result.status == .unchanged else {
            throw ConfigError(file: config.file, "datapath ebpf: PCP \(pcp) DEI \(dei) cannot be classified")
        }
        // The IPv4 TOS byte is at 14 + 4 (tag) + 1.
        return entry(result.treatment, newDSCP: frame[19] >> 2, policy, config, queues: queues)
    }

    /// The actions for a packet classified as `t` whose DSCP the engine set to `newDSCP`.
    static func entry(
        _ t: Treatment, newDSCP: UInt8, _ policy: MarkingPolicy, _ config: DaemonConfig,
        queues: [UInt32]? = nil
    ) -> EBPFEntry {
        var flags: UInt8 = 0
        if config.rewriteDSCP, !config.markOnly { flags |= EBPFLayout.flagDSCP }
        if config.mark != nil { flags |= EBPFLayout.flagMark }
        // Queues win over `priority: true` (as on the nfqueue path).
        if config.priority || queues != nil { flags |= EBPFLayout.flagPriority }
        return EBPFEntry(
            dscp: newDSCP, flags: flags, cell: UInt8(t.cellIndex),
            markValue: config.mark?.value(for: t) ?? 0,
            markMask: config.mark?.mask ?? 0,
            priority: queues?[Int(t.serviceClass.rawValue)] ?? UInt32(policy.egress.pcp(for: t).rawValue))
    }
}
