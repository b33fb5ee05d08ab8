// Flow rules: multi-field classification of packets that arrive unmarked (or
// bleached), before trust. One model, one semantics; each datapath compiles it
// (``FlowClassifier`` for nfqueue and ebpf, nft rules for the export).

/// Where a rule was written, for messages and `qosmap classify`.
public struct SourcePosition: Hashable, Sendable, CustomStringConvertible {
    /// The file.
    public var file: String
    /// 1-based line.
    public var line: Int
    /// 1-based column.
    public var column: Int

    /// Creates a position.
    public init(file: String, line: Int, column: Int) {
        self.file = file
        self.line = line
        self.column = column
    }

    /// `file:line`.
    public var description: String { "\(file):\(line)" }
}

/// The IANA protocol numbers whose first four transport bytes are the source
/// and destination ports: TCP, UDP, DCCP, SCTP, UDP-Lite.
public enum TransportProtocol {
    /// Protocols with ports.
    public static let withPorts: Set<UInt8> = [6, 17, 33, 132, 136]

    /// Whether `p` is one of ``withPorts`` (a switch: no hashing per packet).
    @inlinable
    public static func hasPorts(_ p: UInt8) -> Bool {
        switch p {
        case 6, 17, 33, 132, 136: true
        default: false
        }
    }

    /// The names a rule's `protocol` accepts, with their numbers.
    public static let names: [(name: String, number: UInt8)] = [
        ("tcp", 6), ("udp", 17), ("icmp", 1), ("icmpv6", 58), ("sctp", 132), ("dccp", 33), ("udplite", 136),
        ("gre", 47), ("esp", 50), ("ah", 51),
    ]

    /// Parses a name or a number 0–255.
    public static func parse(_ token: some StringProtocol) throws(FlowRuleError) -> UInt8 {
        let lower = token.lowercased()
        if let n = names.first(where: { $0.name == lower }) { return n.number }
        if let v = parseInteger(Substring(lower)), (0...255).contains(v) { return UInt8(v) }
        throw FlowRuleError(
            "invalid protocol '\(token)'; allowed: \(names.map(\.name).joined(separator: ", ")), or a number 0-255"
        )
    }

    /// The name of a protocol number, or the number.
    public static func name(_ number: UInt8) -> String {
        names.first(where: { $0.number == number })?.name ?? "\(number)"
    }
}

/// What a rule gives a packet it matches.
public enum FlowAction: Hashable, Sendable, CustomStringConvertible {
    /// This class and color, as if trust had classified the packet so.
    case treatment(Treatment)
    /// As if the packet had arrived with this DSCP: the receiving
    /// interface's inbound domain classifies it (its DSCP table, whatever the
    /// interface's trust mode).
    case dscp(DSCP)

    /// The treatment for a packet received under `ingress`.
    public func treatment(ingress: DSDomain) -> Treatment {
        switch self {
        case .treatment(let t): t
        case .dscp(let d): ingress.classify(dscp: d)
        }
    }

    /// `class AF1 color yellow` or `dscp AF41`.
    public var description: String {
        switch self {
        case .treatment(let t): "class \(t.serviceClass.name) color \(t.color.name)"
        case .dscp(let d): "dscp \(d.name ?? "\(d.rawValue)")"
        }
    }
}

/// The conditions of one rule. Every key given must hold (AND); a list within
/// a key holds when any element does (OR). A nil key matches every packet.
public struct FlowMatch: Hashable, Sendable {
    /// IP protocol numbers (the upper-layer protocol, after IPv6 extension headers).
    public var protocols: Set<UInt8>?
    /// Source prefixes, IPv4 and IPv6 mixed.
    public var sources: [IPPrefix]?
    /// Destination prefixes.
    public var destinations: [IPPrefix]?
    /// Source port ranges (only packets with ports match).
    public var sourcePorts: [PortRange]?
    /// Destination port ranges.
    public var destinationPorts: [PortRange]?
    /// Receiving interface names.
    public var ingress: Set<String>?
    /// The DSCP values the packet may arrive with.
    public var dscp: Set<UInt8>?
    /// DNS name patterns: the destination must be an address currently
    /// learned from a reply for a matching name (docs/DNS.md). Sorted and
    /// without duplicates, so that equal lists are one learned set.
    public var dns: [DNSNamePattern]?

    /// Creates a match.
    public init(
        protocols: Set<UInt8>? = nil, sources: [IPPrefix]? = nil, destinations: [IPPrefix]? = nil,
        sourcePorts: [PortRange]? = nil, destinationPorts: [PortRange]? = nil, ingress: Set<String>? = nil,
        dscp: Set<UInt8>? = nil, dns: [DNSNamePattern]? = nil
    ) {
        self.protocols = protocols
        self.sources = sources
        self.destinations = destinations
        self.sourcePorts = sourcePorts
        self.destinationPorts = destinationPorts
        self.ingress = ingress
        self.dscp = dscp
        self.dns = dns.map(DNSNamePattern.normalized)
    }

