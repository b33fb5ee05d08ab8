// Download queues without the ebpf classifier (issue 38, `ingress-rate` on
// the nfqueue datapath and through `qosmap export tc --config`): the pure
// plan of the u32 filters on the IFB's HTB root that send each arriving
// packet to its class. Netfilter runs after tc ingress and after the IFB, so
// neither nfqueue nor nft can classify what the IFB queues; u32 filters on
// the IFB's qdisc can, for what a packet's own header says. qosmapd builds
// this plan through rtnetlink (TrafficShaping) and `export tc` writes it as
// `tc filter` lines: one semantics, compiled here.

/// The address family of a u32 filter: its `protocol` (`ip` or `ipv6`) and
/// the header layout its keys are written for.
public enum U32Family: String, Hashable, Sendable, CaseIterable {
    /// IPv4, `protocol ip` (ETH_P_IP).
    case ipv4 = "ip"
    /// IPv6, `protocol ipv6` (ETH_P_IPV6).
    case ipv6

    /// The EtherType the filter is attached for.
    public var etherType: UInt16 { self == .ipv4 ? 0x0800 : 0x86DD }
}

/// One 32-bit key of a u32 filter: `match u32 VALUE MASK at OFFSET`, the
/// offset in bytes from the network header (4-aligned), value and mask in
/// host order (tc and the kernel's `tc_u32_key` hold them big-endian).
public struct U32Key: Hashable, Sendable, CustomStringConvertible {
    /// The bits wanted under `mask`.
    public var value: UInt32
    /// The bits compared.
    public var mask: UInt32
    /// The word's offset from the network header.
    public var offset: Int32

    /// A key; `value` is masked so that a key can never be unsatisfiable.
    public init(value: UInt32, mask: UInt32, offset: Int32) {
        self.value = value & mask
        self.mask = mask
        self.offset = offset
    }

    /// `match u32 0x00b80000 0x00fc0000 at 0`, as `tc filter` takes it.
    public var description: String {
        "match u32 0x\(Self.hex(value)) 0x\(Self.hex(mask)) at \(offset)"
    }

    static func hex(_ v: UInt32) -> String {
        let digits = String(v, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }
}

/// One filter of a ``DownloadClassifierPlan``: a priority, a family, keys
/// that must all hold, and the HTB leaf class a match goes to.
public struct DownloadFilter: Hashable, Sendable {
    /// Why the filter is there.
    public enum Origin: Hashable, Sendable, CustomStringConvertible {
        /// A `classify:` rule, by name.
        case rule(String)
        /// The interface's trust (its inbound domain's table).
        case trust(TrustMode)

        /// `rule game`, `trust dscp`.
        public var description: String {
            switch self {
            case .rule(let name): "rule \(name)"
            case .trust(let mode): "trust \(mode.name)"
            }
        }
    }

