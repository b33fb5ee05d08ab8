import Metrics
import QoSMapCore

/// The daemon's swift-metrics counters, created once so that no label is built
/// per packet. Labels are bounded: 8 classes × 3 colors × 6 outcomes.
public final class DaemonMetrics: Sendable {
    let packets: [Counter]
    let results: [Counter]
    let checksumCompletions: Counter
    /// Verdicts the kernel rejected or that could not be sent.
    public let verdictErrors: Counter
    /// Receive overruns (ENOBUFS) survived.
    public let enobufs: Counter
    /// Successful reloads.
    public let reloadSuccesses: Counter
    /// Reloads that kept the old tables.
    public let reloadFailures: Counter

    /// Creates the counters with the bootstrapped metrics backend.
    public init() {
        var packets: [Counter] = []
        for t in Treatment.allCells {
            for o in PacketOutcome.allCases {
                packets.append(
                    Counter(
                        label: "qosmapd_packets_total",
                        dimensions: [
                            ("class", t.serviceClass.name), ("color", t.color.name), ("action", o.label),
                        ]))
            }
        }
        self.packets = packets
        results = PacketOutcome.allCases.map {
            Counter(label: "qosmapd_results_total", dimensions: [("result", $0.label)])
        }
        checksumCompletions = Counter(label: "qosmapd_checksum_completions_total")
        verdictErrors = Counter(label: "qosmapd_verdict_errors_total")
        enobufs = Counter(label: "qosmapd_enobufs_total")
        reloadSuccesses = Counter(label: "qosmapd_reloads_total", dimensions: [("result", "success")])
        reloadFailures = Counter(label: "qosmapd_reloads_total", dimensions: [("result", "failure")])
    }

    /// Adds a thread's counts and zeroes them.
    public func flush(_ counts: inout PacketCounts) {
        var totals = [Int](repeating: 0, count: PacketOutcome.allCases.count)
        for (i, n) in counts.byTreatment.enumerated() where n != 0 {
            packets[i].increment(by: Int64(n))
            totals[i % PacketOutcome.allCases.count] += n
        }
        for (i, n) in totals.enumerated() where n != 0 { results[i].increment(by: Int64(n)) }
        if counts.checksumCompletions != 0 {
            checksumCompletions.increment(by: Int64(counts.checksumCompletions))
        }
        counts = PacketCounts()
    }
}
