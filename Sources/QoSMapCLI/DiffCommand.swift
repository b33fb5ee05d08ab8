import ArgumentParser
import QoSMapCore
import QoSMapTables

extension QoSMapCommand {
    /// `qosmap diff A B`: the cells where two domains differ.
    struct Diff: StatusTextCommand {
        static let configuration = CommandConfiguration(
            commandName: "diff",
            abstract: "Show the cells where two domains differ (exit 0 equal, 1 different).",
            discussion: """
                A and B are domain names (built in, /etc/qosmap/domains.d/ or
                --tables DIR) or table files (*.yaml, or any path with a '/'),
                each loaded on its own, so two versions of one domain compare.
                Each line is one cell: 'inbound FIELD VALUE: A -> B' or
                'outbound FIELD CLASS/COLOR: A -> B', then the file:line of B's
                cell. Exit status: 0 equal, 1 different, 64 usage, 65 bad data.

                Examples:
                  qosmap diff default 5p3d
                  qosmap diff old/core.yaml new/core.yaml --field exp
                  qosmap diff default edge --tables /etc/qosmap/site --json
                """)

        @Argument(help: "The first domain: a name or a table file.")
        var a: String

        @Argument(help: "The second domain: a name or a table file.")
        var b: String

        @Option(name: .long, help: "Only this field.")
        var field: Field?

        @OptionGroup var tableOptions: TableOptions
        @OptionGroup var output: OutputOptions

        func result() throws -> (text: String, status: Int32) {
            let set = try tableOptions.load()
            let (da, setA) = try resolveDomainArgument(a, in: set)
            let (db, setB) = try resolveDomainArgument(b, in: set)
            var diff = DomainDiff(da, db)
            if let field { diff.changes.removeAll { $0.cell.field != field } }
            let status: Int32 = diff.isEmpty ? 0 : 1
            if output.json {
                return (jsonText(DiffJSON(da, setA, db, setB, diff)) + "\n", status)
            }
            var lines = [
                "--- \(da.name) (\(da.origin))",
                "+++ \(db.name) (\(db.origin))",
            ]
            if let dei = diff.dropEligibility { lines.append("dei: \(dei.old) -> \(dei.new)") }
            for change in diff.changes {
                lines.append(
                    "\(change.cell): \(change.old) -> \(change.new)  [\(setB.source(db, change.cell))]")
            }
            lines.append(
                diff.isEmpty
                    ? "domains are equal"
                    : "\(diff.changes.count) cell(s) differ"
                        + (diff.dropEligibility == nil ? "" : ", and the DEI policy"))
            return (lines.joined(separator: "\n") + "\n", status)
        }
    }
}

/// `qosmap diff --json`; the schema is in docs/POLICY-TOOLS.md.
struct DiffJSON: Encodable {
    struct Side: Encodable {
        var domain: String
        var origin: String
        var dei: String
    }
    struct Value: Encodable {
        var serviceClass: String?
        var color: String?
        var value: Int?

        init(_ v: DomainCellValue) {
            switch v {
            case .treatment(let t):
                serviceClass = t.serviceClass.name
                color = t.color.name
            case .value(let f): value = Int(f.rawValue)
            }
        }
    }
    struct Change: Encodable {
        var direction: String
        var field: String
        var value: Int?
        var serviceClass: String?
        var color: String?
        var a: Value
        var b: Value
        var sourceA: String
        var sourceB: String
    }
    var a: Side
    var b: Side
    var equal: Bool
    var deiDiffers: Bool
    var changes: [Change]

    init(_ da: DSDomain, _ setA: TableSet, _ db: DSDomain, _ setB: TableSet, _ diff: DomainDiff) {
        a = Side(domain: da.name, origin: da.origin.description, dei: da.dropEligibility.name)
        b = Side(domain: db.name, origin: db.origin.description, dei: db.dropEligibility.name)
        equal = diff.isEmpty
        deiDiffers = diff.dropEligibility != nil
        changes = diff.changes.map { c in
            var change = Change(
                direction: "inbound", field: c.cell.field.name, a: Value(c.old), b: Value(c.new),
                sourceA: setA.source(da, c.cell), sourceB: setB.source(db, c.cell))
            switch c.cell {
            case .inbound(_, let v): change.value = Int(v)
            case .outbound(_, let t):
                change.direction = "outbound"
                change.serviceClass = t.serviceClass.name
                change.color = t.color.name
            }
            return change
        }
    }
}
