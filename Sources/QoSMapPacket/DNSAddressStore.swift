import QoSMapCore

// The learned-address sets of `dns:` rules (issue 24): address -> the groups
// (distinct `dns:` lists) it is learned in, each with its expiry and the reply
// that put it there. Pure Swift and single-threaded: qosmapd keeps it behind a
// lock and mirrors the masks into its datapaths' lookup tables (changes are
// returned by every mutation, so a mirror never has to rescan).

/// The reply that put an address in a set, for `explain` and `classify`.
public struct DNSLearnSource: Hashable, Sendable {
    /// The reply's question name.
    public var question: DNSName
    /// The name of the reply's chain (question or CNAME target) that matched the set's patterns.
    public var name: DNSName
    /// The A or AAAA record's TTL as sent.
    public var ttl: UInt32
    /// The server that sent the reply (its source address), when known.
    public var server: IPAddress?
    /// The client it was sent to, when known.
    public var client: IPAddress?
    /// The interface it was read on, when known.
    public var interface: String?
    /// When it was learned, in the store's clock (seconds).
    public var at: Int64

    /// Creates a source.
    public init(
        question: DNSName, name: DNSName, ttl: UInt32, server: IPAddress? = nil, client: IPAddress? = nil,
        interface: String? = nil, at: Int64
    ) {
        self.question = question
        self.name = name
        self.ttl = ttl
        self.server = server
        self.client = client
        self.interface = interface
        self.at = at
    }
}

/// An address's membership in one group.
public struct DNSLearnedEntry: Hashable, Sendable {
    /// The group (index into ``DNSAddressStore/groups``).
    public var group: Int
    /// When it expires, in the store's clock (seconds): the entry holds while `now < expires`.
    public var expires: Int64
    /// The reply that set this expiry.
    public var source: DNSLearnSource
}

/// A change to an address's group mask, for mirrors (0: the address is gone).
public struct DNSMaskChange: Hashable, Sendable {
    /// The address.
    public var address: IPAddress
    /// Its new mask (bit `i`: group `i`).
    public var mask: UInt16

    /// A change.
    public init(address: IPAddress, mask: UInt16) {
        self.address = address
        self.mask = mask
    }
}

/// The learned addresses of every `dns:` group, bounded by `max-addresses`.
public struct DNSAddressStore: Sendable {
    /// The groups (``FlowRuleSet/dnsGroups``).
    public private(set) var groups: [[DNSNamePattern]]
    /// Bounds and lifetimes.
    public private(set) var settings: DNSLearningSettings
    private var entries: [IPAddress: [DNSLearnedEntry]] = [:]
    /// A min-heap of (expires, address, group); entries refreshed since are
    /// stale items, skipped when popped (their expiry no longer matches).
    private var heap: [HeapItem] = []

    /// Address entries added (one per address and group).
    public private(set) var learned: UInt64 = 0
    /// Entries whose expiry a later reply extended.
    public private(set) var refreshed: UInt64 = 0
    /// Entries removed by ``sweep(now:)``.
    public private(set) var expired: UInt64 = 0
    /// Addresses removed (with all their entries) to stay within `max-addresses`.
    public private(set) var evicted: UInt64 = 0

    private struct HeapItem {
        var expires: Int64
        var address: IPAddress
        var group: Int
    }

    /// An empty store.
    public init(groups: [[DNSNamePattern]], settings: DNSLearningSettings) {
        self.groups = Array(groups.prefix(16))
        self.settings = settings
    }

    /// Addresses held.
    public var count: Int { entries.count }

    /// The group mask of `address` (0: not learned).
    public func mask(of address: IPAddress) -> UInt16 {
        var m: UInt16 = 0
        for e in entries[address] ?? [] { m |= 1 << UInt16(e.group) }
        return m
    }

    /// `address`'s entries, by group.
    public func entries(of address: IPAddress) -> [DNSLearnedEntry] {
        (entries[address] ?? []).sorted { $0.group < $1.group }
    }

    /// Every address with its mask, sorted by address.
    public var masks: [DNSMaskChange] {
        entries.keys.sorted().map { DNSMaskChange(address: $0, mask: mask(of: $0)) }
    }

    /// The groups each of `names` (question first, then the CNAME chain)
    /// belongs to: for each group, the first name matching one of its patterns.
    public func matchingGroups(_ names: [DNSName]) -> [(group: Int, name: DNSName)] {
        groups.indices.compactMap { g in
            names.first { n in groups[g].contains { $0.matches(n) } }.map { (g, $0) }
        }
    }

    /// Learns a parsed reply's addresses at time `now`; returns the mask changes.
    public mutating func learn(
        _ reply: DNSReply, server: IPAddress? = nil, client: IPAddress? = nil, interface: String? = nil,
        now: Int64
    ) -> [DNSMaskChange] {
        learn(
            names: [reply.question] + reply.chain, addresses: reply.addresses, server: server, client: client,
            interface: interface, now: now)
    }

