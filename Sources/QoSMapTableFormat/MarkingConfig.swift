import QoSMapCore
package import QoSMapYAML

/// One interface's marking settings in a qosmapd config; nil fields fall back
/// to the config's top-level ones.
public struct InterfaceMarking: Sendable, Equatable {
    /// The trust mode for packets received on it.
    public var trust: TrustMode?
    /// The domain classifying packets received on it.
    public var inboundDomain: String?
    /// The domain marking packets sent out of it.
    public var outboundDomain: String?

    /// Creates interface settings.
    public init(trust: TrustMode? = nil, inboundDomain: String? = nil, outboundDomain: String? = nil) {
        self.trust = trust
        self.inboundDomain = inboundDomain
        self.outboundDomain = outboundDomain
    }
}

/// The settings of a qosmapd config that decide markings. qosmapd's
/// `DaemonConfig` and `qosmap export --config`'s reader both hold them, and
/// ``MarkingConfigReader`` reads them for both: `qosmap` is a static
/// executable and cannot link the daemon's module (libmnl has no static
/// archive), but it must read the same file the same way.
package protocol MarkingSettings {
    /// `tables`: directories of user domain files.
    var tables: [String] { get set }
    /// `system-tables`.
    var systemTables: Bool { get set }
    /// `trust`: the default trust mode.
    var trust: TrustMode { get set }
    /// `domain`: the default domain for both directions.
    var domain: String { get set }
    /// `interfaces`: per-interface settings by name.
    var interfaces: [String: InterfaceMarking] { get set }
    /// `actions.rewrite-dscp`.
    var rewriteDSCP: Bool { get set }
    /// `actions.mark`.
    var mark: MarkEncoding? { get set }
    /// `actions.priority`.
    var priority: Bool { get set }
    /// `actions.mark-only`.
    var markOnly: Bool { get set }
    /// Every domain name with its position, to report unknown ones in place.
    var domainReferences: [TableDiagnostic] { get set }
    /// `classify:`: flow rules, before trust.
    var classify: FlowRuleSet { get set }
}