    /// Whether a packet satisfies every key.
    public func matches(_ p: FlowPacket) -> Bool {
        if let protocols, !(p.protocolNumber.map { protocols.contains($0) } ?? false) { return false }
        if let sources, !sources.contains(where: { $0.contains(p.source) }) { return false }
        if let destinations, !destinations.contains(where: { $0.contains(p.destination) }) { return false }
        if let sourcePorts {
            guard let port = p.sourcePort, sourcePorts.contains(where: { $0.contains(port) }) else {
                return false
            }
        }
        if let destinationPorts {
            guard let port = p.destinationPort, destinationPorts.contains(where: { $0.contains(port) }) else {
                return false
            }
        }
        if let ingress, !(p.ingress.map { ingress.contains($0) } ?? false) { return false }
        if let dscp, !dscp.contains(p.dscp & 63) { return false }
        if let dns, !dns.contains(where: { pattern in p.destinationNames.contains(where: pattern.matches) }) {
            return false
        }
        return true
    }

    /// Whether every packet this match takes is also taken by `self` (used by
    /// lint to find rules an earlier one shadows). Exact for each key:
    /// prefixes and port ranges are compared as sets of values.
    public func covers(_ other: FlowMatch) -> Bool {
        func sub<T>(_ mine: Set<T>?, _ theirs: Set<T>?) -> Bool {
            guard let mine else { return true }
            guard let theirs else { return false }
            return theirs.isSubset(of: mine)
        }
        func prefixes(_ mine: [IPPrefix]?, _ theirs: [IPPrefix]?) -> Bool {
            guard let mine else { return true }
            guard let theirs else { return false }
            return IntervalSet(theirs).isSubset(of: IntervalSet(mine))
        }
        func ports(_ mine: [PortRange]?, _ theirs: [PortRange]?) -> Bool {
            guard let mine else { return true }
            guard let theirs else { return false }
            return theirs.allSatisfy { t in
                // A range is covered when the union of ours holds all of it.
                var next = Int(t.lower)
                for r in mine.sorted(by: { $0.lower < $1.lower })
                where Int(r.lower) <= next && Int(r.upper) >= next {
                    next = Int(r.upper) + 1
                    if next > Int(t.upper) { return true }
                }
                return next > Int(t.upper)
            }
        }
        return sub(protocols, other.protocols) && prefixes(sources, other.sources)
            && prefixes(destinations, other.destinations) && ports(sourcePorts, other.sourcePorts)
            && ports(destinationPorts, other.destinationPorts) && sub(ingress, other.ingress)
            && sub(dscp, other.dscp) && DNSNamePattern.covers(dns, other.dns)
    }
}

/// A sorted union of address intervals, for exact prefix-set comparisons.
struct IntervalSet {
    var intervals: [ClosedRange<IPAddress>] = []

    init(_ prefixes: [IPPrefix]) {
        for r in prefixes.map(\.range).sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = intervals.last, last.upperBound.isIPv6 == r.lowerBound.isIPv6,
                r.lowerBound <= last.upperBound || IntervalSet.successor(last.upperBound) == r.lowerBound
            {
                intervals[intervals.count - 1] = last.lowerBound...max(last.upperBound, r.upperBound)
            } else {
                intervals.append(r)
            }
        }
    }

    static func successor(_ a: IPAddress) -> IPAddress? {
        if !a.isIPv6 { return a.low == 0xFFFF_FFFF ? nil : IPAddress(ipv4: UInt32(a.low + 1)) }
        if a.low == .max { return a.high == .max ? nil : IPAddress(ipv6: true, high: a.high + 1, low: 0) }
        return IPAddress(ipv6: true, high: a.high, low: a.low + 1)
    }

    func isSubset(of other: IntervalSet) -> Bool {
        intervals.allSatisfy { r in
            other.intervals.contains { $0.lowerBound <= r.lowerBound && r.upperBound <= $0.upperBound }
        }
    }
}

/// One rule of a `classify:` section.
public struct FlowRule: Hashable, Sendable {
    /// The rule's name (unique in its set; the counters' `rule` label).
    public var name: String
    /// The conditions.
    public var match: FlowMatch
    /// What a matched packet gets.
    public var action: FlowAction
    /// `connection: true` (the default): the other direction of a matched
    /// flow gets the same treatment.
    public var connection: Bool
    /// Where the rule was written.
    public var position: SourcePosition

    /// Creates a rule.
    public init(
        name: String, match: FlowMatch, action: FlowAction, connection: Bool = true,
        position: SourcePosition = SourcePosition(file: "config", line: 1, column: 1)
    ) {
        self.name = name
        self.match = match
        self.action = action
        self.connection = connection
        self.position = position
    }
}

