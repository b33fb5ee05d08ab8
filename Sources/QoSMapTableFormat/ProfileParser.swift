import QoSMapCore
internal import QoSMapYAML

/// The columns a profile row may have and how each is checked.
enum ProfileColumn {
    case dscp(list: Bool)
    case threeBit(list: Bool)
    case integer(ClosedRange<Int>)
    /// A whole or decimal number (TS 23.203 priority levels such as 0.7).
    case number(ClosedRange<Double>)
    case rate
    case text
    case textList
    case choice([String])
    case flag
    case phb

    static let tolerances = [
        "Very Low", "Low", "Low-Medium", "Medium", "Medium-High", "High", "Yes", "Not Specified",
    ]

    /// Every known column. Keys are camelCase because `profile show --json` emits them as is.
    static let all: [String: ProfileColumn] = [
        "dscp": .dscp(list: false), "dscpGreen": .dscp(list: true), "dscpYellow": .dscp(list: true),
        "phb": .phb, "pcp": .threeBit(list: false), "exp": .threeBit(list: false),
        "up": .threeBit(list: false),
        "pcpGreen": .threeBit(list: true), "pcpYellow": .threeBit(list: true),
        "sTagPcpGreen": .threeBit(list: true), "sTagPcpYellow": .threeBit(list: true),
        "sTagPcpDei": .threeBit(list: true),
        "qci": .integer(1...255), "5qi": .integer(1...255), "priority": .number(0...127),
        "release": .integer(1...99), "provisional": .flag,
        "thp": .integer(1...3),
        "qosClass": .integer(0...7),
        "resourceType": .choice(["GBR", "Non-GBR", "Delay-critical GBR"]),
        "packetDelayBudgetMs": .integer(0...100_000), "averagingWindowMs": .integer(0...100_000),
        "maxDataBurstBytes": .integer(0...1_000_000), "iptdMs": .integer(0...100_000),
        "ipdvMs": .integer(0...100_000),
        "packetErrorLossRate": .rate, "packetErrorRate": .rate, "iplr": .rate, "iper": .rate,
        "lossTolerance": .choice(tolerances), "delayTolerance": .choice(tolerances),
        "jitterTolerance": .choice(tolerances),
        "trafficClass": .choice(["Conversational", "Streaming", "Interactive", "Background"]),
        "treatmentAggregate": .choice(["Network Control", "Real-Time", "Assured Elastic", "Elastic"]),
        "encoding": .choice(["8P0D", "7P1D", "6P2D", "5P3D"]), "direction": .choice(["encode", "decode"]),
        "accessCategory": .choice(["AC_VO", "AC_VI", "AC_BE", "AC_BK"]),
        "cosLabel": .choice(["H", "M", "L", "H/M"]), "dropEligible": .flag,
        "applications": .textList, "aliases": .textList,
        "trafficCharacteristics": .text, "description": .text, "note": .text, "source": .text,
        "plane": .text, "cosIdType": .text, "nodeMechanism": .text, "networkTechniques": .text,
        "supersededBy": .text, "via": .text, "trafficType": .text,
    ]

    static var allowedKeys: [String] { ["derived", "name", "unverified"] + all.keys.sorted() }
}

enum ProfileParser {
    static let topKeys = ["profile", "title", "source", "deviations", "derived", "rows"]

