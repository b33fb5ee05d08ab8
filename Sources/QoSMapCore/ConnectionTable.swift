import Synchronization

// Per-connection rule state for the nfqueue and ebpf datapaths: a
// direct-mapped table of 65,536 flows (the ebpf map `qm_flows` has the same
// layout, key and hash; Bpf/qosmap.bpf.c). A flow is the 5-tuple with its two
// ends in a fixed order, so both directions find one entry. A matched packet
// writes its entry (when it does not hold this flow and rule already); a
// packet no rule matches takes the rule its flow's entry holds. When two flows
// hash to one slot the later one replaces the earlier, whose next matched
// packet takes the slot back: the other direction of an evicted flow is
// classified by trust until then. Entries carry the rule set's epoch, so a
// reload forgets every connection at once.

/// A flow's key: ten 32-bit words, the ends ordered (address, then port).
public struct FlowKey: Hashable, Sendable {
    /// Words 0–3 the lower end's address, 4–7 the other's (IPv4 in words 3
    /// and 7, the rest 0), 8 the ports (lower end's << 16), 9 `v6 << 8 | protocol`.
    public var w: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)

    /// The key of a packet's flow (its reverse gives the same key).
    @inlinable
    public init(
        protocolNumber: UInt8?, source: IPAddress, destination: IPAddress, sourcePort: UInt16?,
        destinationPort: UInt16?
    ) {
        let sp = sourcePort ?? 0
        let dp = destinationPort ?? 0
        let swap = (destination, dp) < (source, sp)
        let a = swap ? destination : source
        let b = swap ? source : destination
        let pa = swap ? dp : sp
        let pb = swap ? sp : dp
        w = (
            UInt32(truncatingIfNeeded: a.high >> 32), UInt32(truncatingIfNeeded: a.high),
            UInt32(truncatingIfNeeded: a.low >> 32), UInt32(truncatingIfNeeded: a.low),
            UInt32(truncatingIfNeeded: b.high >> 32), UInt32(truncatingIfNeeded: b.high),
            UInt32(truncatingIfNeeded: b.low >> 32), UInt32(truncatingIfNeeded: b.low),
            UInt32(pa) << 16 | UInt32(pb),
            (source.isIPv6 ? 0x100 : 0) | UInt32(protocolNumber ?? 0)
        )
    }

    /// The key of a described packet's flow.
    public init(_ p: FlowPacket) {
        self.init(
            protocolNumber: p.protocolNumber, source: p.source, destination: p.destination,
            sourcePort: p.sourcePort, destinationPort: p.destinationPort)
    }

    /// The words as an array (tests, the ebpf test-run).
    public var words: [UInt32] { [w.0, w.1, w.2, w.3, w.4, w.5, w.6, w.7, w.8, w.9] }

    /// The slot: the words as five UInt64 (`w.0` low, as they lie in memory
    /// on a little-endian host), each multiplied by its odd constant and
    /// summed, then folded (xorshift, multiply, high half). Five independent
    /// multiplies rather than FNV-1a's chain of ten: the ebpf classifier
    /// computes the same per packet (`qm_flow_key`), where the chain cost
    /// nanoseconds. Its low bits pick the slot.
    @inlinable
    public var hash32: UInt32 {
        @inline(__always) func word(_ lo: UInt32, _ hi: UInt32) -> UInt64 { UInt64(hi) << 32 | UInt64(lo) }
        var x = word(w.0, w.1) &* 0x9E37_79B9_7F4A_7C15
        x = x &+ word(w.2, w.3) &* 0xC2B2_AE3D_27D4_EB4F
        x = x &+ word(w.4, w.5) &* 0x1656_67B1_9E37_79F9
        x = x &+ word(w.6, w.7) &* 0xD6E8_FEB8_6659_FD93
        x = x &+ word(w.8, w.9) &* 0xFF51_AFD7_ED55_8CCD
        x ^= x >> 32
        x = x &* 0xC4CE_B9FE_1A85_EC53
        return UInt32(truncatingIfNeeded: x >> 32)
    }

    /// Equal words.
    @inlinable
    public static func == (a: FlowKey, b: FlowKey) -> Bool {
        a.w.0 == b.w.0 && a.w.1 == b.w.1 && a.w.2 == b.w.2 && a.w.3 == b.w.3 && a.w.4 == b.w.4
            && a.w.5 == b.w.5 && a.w.6 == b.w.6 && a.w.7 == b.w.7 && a.w.8 == b.w.8 && a.w.9 == b.w.9
    }

    /// Hashes the words.
    public func hash(into hasher: inout Hasher) { hasher.combine(hash32) }
}