    /// Learns `addresses` for the reply chain `names` (question first).
    public mutating func learn(
        names: [DNSName], addresses: [DNSAddressAnswer], server: IPAddress? = nil, client: IPAddress? = nil,
        interface: String? = nil, now: Int64
    ) -> [DNSMaskChange] {
        guard let question = names.first, !addresses.isEmpty else { return [] }
        let matched = matchingGroups(names)
        guard !matched.isEmpty else { return [] }
        var changed: [DNSMaskChange] = []
        for answer in addresses {
            let a = answer.address
            let expires = now + Int64(settings.lifetime(ttl: answer.ttl))
            let before = mask(of: a)
            if entries[a] == nil {
                while entries.count >= settings.maxAddresses, let gone = evictOne() {
                    changed.append(DNSMaskChange(address: gone, mask: 0))
                }
            }
            var list = entries[a] ?? []
            for (g, name) in matched {
                let source = DNSLearnSource(
                    question: question, name: name, ttl: answer.ttl, server: server, client: client,
                    interface: interface, at: now)
                if let i = list.firstIndex(where: { $0.group == g }) {
                    // Keep the later expiry: an address stays while any reply says so.
                    guard expires > list[i].expires else { continue }
                    list[i].expires = expires
                    list[i].source = source
                    refreshed &+= 1
                } else {
                    list.append(DNSLearnedEntry(group: g, expires: expires, source: source))
                    learned &+= 1
                }
                push(HeapItem(expires: expires, address: a, group: g))
            }
            entries[a] = list
            let after = mask(of: a)
            if after != before { changed.append(DNSMaskChange(address: a, mask: after)) }
        }
        compactIfNeeded()
        return changed
    }

    /// Removes the entries expired at `now` (`expires <= now`); returns the mask changes.
    public mutating func sweep(now: Int64) -> [DNSMaskChange] {
        var touched: [IPAddress] = []
        while let top = heap.first, top.expires <= now {
            let item = pop()
            guard var list = entries[item.address],
                let i = list.firstIndex(where: { $0.group == item.group && $0.expires == item.expires })
            else { continue }
            list.remove(at: i)
            expired &+= 1
            entries[item.address] = list.isEmpty ? nil : list
            touched.append(item.address)
        }
        var seen = Set<IPAddress>()
        return touched.filter { seen.insert($0).inserted }.map {
            DNSMaskChange(address: $0, mask: mask(of: $0))
        }
    }

    /// The store for a new config: entries of groups still present are kept
    /// (renumbered), others dropped; the new `max-addresses` is applied.
    /// Counters carry over.
    public func regrouped(_ newGroups: [[DNSNamePattern]], settings newSettings: DNSLearningSettings)
        -> DNSAddressStore
    {
        var s = DNSAddressStore(groups: newGroups, settings: newSettings)
        s.learned = learned
        s.refreshed = refreshed
        s.expired = expired
        s.evicted = evicted
        let map = groups.map { g in s.groups.firstIndex(of: g) }
        for (a, list) in entries {
            let kept = list.compactMap { e -> DNSLearnedEntry? in
                guard let g = map[e.group] else { return nil }
                var e = e
                e.group = g
                return e
            }
            if !kept.isEmpty { s.entries[a] = kept }
        }
        s.rebuildHeap()
        while s.entries.count > s.settings.maxAddresses, s.evictOne() != nil {}
        return s
    }

    // MARK: eviction and the heap

    /// Removes the address of the soonest-expiring entry; nil when empty.
    private mutating func evictOne() -> IPAddress? {
        while !heap.isEmpty {
            let item = pop()
            guard let list = entries[item.address],
                list.contains(where: { $0.group == item.group && $0.expires == item.expires })
            else { continue }
            entries[item.address] = nil
            evicted &+= 1
            return item.address
        }
        return nil
    }

    private mutating func rebuildHeap() {
        heap = entries.flatMap { a, list in
            list.map { HeapItem(expires: $0.expires, address: a, group: $0.group) }
        }
        heap.sort { $0.expires < $1.expires }  // a sorted array is a heap
    }

    /// Stale items (refreshed entries) accumulate; rebuild when they dominate.
    private mutating func compactIfNeeded() {
        if heap.count > 1024, heap.count > 4 * entries.count * max(1, groups.count) { rebuildHeap() }
    }

    private mutating func push(_ item: HeapItem) {
        heap.append(item)
        var i = heap.count - 1
        while i > 0 {
            let p = (i - 1) / 2
            guard heap[i].expires < heap[p].expires else { break }
            heap.swapAt(i, p)
            i = p
        }
    }

    private mutating func pop() -> HeapItem {
        let top = heap[0]
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            var i = 0
            while true {
                let l = 2 * i + 1
                let r = l + 1
                var m = i
                if l < heap.count, heap[l].expires < heap[m].expires { m = l }
                if r < heap.count, heap[r].expires < heap[m].expires { m = r }
                if m == i { break }
                heap.swapAt(i, m)
                i = m
            }
        }
        return top
    }
}