    static func parse(root: Node, pairs: [(key: Node, value: Node, name: String)], ctx: inout YAMLContext)
        -> (profile: Profile, nameNode: Node)?
    {
        ctx.checkKeys(pairs, allowed: topKeys, in: "a profile file")
        guard let namePair = pairs.first(where: { $0.name == "profile" }),
            let name = ctx.scalar(namePair.value, "a profile name")
        else { return nil }
        if !DomainParser.isValidName(name) {
            ctx.error(namePair.value, "invalid profile name '\(name)'; allowed: 1-64 of A-Z a-z 0-9 - _ .")
        }
        var profile = Profile(name: name, rows: [])
        var rowsNode: Node?
        // `derived: [column, ...]` at the top marks that column of every row
        // as qosmap's choice (the 5QI DSCP); a row's own `derived` adds to it.
        var derivedColumns: [String] = []
        if let pair = pairs.first(where: { $0.name == "derived" }) {
            for (key, node) in markList(pair.value, ctx: &ctx) {
                if ProfileColumn.all[key] == nil || key == "aliases" {
                    ctx.error(
                        node,
                        "unknown column '\(key)' in 'derived'; allowed: "
                            + ProfileColumn.all.keys.filter { $0 != "aliases" }.sorted().joined(
                                separator: ", "))
                } else {
                    derivedColumns.append(key)
                }
            }
        }
        for pair in pairs {
            switch pair.name {
            case "title": profile.title = ctx.scalar(pair.value, "a title") ?? ""
            case "source": profile.source = ctx.scalar(pair.value, "a source citation") ?? ""
            case "deviations": profile.deviations = textList(pair.value, "deviations", ctx: &ctx)
            case "rows":
                rowsNode = pair.value
                guard case .sequence(let seq) = pair.value else {
                    ctx.error(
                        pair.value, "expected rows (a sequence of mappings), found a \(pair.value.kindName)")
                    continue
                }
                for item in seq {
                    guard var row = parseRow(item, ctx: &ctx) else { continue }
                    for key in derivedColumns where row[key] != nil && !row.isDerived(key) {
                        row.derived.append(key)
                    }
                    profile.rows.append(row)
                }
            default: break
            }
        }
        if rowsNode == nil { ctx.error(root, "missing key 'rows' in profile '\(name)'") }
        checkVia(profile, rowsNode: rowsNode, ctx: &ctx)
        return (profile, namePair.value)
    }

    static func textList(_ node: Node, _ what: String, ctx: inout YAMLContext) -> [String] {
        if case .scalar(let s) = node { return [s.string] }
        guard case .sequence(let seq) = node else {
            ctx.error(node, "expected \(what) (text or a sequence of text), found a \(node.kindName)")
            return []
        }
        return seq.compactMap { ctx.scalar($0, "text in \(what)") }
    }

    /// The column names of a `derived` or `unverified` list, each with its node for diagnostics.
    static func markList(_ node: Node, key: String = "derived", ctx: inout YAMLContext) -> [(String, Node)] {
        if case .scalar(let s) = node { return [(s.string, node)] }
        guard case .sequence(let seq) = node else {
            ctx.error(
                node,
                "expected \(key) (a column name or a sequence of column names), found a \(node.kindName)")
            return []
        }
        return seq.compactMap { item in ctx.scalar(item, "a column name in '\(key)'").map { ($0, item) } }
    }

    /// The columns a row's `derived` or `unverified` list names, once each,
    /// every one checked to be a column of the row.
    static func markedColumns(_ node: Node?, _ key: String, of row: ProfileRow, ctx: inout YAMLContext)
        -> [(column: String, node: Node)]
    {
        guard let node else { return [] }
        var marked: [(column: String, node: Node)] = []
        for (column, columnNode) in markList(node, key: key, ctx: &ctx) {
            guard row[column] != nil else {
                ctx.error(
                    columnNode,
                    "\(key) column '\(column)' is not a column of row '\(row.name)'; its columns: "
                        + row.columns.map(\.key).joined(separator: ", "))
                continue
            }
            if !marked.contains(where: { $0.column == column }) { marked.append((column, columnNode)) }
        }
        return marked
    }

