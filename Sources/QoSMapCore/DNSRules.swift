// The model side of `dns:` rules (issue 24): the settings of `classify.dns`,
// the learned sets ("groups") the rules define, and pattern coverage for lint.
// The learned addresses themselves are kept by QoSMapPacket's DNSAddressStore.

/// `classify.dns`: which interfaces' DNS replies are read and how long, and
/// how many, learned addresses are kept.
public struct DNSLearningSettings: Hashable, Sendable {
    /// `snoop`: the interfaces whose DNS replies (UDP and TCP port 53) are read.
    public var snoop: [String]
    /// `max-addresses`: learned addresses kept at most, all sets together;
    /// when full, the address whose entry expires soonest is evicted.
    public var maxAddresses: Int
    /// `min-ttl`: seconds an address is kept at least, whatever the record's TTL.
    public var minTTL: UInt32
    /// `max-ttl`: seconds an address is kept at most after the reply that
    /// (re)learned it, whatever the record's TTL (bounds a hostile 68-year TTL).
    public var maxTTL: UInt32

    /// The defaults of `--print-default-config`.
    public static let defaultMaxAddresses = 100_000
    /// Default `min-ttl`: a minute; clients reuse an answer a little past its
    /// TTL, and records of 0-30 s are common on CDNs.
    public static let defaultMinTTL: UInt32 = 60
    /// Default `max-ttl`: one day.
    public static let defaultMaxTTL: UInt32 = 86_400
    /// `max-addresses` at most (the ebpf map and the nfqueue table are sized by it).
    public static let maxAddressesLimit = 4_000_000

    /// Creates settings.
    public init(
        snoop: [String] = [], maxAddresses: Int = DNSLearningSettings.defaultMaxAddresses,
        minTTL: UInt32 = DNSLearningSettings.defaultMinTTL, maxTTL: UInt32 = DNSLearningSettings.defaultMaxTTL
    ) {
        self.snoop = snoop
        self.maxAddresses = maxAddresses
        self.minTTL = minTTL
        self.maxTTL = maxTTL
    }

    /// How long a record with `ttl` keeps its address: the TTL raised to
    /// `min-ttl`, then capped at `max-ttl` (the cap wins if they cross).
    public func lifetime(ttl: UInt32) -> UInt32 { min(max(ttl, minTTL), maxTTL) }
}

extension FlowRuleSet {
    /// The distinct `dns:` lists of the rules, in the order of their first
    /// rule: one learned address set ("group") each. Bit `i` of a learned
    /// address's mask is group `i`.
    public var dnsGroups: [[DNSNamePattern]] {
        var groups: [[DNSNamePattern]] = []
        for r in rules {
            if let d = r.match.dns, !groups.contains(d) { groups.append(d) }
        }
        return groups
    }

    /// Whether any rule has a `dns:` key.
    public var hasDNSRules: Bool { rules.contains { $0.match.dns != nil } }
}

extension DNSNamePattern {
    /// Sorted by text, duplicates removed: equal lists are one group.
    public static func normalized(_ list: [DNSNamePattern]) -> [DNSNamePattern] {
        var seen = Set<DNSNamePattern>()
        return list.filter { seen.insert($0).inserted }.sorted { $0.description < $1.description }
    }

    /// Whether every name `other` matches, `self` matches too.
    public func covers(_ other: DNSNamePattern) -> Bool {
        guard isSuffix else { return !other.isSuffix && other.name == name }
        // `*.S` takes `*.S`, `*.x.S` and `x.S`.
        return other.name == name && other.isSuffix || matches(other.name)
    }

    /// ``FlowMatch/covers(_:)`` for the `dns:` key: nil takes everything;
    /// each of `theirs` must be covered by one of `mine` (pairwise, so a
    /// pattern covered only by several together is not found: lint then
    /// reports less, never a rule that can still match).
    public static func covers(_ mine: [DNSNamePattern]?, _ theirs: [DNSNamePattern]?) -> Bool {
        guard let mine else { return true }
        guard let theirs else { return false }
        return theirs.allSatisfy { t in mine.contains { $0.covers(t) } }
    }

    /// The group mask of a destination learned for `names`: bit `i` when a
    /// name matches a pattern of `groups[i]`.
    public static func mask(_ groups: [[DNSNamePattern]], names: [DNSName]) -> UInt16 {
        var m: UInt16 = 0
        for (i, g) in groups.enumerated() where i < 16 {
            if g.contains(where: { p in names.contains(where: p.matches) }) { m |= 1 << UInt16(i) }
        }
        return m
    }
}
