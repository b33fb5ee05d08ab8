import QoSMapCore
import QoSMapPacket
import QoSMapTables
import QoSMapYAML

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// The part of a qosmapd config that decides markings, read for `qosmap
/// export nft --config`.
///
/// Why not `QoSMapDaemon.DaemonConfig`: that module links libmnl and
/// libnetfilter_queue (through NFQueue), which have no static archives on
/// Debian, and `qosmap` is built as a fully static executable (see
/// tools/qosmap). The marking keys are read by the daemon's own reader,
/// ``MarkingConfigReader``; `QoSMapCLITests` checks that the policies equal
/// `PolicySnapshot.policy(input:output:)` for every interface pair of the
/// test configs. `queues:` is read by the same reader too (`export nft` sets
/// their skb priorities, `export tc` builds them). Keys that only the daemon
/// uses (`queue`, `metrics`, the rest of `rules`) are accepted unread;
/// `qosmapd --check` validates them.
struct ExportConfig: Equatable, MarkingSettings {
    /// One interface's settings; nil fields fall back to the top-level ones.
    typealias Interface = InterfaceMarking

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
    /// `classify:`: flow rules (sets and rules), before trust.
    var classify = FlowRuleSet()
    /// Each interface's `queues:`, by interface name.
    var queues: [String: QueueConfig] = [:]
    /// One positioned line per interface with `ingress-rate` and `discipline:
    /// cake`, which `export tc` refuses (CAKE's tin comes from the skb
    /// priority, which nothing sets before the IFB without qosmapd's ebpf
    /// classifier), as qosmapd refuses it without `datapath: ebpf`.
    var ingressRateRefusals: [String] = []

    /// The `skb->priority` of each service class (by raw value) for packets
    /// leaving by `output`, nil when it has no queues: qosmapd's
    /// `DaemonConfig.queuePriorities(output:)`, which wins over `priority: true`.
    func queuePriorities(output: String?) -> [UInt32]? {
        guard let output, let queues = queues[output] else { return nil }
        return ServiceClass.allCases.sorted { $0.rawValue < $1.rawValue }.map { queues.skbPriority($0) }
    }

    /// The queue a packet of `serviceClass` leaving by `output` waits in, as
    /// `explain` and `classify` name it: `7173:15 (EF, pq)`, `7173:14 (AF4,
    /// wfq 30)`, `7173:8 (CS7, cake tin 7)`; nil when `output` has no queues.
    func queueName(output: String?, _ serviceClass: ServiceClass) -> String? {
        guard let output, let queues = queues[output] else { return nil }
        let handle = TCHandle(rawValue: queues.skbPriority(serviceClass))
        if let cake = queues.cakePlan(.egress) {
            return "\(handle) (\(serviceClass), cake \(cake.diffserv.rawValue) tin \(cake.tin(serviceClass)))"
        }
        return "\(handle) (\(serviceClass), \(queues.scheduling[serviceClass].map(\.description) ?? "pq"))"
    }

    /// Reads a config file; a read failure names its errno, in qosmapd's
    /// words (`cannot read config: Is a directory (errno 21)`).
    static func load(path: String) throws -> ExportConfig {
        let text: String
        do {
            text = try TableLoader.text(atPath: path, what: "config")
        } catch {
            throw DataError(error.description)
        }
        return try parse(text, file: path)
    }

    /// Parses config text; every problem is one `file:line:column: message` line.
    static func parse(_ text: String, file: String) throws -> ExportConfig {
        var r = MarkingConfigReader(file: file)
        let config = read(text, with: &r)
        guard !r.yaml.hasErrors, let config else {
            throw DataError(r.yaml.diagnostics.map(\.description).joined(separator: "\n"))
        }
        return config
    }

    /// The marking keys through qosmapd's reader, plus the parts of `rules`
    /// and `ebpf` that decide which packets are marked and with what bits.
    static func read(_ text: String, with r: inout MarkingConfigReader) -> ExportConfig? {
        var config = ExportConfig()
        let root = r.yaml.compose(text, allowEmpty: true)
        if r.yaml.hasErrors { return nil }
        guard let root else { return config }
        for (_, value, key) in r.mapping(root, "the config", allowed: MarkingConfigReader.topKeys) ?? []
        where !r.read(key, value, into: &config) {
            switch key {
            case "rules":
                if case .mapping = value {
                    for (_, v, k) in r.mapping(value, "rules", allowed: []) ?? [] {
                        switch k {
                        case "hooks":
                            var hooks: [String] = []
                            for h in r.strings(v, "hooks") {
                                guard h == "forward" || h == "output" else {
                                    r.yaml.error(v, "invalid hook '\(h)'; allowed: forward, output")
                                    continue
                                }
                                if !hooks.contains(h) { hooks.append(h) }
                            }
                            config.hooks = hooks
                        case "mode": config.installRules = r.yaml.scalar(v, "rules mode") == "install"
                        case "interfaces": config.ruleInterfaces = r.strings(v, "interface names")
                        default: break  // the rest is how qosmapd writes its iptables rules
                        }
                    }
                }
            case "ebpf":
                // The same carry bits as qosmapd's ebpf datapath; the rest is the daemon's.
                if case .mapping = value {
                    for (_, v, k) in r.mapping(value, "ebpf", allowed: []) ?? [] where k == "pcp-carry-mask" {
                        if let carry = r.carry(v) { config.carry = carry }
                    }
                }
            default: break  // queues, queue, metrics, datapath: the daemon's alone
            }
        }
        // Read as qosmapd reads them: `export nft` sets the queues' skb
        // priorities, `export tc` builds the trees.
        for (name, key, value) in r.queueNodes {
            guard let queues = r.queueConfig(value, interface: name) else { continue }
            config.queues[name] = queues
            // Download queues are classified by u32 filters on the IFB's HTB
            // root (DownloadClassifierPlan); CAKE reads no filter's class.
            if queues.ingressRate != nil, case .cake = queues.discipline {
                config.ingressRateRefusals.append(
                    "\(r.yaml.file):\(key.mark.line):\(key.mark.column): ingress-rate of '\(name)' with discipline: cake is built by qosmapd's ebpf datapath only (cake picks its tin from the skb priority, which only its tc ingress classifier sets before the IFB); allowed here: discipline: htb"
                )
            }
        }
        if config.markOnly, config.mark == nil { config.mark = .default }
        return config
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
