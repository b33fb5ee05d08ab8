import BPFClassifier
import QoSMapCore

/// `struct qm_bconf` of Bpf/qosmap.bpf.c: one slot's `classify.flows`.
struct EBPFBehaviourConfig: BitwiseCopyable {
    var bytes: UInt64 = 0
    var testNow: UInt64 = 0
    var packetsPerSecond: UInt32 = 0
    var hold: UInt32 = 0
    var maxAverage: UInt32 = 0
    var epoch: UInt32 = 0
    var bulkCell: UInt8 = 0
    var interactiveCell: UInt8 = 0
    var applyTo: UInt8 = 0
    var flags: UInt8 = 0
    var pad: UInt32 = 0
}

/// Flow behaviour in the ebpf classifier (`qm_bconf`, `qm_behave`,
/// `qm_bcount`; the same state machine as ``FlowBehaviourState`` in the
/// same 4-way table as ``FlowBehaviourTable``).
enum EBPFBehaviour {
    /// `QM_GEN_BEHAVE`: the bit of `qm_gen` that says the active slot has flow behaviour.
    static let genBehave: UInt32 = 4

    /// The `qm_bconf` value for `b`.
    static func config(_ b: FlowBehaviour, epoch: UInt32, testNow: UInt64 = 0) -> EBPFBehaviourConfig {
        var c = EBPFBehaviourConfig()
        c.epoch = epoch
        c.testNow = testNow
        c.applyTo = b.applyTo
        if let bulk = b.bulk {
            c.flags |= 1
            c.hold = bulk.hold
            c.bulkCell = UInt8(bulk.treatment.cellIndex)
            if let pps = bulk.packetsPerSecond {
                c.flags |= 2
                c.packetsPerSecond = pps
            }
            if let bytes = bulk.bytes {
                c.flags |= 4
                c.bytes = bytes
            }
        }
        if let i = b.interactive {
            c.flags |= 8
            c.maxAverage = i.maxAverageSize
            c.interactiveCell = UInt8(i.treatment.cellIndex)
        }
        return c
    }

    /// Writes `b` into `slot` of `qm_bconf` (read once `qm_gen` points at
    /// the slot): one entry per class, `slot << 3 | class`, each with that
    /// class's tests (``FlowBehaviour/tests(for:)``; a class not checked has
    /// no `apply_to` bit). Every entry carries the slot's epoch.
    static func write(
        _ b: FlowBehaviour, slot: Int, epoch: UInt32, testNow: UInt64 = 0, _ maps: EBPFDatapath.Maps
    ) throws(BPFError) {
        let map = try maps.object.map(named: "qm_bconf")
        for (c, tests) in b.perClass.enumerated() {
            let value = config(tests ?? FlowBehaviour(applyTo: 0), epoch: epoch, testNow: testNow)
            try map.update(UInt32(slot << 3 | c), value)
        }
    }

    /// `qm_bcount` summed over CPUs: flows tracked, evicted, demoted, promoted.
    static func counts(_ maps: EBPFDatapath.Maps) throws(BPFError) -> [UInt64] {
        let m = try maps.object.map(named: "qm_bcount")
        var r: [UInt64] = []
        for i in 0..<4 { r.append(try m.perCPUCounters(UInt32(i)).reduce(0, &+)) }
        return r
    }
}
