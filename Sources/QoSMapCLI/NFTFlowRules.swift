import QoSMapCore

/// The `classify:` rules as nft, for `qosmap export nft --config`: what
/// qosmapd's `FlowRuntime` decides, in the kernel (docs/CLASSIFY.md).
///
/// Each classify rule becomes one nft rule per address family it can match,
/// at the top of every policy chain (before trust): its addresses in named
/// interval sets, ports as `th sport`/`th dport` under `meta l4proto` (the
/// protocols with ports), `iifname`, `ip dscp`/`ip6 dscp`. A match goes to
/// the rule's chain for that policy, which counts it (the named counter
/// `rule-NAME`), records the rule's number in the conntrack mark
/// (`connection: true`) and then goes where trust sends a packet of the
/// rule's class and color. A packet of a connection whose conntrack mark
/// holds a rule number goes to that rule's chain instead of a `connection:
/// true` rule it matches, and when it matches none; then trust.
struct NFTFlowRules {
    let set: FlowRuleSet
    /// The mark bits below the connection mask's lowest bit.
    let shift: UInt32

    init(_ set: FlowRuleSet) {
        self.set = set
        shift = UInt32(set.connectionMarkMask.trailingZeroBitCount)
    }

    /// The rule numbers the mask holds: 1 up to this (0 is "no rule").
    static func capacity(_ mask: UInt32) -> Int {
        Int(mask >> UInt32(mask.trailingZeroBitCount))
    }

    /// The conntrack mark value of rule `index` (0-based): its number in the mask.
    func connectionValue(_ index: Int) -> UInt32 { UInt32(index + 1) << shift }

    /// What nft cannot do as qosmapd does, one `file:line:column: message`
    /// line each (empty when the rules export exactly).
    static func refusals(_ set: FlowRuleSet, hooks: [String], priority: Int) -> [String] {
        var out: [String] = []
        let capacity = capacity(set.connectionMarkMask)
        let mask = QoSMapCommand.Export.hex(set.connectionMarkMask)
        for (n, rule) in set.rules.enumerated() {
            let at = "\(rule.position.file):\(rule.position.line):\(rule.position.column)"
            if let dns = rule.match.dns {
                out.append(
                    "\(at): rule '\(rule.name)' matches dns: [\(dns.map(\.description).joined(separator: ", "))], whose addresses qosmapd learns from DNS replies at run time; nft without qosmapd cannot; allowed: qosmapd with datapath nfqueue or ebpf (both learn them), or rules without dns: in an nft export"
                )
            }
            if rule.connection, n + 1 > capacity {
                out.append(
                    "\(at): rule '\(rule.name)' is rule \(n + 1) with connection: true, but connection-mark-mask \(mask) numbers at most \(capacity) rules; allowed: a wider connection-mark-mask, or connection: false"
                )
            }
            // conntrack keeps an ICMP echo by its identifier and makes ICMP
            // errors part of the connection they are about; without a DCCP
            // tracker (6.18 here has none) it keeps DCCP as an unknown
            // protocol, by address pair. qosmapd keys both by 5-tuple.
            let portKeys = rule.match.sourcePorts != nil || rule.match.destinationPorts != nil
            let differing: [UInt8] = (portKeys ? [33] : [1, 58, 33]).filter {
                rule.match.protocols?.contains($0) ?? true
            }
            if rule.connection, !differing.isEmpty {
                out.append(
                    "\(at): rule '\(rule.name)' has connection: true and can match \(differing.map(TransportProtocol.name).joined(separator: ", ")), whose connections conntrack keys otherwise than qosmapd (ICMP by echo identifier, DCCP by address pair), so nft would mark differently; allowed: connection: false, or a protocol list without them"
                )
            }
            for name in rule.match.ingress ?? [] where !name.allSatisfy({ $0 != "\"" && $0 != "\\" }) {
                out.append(
                    "\(at): rule '\(rule.name)': interface name '\(name)' cannot be written as an nft string; allowed: names without '\"' and '\\'"
                )
            }
        }
        if !set.behaviour.isEmpty {
            let at = set.behaviour.position.map { "\($0.file):\($0.line):\($0.column): " } ?? ""
            out.append(
                "\(at)classify.flows cannot be exported: nft meters are not exact (no one-second buckets, byte count with hold, or packet-size average as qosmapd keeps); allowed: no flows: in a config for export nft (qosmapd's nfqueue and ebpf datapaths apply it)"
            )
        }
        // conntrack attaches a connection at output priority -200
        // (NF_IP_PRI_CONNTRACK); an earlier chain has none to mark.
        if set.tracksConnections, hooks.contains("output"), priority <= -200 {
            out.append(
                "\(set.rules.first { $0.connection }.map { "\($0.position.file):\($0.position.line):\($0.position.column): " } ?? "")rules.hooks has output and a rule has connection: true, but --priority \(priority) runs before conntrack (-200); allowed: a priority above -200"
            )
        }
        return out
    }

    /// A set name for rule `n`'s addresses.
    static func setName(_ n: Int, _ key: String, _ family: NFTRuleset.Family) -> String {
        "r\(n + 1)_\(key)\(family == .v4 ? 4 : 6)"
    }

    /// The named counter of `rule`.
    static func counterName(_ rule: FlowRule) -> String { "rule-" + rule.name }

    /// Disjoint prefixes of one family covering the same addresses (nft
    /// refuses overlapping elements in an interval set). Two prefixes either
    /// nest or are disjoint, so dropping the covered ones is enough.
    static func disjoint(_ prefixes: [IPPrefix], _ family: NFTRuleset.Family) -> [IPPrefix] {
        let mine = prefixes.filter { $0.address.isIPv6 == (family == .v6) }
            .sorted { ($0.address, $0.length) < ($1.address, $1.length) }
        var out: [IPPrefix] = []
        for p in mine where !out.contains(where: { $0.covers(p) }) { out.append(p) }
        return out
    }