    /// The filter priority (`prio`): lower is tried first, so the first
    /// matching filter in plan order wins, as the first matching rule does.
    public var priority: UInt16
    /// `protocol ip` or `protocol ipv6`.
    public var family: U32Family
    /// Every key must hold.
    public var keys: [U32Key]
    /// The HTB leaf (`classid`).
    public var classID: TCHandle
    /// The class that leaf stands for.
    public var serviceClass: ServiceClass
    /// The rule or the trust it comes from.
    public var origin: Origin
}

/// The u32 filters that classify an interface's download on its IFB, for the
/// datapaths without a tc ingress classifier (nfqueue, the nft export).
///
/// The semantics are the reference's (``FlowRuleSet/firstMatch(_:)``, then
/// trust) restricted to what a stateless match on one packet's header can
/// say exactly:
/// - flow rules first, in order, each as the filters of its keys' cross
///   product (protocols, source and destination prefixes, ports as aligned
///   blocks, DSCP values as aligned blocks); `ingress:` holds or not for the
///   whole download of one interface, so it keeps or drops the rule;
/// - then trust: the DSCP (or precedence) values of each class other than
///   the default one, as aligned blocks of the field;
/// - anything else goes to the HTB default class (BE): trust `none`, a
///   packet no rule matches whose value maps to BE.
///
/// What u32 cannot see is left out and listed in ``ignored``: `dns:` rules
/// (a learned address set), the replies of `connection: true` rules (kept by
/// a connection table; their first direction is still matched), trust
/// 8021p/exp (the tag is not in the IP header), and rules that would need
/// more than ``maximumFiltersPerRule`` filters. Ports are matched on packets
/// whose header has no options (IPv4 IHL 5, not a later fragment) or no
/// extension headers (IPv6 next header at its fixed place): u32 reads fixed
/// offsets, and a packet with options or extension headers goes on to the
/// next filter.
public struct DownloadClassifierPlan: Hashable, Sendable {
    /// The filters, in priority order.
    public let filters: [DownloadFilter]
    /// What the plan leaves out, one phrase each (`rule web (dns: names)`).
    public let ignored: [String]
    /// The HTB default class, where unmatched packets go.
    public let defaultClass: TCHandle

    /// The IFB device that holds the download queues of `interface`: `qmi-`
    /// and the name, or for a name longer than 11 characters its first 6 and
    /// a hash of it (IFNAMSIZ is 16). qosmapd and `export tc` use this one name.
    public static func ifbName(for interface: String) -> String {
        if interface.utf8.count <= 11 { return "qmi-" + interface }
        var h: UInt32 = 2_166_136_261  // FNV-1a: stable across runs and builds
        for b in interface.utf8 { h = (h ^ UInt32(b)) &* 16_777_619 }
        let hex = String(h & 0xFFFF, radix: 16)
        return "qmi-" + String(interface.prefix(6)) + "-" + String(repeating: "0", count: 4 - hex.count) + hex
    }

    /// The clsact ingress priority of the u32 + act_mirred filter that
    /// redirects an interface's arrivals to its IFB: right after the ebpf
    /// classifier's (0x7173).
    public static let redirectPriority: UInt16 = 0x7174

    /// The priority of the first filter; the others follow one by one.
    public static let firstPriority: UInt16 = 1
    /// The most filters one rule may expand to; a rule past it is ignored
    /// (listed) rather than slowing every download packet down.
    public static let maximumFiltersPerRule = 256

    /// The plan for the download of `interface`, received under `trust` and
    /// its inbound `domain`, with `rules`, into `plan`'s classes.
    public init(interface: String, trust: TrustMode, domain: DSDomain, rules: FlowRuleSet, plan: HTBPlan) {
        var filters: [DownloadFilter] = []
        var ignored: [String] = []
        var replies: [String] = []
        var next = Self.firstPriority
        func add(_ family: U32Family, _ keys: [U32Key], _ c: ServiceClass, _ origin: DownloadFilter.Origin) {
            filters.append(
                DownloadFilter(
                    priority: next, family: family, keys: keys, classID: plan.leaf(c).id, serviceClass: c,
                    origin: origin))
            next &+= 1
        }
        for rule in rules.rules {
            if let ingress = rule.match.ingress, !ingress.contains(interface) { continue }
            if rule.match.dns != nil {
                ignored.append("rule \(rule.name) (dns: names)")
                continue
            }
            let serviceClass = rule.action.treatment(ingress: domain).serviceClass
            let expanded = U32Family.allCases.flatMap { family in
                Self.keys(rule.match, family).map { (family, $0) }
            }
            guard expanded.count <= Self.maximumFiltersPerRule else {
                ignored.append("rule \(rule.name) (more than \(Self.maximumFiltersPerRule) u32 filters)")
                continue
            }
            for (family, keys) in expanded { add(family, keys, serviceClass, .rule(rule.name)) }
            if rule.connection { replies.append(rule.name) }
        }
        if !replies.isEmpty {
            ignored.append("the replies of connection rules (\(replies.joined(separator: ", ")))")
        }
        let defaultServiceClass = ServiceClass.allCases.first { plan.leaf($0).id == plan.defaultClass } ?? .be
        switch trust {
        case .none:
            break
        case .field(.dscp), .field(.ipPrecedence):
            let isDSCP = trust == .dscp
            let width = isDSCP ? 6 : 3
            for serviceClass in ServiceClass.allCases where serviceClass != defaultServiceClass {
                let values = Set(
                    (0..<UInt8(1 << width)).filter {
                        domain.classify(isDSCP ? .dscp : .ipPrecedence, $0).serviceClass == serviceClass
                    })
                for block in Self.blocks(values, width: width) {
                    for family in U32Family.allCases {
                        add(
                            family, [Self.trafficClassKey(block, width: width, family)], serviceClass,
                            .trust(trust))
                    }
                }
            }
        case .field:
            ignored.append("trust \(trust.name) (not in the IP header; only rules classify)")
        }
        self.filters = filters
        self.ignored = ignored
        defaultClass = plan.defaultClass
    }