/// Walks the marking keys of a qosmapd config (`tables`, `system-tables`,
/// `trust`, `domain`, `interfaces`, `actions`, and `ebpf.pcp-carry-mask`)
/// with positioned messages; the daemon's parser and the export's reader
/// read the rest of the file themselves.
package struct MarkingConfigReader {
    /// The diagnostics and the reader beneath them.
    package var yaml: YAMLContext
    /// Where an interface's `trust: 8021p` was written (qosmapd allows it
    /// only with `datapath: ebpf`).
    package var dot1pTrust: [Node] = []
    /// Each interface's `queues:` value with its key, in file order: qosmapd
    /// and the `qosmap` commands that take `--config` read them with
    /// ``queueConfig(_:interface:)``.
    package var queueNodes: [(interface: String, key: Node, value: Node)] = []
    /// Each `queues.ingress-rate` value: download shaping needs qosmapd's
    /// ebpf datapath, which the daemon checks; `export nft` and `export tc`
    /// refuse it.
    package var ingressRateNodes: [Node] = []

    /// Every top-level key of a qosmapd config.
    package static let topKeys = [
        "queues", "queue", "tables", "system-tables", "trust", "domain", "interfaces", "actions",
        "metrics", "rules", "datapath", "ebpf", "classify", "status",
    ]

    /// Creates a reader for `file`.
    package init(file: String) { yaml = YAMLContext(file: file) }

    /// A mapping's pairs; with a non-empty `allowed`, unknown keys are reported and dropped.
    package mutating func mapping(_ node: Node, _ what: String, allowed: [String]) -> [(Node, Node, String)]?
    {
        guard let pairs = yaml.mapping(node, what) else { return nil }
        guard !allowed.isEmpty else { return pairs.map { ($0.key, $0.value, $0.name) } }
        yaml.checkKeys(pairs, allowed: allowed, in: what)
        return pairs.filter { allowed.contains($0.name) }.map { ($0.key, $0.value, $0.name) }
    }

    /// A trust mode; `8021p` only for an interface (recorded in ``dot1pTrust``).
    package mutating func trust(_ node: Node, interface: Bool = false) -> TrustMode? {
        guard let s = yaml.scalar(node, "a trust mode") else { return nil }
        // nfqueue hands over bare IP packets: no 802.1p or EXP to trust. The
        // ebpf datapath reads the tag at ingress on the interfaces it names.
        if interface, TrustMode(name: s) == .dot1p {
            dot1pTrust.append(node)
            return .dot1p
        }
        guard let t = TrustMode(name: s), t == .none || t == .dscp || t == .ipPrecedence else {
            yaml.error(
                node,
                "invalid trust mode '\(s)'; allowed: none, dscp, ip-precedence"
                    + (interface
                        ? ", and 8021p with datapath: ebpf" : " (8021p: per interface, with datapath: ebpf)"))
            return nil
        }
        return t
    }

    /// A domain name, recorded with its position in `domainReferences`.
    package mutating func domainName<C: MarkingSettings>(_ node: Node, into config: inout C) -> String? {
        guard let s = yaml.scalar(node, "a domain name") else { return nil }
        config.domainReferences.append(
            TableDiagnostic(
                file: yaml.file, line: node.mark.line, column: node.mark.column, message: s))
        return s
    }

    /// One string or a list of them.
    package mutating func strings(_ node: Node, _ what: String) -> [String] {
        if case .scalar = node, let s = yaml.scalar(node, what) { return [s] }
        guard case .sequence(let seq) = node else {
            yaml.error(node, "expected a list of \(what)")
            return []
        }
        return seq.compactMap { yaml.scalar($0, what) }
    }

    /// A relative `tables:` directory is the config file's neighbour, as its
    /// author wrote it, not the working directory's (a daemon started from
    /// `/` found none). Absolute paths, and configs in the working directory,
    /// are unchanged.
    package func besideConfig(_ path: String) -> String {
        guard !path.isEmpty, !path.hasPrefix("/"), let slash = yaml.file.lastIndex(of: "/") else {
            return path
        }
        return String(yaml.file[...slash]) + path
    }

    /// `ebpf.pcp-carry-mask`: the mark bits that carry PCP and DEI.
    package mutating func carry(_ node: Node) -> PCPCarry? {
        guard let m = yaml.integer(node, "pcp-carry-mask", 1...Int(UInt32.max)) else { return nil }
        guard let carry = PCPCarry(mask: UInt32(m)) else {
            yaml.error(node, "invalid pcp-carry-mask 0x\(String(m, radix: 16)); allowed: \(PCPCarry.allowed)")
            return nil
        }
        return carry
    }

    /// Reads the top-level `key` into `config` when it is a marking key;
    /// false for the others, which the caller reads.
    package mutating func read<C: MarkingSettings>(_ key: String, _ value: Node, into config: inout C) -> Bool
    {
        switch key {
        case "tables": config.tables = strings(value, "table directories").map(besideConfig)
        case "system-tables": config.systemTables = yaml.bool(value, "system-tables flag") ?? true
        case "trust": config.trust = trust(value) ?? .dscp
        case "domain": config.domain = domainName(value, into: &config) ?? "default"
        case "interfaces":
            for (_, v, name) in mapping(value, "interfaces", allowed: []) ?? [] {
                var i = InterfaceMarking()
                let keys = ["trust", "domain", "inbound-domain", "outbound-domain", "queues"]
                for (ikey, iv, ik) in mapping(v, "interface '\(name)'", allowed: keys) ?? [] {
                    switch ik {
                    case "queues": queueNodes.append((name, ikey, iv))
                    case "trust": i.trust = trust(iv, interface: true)
                    case "domain":
                        let d = domainName(iv, into: &config)
                        i.inboundDomain = i.inboundDomain ?? d
                        i.outboundDomain = i.outboundDomain ?? d
                    case "inbound-domain": i.inboundDomain = domainName(iv, into: &config)
                    default: i.outboundDomain = domainName(iv, into: &config)
                    }
                }
                config.interfaces[name] = i
            }
        case "classify": config.classify = classify(value)
        case "actions":
            let keys = ["rewrite-dscp", "mark", "priority", "mark-only"]
            for (_, v, k) in mapping(value, "actions", allowed: keys) ?? [] {
                switch k {
                case "rewrite-dscp": config.rewriteDSCP = yaml.bool(v, "rewrite-dscp flag") ?? true
                case "priority": config.priority = yaml.bool(v, "priority flag") ?? false
                case "mark-only": config.markOnly = yaml.bool(v, "mark-only flag") ?? false
                default: config.mark = mark(v)
                }
            }
        default: return false
        }
        return true
    }

    /// `actions.mark`: a flag, or `{mask: M}`.
    mutating func mark(_ v: Node) -> MarkEncoding? {
        if case .scalar = v { return (yaml.bool(v, "mark setting") ?? false) ? .default : nil }
        var mark: MarkEncoding?
        for (_, mv, _) in mapping(v, "mark", allowed: ["mask"]) ?? [] {
            guard let m = yaml.integer(mv, "mark mask", 1...Int(UInt32.max)) else { continue }
            do {
                mark = try MarkEncoding(mask: UInt32(m))
            } catch {
                yaml.error(mv, error.description)
            }
        }
        return mark == nil && !yaml.hasErrors ? .default : mark
    }
}
