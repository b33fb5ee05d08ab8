import QoSMapCore
import QoSMapPacket
import QoSMapTables
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// A consistent config plus tables: what every packet is decided with. A
/// reload builds a new one and swaps it in whole, so no packet sees a mix.
public final class PolicySnapshot: Sendable {
    /// The configuration.
    public let config: DaemonConfig
    /// The domains (built-ins plus the config's table directories).
    public let tables: TableSet
    /// Increases with every successful load; per-thread caches key on it.
    public let generation: Int
    let defaultDomain: DSDomain
    let inbound: [String: (TrustMode, DSDomain)]
    let outbound: [String: DSDomain]
    /// The `classify:` rules compiled, nil when there are none.
    public let flows: FlowRuntime?
    /// The `classify.flows` table (new with each snapshot), nil when not configured.
    public let behaviour: FlowBehaviourTable?

    /// The system table directory, as the CLI's: `/etc/qosmap/domains.d`, or
    /// `QOSMAP_DOMAINS_DIR` when set (for tests and packagers).
    public static var systemTablesDirectory: String { TableLoader.systemDirectory }

    /// Loads the system table directory (unless `system-tables: false`; a
    /// missing one is skipped, as by the CLI), then the config's table
    /// directories, and resolves every domain name.
    /// - Throws: ``ConfigError`` with `file:line:column` diagnostics.
    /// `dns` keeps the learned addresses of `dns:` rules (the daemon's one
    /// instance by default).
    public init(
        config: DaemonConfig, generation: Int, systemDirectory: String = PolicySnapshot.systemTablesDirectory,
        dns: DNSLearning = .shared
    ) throws(ConfigError) {
        let tables: TableSet
        do {
            tables = try TableLoader.load(
                directories: config.tables, systemDirectory: config.systemTables ? systemDirectory : nil,
                profiles: false)
        } catch {
            throw ConfigError(error.diagnostics)
        }
        var unknown: [TableDiagnostic] = []
        for ref in config.domainReferences where tables.domains[ref.message] == nil {
            var d = ref
            d.message =
                "unknown domain '\(ref.message)'; known domains: \(tables.domains.names.joined(separator: ", "))"
            unknown.append(d)
        }
        guard unknown.isEmpty, let base = tables.domains[config.domain] else {
            // Without a recorded reference (a config built in code), the file's start.
            throw unknown.isEmpty
                ? ConfigError(
                    file: config.file,
                    "unknown domain '\(config.domain)'; known domains: \(tables.domains.names.joined(separator: ", "))"
                )
                : ConfigError(unknown)
        }
        self.config = config
        self.tables = tables
        self.generation = generation
        defaultDomain = base
        var ins: [String: (TrustMode, DSDomain)] = [:]
        var outs: [String: DSDomain] = [:]
        for (name, i) in config.interfaces {
            ins[name] = (i.trust ?? config.trust, tables.domains[i.inboundDomain ?? config.domain] ?? base)
            outs[name] = tables.domains[i.outboundDomain ?? config.domain] ?? base
        }
        inbound = ins
        outbound = outs
        behaviour = config.classify.behaviour.isEmpty ? nil : FlowBehaviourTable(config.classify.behaviour)
        if config.classify.isEmpty {
            flows = nil
        } else if let compiled = config.classifier {
            flows = FlowRuntime(config.classify, compiled, dns: dns.table(for: config.classify))
        } else {
            do throws(FlowRuleError) {
                let compiled = try FlowClassifier(config.classify)
                flows = FlowRuntime(config.classify, compiled, dns: dns.table(for: config.classify))
            } catch {
                throw ConfigError(file: config.file, "classify: \(error.description)")
            }
        }
    }

    /// The marking policy for a packet from `input` to `output` (interface names, nil if unknown).
    public func policy(input: String?, output: String?) -> MarkingPolicy {
        let (trust, ingress) = input.flatMap { inbound[$0] } ?? (config.trust, defaultDomain)
        let egress = output.flatMap { outbound[$0] } ?? defaultDomain
        return MarkingPolicy(trust: trust, ingress: ingress, egress: egress, rewrite: .dscp)
    }
}

/// A snapshot's flow rules: the rules, their compiled form and, when any
/// rule keeps per-connection state, the connection table (new with each
/// snapshot: a reload forgets every connection).
public final class FlowRuntime: Sendable {
    /// The rules, in order.
    public let rules: [FlowRule]
    /// The compiled rules.
    public let classifier: FlowClassifier
    /// The connection table, nil when no rule has `connection: true`.
    public let connections: ConnectionTable?
    /// The learned addresses' group masks, nil when no rule has `dns:`.
    public let dns: DNSMaskTable?

    /// Creates the runtime for `set` compiled as `classifier`.
    public init(_ set: FlowRuleSet, _ classifier: FlowClassifier, dns: DNSMaskTable? = nil) {
        rules = set.rules
        self.classifier = classifier
        connections = set.tracksConnections ? ConnectionTable() : nil
        self.dns = dns
    }

    /// The rule for a packet with these fields received with ingress class
    /// `ingress`, connection first (``ConnectionTable/resolve(_:matched:keepsConnection:epoch:)``):
    /// a matching `connection: false` rule, else the rule its connection
    /// recorded, else the first rule it matches (recorded when the rule
    /// keeps its connection), else nil.
    @inlinable
    public func rule(_ f: FlowFields, ingress: UInt16) -> (index: Int, connection: Bool)? {
        let matched = classifier.classify(
            protocolNumber: f.protocolNumber, source: f.source, destination: f.destination,
            sourcePort: f.sourcePort, destinationPort: f.destinationPort, ingress: ingress, dscp: f.dscp,
            dnsMask: dns?.mask(f.destination) ?? 0)
        guard let connections else { return matched.map { ($0, false) } }
        return connections.resolve(
            f.flowKey, matched: matched, keepsConnection: { rules[$0].connection }, epoch: 0
        ).map { ($0.index, $0.viaConnection) }
    }
}

/// Holds the current snapshot; readers take it once per received batch.
public final class PolicyStore: Sendable {
    private let current: Mutex<PolicySnapshot>

    /// Creates a store holding a first snapshot.
    public init(_ snapshot: PolicySnapshot) { current = Mutex(snapshot) }

    /// The snapshot in force.
    public var snapshot: PolicySnapshot { current.withLock { $0 } }

    /// Replaces the snapshot atomically.
    public func replace(_ snapshot: PolicySnapshot) { current.withLock { $0 = snapshot } }
}