    /// One line for qosmapd's log and the export's comment: what download
    /// classification of `interface` ignores; nil when nothing.
    public func notice(interface: String, ifb: String) -> String? {
        guard !ignored.isEmpty else { return nil }
        return
            "download queues of \(interface) (\(ifb)) are classified by u32 filters on each packet's header, which ignore: \(ignored.joined(separator: "; ")); those packets take trust's class or BE"
    }

    // MARK: Keys

    /// A DSCP (6 bits) or precedence (3 bits) block in the v4 TOS byte or
    /// the v6 traffic class: bits 16-23 of word 0 (v4), 20-27 (v6).
    static func trafficClassKey(_ block: (value: UInt8, mask: UInt8), width: Int, _ family: U32Family)
        -> U32Key
    {
        // The field's top bit sits at bit 23 (v4) or 27 (v6) of word 0.
        let shift = UInt32((family == .ipv4 ? 24 : 28) - width)
        return U32Key(value: UInt32(block.value) << shift, mask: UInt32(block.mask) << shift, offset: 0)
    }

    /// Every key combination of `match` for `family`: empty when no packet
    /// of the family can match (a prefix list without one of it, a protocol
    /// without ports where ports are asked).
    static func keys(_ match: FlowMatch, _ family: U32Family) -> [[U32Key]] {
        let v6 = family == .ipv6
        func prefixKeys(_ list: [IPPrefix]?, at base: Int32) -> [[U32Key]]? {
            guard let list else { return [[]] }
            let mine = list.filter { $0.address.isIPv6 == v6 }
            if mine.isEmpty { return nil }
            return mine.map { prefixKey($0, at: base) }
        }
        let hasPorts = match.sourcePorts != nil || match.destinationPorts != nil
        var protocols: [UInt8?] = [nil]
        if let p = match.protocols {
            protocols = p.sorted().filter { !hasPorts || TransportProtocol.hasPorts($0) }
        } else if hasPorts {
            protocols = TransportProtocol.withPorts.sorted()
        }
        guard !protocols.isEmpty,
            let sources = prefixKeys(match.sources, at: v6 ? 8 : 12),
            let destinations = prefixKeys(match.destinations, at: v6 ? 24 : 16)
        else { return [] }
        let portWord: Int32 = v6 ? 40 : 20
        let sourcePorts: [U32Key?] =
            match.sourcePorts.map { ranges in
                ranges.flatMap(portBlocks).map {
                    U32Key(value: UInt32($0.value) << 16, mask: UInt32($0.mask) << 16, offset: portWord)
                }
            } ?? [nil]
        let destinationPorts: [U32Key?] =
            match.destinationPorts.map { ranges in
                ranges.flatMap(portBlocks).map {
                    U32Key(value: UInt32($0.value), mask: UInt32($0.mask), offset: portWord)
                }
            } ?? [nil]
        let dscp: [U32Key?] =
            match.dscp.map { values in
                blocks(values, width: 6).map { trafficClassKey($0, width: 6, family) }
            } ?? [nil]
        // Ports only where u32's fixed offset is the transport header.
        let fixedHeader: [U32Key] =
            !hasPorts
            ? []
            : v6
                ? []  // the next header key below says "no extension header"
                : [
                    U32Key(value: 0x0500_0000, mask: 0x0F00_0000, offset: 0),  // IHL 5
                    U32Key(value: 0, mask: 0x0000_1FFF, offset: 4),  // not a later fragment
                ]
        var out: [[U32Key]] = []
        for p in protocols {
            let protocolKey = p.map {
                v6
                    ? U32Key(value: UInt32($0) << 8, mask: 0x0000_FF00, offset: 4)
                    : U32Key(value: UInt32($0) << 16, mask: 0x00FF_0000, offset: 8)
            }
            for d in dscp {
                for s in sources {
                    for t in destinations {
                        for sp in sourcePorts {
                            for dp in destinationPorts {
                                var keys = fixedHeader
                                keys += [d, protocolKey].compactMap { $0 }
                                keys += s + t
                                keys += [sp, dp].compactMap { $0 }
                                out.append(keys)
                                if out.count > maximumFiltersPerRule { return out }
                            }
                        }
                    }
                }
            }
        }
        return out
    }

