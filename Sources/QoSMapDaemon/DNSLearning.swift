import CoreMetrics
import Logging
import QoSMapCore
import QoSMapPacket
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The learned addresses of `dns:` rules, for the whole daemon: the store
/// (``DNSAddressStore``) and the lookup table the current snapshot's packets
/// read (``DNSMaskTable``). Replies come from the snoop service
/// (``observe(_:server:client:interface:)``); ``DNSSweepService`` expires
/// entries once a second. A reload regroups the store for the new config's
/// `dns:` lists (``table(for:)``): addresses of lists still present are kept.
public final class DNSLearning: Sendable {
    /// The daemon's instance (snapshots built by ``PolicySnapshot`` attach to it).
    public static let shared = DNSLearning()

    struct State {
        var store = DNSAddressStore(groups: [], settings: DNSLearningSettings())
        var table: DNSMaskTable?
        /// Whether a snapshot's table was adopted (the first one is, at once).
        var adopted = false
        var replies: UInt64 = 0
        var repliesLearned: UInt64 = 0
    }
    private let state = Mutex(State())
    let counters: DNSCounters
    private let mirror = Mutex<(@Sendable ([DNSMaskChange]) -> Void)?>(nil)
    private let snoop = Mutex<(service: DNSSnoopService?, published: DNSSnoopCounters)>(
        (nil, DNSSnoopCounters()))

    /// Creates an empty instance; counters go to `factory` (the bootstrapped backend by default).
    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        counters = DNSCounters(factory: factory)
    }

    /// A second copy of the masks to keep (the ebpf datapath's `qm_fdns4`/`qm_fdns6`):
    /// `update` gets every mask now held, then every change (0: removed), in order.
    public func setMirror(_ update: (@Sendable ([DNSMaskChange]) -> Void)?) {
        state.withLock { s in
            mirror.withLock { $0 = update }
            update?(s.store.masks)
        }
    }

    /// The seconds of `CLOCK_MONOTONIC`: expiry must not follow wall-clock steps.
    public static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec)
    }

    /// A lookup table for a snapshot with `rules`, filled from the store as
    /// regrouped for the rules' `dns:` lists (nil when no rule has `dns:`).
    /// The store itself changes only when the snapshot is committed
    /// (``committed(_:table:logger:)``), so a reload that fails after
    /// building its snapshot leaves the learned state as it was; the first
    /// snapshot of an instance is adopted at once (start-up).
    public func table(for rules: FlowRuleSet) -> DNSMaskTable? {
        guard rules.hasDNSRules else {
            state.withLock { $0.adopted = true }
            return nil
        }
        return state.withLock { s in
            let regrouped = s.store.regrouped(rules.dnsGroups, settings: rules.dns)
            let t = DNSMaskTable(capacity: rules.dns.maxAddresses, initial: regrouped.masks)
            if !s.adopted { adopt(t, regrouped, &s) }
            return t
        }
    }

    /// Makes `store` and `table` current: the mirror gets the new masks and 0
    /// for the addresses dropped.
    private func adopt(_ table: DNSMaskTable?, _ store: DNSAddressStore, _ s: inout State) {
        let old = s.store.masks
        counters.evicted.increment(by: Int64(store.evicted &- s.store.evicted))
        s.store = store
        s.table = table
        s.adopted = true
        let now = store.masks
        let kept = Set(now.map(\.address))
        let dropped = old.filter { !kept.contains($0.address) }.map {
            DNSMaskChange(address: $0.address, mask: 0)
        }
        if let table {
            // Replies learned or entries expired since the table was built.
            for a in table.initial where !kept.contains(a) { table.set(a, mask: 0) }
            for c in now { table.set(c.address, mask: c.mask) }
        }
        if let m = mirror.withLock({ $0 }) { m(dropped + now) }
        counters.addresses.record(store.count)
    }

    /// Learns from a reply read on a snooped interface (the snoop service
    /// has already matched it to a query seen there).
    public func observe(_ reply: DNSReply, server: IPAddress?, client: IPAddress?, interface: String?) {
        let now = Self.now()
        state.withLock { s in
            let (l, e) = (s.store.learned, s.store.evicted)
            let changes = s.store.learn(reply, server: server, client: client, interface: interface, now: now)
            s.replies &+= 1
            if !changes.isEmpty || s.store.learned != l { s.repliesLearned &+= 1 }
            apply(changes, &s)
            counters.learned.increment(by: Int64(s.store.learned &- l))
            counters.evicted.increment(by: Int64(s.store.evicted &- e))
        }
    }

    /// Learns from a reply the snoop service matched to a query.
    public func observe(_ r: DNSObservedReply) {
        observe(r.reply, server: r.server, client: r.client, interface: r.interface)
    }

    /// The snoop service feeding this learner: its counters are published by
    /// ``publishSnoopCounters()`` and its interfaces follow ``committed(_:table:logger:)``.
    public func attach(_ service: DNSSnoopService) { snoop.withLock { $0.service = service } }

    /// A reload committed `config`, whose snapshot's table is `table`: the
    /// store is regrouped for its `dns:` lists (addresses of lists still
    /// present are kept), `table` becomes the one the learner updates, and
    /// the snoop service follows `dns.snoop` (qosmapd starts the service only
    /// when the first config names interfaces).
    public func committed(_ config: DaemonConfig, table: DNSMaskTable?, logger: Logger) {
        let rules = config.classify
        state.withLock { s in
            let groups = rules.hasDNSRules ? rules.dnsGroups : []
            adopt(table, s.store.regrouped(groups, settings: rules.dns), &s)
        }
        let wanted = rules.dns.snoop
        let service = snoop.withLock { $0.service }
        if let service {
            if service.interfaces != wanted { service.setInterfaces(wanted) }
        } else if !wanted.isEmpty {
            logger.warning(
                "classify.dns.snoop added by a reload; restart qosmapd to start DNS snooping",
                metadata: ["interfaces": "\(wanted)"])
        }
    }

    /// Adds what the snoop service counted since the last call to the metrics.
    public func publishSnoopCounters() {
        snoop.withLock { s in
            guard let service = s.service else { return }
            let now = service.counters
            counters.publish(now, since: s.published)
            s.published = now
        }
    }

    /// Expires entries due at `now`.
    public func sweep(now: Int64 = DNSLearning.now()) {
        state.withLock { s in
            let x = s.store.expired
            apply(s.store.sweep(now: now), &s)
            counters.expired.increment(by: Int64(s.store.expired &- x))
        }
    }

    private func apply(_ changes: [DNSMaskChange], _ s: inout State) {
        if let t = s.table { for c in changes { t.set(c.address, mask: c.mask) } }
        if !changes.isEmpty, let m = mirror.withLock({ $0 }) { m(changes) }
        counters.addresses.record(s.store.count)
    }

    /// A copy of the store (for tests and state dumps).
    public var store: DNSAddressStore { state.withLock { $0.store } }
}