/// The connection table of the nfqueue datapath, shared by every queue
/// thread (a reply may be queued to another thread than its request). 64
/// stripes of locks keep threads from waiting on each other.
public final class ConnectionTable: Sendable {
    /// Slots (a power of two; the ebpf map's `max_entries`).
    public static let slots = 65536
    static let stripes = 64

    struct Entry: Sendable {
        var key: FlowKey
        var rule: UInt16  // rule index + 1; 0 empty
        var epoch: UInt16
    }

    final class Stripe: Sendable {
        let entries: Mutex<[Entry]>
        init(_ e: [Entry]) { entries = Mutex(e) }
    }

    private let locks: [Stripe]

    /// Creates an empty table.
    public init() {
        let empty = Entry(
            key: FlowKey(
                protocolNumber: 0, source: IPAddress(ipv4: 0), destination: IPAddress(ipv4: 0),
                sourcePort: 0, destinationPort: 0), rule: 0, epoch: 0)
        let per = ConnectionTable.slots / ConnectionTable.stripes
        locks = (0..<ConnectionTable.stripes).map { _ in Stripe(Array(repeating: empty, count: per)) }
    }

    @inline(__always)
    func place(_ key: FlowKey) -> (stripe: Int, index: Int) {
        let slot = Int(key.hash32) & (ConnectionTable.slots - 1)
        return (slot & (ConnectionTable.stripes - 1), slot / ConnectionTable.stripes)
    }

    /// The rule recorded for `key` in `epoch`, or nil.
    public func lookup(_ key: FlowKey, epoch: UInt16) -> Int? {
        let (s, i) = place(key)
        return locks[s].entries.withLock { e in
            let entry = e[i]
            return entry.rule != 0 && entry.epoch == epoch && entry.key == key ? Int(entry.rule) - 1 : nil
        }
    }

    /// The rule of a packet of flow `key` whose first matching rule is
    /// `matched` (nil: none), connection first (issue 39): a `connection:
    /// false` rule that matches first wins; else the rule the connection
    /// recorded, in both directions, even when a later `connection: true`
    /// rule matches this packet (a catch-all no longer takes the replies of
    /// an earlier rule's connections); else the matched rule, recorded for
    /// the connection when it keeps one. `viaConnection`: the rule came from
    /// the record, not from this packet's match. The ebpf classifier's
    /// `qm_rule` and `qosmap export nft --config` decide the same.
    public func resolve(
        _ key: FlowKey, matched: Int?, keepsConnection: (Int) -> Bool, epoch: UInt16
    ) -> (index: Int, viaConnection: Bool)? {
        if let m = matched, !keepsConnection(m) { return (m, false) }
        if let r = lookup(key, epoch: epoch) { return (r, r != matched) }
        guard let m = matched else { return nil }
        record(key, rule: m, epoch: epoch)
        return (m, false)
    }

    /// Records that `key`'s flow matched `rule` in `epoch` (replacing whatever
    /// the slot held). Returns true when the slot held another flow (an eviction).
    @discardableResult
    public func record(_ key: FlowKey, rule: Int, epoch: UInt16) -> Bool {
        let (s, i) = place(key)
        return locks[s].entries.withLock { e in
            let old = e[i]
            let r = UInt16(truncatingIfNeeded: rule + 1)
            if old.rule == r, old.epoch == epoch, old.key == key { return false }
            e[i] = Entry(key: key, rule: r, epoch: epoch)
            return old.rule != 0 && old.epoch == epoch && old.key != key
        }
    }

    /// Up to `limit` recorded connections of `epoch` with their rule index,
    /// and how many there are in all (`qosmap status`; off the packet path:
    /// one stripe locked at a time).
    public func entries(epoch: UInt16, limit: Int) -> (entries: [(key: FlowKey, rule: Int)], total: Int) {
        var out: [(key: FlowKey, rule: Int)] = []
        var total = 0
        for stripe in locks {
            stripe.entries.withLock { e in
                for entry in e where entry.rule != 0 && entry.epoch == epoch {
                    total += 1
                    if out.count < limit { out.append((entry.key, Int(entry.rule) - 1)) }
                }
            }
        }
        return (out, total)
    }
}