    static func parseRow(_ node: Node, ctx: inout YAMLContext) -> ProfileRow? {
        guard let pairs = ctx.mapping(node, "a profile row") else { return nil }
        guard let namePair = pairs.first(where: { $0.name == "name" }) else {
            ctx.error(node, "a profile row needs a 'name' (its label in the standard)")
            return nil
        }
        guard let name = ctx.scalar(namePair.value, "a row name") else { return nil }
        var row = ProfileRow(name: name, columns: [])
        var dscpNode: Node?
        var phbNode: Node?
        var derivedNode: Node?
        var unverifiedNode: Node?
        for pair in pairs where pair.name != "name" {
            if pair.name == "derived" {
                derivedNode = pair.value
                continue
            }
            if pair.name == "unverified" {
                unverifiedNode = pair.value
                continue
            }
            guard let column = ProfileColumn.all[pair.name] else {
                ctx.error(
                    pair.key,
                    "unknown column '\(pair.name)' in a profile row; allowed: "
                        + ProfileColumn.allowedKeys.joined(separator: ", "))
                continue
            }
            if pair.name == "aliases" {
                row.aliases = textList(pair.value, "aliases", ctx: &ctx)
                continue
            }
            guard let value = cell(pair.value, column: column, key: pair.name, ctx: &ctx) else { continue }
            if pair.name == "dscp" { dscpNode = pair.value }
            if pair.name == "phb" { phbNode = pair.value }
            row.columns.append((pair.name, value))
        }
        row.derived = markedColumns(derivedNode, "derived", of: row, ctx: &ctx).map(\.column)
        // `unverified: [column, ...]`: cells no readable copy of the standard
        // confirmed; shown marked so they never pass for a checked value.
        for (column, node) in markedColumns(unverifiedNode, "unverified", of: row, ctx: &ctx) {
            guard !row.isDerived(column) else {
                ctx.error(
                    node, "column '\(column)' of row '\(name)' is both derived and unverified; mark it once")
                continue
            }
            row.unverified.append(column)
        }
        lintNameAgainstValue(row, dscpNode: dscpNode, phbNode: phbNode, ctx: &ctx)
        return row
    }

    static func cell(_ node: Node, column: ProfileColumn, key: String, ctx: inout YAMLContext)
        -> ProfileValue?
    {
        switch column {
        case .dscp(let list), .threeBit(let list):
            if case .sequence(let seq) = node {
                guard list else {
                    ctx.error(node, "column '\(key)' takes one value, found a sequence")
                    return nil
                }
                let items = seq.compactMap { cell($0, column: column, key: key, ctx: &ctx) }
                return items.count == seq.count ? .list(items) : nil
            }
            guard let s = ctx.scalar(node, "a \(key) value") else { return nil }
            if case .dscp = column {
                guard let parsed = parseDSCPCell(s, node: node, ctx: &ctx) else { return nil }
                return .integer(Int(parsed.rawValue))
            }
            do {
                return .integer(Int(try PCP(parsing: s).rawValue))
            } catch {
                ctx.error(node, "invalid \(key) value '\(s)'; allowed: 0-7")
                return nil
            }
        case .integer(let range):
            guard let s = ctx.scalar(node, "an integer for '\(key)'") else { return nil }
            guard let v = parseInteger(Substring(s)), range.contains(v) else {
                ctx.error(
                    node, "invalid \(key) value '\(s)'; allowed: \(range.lowerBound)-\(range.upperBound)")
                return nil
            }
            return .integer(v)
        case .number(let range):
            guard let s = ctx.scalar(node, "a number for '\(key)'") else { return nil }
            if let v = parseInteger(Substring(s)), range.contains(Double(v)) { return .integer(v) }
            guard let v = Double(s), v.isFinite, range.contains(v) else {
                ctx.error(
                    node,
                    "invalid \(key) value '\(s)'; allowed: a number from \(Int(range.lowerBound)) to "
                        + "\(Int(range.upperBound)), such as 7 or 0.7")
                return nil
            }
            return .rate(v)
        case .rate:
            guard let s = ctx.scalar(node, "a rate for '\(key)'") else { return nil }
            guard let v = Double(s), v >= 0, v <= 1 else {
                ctx.error(node, "invalid \(key) value '\(s)'; allowed: a rate from 0 to 1, such as 1e-6")
                return nil
            }
            return .rate(v)
        case .text:
            return ctx.scalar(node, "text for '\(key)'").map(ProfileValue.text)
        case .textList:
            return .list(textList(node, key, ctx: &ctx).map(ProfileValue.text))
        case .choice(let allowed):
            guard let s = ctx.scalar(node, "a \(key)") else { return nil }
            guard let found = allowed.first(where: { ProfileRow.normalize($0) == ProfileRow.normalize(s) })
            else {
                ctx.error(node, "invalid \(key) '\(s)'; allowed: \(allowed.joined(separator: ", "))")
                return nil
            }
            return .text(found)
        case .flag:
            return ctx.bool(node, "\(key) flag").map(ProfileValue.flag)
        case .phb:
            guard let s = ctx.scalar(node, "a PHB name") else { return nil }
            guard DSCP(name: s) != nil || ServiceClass(name: s) != nil else {
                ctx.error(
                    node,
                    "unknown PHB '\(s)'; allowed: a PHB name (DF, CS0-CS7, AF11-AF43, EF, VA, LE) or a class "
                        + "(\(ServiceClass.allowedNames))")
                return nil
            }
            return .text(s.uppercased())
        }
    }

