// The standards-profile model: a standard's recommendation table as typed
// rows. Parsed from `profile:` files by QoSMapTableFormat's ProfileParser.

/// One typed cell of a profile row.
public enum ProfileValue: Sendable, Equatable, CustomStringConvertible {
    /// An integer: a code point, a priority, a QCI, milliseconds, bytes.
    case integer(Int)
    /// A number that need not be whole: a rate such as a packet loss rate
    /// (`1e-6`), or a decimal priority level (TS 23.203 gives QCI 65 `0.7`).
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
    /// The columns whose cells are qosmap's choice, not the standard's value
    /// (such as the 5QI DSCP, which 3GPP does not define), in file order.
    public var derived: [String]
    /// The columns whose cells no readable copy of the standard confirmed
    /// (the profile file's comments say what was searched), in file order.
    public var unverified: [String]

    /// Creates a row.
    public init(
        name: String, aliases: [String] = [], columns: [(key: String, value: ProfileValue)],
        derived: [String] = [], unverified: [String] = []
    ) {
        self.name = name
        self.aliases = aliases
        self.columns = columns
        self.derived = derived
        self.unverified = unverified
    }

    /// Whether the cell in column `key` is qosmap's choice rather than the standard's value.
    public func isDerived(_ key: String) -> Bool { derived.contains(key) }

    /// Whether the cell in column `key` is the standard's value as far as
    /// known, but not confirmed by a readable copy of it.
    public func isUnverified(_ key: String) -> Bool { unverified.contains(key) }

    /// The row's `applications`, as text.
    public var applications: [String] {
        guard case .list(let items)? = self["applications"] else { return [] }
        return items.compactMap(\.text)
    }

    /// The application of this row that `query` names (same folding as
    /// ``matches(_:)``), or nil.
    public func matchingApplication(_ query: String) -> String? {
        let key = ProfileRow.normalize(query)
        return applications.first { ProfileRow.normalize($0) == key }
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

    /// The Levenshtein distance of `a` and `b`, or `limit + 1` once it exceeds `limit`.
    static func editDistance(_ a: String, _ b: String, limit: Int) -> Int {
        let x = Array(a)
        let y = Array(b)
        if abs(x.count - y.count) > limit { return limit + 1 }
        var previous = Array(0...y.count)
        for i in 1...max(x.count, 1) where !x.isEmpty {
            var current = [i] + Array(repeating: 0, count: y.count)
            for j in 1...max(y.count, 1) where !y.isEmpty {
                current[j] = Swift.min(
                    previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1))
            }
            if current.min() ?? 0 > limit { return limit + 1 }
            previous = current
        }
        return Swift.min(previous[y.count], limit + 1)
    }

    /// Compares names and cells.
    public static func == (a: ProfileRow, b: ProfileRow) -> Bool {
        a.name == b.name && a.aliases == b.aliases && a.columns.map(\.key) == b.columns.map(\.key)
            && a.columns.map(\.value) == b.columns.map(\.value) && a.derived == b.derived
            && a.unverified == b.unverified
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

    /// The rows `query` selects: by name or alias; when none, by application
    /// (`voice` finds QCI 7, whose applications include "Voice").
    public func rows(matching query: String) -> [ProfileRow] {
        let named = rows(named: query)
        return named.isEmpty ? rows.filter { $0.matchingApplication(query) != nil } : named
    }

    /// Row names and applications close to `query`, for an error message:
    /// those that contain it or that it contains (on folded text), or that
    /// are within two edits of it.
    public func nearMisses(_ query: String) -> [String] {
        let key = ProfileRow.normalize(query)
        guard !key.isEmpty else { return [] }
        func close(_ label: String) -> Bool {
            let l = ProfileRow.normalize(label)
            if l.isEmpty { return false }
            if key.count >= 3 && (l.contains(key) || (l.count >= 3 && key.contains(l))) { return true }
            return ProfileRow.editDistance(l, key, limit: 2) <= 2
        }
        // One entry per row name: the name itself when it (or an alias) is
        // close, else its first close application.
        var out: [String] = []
        var seen: Set<String> = []
        for row in rows where !seen.contains(row.name) {
            if ([row.name] + row.aliases).contains(where: close) {
                seen.insert(row.name)
                out.append(row.name)
            } else if let app = row.applications.first(where: close) {
                seen.insert(row.name)
                out.append("\(row.name) (application \"\(app)\")")
            }
        }
        return out
    }

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
