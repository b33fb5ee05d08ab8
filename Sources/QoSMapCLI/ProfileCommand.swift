import ArgumentParser
import QoSMapCore
import QoSMapTables

extension QoSMapCommand {
    /// `qosmap profile list|show`: the standards profiles (RFC 4594, 3GPP QCI, ...).
    struct ProfileCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "profile",
            abstract:
                "List and show standards profiles (RFC 4594, RFC 5127, 3GPP QCI/5QI, IEEE 802.1, MEF, Y.1541).",
            discussion: """
                A profile is a standard's recommendation table, shipped as data in
                Tables/profiles/ with its source and where it departs from the
                reference. A column marked † is qosmap's own choice, not the
                standard's. 'qosmap lookup qci|5qi|app|service' applies one.

                Examples:
                  qosmap profile list
                  qosmap profile show rfc4594
                  qosmap profile show 3gpp-5qi --json
                """,
            subcommands: [List.self, Show.self])

        /// `qosmap profile list`.
        struct List: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "list", abstract: "List the standards profiles.")

            @OptionGroup var tableOptions: TableOptions
            @OptionGroup var output: OutputOptions

            struct Row: Encodable {
                var name: String
                var title: String
                var source: String
                var rows: Int
                var origin: String
            }

            func run() throws {
                let set = try tableOptions.load(profiles: true)
                let rows = set.profiles.profiles.map {
                    Row(
                        name: $0.name, title: $0.title, source: $0.source, rows: $0.rows.count,
                        origin: $0.isBuiltIn ? "built-in" : "file")
                }
                if output.json {
                    print(jsonText(rows))
                    return
                }
                print(table([["NAME", "ROWS", "TITLE"]] + rows.map { [$0.name, "\($0.rows)", $0.title] }))
            }
        }

        /// `qosmap profile show NAME`.
        struct Show: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "show", abstract: "Show a standards profile's rows.")

            @Argument(help: "The profile's name (see 'qosmap profile list').")
            var name: String

            @OptionGroup var tableOptions: TableOptions
            @OptionGroup var output: OutputOptions

            func run() throws {
                let set = try tableOptions.load(profiles: true)
                let p = try resolveProfile(name, in: set)
                if output.json {
                    print(jsonText(ProfileJSON(p)))
                    return
                }
                var lines = ["profile \(p.name): \(p.title)", "source: \(p.source)"]
                for d in p.deviations { lines.append("deviation: \(d)") }
                // Long text columns would make the table unreadable; JSON has them all.
                let long: Set<String> = [
                    "applications", "trafficCharacteristics", "description", "note", "source",
                    "nodeMechanism",
                    "networkTechniques",
                ]
                var keys: [String] = []
                for row in p.rows {
                    for c in row.columns where !long.contains(c.key) && !keys.contains(c.key) {
                        keys.append(c.key)
                    }
                }
                // A cell that is qosmap's choice, not the standard's value, is
                // marked so that it cannot be mistaken for the standard's.
                let rows =
                    [["name"] + keys]
                    + p.rows.map { row in
                        [row.name]
                            + keys.map { k in
                                row[k].map { cellText(k, $0) + cellMark(row, k) } ?? "-"
                            }
                    }
                lines.append(table(rows, indent: "  "))
                // Marked cells of the columns left out above are named, so a
                // legend never stands without its mark.
                var hidden: [(key: String, rows: [String])] = []
                for row in p.rows {
                    for key in row.derived + row.unverified where long.contains(key) {
                        let label = key + cellMark(row, key)
                        if let i = hidden.firstIndex(where: { $0.key == label }) {
                            hidden[i].rows.append(row.name)
                        } else {
                            hidden.append((label, [row.name]))
                        }
                    }
                }
                for h in hidden {
                    lines.append("  \(h.key) (not shown; see --json): \(h.rows.joined(separator: ", "))")
                }
                lines += legends(for: lines.joined())
                print(lines.joined(separator: "\n"))
            }
        }
    }
}

/// The mark after a cell that is qosmap's choice (`profile show`, `lookup`).
let derivedMark = "\u{2020}"

