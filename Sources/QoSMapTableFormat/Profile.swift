import QoSMapCore
import Yams

/// One typed cell of a profile row.
public enum ProfileValue: Sendable, Equatable, CustomStringConvertible {
    /// An integer: a code point, a priority, a QCI, milliseconds, bytes.
    case integer(Int)
    /// A rate such as a packet loss rate (`1e-6`).
    case rate(Double)
    /// Free text or a checked name.
    case text(String)
    /// A yes/no flag.
    case flag(Bool)
    /// Several values, for cells the standard gives as a choice ("5, 3 or 1").
    case list([ProfileValue])

    /// The value as the standard writes it: `46`, `1e-06`, `Low`, `[5, 3, 1]`.
    public var description: String {
        switch self {
        case .integer(let v): return "\(v)"
        case .rate(let v): return "\(v)"
        case .text(let s): return s
        case .flag(let b): return b ? "true" : "false"
        case .list(let items): return items.map(\.description).joined(separator: ", ")
        }
    }

    /// The integer, or nil.
    public var integer: Int? {
        if case .integer(let v) = self { return v }
        return nil
    }

    /// The rate (integers widen), or nil.
    public var rate: Double? {
        switch self {
        case .rate(let v): return v
        case .integer(let v): return Double(v)
        default: return nil
        }
    }

    /// The text, or nil.
    public var text: String? {
        if case .text(let s) = self { return s }
        return nil
    }

    /// The flag, or nil.
    public var flag: Bool? {
        if case .flag(let b) = self { return b }
        return nil
    }
}

/// One row of a standards profile: a labelled code point or class with typed columns.
public struct ProfileRow: Sendable, Equatable {
    /// The row's label in the standard, such as `Telephony` or `QCI 1`.
    public var name: String
    /// Other names the row is found by (`lookup app`, `lookup service`).
    public var aliases: [String]
    /// The columns other than `name` and `aliases`, in file order.
    public var columns: [(key: String, value: ProfileValue)]

    /// Creates a row.
    public init(name: String, aliases: [String] = [], columns: [(key: String, value: ProfileValue)]) {
        self.name = name
        self.aliases = aliases
        self.columns = columns
    }

    /// The value of a column, or nil when the row does not give it.
    public subscript(key: String) -> ProfileValue? {
        columns.first(where: { $0.key == key })?.value
    }

    /// The recommended DSCP, when the row gives one.
    public var dscp: DSCP? { self["dscp"]?.integer.flatMap { DSCP(rawValue: UInt8($0)) } }

    /// Whether `query` names this row: case-insensitive, with `-`, `_` and space equivalent.
    public func matches(_ query: String) -> Bool {
        let key = ProfileRow.normalize(query)
        return ProfileRow.normalize(name) == key || aliases.contains { ProfileRow.normalize($0) == key }
    }

    /// Folds case and treats `-`, `_` and space as one separator.
    public static func normalize(_ text: String) -> String {
        String(
            text.lowercased().map { $0 == "_" || $0 == "-" ? " " : $0 }
        ).split(separator: " ").joined(separator: " ")
    }

    /// Compares names and cells.
    public static func == (a: ProfileRow, b: ProfileRow) -> Bool {
        a.name == b.name && a.aliases == b.aliases && a.columns.map(\.key) == b.columns.map(\.key)
            && a.columns.map(\.value) == b.columns.map(\.value)
    }
}

/// A standards profile: a standard's recommendation table as data (RFC 4594,
/// 3GPP QCI, IEEE 802.1Q PCP encodings, ...).
public struct Profile: Sendable, Equatable {
    /// The canonical name, such as `rfc4594` or `3gpp-qci`.
    public var name: String
    /// A one-line title.
    public var title: String
    /// The standard and section the values come from.
    public var source: String
    /// Where and why the values differ from the reference text.
    public var deviations: [String]
    /// The rows, in the standard's order.
    public var rows: [ProfileRow]
    /// Whether the profile is compiled in.
    public var isBuiltIn: Bool

    /// Creates a profile.
    public init(
        name: String, title: String = "", source: String = "", deviations: [String] = [], rows: [ProfileRow],
        isBuiltIn: Bool = false
    ) {
        self.name = name
        self.title = title
        self.source = source
        self.deviations = deviations
        self.rows = rows
        self.isBuiltIn = isBuiltIn
    }

    /// The rows a name selects (see ``ProfileRow/matches(_:)``), in order.
    public func rows(named query: String) -> [ProfileRow] { rows.filter { $0.matches(query) } }

    /// The first row whose integer column `key` equals `value`.
    public func row(where key: String, is value: Int) -> ProfileRow? {
        rows.first { $0[key]?.integer == value }
    }

    /// Every row name once, in order, for error messages.
    public var rowNames: [String] {
        var seen: Set<String> = []
        return rows.map(\.name).filter { seen.insert($0).inserted }
    }

    /// The row a `via` column points to, or the row itself: where its marking comes from.
    public func markingRow(for row: ProfileRow) -> ProfileRow {
        guard row.dscp == nil, let via = row["via"]?.text,
            let target = rows(named: via).first(where: { $0.dscp != nil })
        else { return row }
        return target
    }
}

/// The profiles of a table set, by name.
public struct ProfileSet: Sendable {
    /// The profiles in definition order (built-ins first).
    public private(set) var profiles: [Profile]

    /// Creates a set.
    public init(_ profiles: [Profile] = []) { self.profiles = profiles }

    /// Adds or replaces a profile by name.
    public mutating func insert(_ profile: Profile) {
        if let i = profiles.firstIndex(where: { $0.name == profile.name }) {
            profiles[i] = profile
        } else {
            profiles.append(profile)
        }
    }

    /// The profile whose name matches (case-insensitive, `-`/`_`/space equivalent), or nil.
    public subscript(name: String) -> Profile? {
        let key = ProfileRow.normalize(name)
        return profiles.first { ProfileRow.normalize($0.name) == key }
    }

    /// The names, in order.
    public var names: [String] { profiles.map(\.name) }
}

/// The columns a profile row may have and how each is checked.
enum ProfileColumn {
    case dscp(list: Bool)
    case threeBit(list: Bool)
    case integer(ClosedRange<Int>)
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
        "qci": .integer(1...255), "5qi": .integer(1...255), "priority": .integer(0...127),
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

    static var allowedKeys: [String] { ["name"] + all.keys.sorted() }
}

enum ProfileParser {
    static let topKeys = ["profile", "title", "source", "deviations", "rows"]

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
                    if let row = parseRow(item, ctx: &ctx) { profile.rows.append(row) }
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
        for pair in pairs where pair.name != "name" {
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
