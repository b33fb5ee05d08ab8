import Synchronization

// Flow behaviour (`classify.flows`): a flow that sends fast or much is
// demoted (bulk), a flow of small packets is promoted (interactive). One
// state machine (``FlowBehaviourState/update(length:segments:now:_:)``),
// run by the nfqueue datapath in a ``FlowBehaviourTable`` and by the ebpf
// classifier in the same table (`qm_behave` in Bpf/qosmap.bpf.c: the same
// sets, ways and victims); the tests feed both the same packets at the same
// times. docs/CLASSIFY.md has the
// semantics in prose.

/// `classify.flows`: the thresholds and what a flow that crosses them gets.
public struct FlowBehaviour: Hashable, Sendable {
    /// `bulk:`: a flow above `packetsPerSecond` or past `bytes` is demoted.
    public struct Bulk: Hashable, Sendable {
        /// Segments per one-second bucket above which a flow is bulk; nil: no rate test.
        public var packetsPerSecond: UInt32?
        /// Bytes (both directions, since the flow started or last went idle
        /// for longer than `hold`) past which a flow is bulk; nil: no byte test.
        public var bytes: UInt64?
        /// Seconds a flow stays bulk after the last second it was above a threshold.
        public var hold: UInt32
        /// What a bulk flow's packets get.
        public var treatment: Treatment

        /// Creates a bulk test.
        public init(
            packetsPerSecond: UInt32? = nil, bytes: UInt64? = nil, hold: UInt32 = 5, treatment: Treatment
        ) {
            self.packetsPerSecond = packetsPerSecond
            self.bytes = bytes
            self.hold = hold
            self.treatment = treatment
        }
    }

    /// `interactive:`: a flow whose average packet size is at most `maxAverageSize` is promoted.
    public struct Interactive: Hashable, Sendable {
        /// The largest average packet size (bytes from the IP header on) that is interactive.
        public var maxAverageSize: UInt32
        /// What an interactive flow's packets get.
        public var treatment: Treatment

        /// Creates an interactive test.
        public init(maxAverageSize: UInt32, treatment: Treatment) {
            self.maxAverageSize = maxAverageSize
            self.treatment = treatment
        }
    }

    /// One class's own tests (`flows.classes.C`), which replace the
    /// defaults above for that class's packets.
    public struct ClassTests: Hashable, Sendable {
        /// The bulk test, nil for none.
        public var bulk: Bulk?
        /// The interactive test, nil for none.
        public var interactive: Interactive?

        /// Creates a class's tests.
        public init(bulk: Bulk? = nil, interactive: Interactive? = nil) {
            self.bulk = bulk
            self.interactive = interactive
        }
    }

    /// The bulk test, nil when not configured.
    public var bulk: Bulk?
    /// The interactive test, nil when not configured.
    public var interactive: Interactive?
    /// The classes whose packets are checked, one bit per ``ServiceClass``
    /// raw value (default: every class but BE).
    public var applyTo: UInt8
    /// Per class (`flows.classes`): a class here is checked with these
    /// tests, whatever `applyTo` says; one with neither test is not checked.
    public var classes: [ServiceClass: ClassTests] = [:]
    /// Where `flows:` was written (messages), nil for one built in code.
    public var position: SourcePosition?

    /// Every class but BE.
    public static let defaultApplyTo: UInt8 = 0xFE

    /// Creates a configuration.
    public init(
        bulk: Bulk? = nil, interactive: Interactive? = nil, applyTo: UInt8 = FlowBehaviour.defaultApplyTo
    ) {
        self.bulk = bulk
        self.interactive = interactive
        self.applyTo = applyTo
    }

    /// Whether there is anything to check.
    public var isEmpty: Bool { ServiceClass.allCases.allSatisfy { tests(for: $0) == nil } }

    /// Whether packets of class `c` are checked.
    public func applies(to c: ServiceClass) -> Bool { tests(for: c) != nil }