/// The `qosmapd_dns_*` metrics: the learner's, and the snoop service's
/// counters (``DNSSnoopCounters``) published as they grow.
struct DNSCounters: Sendable {
    let learned: Counter
    let expired: Counter
    let evicted: Counter
    let addresses: Gauge
    let frames: Counter
    let queries: Counter
    let parsed: Counter
    let delivered: Counter
    let unsolicited: Counter
    let mismatched: Counter
    let refused: [Counter]
    let tcpStreamsDropped: Counter

    init(factory: any MetricsFactory) {
        learned = Counter(label: "qosmapd_dns_addresses_learned_total", factory: factory)
        expired = Counter(label: "qosmapd_dns_addresses_expired_total", factory: factory)
        evicted = Counter(label: "qosmapd_dns_addresses_evicted_total", factory: factory)
        addresses = Gauge(label: "qosmapd_dns_addresses", factory: factory)
        frames = Counter(label: "qosmapd_dns_frames_total", factory: factory)
        queries = Counter(label: "qosmapd_dns_queries_total", factory: factory)
        parsed = Counter(label: "qosmapd_dns_replies_parsed_total", factory: factory)
        delivered = Counter(label: "qosmapd_dns_replies_delivered_total", factory: factory)
        unsolicited = Counter(label: "qosmapd_dns_replies_unsolicited_total", factory: factory)
        mismatched = Counter(label: "qosmapd_dns_replies_mismatched_total", factory: factory)
        refused = DNSReplyError.allCases.map {
            Counter(
                label: "qosmapd_dns_replies_refused_total", dimensions: [("reason", $0.description)],
                factory: factory)
        }
        tcpStreamsDropped = Counter(label: "qosmapd_dns_tcp_streams_dropped_total", factory: factory)
    }

    func publish(_ now: DNSSnoopCounters, since last: DNSSnoopCounters) {
        func add(_ c: Counter, _ a: UInt64, _ b: UInt64) { if a > b { c.increment(by: Int64(a - b)) } }
        add(frames, now.frames, last.frames)
        add(queries, now.queriesSeen, last.queriesSeen)
        add(parsed, now.repliesParsed, last.repliesParsed)
        add(delivered, now.repliesDelivered, last.repliesDelivered)
        add(unsolicited, now.repliesUnsolicited, last.repliesUnsolicited)
        add(mismatched, now.repliesMismatched, last.repliesMismatched)
        add(tcpStreamsDropped, now.tcpStreamsDropped, last.tcpStreamsDropped)
        for i in refused.indices where i < now.refused.count && i < last.refused.count {
            add(refused[i], now.refused[i], last.refused[i])
        }
    }
}

