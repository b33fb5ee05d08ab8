import BPFClassifier
import QoSMapCore

/// The classifier loaded with a config's tables and flow rules exactly as
/// ``EBPFDatapath`` writes them (slot 0, no interface attached), run on
/// frames through `BPF_PROG_TEST_RUN`: for benchmarks (`qosmap-bench-ebpf`)
/// and tests.
public struct EBPFTestBench {
    let maps: EBPFDatapath.Maps
    let tables: EBPFTables
    let behaviour: FlowBehaviour

    /// Loads the embedded classifier and writes `snapshot`'s tables;
    /// `interfaces` gives the ifindex the runs use for interface names
    /// (ingress words carry the flow rules' ingress class, as installed).
    /// `object`: another build of `Bpf/qosmap.bpf.c` than the embedded one
    /// (with the same maps).
    /// - Throws: ``ConfigError`` or ``BPFError``.
    public init(_ snapshot: PolicySnapshot, interfaces: [String: UInt32], object: [UInt8]? = nil) throws {
        tables = try EBPFTables(snapshot)
        maps = try EBPFDatapath.loadObject(object)
        behaviour = snapshot.config.classify.behaviour
        let keys = tables.entries.keys.sorted()
        try maps.table.update(keys: keys.map { UInt32($0) }, values: keys.map { tables.entries[$0]! })
        if let flows = tables.flows { try EBPFDatapath.writeFlows(flows, slot: 0, epoch: 1, maps) }
        if !behaviour.isEmpty { try EBPFBehaviour.write(behaviour, slot: 0, epoch: 1, maps) }
        try maps.gen.update(
            UInt32(0),
            (tables.flows == nil ? 0 : EBPFFlowLayout.genRules)
                | (behaviour.isEmpty ? 0 : EBPFBehaviour.genBehave))
        for (name, ifindex) in interfaces {
            var input = EBPFPolicySlots()
            input[0] = (tables.ingress[name] ?? 0) | UInt32(tables.flows?.ingressClass[name] ?? 0) << 16
            var output = EBPFPolicySlots()
            output[0] = tables.egress[name] ?? 0
            let small = ifindex < EBPFLayout.ifindexArray
            try (small ? maps.ingress : maps.ingressHash).update(ifindex, input)
            try (small ? maps.egress : maps.egressHash).update(ifindex, output)
        }
    }

    /// Runs `frame` (Ethernet) `count` times leaving on `ifindex`, arrived on
    /// `ingressIfindex`; the kernel's run (its average time per run in
    /// ``BPFTestRun/averageNanoseconds``).
    public func run(
        _ frame: [UInt8], ifindex: UInt32 = 1, ingressIfindex: UInt32 = 0, repeat count: UInt32 = 1
    )
        throws(BPFError) -> BPFTestRun
    {
        try maps.program.testRun(
            packet: frame, ifindex: ifindex, ingressIfindex: ingressIfindex, repeat: count)
    }

    /// Makes the classifier read `nanoseconds` as the time (0: its clock),
    /// for `classify.flows` (BPF_PROG_TEST_RUN cannot set the clock).
    public func setTime(_ nanoseconds: UInt64) throws(BPFError) {
        try EBPFBehaviour.write(behaviour, slot: 0, epoch: 1, testNow: nanoseconds, maps)
    }

    /// `classify.flows` counters so far (all CPUs): tracked, evicted,
    /// demoted, promoted.
    public func behaviourCounts() throws(BPFError) -> [UInt64] { try EBPFBehaviour.counts(maps) }

    /// Packets and bytes each rule counted so far (all CPUs).
    public func ruleCounts() throws(BPFError) -> [(packets: UInt64, bytes: UInt64)] {
        try EBPFDatapath.ruleCounts(maps, slot: 0, count: tables.flows?.names.count ?? 0).map {
            ($0.packets, $0.bytes)
        }
    }
}