    /// The tests for packets of class `c`, as a behaviour of that class
    /// alone (``applyTo`` its bit): the class's own (``classes``), else the
    /// defaults when `c` is in ``applyTo``; nil when `c` is not checked.
    public func tests(for c: ServiceClass) -> FlowBehaviour? {
        let own = classes[c]
        let bulk = own == nil ? self.bulk : own!.bulk
        let interactive = own == nil ? self.interactive : own!.interactive
        guard own != nil || applyTo & (1 << c.rawValue) != 0, bulk != nil || interactive != nil else {
            return nil
        }
        return FlowBehaviour(bulk: bulk, interactive: interactive, applyTo: 1 << c.rawValue)
    }

    /// ``tests(for:)`` of every class, by raw value: what the datapaths
    /// look up per packet.
    public var perClass: [FlowBehaviour?] { ServiceClass.allCases.map { tests(for: $0) } }

    /// The classes of ``applyTo``, in order.
    public var applyToClasses: [ServiceClass] {
        ServiceClass.allCases.filter { applyTo & (1 << $0.rawValue) != 0 }
    }

    /// The segments a packet of `length` bytes counts as when it is a GSO
    /// super-packet whose first segment's headers end at `headerLength` and
    /// whose segments are at most `mtu` bytes: ceil(payload / (mtu − headers)),
    /// at least 1. The nfqueue datapath uses it (the kernel does not pass
    /// `gso_segs` through nfnetlink_queue); the ebpf one reads `skb->gso_segs`.
    @inlinable
    public static func estimatedSegments(length: Int, headerLength: Int, mtu: Int) -> UInt32 {
        let per = mtu &- headerLength
        guard per > 0, length > mtu else { return 1 }
        let payload = length &- headerLength
        return UInt32(clamping: (payload &+ per &- 1) / per)
    }
}

/// What the behaviour tests decided for one packet.
public enum FlowVerdict: UInt8, Sendable {
    /// Neither test holds: the packet keeps its class.
    case none = 0
    /// The flow is bulk: the bulk treatment.
    case bulk = 1
    /// The flow is interactive (and not bulk): the interactive treatment.
    case interactive = 2
}

/// One flow's state: 24 bytes, the same fields as `struct qm_bway` in
/// Bpf/qosmap.bpf.c.
public struct FlowBehaviourState: Sendable, Equatable {
    /// The clock's second (monotonic nanoseconds / 10^9) of the flow's last packet.
    public var second: UInt32 = 0
    /// Segments counted in `second`.
    public var packets: UInt32 = 0
    /// Bytes since the flow started, or since it was idle for more than `hold` seconds.
    public var bytes: UInt64 = 0
    /// The first second in which the flow is no longer bulk; 0: not bulk.
    public var bulkUntil: UInt32 = 0
    /// The EWMA of the packet size; 0 before the first packet.
    public var averageSize: UInt32 = 0
    /// The verdict of the flow's last packet (to count transitions).
    public var last: FlowVerdict = .none

    /// A new flow.
    public init() {}

    /// Counts one packet of `length` bytes (IP header on; a GSO packet's
    /// whole length) that is `segments` segments (1, or the GSO segment
    /// count), seen at `now` (monotonic nanoseconds), and decides it:
    ///
    /// - the rate: segments are counted per whole second of the clock (a
    ///   fixed one-second bucket, reset when a packet arrives in a later
    ///   second); more than `packetsPerSecond` in one bucket is bulk;
    /// - the bytes: a flow idle for more than `hold` seconds starts counting
    ///   from zero; more than `bytes` is bulk;
    /// - a flow above either threshold in second S is bulk up to the end of
    ///   second S + hold (it is restored `hold` seconds after the end of the
    ///   last second it was above);
    /// - the size: `avg = (7 × avg + size) / 8` (integer, rounded down) over
    ///   every packet, the first packet's size the initial value; a GSO
    ///   packet is one sample of size length / segments;
    /// - bulk wins over interactive: a flow that sends fast is not interactive.
    @inlinable
    public mutating func update(length: UInt32, segments: UInt32, now: UInt64, _ b: FlowBehaviour)
        -> FlowVerdict
    {
        let sec = UInt32(truncatingIfNeeded: now / 1_000_000_000)
        let segs = segments == 0 ? 1 : segments
        let hold = b.bulk?.hold ?? 0
        if sec != second {
            if sec &- second > hold { bytes = 0 }
            second = sec
            packets = 0
        }
        packets = packets &+ segs < packets ? .max : packets &+ segs
        bytes &+= UInt64(length)
        let size = max(length / segs, 1)
        averageSize = averageSize == 0 ? size : (averageSize &* 7 &+ size) >> 3
        if let bulk = b.bulk {
            if let pps = bulk.packetsPerSecond, packets > pps { bulkUntil = sec &+ hold &+ 1 }
            if let limit = bulk.bytes, bytes > limit { bulkUntil = sec &+ hold &+ 1 }
            if bulkUntil != 0, sec < bulkUntil { return .bulk }
        }
        if let i = b.interactive, averageSize <= i.maxAverageSize { return .interactive }
        return .none
    }
}

