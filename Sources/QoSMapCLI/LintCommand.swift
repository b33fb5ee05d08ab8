import ArgumentParser
import QoSMapCore
import QoSMapTables

extension QoSMapCommand {
    /// `qosmap lint D`: a domain checked against the DiffServ standards.
    struct Lint: StatusTextCommand {
        static let configuration = CommandConfiguration(
            commandName: "lint",
            abstract: "Check a domain against the DiffServ standards (exit 0 clean, 1 with findings).",
            discussion: """
                Each finding is 'file:line: severity: message [rule, standard §section]'. Rules: \
                \(DomainLint.rules.map { "\($0.id) (\($0.reference)): \($0.summary)" }.joined(separator: "; ")). \
                A finding that the reference's default domain shares is marked '(reference choice)' and \
                does not fail the lint. D is a domain name or a table file.

                Examples:
                  qosmap lint default
                  qosmap lint /etc/qosmap/domains.d/edge.yaml --json
                """)

        @Argument(help: "The domain: a name or a table file.")
        var domain: String

        @OptionGroup var tableOptions: TableOptions
        @OptionGroup var output: OutputOptions

        func result() throws -> (text: String, status: Int32) {
            let set = try tableOptions.load()
            let (d, dset) = try resolveDomainArgument(domain, in: set)
            let reference = TableLoader.builtInDomains.domains["default"]
            let findings = DomainLint.lint(d, reference: reference)
            let failing = findings.filter { !$0.isReferenceChoice }
            let status: Int32 = failing.isEmpty ? 0 : 1
            if output.json {
                return (jsonText(LintJSON(domain: d, set: dset, findings: findings)) + "\n", status)
            }
            var lines = findings.map { f in
                "\(dset.source(d, f.cell)): \(f.severity.rawValue): \(f.message) [\(f.rule), \(f.reference)]"
                    + (f.isReferenceChoice ? " (reference choice)" : "")
            }
            lines.append(
                "domain \(d.name): \(findings.count) finding(s), \(failing.count) outside the reference's choices"
            )
            return (lines.joined(separator: "\n") + "\n", status)
        }
    }
}

/// `qosmap lint --json`; the schema is in docs/POLICY-TOOLS.md.
struct LintJSON: Encodable {
    struct Finding: Encodable {
        var rule: String
        var severity: String
        var reference: String
        var source: String
        var cell: String
        var message: String
        var referenceChoice: Bool
    }
    var domain: String
    var origin: String
    var clean: Bool
    var findings: [Finding]

    init(domain d: DSDomain, set: TableSet, findings: [LintFinding]) {
        domain = d.name
        origin = d.origin.description
        clean = findings.allSatisfy(\.isReferenceChoice)
        self.findings = findings.map {
            Finding(
                rule: $0.rule, severity: $0.severity.rawValue, reference: $0.reference,
                source: set.source(d, $0.cell),
                cell: $0.cell.description, message: $0.message, referenceChoice: $0.isReferenceChoice)
        }
    }
}

/// `qosmap show D --overrides`: the cells a derived domain sets differently
/// from what it imports, each with its `file:line`.
enum OverridesView {
    static func render(_ d: DSDomain, set: TableSet, json: Bool) throws -> String {
        guard let provenance = set.provenance[d.name], let base = provenance.base,
            let imports = provenance.imports
        else {
            throw UsageError(
                "domain '\(d.name)' imports nothing; --overrides applies to a domain with 'import:' or an override of an editable domain"
            )
        }
        let diff = DomainDiff(base, d)
        if json {
            var out = DiffJSON(base, set, d, set, diff)
            out.a.domain = imports
            // The base's cells cite where the base had them, which for an
            // override of the same name is no longer in `set`.
            for (i, c) in diff.changes.enumerated() {
                out.changes[i].sourceA = provenance.baseSource(c.cell)?.description ?? "-"
            }
            return jsonText(
                OverridesJSON(
                    domain: d.name, imports: imports, dei: out.deiDiffers ? d.dropEligibility.name : nil,
                    overrides: out.changes)) + "\n"
        }
        var lines = [
            "domain \(d.name) (\(d.origin)) imports \(imports): \(diff.changes.count) cell(s) overridden"
        ]
        if let dei = diff.dropEligibility { lines.append("  dei: \(dei.new) (was \(dei.old))") }
        for c in diff.changes {
            lines.append("  \(c.cell): \(c.new) (was \(c.old))  [\(set.source(d, c.cell))]")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// `qosmap show D --overrides --json`.
struct OverridesJSON: Encodable {
    var domain: String
    var imports: String
    var dei: String?
    var overrides: [DiffJSON.Change]
}
