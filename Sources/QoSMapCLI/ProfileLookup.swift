import QoSMapCore
import QoSMapTables

/// A lookup that starts in a standards profile: `qci 1`, `5qi 82`, `app voip`, `service telephony`.
struct ProfileQuery {
    enum Selector {
        case number(column: String, value: Int)
        case name(String)
    }

    var kind: String
    var selector: Selector
    var defaultProfile: String

    /// The value looked up, for JSON: a number for qci/5qi, else the name.
    var value: ProfileValueJSON {
        switch selector {
        case .number(_, let n): ProfileValueJSON(value: .integer(n))
        case .name(let s): ProfileValueJSON(value: .text(s))
        }
    }

    /// Nil when `kind` is not a profile lookup; throws on a bad number.
    init?(kind: String, value: String) throws {
        let k = kind.lowercased()
        switch k {
        case "qci", "5qi":
            guard let n = parseInteger(Substring(value)), (1...255).contains(n) else {
                throw UsageError("invalid \(k.uppercased()) '\(value)'; allowed: 1-255")
            }
            self.kind = k
            selector = .number(column: k, value: n)
            defaultProfile = k == "qci" ? "3gpp-qci" : "3gpp-5qi"
        case "app", "application":
            self.kind = "app"
            selector = .name(value)
            defaultProfile = "gsma-ir34"
        case "service":
            self.kind = "service"
            selector = .name(value)
            defaultProfile = "rfc4594"
        default:
            return nil
        }
    }
}

extension QoSMapCommand.Lookup {
    /// Prints the profile's recommended marking, then what the domain makes of it.
    func runProfileLookup(_ q: ProfileQuery, set: TableSet, domain d: DSDomain) throws {
        let p = try resolveProfile(profile ?? q.defaultProfile, in: set)
        let matches: [ProfileRow]
        switch q.selector {
        case .number(let column, let value):
            matches = p.rows.filter { $0[column]?.integer == value }
            if matches.isEmpty {
                let known = p.rows.compactMap { $0[column]?.integer }.map(String.init)
                let allowed =
                    known.isEmpty
                    ? "none (profile \(p.name) has no \(column) column)" : known.joined(separator: ", ")
                throw UsageError(
                    "unknown \(column.uppercased()) \(value) in profile \(p.name); allowed: \(allowed)")
            }
        case .name(let name):
            // Names and aliases first; failing those, applications ("Voice" of QCI 7).
            matches = p.rows(matching: name)
            if matches.isEmpty {
                let near = p.nearMisses(name)
                let hint = near.isEmpty ? "" : "; near misses: " + near.joined(separator: ", ")
                throw UsageError(
                    "unknown \(q.kind) '\(name)' in profile \(p.name)\(hint); allowed: "
                        + p.rowNames.joined(separator: ", "))
            }
        }
        var matchedApplication: String?
        if case .name(let name) = q.selector, p.rows(named: name).isEmpty {
            matchedApplication = matches.first?.matchingApplication(name)
        }
        // A superseded row (CS1 for Low-Priority Data) is shown, not recommended.
        let current = matches.filter { $0["supersededBy"] == nil }
        let chosen = (current.isEmpty ? matches : current).first { p.markingRow(for: $0).dscp != nil }
        let row = chosen ?? matches[0]
        let marking = p.markingRow(for: row)
        let others = matches.compactMap { p.markingRow(for: $0).dscp }.filter { $0 != marking.dscp }
        guard let dscp = marking.dscp else {
            // PCP-only profiles (ieee-8021, ieee-8021q-pcp, MEF C-tag PCPs):
            // map the PCP through the domain's 802.1p table instead.
            if let pcp = Self.recommendedPCP(marking) {
                try printPCPLookup(
                    p, query: q, row: row, marking: marking, pcp: pcp, application: matchedApplication,
                    domain: d)
                return
            }
            if output.json {
                var json = ProfileLookupJSON(
                    profile: p.name, field: q.kind, value: q.value, row: row.name,
                    recommendation: ProfileRowJSON(row, in: p), domain: d.name)
                json.application = matchedApplication
                print(jsonText(json))
            } else {
                let details = summary(row)
                print("profile \(p.name): \(row.name): \(details)")
                for legend in legends(for: details) { print("  \(legend)") }
                print(
                    "profile \(p.name) gives no DSCP or 802.1p for '\(row.name)'; nothing to map in domain \(d.name)"
                )
            }
            return
        }
        let t = d.classify(dscp: dscp)
        let marks = OutboundMarks(domain: d, treatment: t)
        if output.json {
            var json = ProfileLookupJSON(
                p, query: q, row: row, marking: marking, application: matchedApplication, domain: d,
                treatment: t, marks: marks)
            json.dscp = Int(dscp.rawValue)
            json.alternatives = others.isEmpty ? nil : others.map { Int($0.rawValue) }
            print(jsonText(json))
            return
        }
        let via = marking.name == row.name ? "" : " (via \(marking.name))"
        let mark = marking.isDerived("dscp") ? derivedMark : ""
        print(
            "profile \(p.name): \(row.name)\(via)\(Self.applicationNote(matchedApplication)) -> recommended dscp \(dscp)\(mark)"
        )
        let details = summary(row)
        if !details.isEmpty { print("  \(details)") }
        if !others.isEmpty { print("  also: dscp " + others.map(\.description).joined(separator: ", ")) }
        for legend in legends(for: mark + details) { print("  \(legend)") }
        print("domain \(d.name): dscp \(dscp) -> service class \(t.serviceClass.name), color \(t.color.name)")
        print("outbound \(t) in domain \(d.name):")
        print(marks.text)
    }