/// The legend line for ``derivedMark``.
let derivedLegend =
    "\(derivedMark) qosmap's choice, not the standard's value (the profile file's comments say why)"

/// The mark after a cell that no readable copy of the standard confirmed.
let unverifiedMark = "\u{2021}"

/// The legend line for ``unverifiedMark``.
let unverifiedLegend =
    "\(unverifiedMark) not confirmed by a readable copy of the standard (the profile file's comments say what was searched)"

/// The legend lines of the marks that `text` shows.
func legends(for text: String) -> [String] {
    [(derivedMark, derivedLegend), (unverifiedMark, unverifiedLegend)].filter { text.contains($0.0) }.map(\.1)
}

/// The mark a cell carries: ``derivedMark``, ``unverifiedMark`` or none.
func cellMark(_ row: ProfileRow, _ key: String) -> String {
    if row.isDerived(key) { return derivedMark }
    if row.isUnverified(key) { return unverifiedMark }
    return ""
}

/// A DSCP cell with its PHB name, others as they are.
func cellText(_ key: String, _ value: ProfileValue) -> String {
    if key.hasPrefix("dscp") {
        switch value {
        case .integer(let v): return DSCP(truncating: UInt8(v)).description
        case .list(let items):
            return items.map { $0.integer.map { DSCP(truncating: UInt8($0)).description } ?? $0.description }
                .joined(separator: ", ")
        default: break
        }
    }
    return value.description
}

/// Resolves a profile name, listing the valid ones when unknown (exit 64).
func resolveProfile(_ name: String, in set: TableSet) throws -> Profile {
    guard let p = set.profiles[name] else {
        throw UsageError(
            "unknown profile '\(name)'; known profiles: \(set.profiles.names.joined(separator: ", "))")
    }
    return p
}

/// One profile row as JSON: `name`, `aliases` when any, then every column,
/// then `derived` (`{"dscp": true}`) when some cells are qosmap's choice and
/// `unverified` (`{"release": true}`) when no readable copy of the standard
/// confirmed some cells.
struct ProfileRowJSON: Encodable {
    var row: ProfileRow
    /// Columns that hold a list in some row of the profile: always written as lists.
    var listColumns: Set<String> = []

    init(_ row: ProfileRow) { self.row = row }

    init(_ row: ProfileRow, in profile: Profile) {
        self.row = row
        listColumns = profile.listColumns
    }

    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ s: String) { stringValue = s }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(row.name, forKey: Key("name"))
        if !row.aliases.isEmpty { try c.encode(row.aliases, forKey: Key("aliases")) }
        for column in row.columns {
            var value = column.value
            if listColumns.contains(column.key), case .list = value {
            } else if listColumns.contains(column.key) {
                value = .list([value])
            }
            try c.encode(ProfileValueJSON(value: value), forKey: Key(column.key))
        }
        for (mark, keys) in [("derived", row.derived), ("unverified", row.unverified)] where !keys.isEmpty {
            var marked = c.nestedContainer(keyedBy: Key.self, forKey: Key(mark))
            for key in keys { try marked.encode(true, forKey: Key(key)) }
        }
    }
}

/// A cell as a JSON number, string, boolean or array.
struct ProfileValueJSON: Encodable {
    var value: ProfileValue

    func encode(to encoder: any Encoder) throws {
        switch value {
        case .integer(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .rate(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .text(let s):
            var c = encoder.singleValueContainer()
            try c.encode(s)
        case .flag(let b):
            var c = encoder.singleValueContainer()
            try c.encode(b)
        case .list(let items):
            var c = encoder.unkeyedContainer()
            for item in items { try c.encode(ProfileValueJSON(value: item)) }
        }
    }
}

/// `profile show --json`: the profile's name, title, source and deviations
/// (what the text prints above the table), then its rows.
struct ProfileJSON: Encodable {
    var profile: String
    var title: String
    var source: String
    var deviations: [String]
    var rows: [ProfileRowJSON]

    init(_ p: Profile) {
        profile = p.name
        title = p.title
        source = p.source
        deviations = p.deviations
        rows = p.rows.map { ProfileRowJSON($0, in: p) }
    }
}
