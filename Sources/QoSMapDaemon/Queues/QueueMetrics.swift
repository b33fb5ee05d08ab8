import Metrics
import QoSMapCore
import Synchronization
import TrafficShaping

/// The kernel's own counters of each class qosmapd built (issue 38), as
/// Prometheus series labelled by interface, direction (`egress`, or
/// `ingress` for the download's IFB) and service class. The kernel's counters
/// are cumulative and restart at zero when a tree is built again; the
/// Prometheus counters add the kernel's increase, so they never go back.
/// Labels are bounded: the configured interfaces × 2 × 8.
public final class QueueMetrics: Sendable {
    /// One class's series and the kernel's figures last read.
    struct Series {
        let bytes, packets, drops, overlimits: Counter
        let backlogBytes, backlogPackets: Gauge
        var last = TrafficStatistics()
    }

    private let factory: any MetricsFactory
    private let series = Mutex<[String: Series]>([:])

    /// Creates the series with `factory` (the bootstrapped backend by default).
    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
    }

    /// Records a class's kernel counters read now.
    public func record(
        interface: String, direction: QueueDirection, serviceClass: ServiceClass, _ stats: TrafficStatistics
    ) {
        let key = "\(interface)/\(direction.rawValue)/\(serviceClass.name)"
        series.withLock { all in
            var s =
                all[key]
                ?? {
                    let labels = [
                        ("interface", interface), ("direction", direction.rawValue),
                        ("class", serviceClass.name),
                    ]
                    func counter(_ name: String) -> Counter {
                        Counter(label: name, dimensions: labels, factory: factory)
                    }
                    return Series(
                        bytes: counter("qosmapd_queue_bytes_total"),
                        packets: counter("qosmapd_queue_packets_total"),
                        drops: counter("qosmapd_queue_drops_total"),
                        overlimits: counter("qosmapd_queue_overlimits_total"),
                        backlogBytes: Gauge(
                            label: "qosmapd_queue_backlog_bytes", dimensions: labels, factory: factory),
                        backlogPackets: Gauge(
                            label: "qosmapd_queue_backlog_packets", dimensions: labels, factory: factory))
                }()
            // A counter below the last reading: the class was built again and
            // counts from zero; all of it is new.
            func delta(_ now: UInt64, _ before: UInt64) -> Int64 {
                Int64(clamping: now >= before ? now - before : now)
            }
            s.bytes.increment(by: delta(stats.bytes, s.last.bytes))
            s.packets.increment(by: delta(stats.packets, s.last.packets))
            s.drops.increment(by: delta(UInt64(stats.drops), UInt64(s.last.drops)))
            s.overlimits.increment(by: delta(UInt64(stats.overlimits), UInt64(s.last.overlimits)))
            s.backlogBytes.record(Int64(stats.backlogBytes))
            s.backlogPackets.record(Int64(stats.queueLength))
            s.last = stats
            all[key] = s
        }
    }
}
