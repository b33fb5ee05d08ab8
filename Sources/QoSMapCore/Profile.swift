// The standards-profile model: a standard's recommendation table as typed
// rows. Parsed from `profile:` files by QoSMapTableFormat's ProfileParser.

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