/// The facts about one packet that rules read.
public struct FlowPacket: Hashable, Sendable {
    /// The upper-layer protocol, nil when the IPv6 extension-header walk failed.
    public var protocolNumber: UInt8?
    /// Source address.
    public var source: IPAddress
    /// Destination address.
    public var destination: IPAddress
    /// Source port: nil for a protocol without ports, a non-first fragment or
    /// a transport header cut short.
    public var sourcePort: UInt16?
    /// Destination port.
    public var destinationPort: UInt16?
    /// The receiving interface, nil for host-originated packets.
    public var ingress: String?
    /// The DSCP as it arrives.
    public var dscp: UInt8
    /// The names the destination address is currently learned for (from DNS
    /// replies); `dns:` rules read them.
    public var destinationNames: [DNSName]

    /// Creates a packet description.
    public init(
        protocolNumber: UInt8?, source: IPAddress, destination: IPAddress, sourcePort: UInt16? = nil,
        destinationPort: UInt16? = nil, ingress: String? = nil, dscp: UInt8 = 0,
        destinationNames: [DNSName] = []
    ) {
        self.protocolNumber = protocolNumber
        self.source = source
        self.destination = destination
        self.sourcePort = sourcePort
        self.destinationPort = destinationPort
        self.ingress = ingress
        self.dscp = dscp
        self.destinationNames = destinationNames
    }

    /// The same flow seen from the other end: addresses and ports swapped;
    /// no destination names (those were the other address's).
    public var reversed: FlowPacket {
        var r = self
        r.destinationNames = []
        r.source = destination
        r.destination = source
        r.sourcePort = destinationPort
        r.destinationPort = sourcePort
        return r
    }
}

/// The `classify:` section: named address sets and ordered rules.
public struct FlowRuleSet: Hashable, Sendable {
    /// Named address sets, as written (set names in rules are already expanded).
    public var sets: [String: [IPPrefix]]
    /// The rules, first match wins.
    public var rules: [FlowRule]
    /// `connection-mark-mask`: the conntrack mark bits the nft export keeps
    /// a matched connection's rule in.
    public var connectionMarkMask: UInt32
    /// `dns:`: where and how addresses are learned for `dns:` rules.
    public var dns = DNSLearningSettings()
    /// `flows:`: bulk demotion and interactive promotion (``FlowBehaviour``).
    public var behaviour = FlowBehaviour()

    /// The default `connection-mark-mask`: 12 bits, up to 4,095 rules.
    public static let defaultConnectionMarkMask: UInt32 = 0x0FFF_0000

    /// Creates a rule set.
    public init(
        sets: [String: [IPPrefix]] = [:], rules: [FlowRule] = [],
        connectionMarkMask: UInt32 = FlowRuleSet.defaultConnectionMarkMask
    ) {
        self.sets = sets
        self.rules = rules
        self.connectionMarkMask = connectionMarkMask
    }

    /// Whether the section has any rule.
    public var isEmpty: Bool { rules.isEmpty }

    /// Whether any rule keeps per-connection state.
    public var tracksConnections: Bool { rules.contains { $0.connection } }

    /// Rules that can never match because an earlier rule covers them (every
    /// packet they match, the earlier one matches first): each shadowed rule
    /// with the first rule that covers it. Pairwise: a rule covered only by
    /// the union of several earlier ones is not reported.
    public func shadowed() -> [(rule: Int, by: Int)] {
        rules.indices.compactMap { j in
            rules[..<j].firstIndex { $0.match.covers(rules[j].match) }.map { (j, $0) }
        }
    }

    /// Rules that only match what looks like the replies of an earlier
    /// `connection: true` rule's connections: the earlier rule's match with
    /// sources and destinations (addresses and ports) swapped, receiving
    /// interface and DSCP free, covers them. Connection first, those replies
    /// keep the earlier rule, so such a rule classifies only packets of
    /// connections the earlier rule did not match (lint's `replies-of`).
    /// Each with the first such earlier rule; shadowed rules are left out,
    /// and so are earlier rules with `dns:` (their replies come from names,
    /// which a match cannot say).
    public func repliesOf() -> [(rule: Int, of: Int)] {
        let shadow = Set(shadowed().map(\.rule))
        return rules.indices.compactMap { j in
            guard !shadow.contains(j) else { return nil }
            return rules[..<j].firstIndex { r in
                guard r.connection, r.match.dns == nil else { return false }
                var mirror = r.match
                (mirror.sources, mirror.destinations) = (r.match.destinations, r.match.sources)
                (mirror.sourcePorts, mirror.destinationPorts) = (
                    r.match.destinationPorts, r.match.sourcePorts
                )
                mirror.ingress = nil
                mirror.dscp = nil
                return mirror.covers(rules[j].match)
            }.map { (j, $0) }
        }
    }

    /// The reference semantics: the index of the first rule `packet`
    /// satisfies. Every datapath must agree with it (tests compare them).
    public func firstMatch(_ packet: FlowPacket) -> Int? {
        rules.firstIndex { $0.match.matches(packet) }
    }
}
