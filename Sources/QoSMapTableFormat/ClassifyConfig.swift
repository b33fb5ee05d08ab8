import QoSMapCore
package import QoSMapYAML

/// Reads a qosmapd config's `classify:` section (sets and rules) into a
/// ``FlowRuleSet``, every problem positioned; qosmapd and every `qosmap`
/// command that takes `--config` read it through ``MarkingConfigReader``.
extension MarkingConfigReader {
    /// The keys of `classify:`.
    package static let classifyKeys = ["sets", "rules", "connection-mark-mask", "dns", "flows"]
    /// The keys of one rule.
    package static let ruleKeys = ["name", "match", "set", "connection"]
    /// The keys of a rule's `match:`.
    package static let matchKeys = [
        "protocol", "source", "destination", "source-port", "destination-port", "ingress", "dscp", "dns",
    ]

    /// `classify:`.
    package mutating func classify(_ node: Node) -> FlowRuleSet {
        var result = FlowRuleSet()
        guard let pairs = mapping(node, "classify", allowed: Self.classifyKeys) else { return result }
        // Sets first, wherever they are written: rules name them.
        var sets: [String: [IPPrefix]] = [:]
        for (_, v, k) in pairs where k == "sets" {
            for (kn, sv, name) in mapping(v, "classify.sets", allowed: []) ?? [] {
                guard Self.validName(name) else {
                    yaml.error(
                        kn,
                        "invalid set name '\(name)'; allowed: letters, digits, '-', '_' and '.', starting with a letter, at most 64"
                    )
                    continue
                }
                var prefixes: [IPPrefix] = []
                for item in list(sv, "addresses or prefixes") {
                    guard let s = yaml.scalar(item, "an address or prefix") else { continue }
                    do {
                        prefixes.append(try IPPrefix(parsing: s))
                    } catch {
                        yaml.error(item, error.description)
                    }
                }
                sets[name] = prefixes
            }
        }
        result.sets = sets
        // dns: before the rules too: a dns: rule needs snoop interfaces.
        for (_, v, k) in pairs where k == "dns" { result.dns = dnsSettings(v) }
        for (_, v, k) in pairs {
            switch k {
            case "connection-mark-mask":
                if let m = yaml.integer(v, "connection-mark-mask", 1...Int(UInt32.max)) {
                    let mask = UInt32(m)
                    let shifted = mask >> UInt32(mask.trailingZeroBitCount)
                    if shifted & (shifted &+ 1) != 0 {
                        yaml.error(
                            v,
                            "invalid connection-mark-mask 0x\(String(mask, radix: 16)); allowed: contiguous bits of the 32-bit conntrack mark, e.g. 0x0fff0000"
                        )
                    } else {
                        result.connectionMarkMask = mask
                    }
                }
            case "flows": result.behaviour = flows(v)
            case "rules":
                var names: [String: Node] = [:]
                // `rules: []` is no rule at all, as the embedded default writes it.
                let items: [Node] =
                    if case .sequence(let seq) = v, seq.isEmpty { [] } else { list(v, "rules") }
                for item in items {
                    guard let rule = rule(item, sets: sets, snoop: !result.dns.snoop.isEmpty) else {
                        continue
                    }
                    if let first = names[rule.name] {
                        let at = " (first at line \(first.mark.line), column \(first.mark.column))"
                        yaml.error(item, "duplicate rule name '\(rule.name)'\(at); allowed: unique names")
                        continue
                    }
                    names[rule.name] = item
                    result.rules.append(rule)
                }
                if result.rules.count > FlowClassifier.maxRules {
                    yaml.error(v, "\(result.rules.count) rules; allowed: at most \(FlowClassifier.maxRules)")
                }
                let groups = result.dnsGroups.count
                if groups > FlowClassifier.maxDNSGroups {
                    yaml.error(
                        v,
                        "\(groups) distinct dns: lists; allowed: at most \(FlowClassifier.maxDNSGroups) (rules with the same list share one)"
                    )
                }
            default: break
            }
        }
        return result
    }

