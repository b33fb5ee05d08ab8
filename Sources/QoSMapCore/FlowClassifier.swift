// The compiled form of a FlowRuleSet that nfqueue runs in Swift and the ebpf
// datapath loads into maps (Bpf/qosmap.bpf.c): Recursive Flow Classification
// (Gupta and McKeown, SIGCOMM 1999). Each field's value maps to an
// equivalence class (the set of rules whose condition on that field it meets),
// and a few cross-product tables combine classes pairwise, each result
// reduced to its distinct rule sets again, down to the first rule. A packet
// costs a fixed number of array reads whatever the rule count: 7 field
// lookups (two of them a 12-step binary search over address intervals) and 6
// table reads.

/// A set of rule indices, as words.
struct RuleBits: Hashable {
    var words: [UInt64]

    init(count: Int) { words = Array(repeating: 0, count: max(1, (count + 63) / 64)) }

    mutating func insert(_ i: Int) { words[i >> 6] |= 1 << UInt64(i & 63) }

    func intersection(_ o: RuleBits) -> RuleBits {
        var r = self
        for i in r.words.indices { r.words[i] &= o.words[i] }
        return r
    }

    /// The lowest index in both, or nil.
    func firstCommon(_ o: RuleBits) -> Int? {
        for i in words.indices {
            let w = words[i] & o.words[i]
            if w != 0 { return i * 64 + w.trailingZeroBitCount }
        }
        return nil
    }
}

/// Numbers distinct rule sets; class 0 is always the set given first (the
/// rules with no condition on the field), so that a value the packet lacks
/// (no ports, no ingress interface) can use class 0.
struct ClassNumbering {
    var ids: [RuleBits: UInt16] = [:]
    var sets: [RuleBits] = []

    init(first: RuleBits) { _ = id(first) }

    mutating func id(_ b: RuleBits) -> UInt16 {
        if let i = ids[b] { return i }
        let i = UInt16(truncatingIfNeeded: sets.count)
        ids[b] = i
        sets.append(b)
        return i
    }
}

/// Address intervals of one family for one field: `starts` ascending, the
/// first 0; an address belongs to the last interval whose start is not above it.
public struct AddressIntervals: Sendable, Equatable {
    /// Interval starts (IPv4: the address in `low`).
    public var starts: [IPAddress]
    /// The class of each interval.
    public var classes: [UInt16]

    /// The class of `a` (binary search; no allocation).
    @inlinable
    public func classOf(_ a: IPAddress) -> UInt16 {
        var lo = 0
        var hi = starts.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) >> 1
            if starts[mid] <= a { lo = mid } else { hi = mid - 1 }
        }
        return classes[lo]
    }
}

/// A cross-product table: `table[x * width + y]`.
public struct CrossTable: Sendable, Equatable {
    /// Rows (classes of the first input).
    public var rows: Int
    /// Columns (classes of the second input).
    public var width: Int
    /// The result class (or, for the last table, rule index + 1; 0 none).
    public var table: [UInt16]

    /// The entry for classes `x` and `y`.
    @inlinable
    public func at(_ x: UInt16, _ y: UInt16) -> UInt16 { table[Int(x) &* width &+ Int(y)] }
}

/// A ``FlowRuleSet`` compiled for constant-time classification.
public struct FlowClassifier: Sendable, Equatable {
    /// Rules the compiled form holds at most (rule + 1 fits the tables' 16 bits
    /// and the ebpf counters are sized for it).
    public static let maxRules = 4096
    /// Address intervals per family and field at most (the ebpf binary search
    /// runs 12 steps).
    public static let maxIntervals = 4096
    /// Cross-product entries at most, all tables together (the ebpf map's size).
    public static let maxCrossEntries = 1 << 20
    /// Distinct `dns:` lists at most: the dns field's class comes from the
    /// destination's group mask through a table of 2^N entries.
    public static let maxDNSGroups = 12

