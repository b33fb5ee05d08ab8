import Foundation
import QoSMapCore
import QoSMapPacket
import QoSMapTables
import Yams

/// The part of a qosmapd config that decides markings, read for `qosmap
/// export nft --config`.
///
/// Why not `QoSMapDaemon.DaemonConfig`: that module links libmnl and
/// libnetfilter_queue (through NFQueue), which have no static archives on
/// Debian, and `qosmap` is built as a fully static executable (see
/// tools/qosmap). So this reader takes the same keys with the same reader
/// (``YAMLContext``) and messages, and `QoSMapCLITests` checks that its
/// policies equal `PolicySnapshot.policy(input:output:)` for every interface
/// pair of the test configs. Keys that only the daemon uses (`queues`,
/// `queue`, `metrics`, the rest of `rules`) are accepted unread; `qosmapd
/// --check` validates them.
struct ExportConfig: Equatable {
    /// One interface's settings; nil fields fall back to the top-level ones.
    struct Interface: Equatable {
        var trust: TrustMode?
        var inboundDomain: String?
        var outboundDomain: String?
    }

    var tables: [String] = []
    var systemTables = true
    var trust: TrustMode = .dscp
    var domain = "default"
    var interfaces: [String: Interface] = [:]
    var rewriteDSCP = true
    var mark: MarkEncoding?
    var priority = false
    var markOnly = false
    /// `rules.hooks`: forward and/or output.
    var hooks: [String] = ["forward"]
    /// `rules.mode: install`: qosmapd queues only some egress interfaces.
    var installRules = false
    /// `rules.interfaces`.
    var ruleInterfaces: [String]?
    /// `ebpf.pcp-carry-mask`: the mark bits that carry PCP and DEI from the
    /// ingress of a `trust: 8021p` interface to the forward hook.
    var carry = PCPCarry.default

    /// The egress interfaces whose packets qosmapd marks, nil for all: with
    /// `rules: install`, `rules.interfaces`, else the names under `interfaces:`
    /// (qosmapd's `RulesConfig.interfaces`); with external rules, whatever the
    /// operator queues, taken as everything.
    var markedEgress: [String]? {
        guard installRules else { return nil }
        if let ruleInterfaces { return ruleInterfaces }
        return interfaces.isEmpty ? nil : interfaces.keys.sorted()
    }
    /// Every domain name with its position, to report unknown ones in place.
    var domainReferences: [TableDiagnostic] = []

