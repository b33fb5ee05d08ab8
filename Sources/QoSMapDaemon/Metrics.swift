import Metrics
import QoSMapCore

/// The daemon's swift-metrics counters, created once so that no label is built
/// per packet. Labels are bounded: 8 classes × 3 colors × 6 outcomes.
public final class DaemonMetrics: Sendable {
    let packets: [Counter]
    let results: [Counter]
    let checksumCompletions: Counter
    let gsoPartialChecksums: Counter
    let malformedTails: Counter
    /// Verdicts the kernel rejected or that could not be sent.
    public let verdictErrors: Counter
    /// Receive overruns (ENOBUFS) survived.
    public let enobufs: Counter
    /// Queue settings applied to a bound queue on reload, by result.
    public let queueReconfigurations: Counter
    /// Queue settings that the kernel refused on reload.
    public let queueReconfigurationFailures: Counter
    /// Verdict messages sent; against the packets counted, it shows how many
    /// packets shared a batch verdict.
    public let verdictMessages: Counter
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
        gsoPartialChecksums = Counter(label: "qosmapd_gso_partial_checksums_total")
        malformedTails = Counter(label: "qosmapd_malformed_tails_total")
        verdictErrors = Counter(label: "qosmapd_verdict_errors_total")
        enobufs = Counter(label: "qosmapd_enobufs_total")
        queueReconfigurations = Counter(
            label: "qosmapd_queue_reconfigurations_total", dimensions: [("result", "success")])
        queueReconfigurationFailures = Counter(
            label: "qosmapd_queue_reconfigurations_total", dimensions: [("result", "failure")])
        verdictMessages = Counter(label: "qosmapd_verdict_messages_total")
        reloadSuccesses = Counter(label: "qosmapd_reloads_total", dimensions: [("result", "success")])
        reloadFailures = Counter(label: "qosmapd_reloads_total", dimensions: [("result", "failure")])
    }

    /// Adds a thread's counts and zeroes them.
    ///
    /// Runs once per received datagram, so it allocates nothing: it zeroes
    /// the touched cells in place instead of building new arrays.
    public func flush(_ counts: inout PacketCounts) {
        let outcomes = PacketOutcome.caseCount
        for i in counts.byTreatment.indices {
            let n = counts.byTreatment[i]
            guard n != 0 else { continue }
            packets[i].increment(by: Int64(n))
            results[i % outcomes].increment(by: Int64(n))
            counts.byTreatment[i] = 0
        }
        if counts.checksumCompletions != 0 {
            checksumCompletions.increment(by: Int64(counts.checksumCompletions))
            counts.checksumCompletions = 0
        }
        if counts.gsoPartialChecksums != 0 {
            gsoPartialChecksums.increment(by: Int64(counts.gsoPartialChecksums))
            counts.gsoPartialChecksums = 0
        }
        if counts.malformedTails != 0 {
            malformedTails.increment(by: Int64(counts.malformedTails))
            counts.malformedTails = 0
        }
    }
}