    /// The number of rules.
    public var ruleCount: Int
    /// Class by protocol number (256 entries).
    public var protocolClass: [UInt16]
    /// Class by source port (65,536 entries); packets without ports use 0.
    public var sourcePortClass: [UInt16]
    /// Class by destination port.
    public var destinationPortClass: [UInt16]
    /// Class by arriving DSCP (64 entries).
    public var dscpClass: [UInt16]
    /// Class by receiving interface name; others (and local packets) 0.
    public var ingressClass: [String: UInt16]
    /// Source address intervals, IPv4 and IPv6.
    public var source4: AddressIntervals
    /// IPv6 source intervals.
    public var source6: AddressIntervals
    /// Destination address intervals, IPv4.
    public var destination4: AddressIntervals
    /// IPv6 destination intervals.
    public var destination6: AddressIntervals
    /// (protocol, destination port) → class.
    public var protocolPort: CrossTable
    /// (that, source port) → class.
    public var ports: CrossTable
    /// (source, destination) → class.
    public var addresses: CrossTable
    /// (ingress, DSCP) → class.
    public var arrival: CrossTable
    /// (ports, arrival) → class.
    public var portsArrival: CrossTable
    /// (that, addresses with dns) → rule index + 1, or 0.
    public var final: CrossTable
    /// The distinct `dns:` lists (``FlowRuleSet/dnsGroups``): bit `i` of a
    /// learned address's mask is `dnsGroups[i]`.
    public var dnsGroups: [[DNSNamePattern]]
    /// Class by the destination's group mask (2^N entries; `[0]` with no dns rule).
    public var dnsClass: [UInt16]
    /// (addresses, dns) → class. With no dns rule it is the identity
    /// (one column), so ``final`` reads the addresses' class unchanged.
    public var addressesDNS: CrossTable

    /// The classes per field, in the order the ebpf config carries them.
    public var ingressClassCount: Int

