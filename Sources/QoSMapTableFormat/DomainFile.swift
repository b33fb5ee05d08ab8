import QoSMapCore
internal import QoSMapYAML

/// A parsed but not yet resolved domain file: its cells keep their source
/// positions so that the import step can still report them.
struct DomainDocument {
    var file: String
    var name: String
    var nameNode: Node
    var root: Node
    var summary: String = ""
    var editable: Bool?
    var dropEligibility: DropEligibility?
    var importName: String?
    var importNode: Node?
    // Each cell keeps the line of its key, which `explain` and `lint` cite.
    var inbound: [(field: Field, value: UInt8, treatment: Treatment, line: Int)] = []
    var outbound: [(field: Field, treatment: Treatment, value: UInt8, line: Int)] = []
    var inboundNodes: [Field: Node] = [:]
    var outboundNodes: [Field: Node] = [:]
}

enum DomainParser {
    static let topKeys = ["domain", "description", "editable", "dei", "import", "inbound", "outbound"]

    /// Whether a domain name is acceptable: letters, digits, `-`, `_`, `.`.
    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64
            && name.unicodeScalars.allSatisfy {
                ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9")
                    || $0 == "-" || $0 == "_" || $0 == "."
            }
    }

    static func parse(root: Node, pairs: [(key: Node, value: Node, name: String)], ctx: inout YAMLContext)
        -> DomainDocument?
    {
        ctx.checkKeys(pairs, allowed: topKeys, in: "a domain file")
        guard let namePair = pairs.first(where: { $0.name == "domain" }),
            let name = ctx.scalar(namePair.value, "a domain name")
        else {
            if !pairs.contains(where: { $0.name == "domain" }) {
                ctx.error(root, "missing key 'domain' (the domain's name)")
            }
            return nil
        }
        if !isValidName(name) {
            ctx.error(namePair.value, "invalid domain name '\(name)'; allowed: 1-64 of A-Z a-z 0-9 - _ .")
        }
        var doc = DomainDocument(file: ctx.file, name: name, nameNode: namePair.value, root: root)
        for pair in pairs {
            switch pair.name {
            case "description":
                doc.summary = ctx.scalar(pair.value, "a description") ?? ""
            case "editable":
                doc.editable = ctx.bool(pair.value, "editable flag")
            case "dei":
                if let s = ctx.scalar(pair.value, "a DEI policy") {
                    if let d = DropEligibility(name: s) {
                        doc.dropEligibility = d
                    } else {
                        ctx.error(pair.value, "invalid dei policy '\(s)'; allowed: ignore, color")
                    }
                }
            case "import":
                doc.importName = ctx.scalar(pair.value, "a domain name to import")
                doc.importNode = pair.value
            case "inbound":
                parseInbound(pair.value, into: &doc, ctx: &ctx)
            case "outbound":
                parseOutbound(pair.value, into: &doc, ctx: &ctx)
            default:
                break
            }
        }
        return doc
    }

    static func field(_ pair: (key: Node, value: Node, name: String), ctx: inout YAMLContext) -> Field? {
        guard let f = Field(name: pair.name) else {
            ctx.error(pair.key, "unknown field '\(pair.name)'; allowed: \(Field.allowedNames)")
            return nil
        }
        return f
    }

    /// Parses a value key: one value, a `lo-hi` range, or (for DSCP) a PHB name.
    static func valueRange(_ node: Node, _ text: String, field: Field, ctx: inout YAMLContext)
        -> ClosedRange<Int>?
    {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        if parts.count == 2, let lo = parseInteger(parts[0]), let hi = parseInteger(parts[1]) {
            guard lo <= hi else {
                ctx.error(node, "invalid range '\(text)': \(lo) is above \(hi)")
                return nil
            }
            guard hi <= field.maxValue else {
                ctx.error(
                    node,
                    "\(field.name) value \(hi) in '\(text)' is out of range; allowed: 0-\(field.maxValue)")
                return nil
            }
            return lo...hi
        }
        if field == .dscp, text.contains("(") {
            // `EF(46)` style: a name that contradicts its number is a warning.
            guard let d = parseDSCPCell(text, node: node, ctx: &ctx) else { return nil }
            return Int(d.rawValue)...Int(d.rawValue)
        }
        do {
            let v = Int(try field.parseValue(text))
            return v...v
        } catch {
            ctx.error(node, error.description)
            return nil
        }
    }

    static func treatment(_ node: Node, ctx: inout YAMLContext) -> Treatment? {
        guard case .sequence(let seq) = node else {
            ctx.error(node, "expected [CLASS, color] (a two-item sequence), found a \(node.kindName)")
            return nil
        }
        guard seq.count == 2 else {
            ctx.error(node, "expected [CLASS, color], found \(seq.count) item(s)")
            return nil
        }
        guard let cs = ctx.scalar(seq[0], "a service class"), let cl = ctx.scalar(seq[1], "a color") else {
            return nil
        }
        let sc = ServiceClass(name: cs)
        let color = Color(name: cl)
        if sc == nil {
            ctx.error(seq[0], "unknown service class '\(cs)'; allowed: \(ServiceClass.allowedNames)")
        }
        if color == nil { ctx.error(seq[1], "unknown color '\(cl)'; allowed: \(Color.allowedNames)") }
        guard let sc, let color else { return nil }
        return Treatment(sc, color)
    }

    static func parseInbound(_ node: Node, into doc: inout DomainDocument, ctx: inout YAMLContext) {
        guard let fields = ctx.mapping(node, "inbound maps") else { return }
        for fp in fields {
            guard let field = field(fp, ctx: &ctx) else { continue }
            doc.inboundNodes[field] = fp.key
            guard let cells = ctx.mapping(fp.value, "the inbound \(field.name) map") else { continue }
            var seen: [Int: Node] = [:]
            for cell in cells {
                guard let range = valueRange(cell.key, cell.name, field: field, ctx: &ctx) else { continue }
                if let v = range.first(where: { seen[$0] != nil }), let prior = seen[v]?.mark {
                    ctx.error(
                        cell.key,
                        "\(field.name) \(v) is already mapped at line \(prior.line), column \(prior.column)")
                    continue
                }
                for v in range { seen[v] = cell.key }
                guard let t = treatment(cell.value, ctx: &ctx) else { continue }
                let line = cell.key.mark.line
                for v in range { doc.inbound.append((field, UInt8(v), t, line)) }
            }
        }
    }

    static func outboundValue(_ node: Node, field: Field, ctx: inout YAMLContext) -> UInt8? {
        guard let s = ctx.scalar(node, "a \(field.name) value") else { return nil }
        if field == .dscp, s.contains("(") {
            return parseDSCPCell(s, node: node, ctx: &ctx)?.rawValue
        }
        do {
            return try field.parseValue(s)
        } catch {
            ctx.error(node, error.description)
            return nil
        }
    }

    static func parseOutbound(_ node: Node, into doc: inout DomainDocument, ctx: inout YAMLContext) {
        guard let fields = ctx.mapping(node, "outbound maps") else { return }
        for fp in fields {
            guard let field = field(fp, ctx: &ctx) else { continue }
            doc.outboundNodes[field] = fp.key
            guard let classes = ctx.mapping(fp.value, "the outbound \(field.name) map") else { continue }
            for cp in classes {
                guard let sc = ServiceClass(name: cp.name) else {
                    ctx.error(
                        cp.key, "unknown service class '\(cp.name)'; allowed: \(ServiceClass.allowedNames)")
                    continue
                }
                if case .scalar = cp.value {
                    guard let v = outboundValue(cp.value, field: field, ctx: &ctx) else { continue }
                    let line = cp.key.mark.line
                    for c in Color.allCases { doc.outbound.append((field, Treatment(sc, c), v, line)) }
                    continue
                }
                guard let colors = ctx.mapping(cp.value, "a value or {green, yellow, red} for \(sc.name)")
                else {
                    continue
                }
                for colorPair in colors {
                    guard let color = Color(name: colorPair.name) else {
                        ctx.error(
                            colorPair.key, "unknown color '\(colorPair.name)'; allowed: \(Color.allowedNames)"
                        )
                        continue
                    }
                    guard let v = outboundValue(colorPair.value, field: field, ctx: &ctx) else { continue }
                    doc.outbound.append((field, Treatment(sc, color), v, colorPair.key.mark.line))
                }
            }
        }
    }
}

/// Compresses values into `1, 3-5` text (sorted first).
package func rangeText(_ unsorted: [Int]) -> String {
    let values = unsorted.sorted()
    var parts: [String] = []
    var i = 0
    while i < values.count {
        var j = i
        while j + 1 < values.count, values[j + 1] == values[j] + 1 { j += 1 }
        parts.append(i == j ? "\(values[i])" : "\(values[i])-\(values[j])")
        i = j + 1
    }
    return parts.joined(separator: ", ")
}
