import Metrics
import NFQueue
import QoSMapCore
import Synchronization

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
    /// Verdict sends retried after a transient error.
    public let verdictSendRetries: Counter
    /// Verdict sends split after `EMSGSIZE` or repeated failures.
    public let verdictSendSplits: Counter
    /// Verdicts that could not be sent at all.
    public let verdictsLost: Counter
    /// Successful reloads.
    public let reloadSuccesses: Counter
    /// Reloads that kept the old tables.
    public let reloadFailures: Counter
    /// Queues that could not be bound (at start or on reload).
    public let queueBindFailures: Counter
    /// Queues currently bound by this process.
    public let queuesBound: Gauge
    /// When the last reload finished (seconds since the epoch).
    public let lastReloadTimestamp: Gauge
    /// 1 when the last reload succeeded, 0 when it failed.
    public let lastReloadSuccess: Gauge
    /// The flow-behaviour counters (`qosmapd_flows_*`).
    public let flows: FlowBehaviourMetrics
    private let factory: any MetricsFactory
    private let bound = Atomic<Int>(0)
    private let kernel = Mutex<[UInt16: KernelQueueMetrics]>([:])
    private let rules = Mutex<[String: (packets: Counter, bytes: Counter)]>([:])

    /// The kernel's figures for one queue (`/proc/net/netfilter/nfnetlink_queue`).
    public struct KernelQueueMetrics: Sendable {
        /// `queue_dropped`: packets dropped because the queue was full.
        public let queueDropped: Counter
        /// `user_dropped`: packets dropped because netlink could not deliver them.
        public let userDropped: Counter
        /// `queue_total`: packets waiting for a verdict.
        public let backlog: Gauge
    }

    /// Creates the counters with `factory` (the bootstrapped backend by default).
    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
        flows = FlowBehaviourMetrics(factory: factory)
        var packets: [Counter] = []
        for t in Treatment.allCells {
            for o in PacketOutcome.allCases {
                packets.append(
                    Counter(
                        label: "qosmapd_packets_total",
                        dimensions: [
                            ("class", t.serviceClass.name), ("color", t.color.name), ("action", o.label),
                        ], factory: factory))
            }
        }
        self.packets = packets
        results = PacketOutcome.allCases.map {
            Counter(label: "qosmapd_results_total", dimensions: [("result", $0.label)], factory: factory)
        }
        checksumCompletions = Counter(label: "qosmapd_checksum_completions_total", factory: factory)
        gsoPartialChecksums = Counter(label: "qosmapd_gso_partial_checksums_total", factory: factory)
        malformedTails = Counter(label: "qosmapd_malformed_tails_total", factory: factory)
        verdictErrors = Counter(label: "qosmapd_verdict_errors_total", factory: factory)
        enobufs = Counter(label: "qosmapd_enobufs_total", factory: factory)
        queueReconfigurations = Counter(
            label: "qosmapd_queue_reconfigurations_total", dimensions: [("result", "success")],
            factory: factory)
        queueReconfigurationFailures = Counter(
            label: "qosmapd_queue_reconfigurations_total", dimensions: [("result", "failure")],
            factory: factory)
        verdictMessages = Counter(label: "qosmapd_verdict_messages_total", factory: factory)
        verdictSendRetries = Counter(label: "qosmapd_verdict_send_retries_total", factory: factory)
        verdictSendSplits = Counter(label: "qosmapd_verdict_send_splits_total", factory: factory)
        verdictsLost = Counter(label: "qosmapd_verdicts_lost_total", factory: factory)
        reloadSuccesses = Counter(
            label: "qosmapd_reloads_total", dimensions: [("result", "success")], factory: factory)
        reloadFailures = Counter(
            label: "qosmapd_reloads_total", dimensions: [("result", "failure")], factory: factory)
        queueBindFailures = Counter(label: "qosmapd_queue_bind_failures_total", factory: factory)
        queuesBound = Gauge(label: "qosmapd_queues_bound", factory: factory)
        lastReloadTimestamp = Gauge(label: "qosmapd_last_reload_timestamp_seconds", factory: factory)
        lastReloadSuccess = Gauge(label: "qosmapd_last_reload_success", factory: factory)
        queuesBound.record(0)
    }

    /// Counts a queue bound (`by` 1) or unbound (`by` -1) and updates the gauge.
    public func queueBound(by delta: Int) {
        queuesBound.record(bound.add(delta, ordering: .relaxed).newValue)
    }

    /// Records the load at start as the last (successful) one, so that
    /// `qosmapd_last_reload_success` reads 0 only after a failed reload.
    public func loaded(at seconds: Double) {
        lastReloadTimestamp.record(seconds)
        lastReloadSuccess.record(1)
    }

    /// Records a finished reload's time and result.
    public func reloaded(success: Bool, at seconds: Double) {
        (success ? reloadSuccesses : reloadFailures).increment()
        lastReloadTimestamp.record(seconds)
        lastReloadSuccess.record(success ? 1 : 0)
    }

    /// The kernel figures of queue `number`, created on first use; only queues
    /// in the config are asked for, so the label set stays bounded.
    public func kernelQueue(_ number: UInt16) -> KernelQueueMetrics {
        kernel.withLock { cache in
            if let m = cache[number] { return m }
            let labels = [("queue", String(number))]
            let m = KernelQueueMetrics(
                queueDropped: Counter(
                    label: "qosmapd_kernel_queue_dropped_total", dimensions: labels, factory: factory),
                userDropped: Counter(
                    label: "qosmapd_kernel_user_dropped_total", dimensions: labels, factory: factory),
                backlog: Gauge(label: "qosmapd_kernel_queue_backlog", dimensions: labels, factory: factory))
            cache[number] = m
            return m
        }
    }

    /// The counters of the flow rule `name` (`qosmapd_rule_packets_total` and
    /// `qosmapd_rule_bytes_total`, label `rule`), created on first use. Rule
    /// names come from the config, which bounds the label set.
    public func rule(_ name: String) -> (packets: Counter, bytes: Counter) {
        rules.withLock { cache in
            if let c = cache[name] { return c }
            let labels = [("rule", name)]
            let c = (
                packets: Counter(label: "qosmapd_rule_packets_total", dimensions: labels, factory: factory),
                bytes: Counter(label: "qosmapd_rule_bytes_total", dimensions: labels, factory: factory)
            )
            cache[name] = c
            return c
        }
    }

    /// Advances the kernel counters by what `sample` adds since the last one.
    public func record(_ deltas: [KernelQueueDelta]) {
        for d in deltas {
            let m = kernelQueue(d.queue)
            if d.queueDropped > 0 { m.queueDropped.increment(by: Int64(clamping: d.queueDropped)) }
            if d.userDropped > 0 { m.userDropped.increment(by: Int64(clamping: d.userDropped)) }
            m.backlog.record(Int64(clamping: d.backlog))
        }
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
        if counts.ruleTouched {
            for i in counts.rulePackets.indices where counts.rulePackets[i] != 0 {
                let c = rule(counts.ruleNames[i])
                c.packets.increment(by: Int64(clamping: counts.rulePackets[i]))
                c.bytes.increment(by: Int64(clamping: counts.ruleBytes[i]))
                counts.rulePackets[i] = 0
                counts.ruleBytes[i] = 0
            }
            counts.ruleTouched = false
        }
        flows.flush(&counts.flows)
    }

    /// Adds what a queue's verdict statistics gained since `last`, then
    /// remembers them.
    func flush(_ now: NetfilterQueue.Statistics, since last: inout NetfilterQueue.Statistics) {
        guard now != last else { return }
        for (counter, value, old) in [
            (verdictMessages, now.messages, last.messages),
            (verdictSendRetries, now.sendRetries, last.sendRetries),
            (verdictSendSplits, now.sendSplits, last.sendSplits),
            (verdictsLost, now.verdictsLost, last.verdictsLost),
        ] where value != old {
            counter.increment(by: Int64(value - old))
        }
        last = now
    }
}