    /// Reads a config file.
    static func load(path: String) throws -> ExportConfig {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw DataError("\(path):1:1: cannot read config: \(String(cString: strerror(errno)))")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw DataError("\(path):1:1: config is not UTF-8 text")
        }
        return try parse(text, file: path)
    }

    /// Parses config text; every problem is one `file:line:column: message` line.
    static func parse(_ text: String, file: String) throws -> ExportConfig {
        var r = Reader(yaml: YAMLContext(file: file))
        let config = r.parse(text)
        guard !r.yaml.hasErrors, let config else {
            throw DataError(r.yaml.diagnostics.map(\.description).joined(separator: "\n"))
        }
        return config
    }

    /// The same walk as qosmapd's `ConfigParser`, for the marking keys only.
    struct Reader {
        var yaml: YAMLContext

        mutating func pairs(_ node: Node, _ what: String, allowed: [String]) -> [(Node, Node, String)] {
            guard let pairs = yaml.mapping(node, what) else { return [] }
            guard !allowed.isEmpty else { return pairs.map { ($0.key, $0.value, $0.name) } }
            yaml.checkKeys(pairs, allowed: allowed, in: what)
            return pairs.filter { allowed.contains($0.name) }.map { ($0.key, $0.value, $0.name) }
        }

        mutating func trust(_ node: Node, interface: Bool = false) -> TrustMode? {
            guard let s = yaml.scalar(node, "a trust mode") else { return nil }
            guard let t = TrustMode(name: s), t == .none || t == .dscp || t == .ipPrecedence else {
                // qosmapd takes it with datapath: ebpf, and device exports bind
                // 802.1p classifiers; `export nft` refuses it (see Export).
                if interface, TrustMode(name: s) == .dot1p { return .dot1p }
                yaml.error(
                    node,
                    "invalid trust mode '\(s)'; allowed: none, dscp, ip-precedence"
                        + (interface ? "" : " (8021p: per interface, with datapath: ebpf)"))
                return nil
            }
            return t
        }

        mutating func domainName(_ node: Node, into config: inout ExportConfig) -> String? {
            guard let s = yaml.scalar(node, "a domain name") else { return nil }
            config.domainReferences.append(
                TableDiagnostic(
                    file: yaml.file, line: node.mark?.line ?? 1, column: node.mark?.column ?? 1, message: s))
            return s
        }

        mutating func strings(_ node: Node, _ what: String) -> [String] {
            if case .scalar = node, let s = yaml.scalar(node, what) { return [s] }
            guard case .sequence(let seq) = node else {
                yaml.error(node, "expected a list of \(what)")
                return []
            }
            return seq.compactMap { yaml.scalar($0, what) }
        }

        mutating func parse(_ text: String) -> ExportConfig? {
            var config = ExportConfig()
            let root = yaml.compose(text, allowEmpty: true)
            if yaml.hasErrors { return nil }
            guard let root else { return config }
            let top = [
                "queues", "queue", "tables", "system-tables", "trust", "domain", "interfaces", "actions",
                "metrics", "rules", "datapath", "ebpf",
            ]
            for (_, value, key) in pairs(root, "the config", allowed: top) {
                switch key {
                case "tables": config.tables = strings(value, "table directories")
                case "system-tables": config.systemTables = yaml.bool(value, "system-tables flag") ?? true
                case "trust": config.trust = trust(value) ?? .dscp
                case "domain": config.domain = domainName(value, into: &config) ?? "default"
                case "interfaces":
                    for (_, v, name) in pairs(value, "interfaces", allowed: []) {
                        var i = Interface()
                        let keys = ["trust", "domain", "inbound-domain", "outbound-domain"]
                        for (_, iv, ik) in pairs(v, "interface '\(name)'", allowed: keys) {
                            switch ik {
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
                case "actions":
                    let keys = ["rewrite-dscp", "mark", "priority", "mark-only"]
                    for (_, v, k) in pairs(value, "actions", allowed: keys) {
                        switch k {
                        case "rewrite-dscp": config.rewriteDSCP = yaml.bool(v, "rewrite-dscp flag") ?? true
                        case "priority": config.priority = yaml.bool(v, "priority flag") ?? false
                        case "mark-only": config.markOnly = yaml.bool(v, "mark-only flag") ?? false
                        default: mark(v, into: &config)
                        }
                    }
                case "rules":
                    if case .mapping = value {
                        for (_, v, k) in pairs(value, "rules", allowed: []) {
                            switch k {
                            case "hooks":
                                var hooks: [String] = []
                                for h in strings(v, "hooks") {
                                    guard h == "forward" || h == "output" else {
                                        yaml.error(v, "invalid hook '\(h)'; allowed: forward, output")
                                        continue
                                    }
                                    if !hooks.contains(h) { hooks.append(h) }
                                }
                                config.hooks = hooks
                            case "mode": config.installRules = yaml.scalar(v, "rules mode") == "install"
                            case "interfaces": config.ruleInterfaces = strings(v, "interface names")
                            default: break  // the rest is how qosmapd writes its iptables rules
                            }
                        }
                    }
                case "ebpf":
                    // The same carry bits as qosmapd's ebpf datapath; the rest is the daemon's.
                    if case .mapping = value {
                        for (_, v, k) in pairs(value, "ebpf", allowed: []) where k == "pcp-carry-mask" {
                            guard let m = yaml.integer(v, "pcp-carry-mask", 1...Int(UInt32.max)) else {
                                continue
                            }
                            guard let carry = PCPCarry(mask: UInt32(m)) else {
                                yaml.error(
                                    v,
                                    "invalid pcp-carry-mask 0x\(String(m, radix: 16)); allowed: \(PCPCarry.allowed)"
                                )
                                continue
                            }
                            config.carry = carry
                        }
                    }
                default: break  // queues, queue, metrics: the daemon's alone
                }
            }
            if config.markOnly, config.mark == nil { config.mark = .default }
            return config
        }

        mutating func mark(_ v: Node, into config: inout ExportConfig) {
            if case .scalar = v {
                config.mark = (yaml.bool(v, "mark setting") ?? false) ? .default : nil
                return
            }
            for (_, mv, _) in pairs(v, "mark", allowed: ["mask"]) {
                guard let m = yaml.integer(mv, "mark mask", 1...Int(UInt32.max)) else { continue }
                do {
                    config.mark = try MarkEncoding(mask: UInt32(m))
                } catch {
                    yaml.error(mv, error.description)
                }
            }
            if config.mark == nil, !yaml.hasErrors { config.mark = .default }
        }
    }
}

/// The domains resolved for a config: what qosmapd's `PolicySnapshot` holds.
struct ExportPolicies {
    let config: ExportConfig
    /// The domains loaded for the config (built-ins, system and table directories).
    let tables: TableSet
    let defaultDomain: DSDomain
    let inbound: [String: (TrustMode, DSDomain)]
    let outbound: [String: DSDomain]

    /// Loads the system directory (unless `system-tables: false` or
    /// `--no-system-tables`) and the config's and `--tables` directories, and
    /// resolves every domain name.
    init(config: ExportConfig, extraTables: [String], systemDirectory: String?) throws {
        let set: TableSet
        do {
            set = try TableLoader.load(
                directories: config.tables + extraTables,
                systemDirectory: config.systemTables ? systemDirectory : nil, profiles: false)
        } catch {
            throw DataError(error.description)
        }
        let known = set.domains.names.joined(separator: ", ")
        let unknown = config.domainReferences.filter { set.domains[$0.message] == nil }.map {
            "\($0.file):\($0.line):\($0.column): unknown domain '\($0.message)'; known domains: \(known)"
        }
        guard unknown.isEmpty, let base = set.domains[config.domain] else {
            throw DataError(
                unknown.isEmpty ? "unknown domain '\(config.domain)'" : unknown.joined(separator: "\n"))
        }
        self.config = config
        tables = set
        defaultDomain = base
        var ins: [String: (TrustMode, DSDomain)] = [:]
        var outs: [String: DSDomain] = [:]
        for (name, i) in config.interfaces {
            ins[name] = (i.trust ?? config.trust, set.domains[i.inboundDomain ?? config.domain] ?? base)
            outs[name] = set.domains[i.outboundDomain ?? config.domain] ?? base
        }
        inbound = ins
        outbound = outs
    }

    /// The policy for a packet from `input` to `output`, as qosmapd's
    /// `PolicySnapshot.policy(input:output:)` (nil: an interface not named).
    func policy(input: String?, output: String?) -> MarkingPolicy {
        let (trust, ingress) = input.flatMap { inbound[$0] } ?? (config.trust, defaultDomain)
        let egress = output.flatMap { outbound[$0] } ?? defaultDomain
        return MarkingPolicy(trust: trust, ingress: ingress, egress: egress, rewrite: .dscp)
    }
}