    /// Compiles `rules`. Throws when the rule set exceeds the limits above,
    /// with a message naming the limit.
    public init(_ rules: FlowRuleSet) throws(FlowRuleError) {
        let n = rules.rules.count
        guard n <= FlowClassifier.maxRules else {
            throw FlowRuleError("\(n) rules; allowed: at most \(FlowClassifier.maxRules)")
        }
        ruleCount = n
        let matches = rules.rules.map(\.match)
        func unconstrained(_ has: (FlowMatch) -> Bool) -> RuleBits {
            var b = RuleBits(count: n)
            for (i, m) in matches.enumerated() where !has(m) { b.insert(i) }
            return b
        }

        // Protocol.
        var protoNum = ClassNumbering(first: unconstrained { $0.protocols != nil })
        protocolClass = (0..<256).map { v in
            var b = RuleBits(count: n)
            for (i, m) in matches.enumerated() where m.protocols?.contains(UInt8(v)) ?? true { b.insert(i) }
            return protoNum.id(b)
        }
        // DSCP.
        // Class 0 the rules without dscp: (as for the other fields): with no
        // dscp: rule DSCP has one class, and the ebpf program can skip the
        // arrival stages (EBPFFlowTables, CrossTable.isRowIdentity).
        var dscpNum = ClassNumbering(first: unconstrained { $0.dscp != nil })
        dscpClass = (0..<64).map { v in
            var b = RuleBits(count: n)
            for (i, m) in matches.enumerated() where m.dscp?.contains(UInt8(v)) ?? true { b.insert(i) }
            return dscpNum.id(b)
        }
        // Ingress.
        var ifNum = ClassNumbering(first: unconstrained { $0.ingress != nil })
        var ifClass: [String: UInt16] = [:]
        for name in Set(matches.flatMap { $0.ingress ?? [] }).sorted() {
            var b = RuleBits(count: n)
            for (i, m) in matches.enumerated() where m.ingress?.contains(name) ?? true { b.insert(i) }
            ifClass[name] = ifNum.id(b)
        }
        ingressClass = ifClass
        ingressClassCount = ifNum.sets.count

        // Ports: elementary intervals from the range ends.
        func portClasses(_ get: (FlowMatch) -> [PortRange]?) -> ([UInt16], ClassNumbering) {
            var num = ClassNumbering(first: unconstrained { get($0) != nil })
            var cuts = Set<Int>([0])
            for m in matches {
                for r in get(m) ?? [] { cuts.insert(Int(r.lower)); cuts.insert(Int(r.upper) + 1) }
            }
            let starts = cuts.filter { $0 <= 65535 }.sorted()
            var table = [UInt16](repeating: 0, count: 65536)
            for (k, s) in starts.enumerated() {
                let e = k + 1 < starts.count ? starts[k + 1] : 65536
                var b = RuleBits(count: n)
                for (i, m) in matches.enumerated() {
                    if let rs = get(m) {
                        if rs.contains(where: { $0.contains(UInt16(s)) }) { b.insert(i) }
                    } else {
                        b.insert(i)
                    }
                }
                let id = num.id(b)
                for p in s..<e { table[p] = id }
            }
            return (table, num)
        }
        let (sp, spNum) = portClasses(\.sourcePorts)
        let (dp, dpNum) = portClasses(\.destinationPorts)
        sourcePortClass = sp
        destinationPortClass = dp

        // Addresses: elementary intervals per family, one numbering per field.
        func addressClasses(_ get: (FlowMatch) -> [IPPrefix]?) throws(FlowRuleError) -> (
            AddressIntervals, AddressIntervals, ClassNumbering
        ) {
            var num = ClassNumbering(first: unconstrained { get($0) != nil })
            func family(_ v6: Bool) throws(FlowRuleError) -> AddressIntervals {
                var cuts = Set<IPAddress>([IPAddress(ipv6: v6, high: 0, low: 0)])
                for m in matches {
                    for p in get(m) ?? [] where p.address.isIPv6 == v6 {
                        cuts.insert(p.range.lowerBound)
                        if let next = IntervalSet.successor(p.range.upperBound) { cuts.insert(next) }
                    }
                }
                let starts = cuts.sorted()
                guard starts.count <= FlowClassifier.maxIntervals else {
                    throw FlowRuleError(
                        "\(starts.count) \(v6 ? "IPv6" : "IPv4") address intervals; allowed: at most \(FlowClassifier.maxIntervals) per family and direction"
                    )
                }
                var classes: [UInt16] = []
                for s in starts {
                    var b = RuleBits(count: n)
                    for (i, m) in matches.enumerated() {
                        if let ps = get(m) {
                            if ps.contains(where: { $0.contains(s) }) { b.insert(i) }
                        } else {
                            b.insert(i)
                        }
                    }
                    classes.append(num.id(b))
                }
                return AddressIntervals(starts: starts, classes: classes)
            }
            let v4 = try family(false)
            let v6 = try family(true)
            return (v4, v6, num)
        }
        let (s4, s6, srcNum) = try addressClasses(\.sources)
        let (d4, d6, dstNum) = try addressClasses(\.destinations)
        source4 = s4
        source6 = s6
        destination4 = d4
        destination6 = d6

        var total = 0
        func cross(_ a: ClassNumbering, _ b: ClassNumbering) throws(FlowRuleError) -> (
            CrossTable, ClassNumbering
        ) {
            total += a.sets.count * b.sets.count
            guard total <= FlowClassifier.maxCrossEntries else { throw FlowClassifier.tooLarge(total) }
            var num = ClassNumbering(first: a.sets[0].intersection(b.sets[0]))
            var t = [UInt16]()
            t.reserveCapacity(a.sets.count * b.sets.count)
            for x in a.sets { for y in b.sets { t.append(num.id(x.intersection(y))) } }
            guard num.sets.count <= 65535 else { throw FlowClassifier.tooLarge(total) }
            return (CrossTable(rows: a.sets.count, width: b.sets.count, table: t), num)
        }
        let (pp, ppNum) = try cross(protoNum, dpNum)
        let (po, poNum) = try cross(ppNum, spNum)
        let (ad, adNum0) = try cross(srcNum, dstNum)
        // DNS: the class of each group mask; the rules without dns: hold for all.
        let groups = rules.dnsGroups
        guard groups.count <= FlowClassifier.maxDNSGroups else {
            throw FlowRuleError(
                "\(groups.count) distinct dns: lists; allowed: at most \(FlowClassifier.maxDNSGroups) (rules with the same list share one)"
            )
        }
        dnsGroups = groups
        var dnsNum = ClassNumbering(first: unconstrained { $0.dns != nil })
        dnsClass = (0..<(1 << groups.count)).map { mask in
            var b = RuleBits(count: n)
            for (i, m) in matches.enumerated() {
                if let d = m.dns {
                    if let g = groups.firstIndex(of: d), mask & (1 << g) != 0 { b.insert(i) }
                } else {
                    b.insert(i)
                }
            }
            return dnsNum.id(b)
        }
        // The class-by-mask table shares the ebpf map with the cross tables.
        if groups.count > 0 { total += dnsClass.count }
        let (adn, adNum) = try cross(adNum0, dnsNum)
        addressesDNS = adn
        let (ar, arNum) = try cross(ifNum, dscpNum)
        let (pa, paNum) = try cross(poNum, arNum)
        protocolPort = pp
        ports = po
        addresses = ad
        arrival = ar
        portsArrival = pa
        total += paNum.sets.count * adNum.sets.count
        guard total <= FlowClassifier.maxCrossEntries else { throw FlowClassifier.tooLarge(total) }
        var f = [UInt16]()
        f.reserveCapacity(paNum.sets.count * adNum.sets.count)
        for x in paNum.sets {
            for y in adNum.sets { f.append(x.firstCommon(y).map { UInt16($0 + 1) } ?? 0) }
        }
        final = CrossTable(rows: paNum.sets.count, width: adNum.sets.count, table: f)
    }