    /// The keys of a prefix at `base` (the address's first word): one per
    /// 32-bit word the prefix covers, none for `/0`.
    static func prefixKey(_ prefix: IPPrefix, at base: Int32) -> [U32Key] {
        let a = prefix.address
        let words: [UInt32] =
            a.isIPv6
            ? [
                UInt32(truncatingIfNeeded: a.high >> 32), UInt32(truncatingIfNeeded: a.high),
                UInt32(truncatingIfNeeded: a.low >> 32), UInt32(truncatingIfNeeded: a.low),
            ]
            : [UInt32(truncatingIfNeeded: a.low)]
        var keys: [U32Key] = []
        for (i, word) in words.enumerated() {
            let bits = min(max(prefix.length - 32 * i, 0), 32)
            guard bits > 0 else { break }
            let mask = bits == 32 ? UInt32.max : ~(UInt32.max >> UInt32(bits))
            keys.append(U32Key(value: word, mask: mask, offset: base + Int32(4 * i)))
        }
        return keys
    }

    /// A port range as aligned blocks (value, mask), the fewest that cover
    /// exactly it.
    static func portBlocks(_ range: PortRange) -> [(value: UInt16, mask: UInt16)] {
        var out: [(UInt16, UInt16)] = []
        var low = UInt32(range.lower)
        let high = UInt32(range.upper)
        while low <= high {
            // The largest aligned block starting at `low` that ends by `high`.
            var size: UInt32 = 1
            while size < 65_536, low % (size * 2) == 0, low + size * 2 - 1 <= high { size *= 2 }
            out.append((UInt16(low), UInt16(truncatingIfNeeded: ~(size - 1))))
            low += size
        }
        return out
    }

    /// A set of `width`-bit values as aligned blocks (value, mask of `width`
    /// bits), largest first, covering exactly the set.
    static func blocks(_ values: Set<UInt8>, width: Int) -> [(value: UInt8, mask: UInt8)] {
        let all = 1 << width
        var covered = Set<Int>()
        var out: [(UInt8, UInt8)] = []
        var size = all
        while size >= 1 {
            for start in stride(from: 0, to: all, by: size)
            where !covered.contains(start)
                && (start..<start + size).allSatisfy({ values.contains(UInt8($0)) })
            {
                covered.formUnion(start..<start + size)
                out.append((UInt8(start), UInt8((all - 1) & ~(size - 1))))
            }
            size /= 2
        }
        return out.sorted { $0.0 < $1.0 }
    }
}