/// What a table lookup did, for the counters.
public struct FlowBehaviourEvent: Sendable, Equatable {
    /// The packet's verdict.
    public var verdict: FlowVerdict
    /// The flow was not in the table (a new entry).
    public var created = false
    /// A new entry replaced another flow's.
    public var evicted = false
    /// The flow's verdict became ``FlowVerdict/bulk`` with this packet.
    public var demoted = false
    /// The flow's verdict became ``FlowVerdict/interactive`` with this packet.
    public var promoted = false

    /// Creates an event.
    public init(verdict: FlowVerdict) { self.verdict = verdict }
}

/// The nfqueue datapath's flow-behaviour table: 65,536 flows, 4-way set
/// associative (16,384 sets by ``FlowKey/hash32``); a new flow in a full set
/// replaces the set's least recently used entry (by the second of its last
/// packet, the lowest way on a tie). Shared by the queue threads (64 lock
/// stripes); no allocation per packet. The ebpf classifier's `qm_behave`
/// is the same table (sets, ways, victims), so both datapaths track and
/// evict the same flows.
public final class FlowBehaviourTable: Sendable {
    /// Entries in all.
    public static let capacity = 65536
    static let ways = 4
    static let stripes = 64

    struct Entry: Sendable {
        var key: FlowKey
        var state: FlowBehaviourState
        var used: Bool
    }

    final class Stripe: Sendable {
        let entries: Mutex<[Entry]>
        init(_ e: [Entry]) { entries = Mutex(e) }
    }

    private let locks: [Stripe]
    /// Nonzero: the time the datapath reads instead of its clock (tests that
    /// compare datapaths feed both the same times).
    public let testNow = Atomic<UInt64>(0)
    /// The thresholds.
    public let behaviour: FlowBehaviour
    /// ``FlowBehaviour/perClass`` of ``behaviour``: each class's tests.
    public let perClass: [FlowBehaviour?]

    /// Creates an empty table for `behaviour`.
    public init(_ behaviour: FlowBehaviour) {
        self.behaviour = behaviour
        perClass = behaviour.perClass
        let empty = Entry(
            key: FlowKey(
                protocolNumber: 0, source: IPAddress(ipv4: 0), destination: IPAddress(ipv4: 0), sourcePort: 0,
                destinationPort: 0), state: FlowBehaviourState(), used: false)
        let per = FlowBehaviourTable.capacity / FlowBehaviourTable.stripes
        locks = (0..<FlowBehaviourTable.stripes).map { _ in Stripe(Array(repeating: empty, count: per)) }
    }

