import Prometheus
import QoSMapCore
import QoSMapDaemon
import Testing
import TrafficShaping

@Suite("Queue metrics: the kernel's counters in Prometheus")
struct QueueMetricsTests {
    static let ef = #"{interface="wan0",direction="egress",class="EF"}"#

    static func tin(bytes: UInt64, packets: UInt32, dropped: UInt32, ecn: UInt32, backlog: UInt32)
        -> CAKETinStatistics
    {
        var t = CAKETinStatistics()
        t.sentBytes = bytes
        t.sentPackets = packets
        t.droppedPackets = dropped
        t.ecnMarkedPackets = ecn
        t.backlogBytes = backlog
        return t
    }

    /// The value of `name` with EF's labels, nil if absent (labels in any order).
    static func series(_ text: String, _ name: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + "{") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, parts[0].contains(#"interface="wan0""#),
                parts[0].contains(#"direction="egress""#), parts[0].contains(#"class="EF""#)
            else { continue }
            return Double(parts[1])
        }
        return nil
    }

    @Test func aCAKETinsCountersAreTheClasssSeriesAndNeverGoBack() {
        let registry = PrometheusCollectorRegistry()
        let metrics = QueueMetrics(factory: PrometheusMetricsFactory(registry: registry))
        metrics.record(
            interface: "wan0", direction: .egress, serviceClass: .ef,
            Self.tin(bytes: 10_000, packets: 10, dropped: 1, ecn: 2, backlog: 1_500))
        metrics.record(
            interface: "wan0", direction: .egress, serviceClass: .ef,
            Self.tin(bytes: 25_000, packets: 25, dropped: 3, ecn: 2, backlog: 0))
        var text = registry.emitToString()
        #expect(Self.series(text, "qosmapd_queue_bytes_total") == 25_000)
        #expect(Self.series(text, "qosmapd_queue_packets_total") == 25)
        #expect(Self.series(text, "qosmapd_queue_drops_total") == 3)
        #expect(Self.series(text, "qosmapd_queue_ecn_marked_total") == 2)
        #expect(Self.series(text, "qosmapd_queue_backlog_bytes") == 0)
        // CAKE counts neither per tin.
        #expect(Self.series(text, "qosmapd_queue_overlimits_total") == nil)
        #expect(Self.series(text, "qosmapd_queue_backlog_packets") == nil)
        // The qdisc built again: CAKE counts from zero, the series on.
        metrics.record(
            interface: "wan0", direction: .egress, serviceClass: .ef,
            Self.tin(bytes: 4_000, packets: 4, dropped: 0, ecn: 1, backlog: 0))
        text = registry.emitToString()
        #expect(Self.series(text, "qosmapd_queue_bytes_total") == 29_000)
        #expect(Self.series(text, "qosmapd_queue_packets_total") == 29)
        #expect(Self.series(text, "qosmapd_queue_ecn_marked_total") == 3)
    }

    @Test func aReloadToHTBCountsTheNewClassFromZeroAndDropsCAKEsOwnSeries() {
        let registry = PrometheusCollectorRegistry()
        let metrics = QueueMetrics(factory: PrometheusMetricsFactory(registry: registry))
        metrics.record(
            interface: "wan0", direction: .egress, serviceClass: .ef,
            Self.tin(bytes: 10_000, packets: 10, dropped: 1, ecn: 2, backlog: 0))
        var htb = TrafficStatistics()
        // More than CAKE's count, and yet a new tree's: all of it is new.
        htb.bytes = 12_000
        htb.packets = 12
        htb.overlimits = 5
        htb.queueLength = 2
        metrics.record(interface: "wan0", direction: .egress, serviceClass: .ef, htb)
        let text = registry.emitToString()
        #expect(Self.series(text, "qosmapd_queue_bytes_total") == 22_000)
        #expect(Self.series(text, "qosmapd_queue_packets_total") == 22)
        #expect(Self.series(text, "qosmapd_queue_overlimits_total") == 5)
        #expect(Self.series(text, "qosmapd_queue_backlog_packets") == 2)
        #expect(Self.series(text, "qosmapd_queue_ecn_marked_total") == nil)
    }
}
