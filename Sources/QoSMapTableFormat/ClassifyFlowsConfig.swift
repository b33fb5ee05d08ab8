import QoSMapCore
package import QoSMapYAML

/// Reads `classify.flows` (flow behaviour: bulk demotion, interactive
/// promotion) into a ``FlowBehaviour``; docs/CLASSIFY.md has the semantics.
extension MarkingConfigReader {
    /// The keys of `classify.flows`.
    package static let flowsKeys = ["bulk", "interactive", "apply-to", "classes"]
    /// The keys of `flows.classes.C`.
    package static let classTestKeys = ["bulk", "interactive"]
    /// The keys of `flows.bulk`.
    package static let bulkKeys = ["packets-per-second", "bytes", "hold", "set"]
    /// The keys of `flows.interactive`.
    package static let interactiveKeys = ["max-average-size", "set"]

    /// `classify.flows`.
    package mutating func flows(_ node: Node) -> FlowBehaviour {
        var b = FlowBehaviour()
        b.position = SourcePosition(file: yaml.file, line: node.mark.line, column: node.mark.column)
        if case .mapping(let m) = node, m.isEmpty { return b }
        guard let pairs = mapping(node, "classify.flows", allowed: Self.flowsKeys) else { return b }
        // A class's key left out takes the default, once all are read.
        var own: [(ServiceClass, bulk: FlowBehaviour.Bulk??, interactive: FlowBehaviour.Interactive??)] = []
        for (_, v, k) in pairs {
            switch k {
            case "bulk": b.bulk = bulk(v)
            case "interactive": b.interactive = interactive(v)
            case "classes": own = classTests(v)
            default:
                var mask: UInt8 = 0
                let items: [Node] = if case .sequence(let s) = v, s.isEmpty { [] } else { list(v, "classes") }
                for item in items {
                    guard let s = yaml.scalar(item, "a service class") else { continue }
                    guard let c = ServiceClass(name: s) else {
                        yaml.error(
                            item, "invalid service class '\(s)'; allowed: \(ServiceClass.allowedNames)")
                        continue
                    }
                    mask |= 1 << c.rawValue
                }
                b.applyTo = mask
            }
        }
        for (c, bulk, interactive) in own {
            b.classes[c] = FlowBehaviour.ClassTests(
                bulk: bulk ?? b.bulk, interactive: interactive ?? b.interactive)
        }
        return b
    }

    /// `flows.classes`: per service class, `bulk:` and `interactive:` as
    /// above or `none`; a key left out is nil here (the default's).
    mutating func classTests(_ node: Node) -> [(
        ServiceClass, bulk: FlowBehaviour.Bulk??, interactive: FlowBehaviour.Interactive??
    )] {
        if case .mapping(let m) = node, m.isEmpty { return [] }
        guard let pairs = mapping(node, "flows.classes", allowed: []) else { return [] }
        var out: [(ServiceClass, bulk: FlowBehaviour.Bulk??, interactive: FlowBehaviour.Interactive??)] = []
        for (keyNode, v, name) in pairs {
            guard let c = ServiceClass(name: name) else {
                yaml.error(
                    keyNode,
                    "invalid service class '\(name)' in flows.classes; allowed: \(ServiceClass.allowedNames)")
                continue
            }
            guard let tests = mapping(v, "flows.classes.\(name)", allowed: Self.classTestKeys) else {
                continue
            }
            var bulkTest: FlowBehaviour.Bulk?? = nil
            var interactiveTest: FlowBehaviour.Interactive?? = nil
            for (_, tv, tk) in tests {
                let none = Self.isNone(tv)
                if tk == "bulk" {
                    bulkTest = .some(none ? nil : bulk(tv))
                } else {
                    interactiveTest = .some(none ? nil : interactive(tv))
                }
            }
            out.append((c, bulkTest, interactiveTest))
        }
        return out
    }

    /// Whether `node` is the scalar `none` (a test switched off for a class).
    static func isNone(_ node: Node) -> Bool {
        if case .scalar(let s) = node, s.string == "none" { return true }
        return false
    }

    /// `flows.bulk`.
    mutating func bulk(_ node: Node) -> FlowBehaviour.Bulk? {
        let before = yaml.diagnostics.count
        guard let pairs = mapping(node, "flows.bulk", allowed: Self.bulkKeys) else { return nil }
        var pps: UInt32?
        var bytes: UInt64?
        var hold: UInt32 = 5
        var treatment: Treatment?
        for (_, v, k) in pairs {
            switch k {
            case "packets-per-second":
                pps = yaml.integer(v, "packets-per-second", 1...Int(UInt32.max)).map(UInt32.init)
            case "bytes": bytes = yaml.integer(v, "bytes", 1...Int.max).map(UInt64.init)
            case "hold": hold = yaml.integer(v, "hold (seconds)", 0...86400).map(UInt32.init) ?? hold
            default: treatment = flowSet(v, "flows.bulk")
            }
        }
        let present = Set(pairs.map(\.2))
        if yaml.diagnostics.count == before, !present.contains("packets-per-second"),
            !present.contains("bytes")
        {
            yaml.error(
                node, "flows.bulk needs a threshold; allowed: packets-per-second: N, bytes: N, or both")
        }
        if yaml.diagnostics.count == before, !present.contains("set") {
            yaml.error(node, "flows.bulk has no set; allowed: set: {class: C, color: K}")
        }
        guard yaml.diagnostics.count == before, let treatment else { return nil }
        return FlowBehaviour.Bulk(packetsPerSecond: pps, bytes: bytes, hold: hold, treatment: treatment)
    }

    /// `flows.interactive`.
    mutating func interactive(_ node: Node) -> FlowBehaviour.Interactive? {
        let before = yaml.diagnostics.count
        guard let pairs = mapping(node, "flows.interactive", allowed: Self.interactiveKeys) else {
            return nil
        }
        var size: UInt32?
        var treatment: Treatment?
        for (_, v, k) in pairs {
            switch k {
            case "max-average-size":
                size = yaml.integer(v, "max-average-size (bytes)", 20...65535).map(UInt32.init)
            default: treatment = flowSet(v, "flows.interactive")
            }
        }
        let present = Set(pairs.map(\.2))
        if yaml.diagnostics.count == before, !present.contains("max-average-size") {
            yaml.error(node, "flows.interactive needs max-average-size; allowed: max-average-size: 20-65535")
        }
        if yaml.diagnostics.count == before, !present.contains("set") {
            yaml.error(node, "flows.interactive has no set; allowed: set: {class: C, color: K}")
        }
        guard yaml.diagnostics.count == before, let size, let treatment else { return nil }
        return FlowBehaviour.Interactive(maxAverageSize: size, treatment: treatment)
    }

    /// A behaviour's `set:`: a class and color (a `dscp:` set has no inbound
    /// domain to read it through once the flow's class is decided).
    mutating func flowSet(_ node: Node, _ what: String) -> Treatment? {
        switch set(node) {
        case .treatment(let t): return t
        case .dscp:
            yaml.error(node, "\(what).set takes a class; allowed: {class: C, color: K}")
            return nil
        case nil: return nil
        }
    }
}