    /// Counts a packet of `key`'s flow and decides it (see
    /// ``FlowBehaviourState/update(length:segments:now:_:)``) with `tests`
    /// (the packet's class's, ``perClass``), by default ``behaviour``.
    public func update(
        _ key: FlowKey, length: UInt32, segments: UInt32, now: UInt64, tests: FlowBehaviour? = nil
    ) -> FlowBehaviourEvent {
        let sets = FlowBehaviourTable.capacity / FlowBehaviourTable.ways
        let set = Int(key.hash32) & (sets - 1)
        let stripe = set & (FlowBehaviourTable.stripes - 1)
        let base = (set / FlowBehaviourTable.stripes) &* FlowBehaviourTable.ways
        let b = tests ?? behaviour
        return locks[stripe].entries.withLock { e in
            var slot = -1
            var victim = base
            for i in base..<(base &+ FlowBehaviourTable.ways) {
                if e[i].used, e[i].key == key {
                    slot = i
                    break
                }
                if !e[victim].used { continue }
                if !e[i].used || e[i].state.second < e[victim].state.second { victim = i }
            }
            var created = false
            var evicted = false
            if slot < 0 {
                slot = victim
                evicted = e[slot].used
                created = true
                e[slot] = Entry(key: key, state: FlowBehaviourState(), used: true)
            }
            let before = e[slot].state.last
            let v = e[slot].state.update(length: length, segments: segments, now: now, b)
            e[slot].state.last = v
            var event = FlowBehaviourEvent(verdict: v)
            event.created = created
            event.evicted = evicted
            event.demoted = v == .bulk && before != .bulk
            event.promoted = v == .interactive && before != .interactive
            return event
        }
    }

    /// The state of `key`'s flow, nil when not tracked (tests, `explain`).
    public func state(_ key: FlowKey) -> FlowBehaviourState? {
        let sets = FlowBehaviourTable.capacity / FlowBehaviourTable.ways
        let set = Int(key.hash32) & (sets - 1)
        let base = (set / FlowBehaviourTable.stripes) &* FlowBehaviourTable.ways
        return locks[set & (FlowBehaviourTable.stripes - 1)].entries.withLock { e in
            e[base..<(base &+ FlowBehaviourTable.ways)].first { $0.used && $0.key == key }?.state
        }
    }

    /// Up to `limit` tracked flows with their state, and how many there are
    /// in all (`qosmap status`; one stripe locked at a time).
    public func entries(limit: Int) -> (entries: [(key: FlowKey, state: FlowBehaviourState)], total: Int) {
        var out: [(key: FlowKey, state: FlowBehaviourState)] = []
        var total = 0
        for stripe in locks {
            stripe.entries.withLock { e in
                for entry in e where entry.used {
                    total += 1
                    if out.count < limit { out.append((entry.key, entry.state)) }
                }
            }
        }
        return (out, total)
    }
}

extension FlowBehaviourTable {
    /// The MTU the nfqueue datapath assumes for a GSO packet's segments when
    /// the egress interface's cannot be read (nfnetlink_queue passes neither
    /// `gso_segs` nor `gso_size`).
    public static let assumedMTU = 1500
    /// The segments of a queued packet: 1, or for a GSO packet (`gso`) the
    /// estimate ``FlowBehaviour/estimatedSegments(length:headerLength:mtu:)``
    /// with the IP and TCP/UDP headers of `ip` and the egress `mtu` (the
    /// nfqueue datapath, and `qosmap classify --in` for a packet longer than
    /// the MTU: a capture taken before segmentation).
    public static func segments(_ ip: UnsafeRawBufferPointer, length: Int, gso: Bool, mtu: Int = assumedMTU)
        -> UInt32
    {
        guard gso, ip.count >= 20 else { return 1 }
        var l4 = 0
        var proto: UInt8 = 0
        switch ip[0] >> 4 {
        case 4:
            l4 = Int(ip[0] & 0x0F) * 4
            proto = ip[9]
        case 6:
            l4 = 40
            proto = ip.count >= 40 ? ip[6] : 0
        default: return 1
        }
        var header = l4
        if proto == 6, ip.count >= l4 + 13 {
            header += Int(ip[l4 + 12] >> 4) * 4
        } else if proto == 17 {
            header += 8
        }
        return FlowBehaviour.estimatedSegments(length: length, headerLength: header, mtu: mtu)
    }
}
