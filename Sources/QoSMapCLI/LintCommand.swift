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

        @Argument(help: "The domain: a name or a table file (or --config).")
        var domain: String?

        @Option(
            name: .long,
            help: ArgumentHelp(
                "A qosmapd config: lint its flow rules (classify:) instead of a domain.", valueName: "FILE"))
        var config: String?

        @OptionGroup var tableOptions: TableOptions
        @OptionGroup var output: OutputOptions

        func validate() throws {
            if (domain == nil) == (config == nil) {
                throw ValidationError("give a domain (a name or a table file) or --config FILE, one of them")
            }
        }

        func result() throws -> (text: String, status: Int32) {
            if let config { return try Self.lintRules(config, tableOptions, json: output.json) }
            let set = try tableOptions.load()
            let (d, dset) = try resolveDomainArgument(domain ?? "", in: set)
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

        /// The flow rules of a qosmapd config: rules an earlier one shadows,
        /// and rules whose `set` equals what trust gives every packet they match.
        static func lintRules(_ path: String, _ options: TableOptions, json: Bool) throws -> (
            text: String, status: Int32
        ) {
            let policies = try Explain.snapshot(path, options)
            let set = policies.config.classify
            var findings: [RuleLintJSON.Finding] = []
            for (j, i) in set.shadowed() {
                let r = set.rules[j]
                let by = set.rules[i]
                findings.append(
                    .init(
                        rule: r.name, check: "shadowed", source: "\(r.position)",
                        message:
                            "rule '\(r.name)' can never match: rule '\(by.name)' (\(by.position)) matches every packet it does, first"
                    ))
            }
            for (j, i) in set.repliesOf() {
                let r = set.rules[j]
                let of = set.rules[i]
                findings.append(
                    .init(
                        rule: r.name, check: "replies-of", source: "\(r.position)",
                        message:
                            "rule '\(r.name)' only matches what looks like replies of rule '\(of.name)' (\(of.position)), whose connections keep rule '\(of.name)' in both directions (connection first); it classifies only connections that '\(of.name)' did not match"
                    ))
            }
            let shadowed = Set(findings.filter { $0.check == "shadowed" }.map(\.rule))
            for r in set.rules where !shadowed.contains(r.name) {
                guard let trustGives = redundancy(r, policies) else { continue }
                let replies =
                    r.connection
                    ? "; with connection: true its replies still take \(trustGives) instead of their own trust"
                    : ""
                findings.append(
                    .init(
                        rule: r.name, check: "same-as-trust", source: "\(r.position)",
                        message:
                            "rule '\(r.name)' sets what trust gives anyway (\(trustGives)) for every packet it matches\(replies)"
                    ))
            }
            let status: Int32 = findings.isEmpty ? 0 : 1
            if json {
                return (
                    jsonText(RuleLintJSON(config: path, rules: set.rules.count, findings: findings)) + "\n",
                    status
                )
            }
            var lines = findings.map { "\($0.source): warning: \($0.message) [\($0.check)]" }
            lines.append("\(path): \(set.rules.count) rule(s), \(findings.count) finding(s)")
            return (lines.joined(separator: "\n") + "\n", status)
        }

        /// The treatment trust gives every packet `rule` can match when that is
        /// also the rule's, else nil. The packets are those of every
        /// receiving interface the rule allows (the config's named ones and
        /// any other) and every DSCP it allows; trust 8021p reads a tag, so a
        /// rule on such an interface is never redundant.
        static func redundancy(_ rule: FlowRule, _ policies: ExportPolicies) -> Treatment? {
            let named = policies.config.interfaces.keys.sorted()
            let inputs: [String?] =
                rule.match.ingress.map { $0.sorted().map { Optional($0) } } ?? (named + [nil])
            let dscps = rule.match.dscp.map { $0.sorted() } ?? Array(0..<64)
            var seen: Treatment?
            for input in inputs {
                let p = policies.policy(input: input, output: nil)
                let mine = rule.action.treatment(ingress: p.ingress)
                for d in dscps {
                    let trust: Treatment
                    switch p.trust {
                    case .none: trust = .bestEffort
                    case .field(.dscp): trust = p.ingress.classify(dscp: DSCP(truncating: d))
                    case .field(.ipPrecedence):
                        trust = p.ingress.classify(precedence: DSCP(truncating: d).precedence)
                    default: return nil
                    }
                    guard trust == mine, seen == nil || seen == mine else { return nil }
                    seen = mine
                }
            }
            return seen
        }
    }
}

/// `qosmap lint --config F --json`.
struct RuleLintJSON: Encodable {
    struct Finding: Encodable {
        var rule: String
        var check: String
        var source: String
        var message: String
    }
    var config: String
    var rules: Int
    var findings: [Finding]
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
