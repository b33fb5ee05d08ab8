import Metrics
import Synchronization

/// The counters of the ebpf datapath's reconciliation: what it found wrong in
/// the kernel and put right. Labels are bounded by the configured interfaces
/// and the two hooks.
public final class AttachmentMetrics: Sendable {
    private let factory: any MetricsFactory
    private let repairs = Mutex<[String: Counter]>([:])
    /// Classifiers of a qosmapd that is gone, removed from interfaces this
    /// daemon does not manage, or taken over on those it does.
    public let staleRemoved: Counter
    /// Classifiers of a qosmapd that is gone taken over on configured interfaces.
    public let staleTakenOver: Counter

    /// Creates the counters with `factory` (the bootstrapped backend by default).
    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
        staleRemoved = Counter(label: "qosmapd_classifier_stale_removed_total", factory: factory)
        staleTakenOver = Counter(label: "qosmapd_classifier_stale_taken_over_total", factory: factory)
    }

    /// Counts one repair: the classifier put back on `interface` at `hook`
    /// (`ingress` or `egress`) after the kernel was found without it.
    public func repaired(interface: String, hook: String) {
        let key = "\(interface)/\(hook)"
        let counter = repairs.withLock { r in
            if let c = r[key] { return c }
            let c = Counter(
                label: "qosmapd_classifier_repairs_total",
                dimensions: [("interface", interface), ("hook", hook)], factory: factory)
            r[key] = c
            return c
        }
        counter.increment()
    }
}