/// Expires learned addresses once a second (not per packet), and publishes
/// the snoop service's counters, until shutdown.
public struct DNSSweepService: Service {
    let learning: DNSLearning
    let interval: Duration

    /// A sweeper for `learning`.
    public init(_ learning: DNSLearning = .shared, interval: Duration = .seconds(1)) {
        self.learning = learning
        self.interval = interval
    }

    /// Sweeps every `interval` until graceful shutdown or cancellation.
    public func run() async throws {
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            learning.sweep()
            learning.publishSnoopCounters()
            do { try await Task.sleep(for: interval) } catch { return }
        }
    }
}

/// Address → group mask for the packet path: open addressing with linear
/// probing and backward-shift deletion in fixed arrays (no allocation per
/// lookup or update), behind a lock the learner takes for each change.
public final class DNSMaskTable: Sendable {
    struct Slots {
        var high: [UInt64]
        var low: [UInt64]
        /// 0 empty; else family (1 v4, 2 v6) << 16 | mask.
        var meta: [UInt32]
        var count = 0
    }
    private let slots: Mutex<Slots>
    private let bits: Int
    /// The addresses it was created with.
    let initial: [IPAddress]

    /// A table for `capacity` addresses (at least twice as many slots),
    /// holding `initial`.
    public init(capacity: Int, initial: [DNSMaskChange] = []) {
        self.initial = initial.map(\.address)
        var b = 10
        while (1 << b) < 2 * capacity { b += 1 }
        bits = b
        let n = 1 << b
        slots = Mutex(
            Slots(
                high: [UInt64](repeating: 0, count: n), low: [UInt64](repeating: 0, count: n),
                meta: [UInt32](repeating: 0, count: n)))
        for c in initial { set(c.address, mask: c.mask) }
    }

    @inline(__always)
    private func home(_ a: IPAddress) -> Int {
        let h = (a.high &* 0x9E37_79B9_7F4A_7C15) ^ (a.low &* 0xC2B2_AE3D_27D4_EB4F)
        return Int(truncatingIfNeeded: (h ^ (h >> 29)) >> UInt64(64 - bits))
    }

    @inline(__always)
    private static func family(_ a: IPAddress) -> UInt32 { a.isIPv6 ? 2 : 1 }

    /// The mask of `a` (0: not learned).
    public func mask(_ a: IPAddress) -> UInt16 {
        let f = Self.family(a)
        let m = (1 << bits) - 1
        var i = home(a)
        return slots.withLock { s in
            while s.meta[i] != 0 {
                if s.meta[i] >> 16 == f, s.high[i] == a.high, s.low[i] == a.low {
                    return UInt16(truncatingIfNeeded: s.meta[i])
                }
                i = (i + 1) & m
            }
            return 0
        }
    }

    /// Addresses held.
    public var count: Int { slots.withLock { $0.count } }

    /// Sets `a`'s mask; 0 removes it. A full table (more addresses than
    /// slots, which the store's bound prevents) ignores new ones.
    public func set(_ a: IPAddress, mask: UInt16) {
        let f = Self.family(a)
        let m = (1 << bits) - 1
        var i = home(a)
        slots.withLock { s in
            while s.meta[i] != 0 {
                if s.meta[i] >> 16 == f, s.high[i] == a.high, s.low[i] == a.low { break }
                i = (i + 1) & m
            }
            if mask != 0 {
                if s.meta[i] == 0 {
                    guard s.count < m else { return }
                    s.count += 1
                    s.high[i] = a.high
                    s.low[i] = a.low
                }
                s.meta[i] = f << 16 | UInt32(mask)
                return
            }
            guard s.meta[i] != 0 else { return }
            // Backward-shift deletion: pull later entries of the run into the hole.
            s.meta[i] = 0
            s.count -= 1
            var hole = i
            var j = (i + 1) & m
            while s.meta[j] != 0 {
                let fam = s.meta[j] >> 16
                let key = IPAddress(ipv6: fam == 2, high: s.high[j], low: s.low[j])
                let h = home(key)
                // Move j to the hole when its home is not within (hole, j].
                if (j - h) & m >= (j - hole) & m {
                    s.high[hole] = s.high[j]
                    s.low[hole] = s.low[j]
                    s.meta[hole] = s.meta[j]
                    s.meta[j] = 0
                    hole = j
                }
                j = (j + 1) & m
            }
        }
    }
}
