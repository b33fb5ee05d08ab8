import Metrics
import QoSMapCore
import Synchronization
import TrafficShaping

/// The kernel's own counters of each class qosmapd built (issue 38), as
/// Prometheus series labelled by interface, direction (`egress`, or
/// `ingress` for the download's IFB) and service class: an HTB leaf class's,
/// or the CAKE tin's that the class is queued in. The kernel's counters
/// are cumulative and restart at zero when a tree is built again; the
/// Prometheus counters add the kernel's increase, so they never go back.
/// Labels are bounded: the configured interfaces × 2 × 8.
///
/// What CAKE does not count per tin has no series there: overlimits and the
/// packet backlog (HTB only); CAKE's ECN marks are
/// `qosmapd_queue_ecn_marked_total` (CAKE only).
public final class QueueMetrics: Sendable {
    /// One read of a class or a tin, in the series' terms; nil where the
    /// discipline has no such counter.
    struct Reading: Equatable {
        var discipline: String
        var bytes: UInt64 = 0
        var packets: UInt64 = 0
        var drops: UInt64 = 0
        var overlimits: UInt64?
        var ecnMarked: UInt64?
        var backlogBytes: UInt64 = 0
        var backlogPackets: UInt64?
    }

    /// One class's series and the kernel's figures last read. The series of
    /// counters one discipline lacks are made when a reading has them.
    struct Series {
        let bytes, packets, drops: Counter
        let backlogBytes: Gauge
        var overlimits, ecnMarked: Counter?
        var backlogPackets: Gauge?
        var last: Reading?
    }

    private let factory: any MetricsFactory
    private let series = Mutex<[String: Series]>([:])

    /// Creates the series with `factory` (the bootstrapped backend by default).
    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
    }

    /// Records an HTB class's kernel counters read now.
    public func record(
        interface: String, direction: QueueDirection, serviceClass: ServiceClass, _ stats: TrafficStatistics
    ) {
        record(
            interface: interface, direction: direction, serviceClass: serviceClass,
            Reading(
                discipline: "htb", bytes: stats.bytes, packets: stats.packets, drops: UInt64(stats.drops),
                overlimits: UInt64(stats.overlimits), backlogBytes: UInt64(stats.backlogBytes),
                backlogPackets: UInt64(stats.queueLength)))
    }

    /// Records the counters of the CAKE tin that `serviceClass` is queued in,
    /// read now. Drops are CAKE's and its ACK filter's.
    public func record(
        interface: String, direction: QueueDirection, serviceClass: ServiceClass, _ tin: CAKETinStatistics
    ) {
        record(
            interface: interface, direction: direction, serviceClass: serviceClass,
            Reading(
                discipline: "cake", bytes: tin.sentBytes, packets: UInt64(tin.sentPackets),
                drops: UInt64(tin.droppedPackets) + UInt64(tin.ackDroppedPackets),
                ecnMarked: UInt64(tin.ecnMarkedPackets), backlogBytes: UInt64(tin.backlogBytes)))
    }

    func record(interface: String, direction: QueueDirection, serviceClass: ServiceClass, _ now: Reading) {
        let key = "\(interface)/\(direction.rawValue)/\(serviceClass.name)"
        let labels = [
            ("interface", interface), ("direction", direction.rawValue), ("class", serviceClass.name),
        ]
        let factory = self.factory
        func counter(_ name: String) -> Counter { Counter(label: name, dimensions: labels, factory: factory) }
        func gauge(_ name: String) -> Gauge { Gauge(label: name, dimensions: labels, factory: factory) }
        series.withLock { all in
            var s =
                all[key]
                ?? Series(
                    bytes: counter("qosmapd_queue_bytes_total"),
                    packets: counter("qosmapd_queue_packets_total"),
                    drops: counter("qosmapd_queue_drops_total"),
                    backlogBytes: gauge("qosmapd_queue_backlog_bytes"))
            // Another discipline (a reload from HTB to CAKE or back) rebuilt
            // the tree: its counters start at zero, and the series it does
            // not have go, rather than stay at a value nothing updates.
            let before = s.last?.discipline == now.discipline ? s.last : nil
            // A counter below the last reading: the class was built again and
            // counts from zero; all of it is new.
            func delta(_ now: UInt64, _ before: UInt64?) -> Int64 {
                guard let before else { return Int64(clamping: now) }
                return Int64(clamping: now >= before ? now - before : now)
            }
            s.bytes.increment(by: delta(now.bytes, before?.bytes))
            s.packets.increment(by: delta(now.packets, before?.packets))
            s.drops.increment(by: delta(now.drops, before?.drops))
            s.backlogBytes.record(Int64(clamping: now.backlogBytes))
            if let value = now.overlimits {
                s.overlimits = s.overlimits ?? counter("qosmapd_queue_overlimits_total")
                s.overlimits?.increment(by: delta(value, before?.overlimits))
            } else {
                s.overlimits?.destroy()
                s.overlimits = nil
            }
            if let value = now.ecnMarked {
                s.ecnMarked = s.ecnMarked ?? counter("qosmapd_queue_ecn_marked_total")
                s.ecnMarked?.increment(by: delta(value, before?.ecnMarked))
            } else {
                s.ecnMarked?.destroy()
                s.ecnMarked = nil
            }
            if let value = now.backlogPackets {
                s.backlogPackets = s.backlogPackets ?? gauge("qosmapd_queue_backlog_packets")
                s.backlogPackets?.record(Int64(clamping: value))
            } else {
                s.backlogPackets?.destroy()
                s.backlogPackets = nil
            }
            s.last = now
            all[key] = s
        }
    }
}