    /// The single PCP a row recommends: its `pcp`, else a single green C-tag PCP.
    static func recommendedPCP(_ row: ProfileRow) -> PCP? {
        guard let v = row["pcp"]?.integer ?? row["pcpGreen"]?.integer, (0...7).contains(v) else { return nil }
        return PCP(truncating: UInt8(v))
    }

    /// ` (application "Voice")` when the row was found by an application.
    static func applicationNote(_ application: String?) -> String {
        application.map { " (application \"\($0)\")" } ?? ""
    }

    /// Prints a PCP-only recommendation and what the domain's 802.1p table makes of it.
    func printPCPLookup(
        _ p: Profile, query q: ProfileQuery, row: ProfileRow, marking: ProfileRow, pcp: PCP,
        application: String?,
        domain d: DSDomain
    ) throws {
        let t = d.classify(pcp: pcp)
        let marks = OutboundMarks(domain: d, treatment: t)
        if output.json {
            var json = ProfileLookupJSON(
                p, query: q, row: row, marking: marking, application: application, domain: d,
                treatment: t, marks: marks)
            json.pcp = Int(pcp.rawValue)
            print(jsonText(json))
            return
        }
        let via = marking.name == row.name ? "" : " (via \(marking.name))"
        print(
            "profile \(p.name): \(row.name)\(via)\(Self.applicationNote(application)) -> recommended 802.1p \(pcp.rawValue) (no DSCP)"
        )
        let details = summary(row)
        if !details.isEmpty { print("  \(details)") }
        for legend in legends(for: details) { print("  \(legend)") }
        print(
            "domain \(d.name): 802.1p \(pcp.rawValue) -> service class \(t.serviceClass.name), color \(t.color.name)"
        )
        print("outbound \(t) in domain \(d.name):")
        print(marks.text)
    }

    /// The row's short columns as `key value` pairs.
    func summary(_ row: ProfileRow) -> String {
        let skip: Set<String> = ["trafficCharacteristics", "description", "note", "source", "dscp", "via"]
        return row.columns.filter { !skip.contains($0.key) }
            .map { "\($0.key) \(cellText($0.key, $0.value))\(cellMark(row, $0.key))" }
            .joined(separator: ", ")
    }
}

/// A profile lookup as JSON; `field` and `value` echo the query as inbound
/// lookups do (`qci` and 1, `app` and "voip").
struct ProfileLookupJSON: Encodable {
    var profile: String
    var field: String
    var value: ProfileValueJSON
    var row: String
    var recommendation: ProfileRowJSON
    var domain: String
    var dscp: Int?
    /// The 802.1p a PCP-only profile recommends (mapped through the domain's 802.1p table).
    var pcp: Int?
    /// The application the query matched, when it named no row.
    var application: String?
    var via: String?
    var alternatives: [Int]?
    var serviceClass: String?
    var color: String?
    var outbound: [String: Int]?
}

extension ProfileLookupJSON {
    /// A lookup that found a marking and mapped it through domain `d`: every
    /// field but the recommended value itself (`dscp` or `pcp`).
    init(
        _ p: Profile, query q: ProfileQuery, row: ProfileRow, marking: ProfileRow, application: String?,
        domain d: DSDomain, treatment t: Treatment, marks: OutboundMarks
    ) {
        self.init(
            profile: p.name, field: q.kind, value: q.value, row: row.name,
            recommendation: ProfileRowJSON(row, in: p), domain: d.name)
        self.application = application
        via = marking.name == row.name ? nil : marking.name
        serviceClass = t.serviceClass.name
        color = t.color.name
        outbound = marks.dictionary
    }
}

extension Profile {
    /// The columns that hold a list in at least one row (MEF's `pcpGreen`),
    /// so that JSON gives them one type in every row.
    var listColumns: Set<String> {
        var keys: Set<String> = []
        for row in rows {
            for column in row.columns {
                if case .list = column.value { keys.insert(column.key) }
            }
        }
        return keys
    }
}
