import Metrics
import QoSMapCore
import QoSMapPacket
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A queue thread's flow-behaviour counts between flushes.
public struct FlowBehaviourCounts: Sendable {
    /// Flows that got an entry.
    public var tracked = 0
    /// Entries that replaced another flow's.
    public var evicted = 0
    /// Flows whose verdict became bulk.
    public var demoted = 0
    /// Flows whose verdict became interactive.
    public var promoted = 0

    /// Creates zero counts.
    public init() {}

    /// Adds what one packet's update did.
    @inlinable
    public mutating func count(_ e: FlowBehaviourEvent) {
        if e.created { tracked &+= 1 }
        if e.evicted { evicted &+= 1 }
        if e.demoted { demoted &+= 1 }
        if e.promoted { promoted &+= 1 }
    }
}

/// `qosmapd_flows_tracked_total`, `_evicted_total`, `_demoted_total`,
/// `_promoted_total` (docs/CLASSIFY.md).
public final class FlowBehaviourMetrics: Sendable {
    /// Flows that got an entry in the flow-behaviour table.
    public let tracked: Counter
    /// Entries that replaced another flow's (the table was full there).
    public let evicted: Counter
    /// Times a flow became bulk.
    public let demoted: Counter
    /// Times a flow became interactive.
    public let promoted: Counter

    /// Creates the counters with `factory`.
    public init(factory: any MetricsFactory) {
        tracked = Counter(label: "qosmapd_flows_tracked_total", factory: factory)
        evicted = Counter(label: "qosmapd_flows_evicted_total", factory: factory)
        demoted = Counter(label: "qosmapd_flows_demoted_total", factory: factory)
        promoted = Counter(label: "qosmapd_flows_promoted_total", factory: factory)
    }

    /// Adds a thread's counts and zeroes them.
    public func flush(_ c: inout FlowBehaviourCounts) {
        if c.tracked != 0 { tracked.increment(by: Int64(c.tracked)) }
        if c.evicted != 0 { evicted.increment(by: Int64(c.evicted)) }
        if c.demoted != 0 { demoted.increment(by: Int64(c.demoted)) }
        if c.promoted != 0 { promoted.increment(by: Int64(c.promoted)) }
        c = FlowBehaviourCounts()
    }
}

extension FlowBehaviourTable {

    /// The MTU of interface `name` (`SIOCGIFMTU`), nil when unknown.
    public static func systemMTU(_ name: String) -> Int? {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var ifr = ifreq()
        let bytes = Array(name.utf8.prefix(Int(IF_NAMESIZE) - 1))
        withUnsafeMutableBytes(of: &ifr.ifr_ifrn.ifrn_name) { b in
            for (i, c) in bytes.enumerated() { b[i] = c }
        }
        guard ioctl(fd, UInt(SIOCGIFMTU), &ifr) == 0 else { return nil }
        return Int(ifr.ifr_ifru.ifru_mtu)
    }

    /// The treatment for a packet of `fields` that rules or trust gave
    /// `base`: the bulk or interactive one of `base`'s class's tests, or nil
    /// to keep `base` (a class that is not checked is not counted at all).
    @inlinable
    public func treatment(
        _ fields: FlowFields, base: Treatment, length: Int, segments: UInt32,
        counts: inout FlowBehaviourCounts
    ) -> Treatment? {
        guard let b = perClass[Int(base.serviceClass.rawValue)] else { return nil }
        let fed = testNow.load(ordering: .relaxed)
        let e = update(
            fields.flowKey, length: UInt32(clamping: length), segments: segments,
            now: fed == 0 ? FlowBehaviourTable.monotonicNanoseconds() : fed, tests: b)
        counts.count(e)
        switch e.verdict {
        case .none: return nil
        case .bulk: return b.bulk?.treatment
        case .interactive: return b.interactive?.treatment
        }
    }

    /// `CLOCK_MONOTONIC_COARSE` in nanoseconds, the clock the ebpf classifier
    /// reads (`bpf_ktime_get_coarse_ns`): one-second buckets need no finer one.
    public static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

}