    /// The ruleset's heading lines about the rules (none without rules).
    var comment: String {
        guard !set.isEmpty else { return "" }
        var out = "# classify: \(set.rules.count) rules before trust, first match wins; counters rule-NAME"
        if set.tracksConnections {
            out +=
                ";\n# a connection's rule number in ct mark & \(QoSMapCommand.Export.hex(set.connectionMarkMask)) (rule 1 is \(QoSMapCommand.Export.hex(connectionValue(0))))"
        }
        return out + ".\n"
    }

    /// The named counters and address sets.
    var declarations: String {
        var out = ""
        for rule in set.rules {
            out += "  counter \(Self.counterName(rule)) {\n  }\n"
        }
        for (n, rule) in set.rules.enumerated() {
            for (key, prefixes) in [("saddr", rule.match.sources), ("daddr", rule.match.destinations)] {
                guard let prefixes else { continue }
                for family in NFTRuleset.Family.allCases {
                    let elements = Self.disjoint(prefixes, family)
                    guard !elements.isEmpty else { continue }
                    out += "  set \(Self.setName(n, key, family)) {\n"
                    out += "    type \(family == .v4 ? "ipv4_addr" : "ipv6_addr")\n    flags interval\n"
                    out += "    elements = { " + elements.map(\.description).joined(separator: ", ") + " }\n"
                    out += "  }\n"
                }
            }
        }
        return out
    }

    /// `{ a, b }` or a lone `a`.
    static func list(_ items: [String]) -> String {
        items.count == 1 ? items[0] : "{ " + items.joined(separator: ", ") + " }"
    }

    /// The nft match of rule `n` for `family`, nil when it can match no
    /// packet of that family (its addresses are all of the other one).
    func match(_ n: Int, _ family: NFTRuleset.Family) -> String? {
        let m = set.rules[n].match
        var parts = ["meta nfproto \(family.nfproto)"]
        var protocols = m.protocols
        if m.sourcePorts != nil || m.destinationPorts != nil {
            // Only packets with ports match a port key (`th` reads any protocol's bytes).
            protocols = (protocols ?? TransportProtocol.withPorts).intersection(TransportProtocol.withPorts)
        }
        if let protocols {
            guard !protocols.isEmpty else { return nil }
            parts.append("meta l4proto " + Self.list(protocols.sorted().map { "\($0)" }))
        }
        for (key, prefixes) in [("saddr", m.sources), ("daddr", m.destinations)] {
            guard let prefixes else { continue }
            guard !Self.disjoint(prefixes, family).isEmpty else { return nil }
            parts.append("\(family.keyword) \(key) @\(Self.setName(n, key, family))")
        }
        for (key, ports) in [("sport", m.sourcePorts), ("dport", m.destinationPorts)] {
            guard let ports else { continue }
            parts.append("th \(key) " + Self.list(ports.sorted { $0.lower < $1.lower }.map(\.description)))
        }
        if let ingress = m.ingress {
            parts.append("iifname " + Self.list(ingress.sorted().map { "\"\($0)\"" }))
        }
        if let dscp = m.dscp {
            guard !dscp.isEmpty else { return nil }
            parts.append("\(family.keyword) dscp " + Self.list(dscp.sorted().map { "\($0)" }))
        }
        return parts.joined(separator: " ")
    }

    /// The top of a policy chain, connection first (qosmapd's
    /// `ConnectionTable.resolve`): the rules in order, each going to
    /// `chain(n)`; a `connection: true` rule's match first goes to the rule
    /// its connection recorded, if any (a vmap without an element for "no
    /// rule" does not match, so the packet goes on to `chain(n)`); then, for
    /// a packet no rule matches, the connection's rule.
    func scan(_ chain: (Int) -> String) -> String {
        var out = ""
        let tracked = set.rules.indices.filter { set.rules[$0].connection }
        // new and established: not related (an ICMP error or a helper's
        // child connection carries its master's mark), not invalid.
        let recorded =
            tracked.isEmpty
            ? ""
            : "ct state { new, established } ct mark & \(QoSMapCommand.Export.hex(set.connectionMarkMask)) vmap { "
                + tracked.map { "\(QoSMapCommand.Export.hex(connectionValue($0))) : goto \(chain($0))" }
                .joined(separator: ", ") + " }"
        for n in set.rules.indices {
            for family in NFTRuleset.Family.allCases {
                guard let m = match(n, family) else { continue }
                if set.rules[n].connection { out += "    \(m) \(recorded)\n" }
                out += "    \(m) goto \(chain(n))\n"
            }
        }
        if !tracked.isEmpty { out += "    \(recorded)\n" }
        return out
    }

    /// The start of rule `n`'s chain: count, record the connection.
    func chainHead(_ n: Int) -> String {
        let rule = set.rules[n]
        var out = "    counter name \"\(Self.counterName(rule))\"\n"
        if rule.connection {
            out +=
                "    ct mark set ct mark & \(QoSMapCommand.Export.hex(~set.connectionMarkMask)) | \(QoSMapCommand.Export.hex(connectionValue(n)))\n"
        }
        return out
    }

    /// At the top of each base chain: a connection's first packet starts with
    /// no rule (conntrack copies a helper's master's mark into its children).
    var clearNewConnection: String {
        guard set.tracksConnections else { return "" }
        return
            "    ct status & confirmed == 0 ct mark set ct mark & \(QoSMapCommand.Export.hex(~set.connectionMarkMask))\n"
    }
}