    /// Checks that every `via` names a row of the same profile.
    static func checkVia(_ profile: Profile, rowsNode: Node?, ctx: inout YAMLContext) {
        guard case .sequence(let seq)? = rowsNode else { return }
        for item in seq {
            guard case .mapping(let m) = item else { continue }
            for (k, v) in m where k.string == "via" {
                guard let target = v.string else { continue }
                if profile.rows(named: target).isEmpty {
                    ctx.error(
                        v,
                        "unknown row '\(target)' in 'via'; rows: " + profile.rowNames.joined(separator: ", "))
                }
            }
        }
    }

    /// Warns when a row's `phb` name and its `dscp` value disagree (the
    /// reference gives QCI 5 "0x30(48)" with PHB EF; EF is 46).
    static func lintNameAgainstValue(
        _ row: ProfileRow, dscpNode: Node?, phbNode: Node?, ctx: inout YAMLContext
    ) {
        guard let dscp = row.dscp, let phb = row["phb"]?.text else { return }
        if let named = DSCP(name: phb) {
            if named != dscp {
                ctx.warning(
                    dscpNode ?? phbNode,
                    "dscp \(dscp.rawValue) contradicts PHB name '\(phb)' (\(phb) is \(named.rawValue)) in row '\(row.name)'"
                )
            }
        } else if let sc = ServiceClass(name: phb), !dscpFits(dscp, sc) {
            ctx.warning(
                dscpNode ?? phbNode,
                "dscp \(dscp) is not in class \(sc.name) given by 'phb' in row '\(row.name)'")
        }
    }

    /// Whether a code point belongs to a PHB group (AF4 is AF41-AF43; BE is 0).
    static func dscpFits(_ dscp: DSCP, _ sc: ServiceClass) -> Bool {
        switch sc {
        case .be: return dscp.rawValue == 0
        case .af1, .af2, .af3, .af4: return dscp.name?.hasPrefix(sc.name) ?? false
        case .ef: return dscp == .ef || dscp == .va
        case .cs6: return dscp == .cs6
        case .cs7: return dscp == .cs7
        }
    }
}

/// Parses a DSCP cell: a number, a PHB name, or both as `EF(46)`, `46 (EF)`,
/// `0x2E(46)`. When the two parts disagree the number wins and a warning
/// names both (the reference's "0x0E(14) AF11" kind of slip).
func parseDSCPCell(_ text: String, node: Node, ctx: inout YAMLContext) -> DSCP? {
    let trimmed = text.trimmingSpaces
    if let open = trimmed.firstIndex(of: "("), trimmed.hasSuffix(")") {
        let outer = String(trimmed[..<open]).trimmingSpaces
        let inner = String(trimmed[trimmed.index(after: open)..<trimmed.index(before: trimmed.endIndex)])
            .trimmingSpaces
        let a: DSCP
        let b: DSCP
        do {
            a = try DSCP(parsing: outer)
            b = try DSCP(parsing: inner)
        } catch {
            ctx.error(node, error.description)
            return nil
        }
        // A name and a number: the number is what goes on the wire.
        let outerIsName = DSCP(name: outer) != nil
        let innerIsName = DSCP(name: inner) != nil
        let value = outerIsName && !innerIsName ? b : a
        if a != b {
            let message =
                outerIsName || innerIsName
                ? "PHB \(outerIsName ? outer : inner) is \(outerIsName ? a.rawValue : b.rawValue), not "
                    + "\(value.rawValue)"
                : "\(outer) and \(inner) differ"
            ctx.warning(node, "dscp '\(text)': \(message); using \(value.rawValue)")
        }
        return value
    }
    do {
        return try DSCP(parsing: trimmed)
    } catch {
        ctx.error(node, error.description)
        return nil
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}