    static func tooLarge(_ total: Int) -> FlowRuleError {
        FlowRuleError(
            "the rules compile to more than \(maxCrossEntries) cross-product entries (\(total) so far); allowed: fewer combinations of distinct addresses, ports and protocols across rules"
        )
    }

    /// Every cross-product table, in the order the ebpf map holds them.
    public var crossTables: [CrossTable] { [protocolPort, ports, addresses, arrival, portsArrival, final] }

    /// The first rule a packet matches (index), from its fields:
    /// `protocolNumber` nil and ports nil as ``FlowPacket`` documents,
    /// `ingress` the receiving interface's class (``ingressClass``; 0 for
    /// others), `dnsMask` the groups the destination is learned in (bit `i`:
    /// ``dnsGroups``[i]). Allocation-free.
    @inlinable
    public func classify(
        protocolNumber: UInt8?, source: IPAddress, destination: IPAddress, sourcePort: UInt16?,
        destinationPort: UInt16?, ingress: UInt16, dscp: UInt8, dnsMask: UInt16 = 0
    ) -> Int? {
        let p = protocolNumber.map { protocolClass[Int($0)] } ?? 0
        let sp = sourcePort.map { sourcePortClass[Int($0)] } ?? 0
        let dp = destinationPort.map { destinationPortClass[Int($0)] } ?? 0
        let s = source.isIPv6 ? source6.classOf(source) : source4.classOf(source)
        let d = destination.isIPv6 ? destination6.classOf(destination) : destination4.classOf(destination)
        let po = ports.at(protocolPort.at(p, dp), sp)
        let ar = arrival.at(ingress, dscpClass[Int(dscp & 63)])
        var ad = addresses.at(s, d)
        if dnsClass.count > 1 { ad = addressesDNS.at(ad, dnsClass[Int(dnsMask) & (dnsClass.count - 1)]) }
        let r = final.at(portsArrival.at(po, ar), ad)
        return r == 0 ? nil : Int(r) - 1
    }

    /// ``classify(protocolNumber:source:destination:sourcePort:destinationPort:ingress:dscp:dnsMask:)``
    /// for a described packet (its destination names give the group mask).
    public func classify(_ p: FlowPacket) -> Int? {
        classify(
            protocolNumber: p.protocolNumber, source: p.source, destination: p.destination,
            sourcePort: p.sourcePort, destinationPort: p.destinationPort,
            ingress: p.ingress.flatMap { ingressClass[$0] } ?? 0, dscp: p.dscp,
            dnsMask: DNSNamePattern.mask(dnsGroups, names: p.destinationNames))
    }
}
