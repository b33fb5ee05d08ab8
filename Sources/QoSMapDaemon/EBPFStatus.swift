import BPFClassifier
import QoSMapCore

/// `struct qm_bway` of Bpf/qosmap.bpf.c: one way of a `qm_behave` set.
struct EBPFBehaviourWay: BitwiseCopyable {
    var k: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)
    var second: UInt32 = 0
    var packets: UInt32 = 0
    var bytes: UInt64 = 0
    var bulkUntil: UInt32 = 0
    var average: UInt32 = 0
    var epoch: UInt32 = 0
    var last: UInt32 = 0
    var since: UInt64 = 0
}

/// `struct qm_bset`: the four ways of one set.
typealias EBPFBehaviourSet = (EBPFBehaviourWay, EBPFBehaviourWay, EBPFBehaviourWay, EBPFBehaviourWay)

/// `struct qm_flow`: FlowKey's ten words and `rule + 1 | epoch << 16`.
typealias EBPFFlowEntry = (
    UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32
)

extension EBPFDatapath {
    /// `qm_flows` and `qm_behave` read for `qosmap status`: the entries of
    /// the epoch in force, the first `limit` of each. One lookup per slot
    /// (65,536 and 16,384 `bpf(2)` calls, tens of milliseconds) on the status
    /// server's thread, never a packet's.
    func statusTables(limit: Int) -> (
        StatusReport.List<StatusReport.Connection>, StatusReport.List<StatusReport.TrackedFlow>
    ) {
        guard let st = statusState() else {
            return (
                .init([], total: 0, note: "the classifier is not loaded"),
                .init([], total: 0, note: "the classifier is not loaded")
            )
        }
        var connections: StatusReport.List<StatusReport.Connection>
        if st.rules.isEmpty {
            connections = .init([], total: 0, note: "no flow rules")
        } else {
            var items: [StatusReport.Connection] = []
            var total = 0
            var failure: String?
            for slot in 0..<UInt32(ConnectionTable.slots) {
                let e: EBPFFlowEntry?
                do { e = try st.maps.flows.lookup(slot, as: EBPFFlowEntry.self) } catch {
                    failure = "cannot read qm_flows: \(error)"
                    break
                }
                guard let e, e.10 & 0xFFFF != 0, e.10 >> 16 == st.epoch & 0xFFFF else { continue }
                total += 1
                guard items.count < limit else { continue }
                let key = FlowKey(words: (e.0, e.1, e.2, e.3, e.4, e.5, e.6, e.7, e.8, e.9))
                let rule = Int(e.10 & 0xFFFF) - 1
                items.append(
                    .init(flow: .init(key), rule: rule < st.rules.count ? st.rules[rule] : "#\(rule)"))
            }
            connections = .init(items, total: total, note: failure)
        }
        guard st.behaviour else {
            return (connections, .init([], total: 0, note: "classify.flows is not configured"))
        }
        var flows: [StatusReport.TrackedFlow] = []
        var total = 0
        var failure: String?
        let m: BPFMap
        do { m = try st.maps.object.map(named: "qm_behave") } catch {
            return (connections, .init([], total: 0, note: "cannot read qm_behave: \(error)"))
        }
        sets: for set in 0..<UInt32(FlowBehaviourTable.capacity / 4) {
            let b: EBPFBehaviourSet?
            do { b = try m.lookup(set, as: EBPFBehaviourSet.self) } catch {
                failure = "cannot read qm_behave: \(error)"
                break sets
            }
            guard let b else { continue }
            for w in [b.0, b.1, b.2, b.3] where w.last & 0x100 != 0 && w.epoch == st.behaviourEpoch {
                total += 1
                guard flows.count < limit else { continue }
                func lo(_ x: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: x) }
                func hi(_ x: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: x >> 32) }
                let key = FlowKey(
                    words: (
                        lo(w.k.0), hi(w.k.0), lo(w.k.1), hi(w.k.1), lo(w.k.2), hi(w.k.2), lo(w.k.3),
                        hi(w.k.3),
                        lo(w.k.4), hi(w.k.4)
                    ))
                var s = FlowBehaviourState()
                s.second = w.second
                s.packets = w.packets
                s.bytes = w.bytes
                s.bulkUntil = w.bulkUntil
                s.averageSize = w.average
                s.last = FlowVerdict(rawValue: UInt8(truncatingIfNeeded: w.last)) ?? .none
                flows.append(.init(key, s))
            }
        }
        return (connections, .init(flows, total: total, note: failure))
    }
}
