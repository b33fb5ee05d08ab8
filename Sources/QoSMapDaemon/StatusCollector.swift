import Prometheus
import QoSMapCore
import QoSMapPacket

/// Builds the ``StatusReport`` that `qosmap status` reads, from what the
/// daemon holds: the learned `dns:` addresses (``DNSLearning``), the
/// current snapshot's connection and flow-behaviour tables (nfqueue), or the
/// ebpf classifier's `qm_flows` and `qm_behave`, and the counters the
/// Prometheus registry exports (the same numbers `/metrics` shows).
public struct StatusCollector: Sendable {
    let store: PolicyStore
    let registry: PrometheusCollectorRegistry
    let dns: DNSLearning
    let ebpf: EBPFDatapath?

    /// A collector for the nfqueue datapath's `store` (or `ebpf`'s tables).
    public init(
        store: PolicyStore, registry: PrometheusCollectorRegistry, dns: DNSLearning = .shared,
        ebpf: EBPFDatapath? = nil
    ) {
        self.store = store
        self.registry = registry
        self.dns = dns
        self.ebpf = ebpf
    }

    /// The report, each list cut at `limit` entries.
    public func report(limit: Int) -> StatusReport {
        let snapshot = store.snapshot
        let rules = snapshot.config.classify.rules
        var connections: StatusReport.List<StatusReport.Connection>
        var flows: StatusReport.List<StatusReport.TrackedFlow>
        if let ebpf {
            (connections, flows) = ebpf.statusTables(limit: limit)
        } else {
            if let table = snapshot.flows?.connections {
                let (e, total) = table.entries(epoch: 0, limit: limit)
                connections = .init(
                    e.map {
                        .init(
                            flow: .init($0.key),
                            rule: $0.rule < rules.count ? rules[$0.rule].name : "#\($0.rule)")
                    }, total: total)
            } else {
                connections = .init([], total: 0, note: "no rule keeps its connection (connection: true)")
            }
            if let table = snapshot.behaviour {
                let (e, total) = table.entries(limit: limit)
                flows = .init(e.map { .init($0.key, $0.state) }, total: total)
            } else {
                flows = .init([], total: 0, note: "classify.flows is not configured")
            }
        }
        let (rulesCount, classes) = counters(rules.map(\.name))
        return StatusReport(
            datapath: snapshot.config.datapath.rawValue, limit: limit,
            dns: learned(snapshot, limit: limit), flows: flows, connections: connections, rules: rulesCount,
            classes: classes)
    }

    /// The learned addresses, soonest expiry first, with the rules whose list holds each.
    func learned(_ snapshot: PolicySnapshot, limit: Int) -> StatusReport.List<StatusReport.LearnedAddress> {
        let s = dns.store
        let now = DNSLearning.now()
        let rules = snapshot.config.classify.rules
        var all: [StatusReport.LearnedAddress] = []
        for m in s.masks {
            for e in s.entries(of: m.address) {
                let group = e.group < s.groups.count ? s.groups[e.group] : []
                all.append(
                    .init(
                        name: "\(e.source.name)", question: "\(e.source.question)", address: "\(m.address)",
                        expiresIn: max(0, e.expires - now), ttl: e.source.ttl,
                        rules: rules.filter { $0.match.dns == group }.map(\.name)))
            }
        }
        if !snapshot.config.classify.hasDNSRules, all.isEmpty {
            return .init([], total: 0, note: "no rule has dns:")
        }
        all.sort { ($0.expiresIn, $0.address, $0.name) < ($1.expiresIn, $1.address, $1.name) }
        return .init(Array(all.prefix(limit)), total: all.count)
    }

    /// `qosmapd_rule_{packets,bytes}_total` for `ruleNames` (in rule order,
    /// zero when not yet counted) and the nonzero `qosmapd_packets_total`
    /// by class, color and action, read from the registry's own text.
    func counters(_ ruleNames: [String]) -> (rules: [StatusReport.Counter], classes: [StatusReport.Counter]) {
        var packets: [String: UInt64] = [:]
        var bytes: [String: UInt64] = [:]
        var classes: [StatusReport.Counter] = []
        for line in registry.emitToString().split(separator: "\n") where line.hasPrefix("qosmapd_") {
            guard let brace = line.firstIndex(of: "{"), let close = line.lastIndex(of: "}"),
                let value = Self.number(line[line.index(after: close)...])
            else { continue }
            let name = line[..<brace]
            let labels = Self.labels(line[line.index(after: brace)..<close])
            switch name {
            case "qosmapd_rule_packets_total": if let r = labels["rule"] { packets[String(r)] = value }
            case "qosmapd_rule_bytes_total": if let r = labels["rule"] { bytes[String(r)] = value }
            case "qosmapd_packets_total":
                guard value > 0, let c = labels["class"], let k = labels["color"], let a = labels["action"]
                else {
                    continue
                }
                classes.append(.init(name: "\(c)/\(k)/\(a)", packets: value))
            default: continue
            }
        }
        classes.sort { $0.name < $1.name }
        return (ruleNames.map { .init(name: $0, packets: packets[$0] ?? 0, bytes: bytes[$0] ?? 0) }, classes)
    }

    /// A sample's value (` 12` or ` 12.0`) as an integer.
    static func number(_ text: Substring) -> UInt64? {
        let t = text.split(separator: " ").first ?? ""
        if let v = UInt64(t) { return v }
        return Double(t).flatMap { $0 >= 0 && $0 < 1.8e19 ? UInt64($0) : nil }
    }

    /// `a="x",b="y"` as a dictionary: commas inside quotes are kept, and
    /// the exposition format's escapes (`\\`, `\"`, `\n`) undone, so that
    /// any rule name the config allows comes back as written.
    static func labels(_ text: Substring) -> [Substring: Substring] {
        var out: [Substring: Substring] = [:]
        var i = text.startIndex
        while i < text.endIndex {
            guard let eq = text[i...].firstIndex(of: "=") else { break }
            let name = text[i..<eq].drop { $0 == "," || $0 == " " }
            var j = text.index(after: eq)
            guard j < text.endIndex, text[j] == "\"" else { break }
            j = text.index(after: j)
            var value = ""
            while j < text.endIndex, text[j] != "\"" {
                if text[j] == "\\", text.index(after: j) < text.endIndex {
                    j = text.index(after: j)
                    value.append(text[j] == "n" ? "\n" : text[j])
                } else {
                    value.append(text[j])
                }
                j = text.index(after: j)
            }
            out[name] = Substring(value)
            i = j < text.endIndex ? text.index(after: j) : j
        }
        return out
    }
}
