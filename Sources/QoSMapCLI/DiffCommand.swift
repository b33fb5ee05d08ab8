import ArgumentParser
import QoSMapCore
import QoSMapDevices
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
                Either may be a device file, FORMAT:FILE (sonic:leaf1.json,
                junos:pe1.conf; --map picks a map), or --sonic FILE / --junos FILE
                in place of B: it is imported as `qosmap import` does, with the
                cells the device cannot hold (SONiC's colors, absent fields)
                taken from the other side, so only what the device holds
                compares; 'note:' lines say what was taken.
                Each line is one cell: 'inbound FIELD VALUE: A -> B' or
                'outbound FIELD CLASS/COLOR: A -> B', then the file:line of B's
                cell. Exit status: 0 equal, 1 different, 64 usage, 65 bad data.

                Examples:
                  qosmap diff default 5p3d
                  qosmap diff old/core.yaml new/core.yaml --field exp
                  qosmap diff default edge --tables /etc/qosmap/site --json
                  qosmap diff intent.yaml --sonic leaf1.json --map AZURE
                  qosmap diff intent.yaml junos:pe1.conf
                """)

        @Argument(help: "The first domain: a name or a table file.", completion: Completions.domainOrFile)
        var a: String

        @Argument(
            help: "The second domain: a name, a table file, or FORMAT:FILE (sonic, junos).",
            completion: Completions.domainOrFile)
        var b: String?

        @Option(
            name: .long,
            help: ArgumentHelp(
                "A SONiC config_db JSON to compare with A (in place of B).", valueName: "FILE"),
            completion: .file()
        )
        var sonic: String?

        @Option(
            name: .long,
            help: ArgumentHelp(
                "A Junos class-of-service config to compare with A (in place of B).", valueName: "FILE"),
            completion: .file())
        var junos: String?

        @Option(
            name: .long, help: "The map (SONiC) or classifier/rewrite-rule name (Junos) in a device file.")
        var map: String?

        @Option(name: .long, help: "Only this field.")
        var field: Field?

        @OptionGroup var tableOptions: TableOptions
        @OptionGroup var output: OutputOptions

        /// B as given: the argument, or `--sonic`/`--junos` as FORMAT:FILE.
        var second: String? {
            if let sonic { return "sonic:\(sonic)" }
            if let junos { return "junos:\(junos)" }
            return b
        }

        func validate() throws {
            let given = [b, sonic, junos].compactMap { $0 }.count
            guard given == 1 else {
                throw ValidationError(
                    given == 0
                        ? "missing B; allowed: a domain name, a table file, FORMAT:FILE, --sonic FILE or --junos FILE"
                        : "B given \(given) times; allowed: one of B, --sonic FILE, --junos FILE")
            }
            if map != nil, [a, second ?? ""].allSatisfy({ DeviceFile.reference($0) == nil }) {
                throw ValidationError(
                    "--map applies to a device file; allowed with sonic:FILE, junos:FILE, --sonic, --junos")
            }
        }

        func result() throws -> (text: String, status: Int32) {
            let set = try tableOptions.load()
            let bArgument = second ?? ""
            var notes: [String] = []
            /// Resolves one side; a device file is completed from `other` (or `default`).
            func side(_ argument: String, other: DSDomain?) throws -> (DSDomain, TableSet) {
                guard let (format, path) = DeviceFile.reference(argument) else {
                    return try resolveDomainArgument(argument, in: set)
                }
                let base = try other ?? resolveDomain("default", in: set)
                let imported = try DeviceFile.read(format, path: path, map: map)
                var (domain, lines) = imported.completed(base: base, name: "\(format):\(imported.name)")
                domain.origin = .file(path)
                notes += (imported.unmapped + lines).map { "\(format) \(path): \($0)" }
                return (domain, set)
            }
            let aIsDevice = DeviceFile.reference(a) != nil
            let (da, setA): (DSDomain, TableSet)
            let (db, setB): (DSDomain, TableSet)
            if aIsDevice && DeviceFile.reference(bArgument) == nil {
                (db, setB) = try side(bArgument, other: nil)
                (da, setA) = try side(a, other: db)
            } else {
                (da, setA) = try side(a, other: nil)
                (db, setB) = try side(bArgument, other: aIsDevice ? nil : da)
            }
            var diff = DomainDiff(da, db)
            if let field { diff.changes.removeAll { $0.cell.field != field } }
            let status: Int32 = diff.isEmpty ? 0 : 1
            if output.json {
                var json = DiffJSON(da, setA, db, setB, diff)
                json.notes = notes.isEmpty ? nil : notes
                return (jsonText(json) + "\n", status)
            }
            var lines = [
                "--- \(da.name) (\(da.origin))",
                "+++ \(db.name) (\(db.origin))",
            ]
            lines += notes.map { "note: \($0)" }
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
    /// What a device side could not hold and took from the other side (absent without a device file).
    var notes: [String]?

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
