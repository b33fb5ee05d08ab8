import Foundation
import QoSMapCore
import QoSMapPacket
import QoSMapTables
import Synchronization

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

    /// Loads the config's table directories and resolves every domain name.
    /// - Throws: ``ConfigError`` with `file:line:column` diagnostics.
    public init(config: DaemonConfig, generation: Int) throws(ConfigError) {
        var sources: [TableSource] = []
        for dir in config.tables {
            do {
                let names = try FileManager.default.contentsOfDirectory(atPath: dir)
                    .filter { $0.hasSuffix(".yaml") || $0.hasSuffix(".yml") }.sorted()
                for name in names {
                    let path = (dir as NSString).appendingPathComponent(name)
                    guard let data = FileManager.default.contents(atPath: path),
                        let text = String(data: data, encoding: .utf8)
                    else { throw ConfigError(file: path, "cannot read table file as UTF-8 text") }
                    sources.append(TableSource(path: path, text: text))
                }
            } catch let e as ConfigError {
                throw e
            } catch {
                throw ConfigError(file: dir, "cannot read table directory: \(error.localizedDescription)")
            }
        }
        let tables: TableSet
        switch TableLoader.load(sources, onto: TableLoader.builtInDomains) {
        case .success(let t): tables = t
        case .failure(let e): throw ConfigError(e.diagnostics)
        }
        var unknown: [TableDiagnostic] = []
        for ref in config.domainReferences where tables.domains[ref.message] == nil {
            var d = ref
            d.message =
                "unknown domain '\(ref.message)'; known domains: \(tables.domains.names.joined(separator: ", "))"
            unknown.append(d)
        }
        guard unknown.isEmpty, let base = tables.domains[config.domain] else {
            throw ConfigError(
                unknown.isEmpty
                    ? [TableDiagnostic(file: "config", line: 1, column: 1, message: "unknown domain")]
                    : unknown)
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
    }

    /// The marking policy for a packet from `input` to `output` (interface names, nil if unknown).
    public func policy(input: String?, output: String?) -> MarkingPolicy {
        let (trust, ingress) = input.flatMap { inbound[$0] } ?? (config.trust, defaultDomain)
        let egress = output.flatMap { outbound[$0] } ?? defaultDomain
        return MarkingPolicy(trust: trust, ingress: ingress, egress: egress, rewrite: .dscp)
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