    /// Names of rules and sets: Prometheus label values and nft identifiers alike.
    static func validName(_ s: String) -> Bool {
        guard let f = s.unicodeScalars.first, s.unicodeScalars.count <= 64,
            ("a"..."z").contains(f) || ("A"..."Z").contains(f)
        else { return false }
        return s.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "-"
                || $0 == "_" || $0 == "."
        }
    }

    /// A sequence's items, or a single scalar as one item.
    mutating func list(_ node: Node, _ what: String) -> [Node] {
        switch node {
        case .sequence(let s):
            if s.isEmpty { yaml.error(node, "empty list of \(what) matches nothing; allowed: one or more") }
            return Array(s)
        case .scalar: return [node]
        default:
            yaml.error(node, "expected a list of \(what), found a \(node.kindName)")
            return []
        }
    }

    /// One rule.
    mutating func rule(_ node: Node, sets: [String: [IPPrefix]], snoop: Bool = true) -> FlowRule? {
        let errorsBefore = yaml.diagnostics.count
        guard let pairs = mapping(node, "a rule", allowed: Self.ruleKeys) else { return nil }
        var name: String?
        var match = FlowMatch()
        var action: FlowAction?
        var connection = true
        for (_, v, k) in pairs {
            switch k {
            case "name":
                if let s = yaml.scalar(v, "a rule name") {
                    if Self.validName(s) {
                        name = s
                    } else {
                        yaml.error(
                            v,
                            "invalid rule name '\(s)'; allowed: letters, digits, '-', '_' and '.', starting with a letter, at most 64"
                        )
                    }
                }
            case "match":
                match = self.match(v, sets: sets, snoop: snoop)
            case "set": action = set(v)
            default: connection = yaml.bool(v, "connection flag") ?? true
            }
        }
        if name == nil, yaml.diagnostics.count == errorsBefore {
            yaml.error(
                node,
                "rule without a name; allowed keys: \(Self.ruleKeys.joined(separator: ", ")) (name and set required)"
            )
        }
        if action == nil, yaml.diagnostics.count == errorsBefore {
            yaml.error(
                node, "rule '\(name ?? "")' has no set; allowed: set: {class: C, color: K} or set: {dscp: D}")
        }
        guard yaml.diagnostics.count == errorsBefore, let name, let action else { return nil }
        let mark = node.mark
        return FlowRule(
            name: name, match: match, action: action, connection: connection,
            position: SourcePosition(file: yaml.file, line: mark.line, column: mark.column))
    }

    /// A rule's `match:`.
    mutating func match(_ node: Node, sets: [String: [IPPrefix]], snoop: Bool = true) -> FlowMatch {
        var m = FlowMatch()
        var portNodes: [Node] = []
        for (_, v, k) in mapping(node, "match", allowed: Self.matchKeys) ?? [] {
            switch k {
            case "protocol":
                var ps = Set<UInt8>()
                for item in list(v, "protocols") {
                    guard let s = yaml.scalar(item, "a protocol") else { continue }
                    do { ps.insert(try TransportProtocol.parse(s)) } catch {
                        yaml.error(item, error.description)
                    }
                }
                m.protocols = ps
            case "source", "destination":
                var prefixes: [IPPrefix] = []
                for item in list(v, "addresses, prefixes or set names") {
                    guard let s = yaml.scalar(item, "an address, prefix or set name") else { continue }
                    if let set = sets[s] {
                        prefixes += set
                        continue
                    }
                    do {
                        prefixes.append(try IPPrefix(parsing: s))
                    } catch {
                        if IPAddress(parsing: s.split(separator: "/").first ?? "") == nil, !s.contains("/") {
                            let known = sets.keys.sorted()
                            yaml.error(
                                item,
                                "unknown set '\(s)'; allowed: an IPv4 or IPv6 address or prefix, or a set of classify.sets"
                                    + (known.isEmpty
                                        ? " (none defined)" : " (\(known.joined(separator: ", ")))"))
                        } else {
                            yaml.error(item, error.description)
                        }
                    }
                }
                if k == "source" { m.sources = prefixes } else { m.destinations = prefixes }
            case "source-port", "destination-port":
                portNodes.append(v)
                var ranges: [PortRange] = []
                for item in list(v, "ports") {
                    guard let s = yaml.scalar(item, "a port or range") else { continue }
                    do { ranges.append(try PortRange(parsing: s)) } catch {
                        yaml.error(item, error.description)
                    }
                }
                if k == "source-port" { m.sourcePorts = ranges } else { m.destinationPorts = ranges }
            case "ingress":
                var names = Set<String>()
                for item in list(v, "interface names") {
                    guard let s = yaml.scalar(item, "an interface name") else { continue }
                    // IFNAMSIZ is 16 with the terminating NUL; '/' and spaces are refused by the kernel.
                    guard !s.isEmpty, s.utf8.count <= 15, !s.contains("/"), !s.contains(" ") else {
                        yaml.error(
                            item, "invalid interface name '\(s)'; allowed: 1-15 bytes without '/' or spaces")
                        continue
                    }
                    names.insert(s)
                }
                m.ingress = names
            case "dns":
                m.dns = dnsPatterns(v, snoop: snoop)
            default:  // dscp
                var values = Set<UInt8>()
                for item in list(v, "DSCP values") {
                    guard let s = yaml.scalar(item, "a DSCP value") else { continue }
                    do { values.insert(try DSCP(parsing: s).rawValue) } catch {
                        yaml.error(item, error.description)
                    }
                }
                m.dscp = values
            }
        }
        if let protocols = m.protocols, !portNodes.isEmpty {
            let without = protocols.subtracting(TransportProtocol.withPorts).sorted()
            if !without.isEmpty {
                yaml.error(
                    portNodes[0],
                    "ports need a protocol with ports; '\(without.map(TransportProtocol.name).joined(separator: ", "))' has none; allowed: tcp, udp, sctp, dccp, udplite"
                )
            }
        }
        return m
    }

    /// A rule's `set:`.
    mutating func set(_ node: Node) -> FlowAction? {
        guard let pairs = mapping(node, "set", allowed: ["class", "color", "dscp"]) else { return nil }
        var cls: ServiceClass?
        var color: Color?
        var dscp: DSCP?
        var colorNode: Node?
        for (_, v, k) in pairs {
            guard let s = yaml.scalar(v, k == "dscp" ? "a DSCP value" : "a \(k)") else { continue }
            switch k {
            case "class":
                cls = ServiceClass(name: s)
                if cls == nil {
                    yaml.error(v, "invalid service class '\(s)'; allowed: \(ServiceClass.allowedNames)")
                }
            case "color":
                colorNode = v
                color = Color(name: s)
                if color == nil { yaml.error(v, "invalid color '\(s)'; allowed: \(Color.allowedNames)") }
            default:
                do { dscp = try DSCP(parsing: s) } catch { yaml.error(v, error.description) }
            }
        }
        let present = Set(pairs.map(\.2))
        if present.contains("dscp"), present.contains("class") || present.contains("color") {
            yaml.error(
                node,
                "set takes class (and color) or dscp, not both; allowed: {class: C, color: K} or {dscp: D}")
            return nil
        }
        if present.contains("color"), !present.contains("class") {
            yaml.error(colorNode ?? node, "set: color needs a class; allowed: {class: C, color: K}")
            return nil
        }
        if present.isEmpty {
            yaml.error(node, "empty set; allowed: {class: C, color: K} or {dscp: D}")
            return nil
        }
        if let dscp { return .dscp(dscp) }
        guard let cls else { return nil }
        return .treatment(Treatment(cls, color ?? .green))
    }
}
