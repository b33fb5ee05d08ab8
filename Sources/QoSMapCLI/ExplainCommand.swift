import ArgumentParser
import QoSMapCore
import QoSMapTables

/// One `--hop` as written: `[LABEL=]TRUST[@IN][:WRITES[@OUT]]`.
struct HopSpec: Equatable {
    var label: String?
    var trust: Field
    var inbound: String
    var writes: [Field]
    var outbound: String

    /// The grammar, for help and errors.
    static let grammar = "[LABEL=]TRUST[@IN-DOMAIN][:WRITE,...[@OUT-DOMAIN]]"

    /// Parses one hop; the inbound domain defaults to `default` and the
    /// outbound one to the inbound one.
    init(parsing text: String) throws(UsageError) {
        var rest = Substring(text)
        if let eq = rest.firstIndex(of: "=") {
            label = String(rest[..<eq])
            rest = rest[rest.index(after: eq)...]
            if label!.isEmpty {
                throw UsageError("invalid hop '\(text)': empty label; allowed: \(Self.grammar)")
            }
        }
        let parts = rest.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let (trustText, inText) = Self.split(parts[0])
        guard let trust = Field(name: trustText) else {
            throw UsageError(
                "invalid hop '\(text)': unknown trusted field '\(trustText)'; allowed: \(Field.allowedNames)")
        }
        self.trust = trust
        inbound = inText ?? "default"
        outbound = inbound
        writes = []
        if parts.count == 2 {
            let (writeText, outText) = Self.split(parts[1])
            if let outText { outbound = outText }
            if writeText != "none" && !writeText.isEmpty {
                for token in writeText.split(separator: ",") {
                    guard let f = Field(name: token) else {
                        throw UsageError(
                            "invalid hop '\(text)': unknown written field '\(token)'; allowed: "
                                + "\(Field.allowedNames), none")
                    }
                    if !writes.contains(f) { writes.append(f) }
                }
            }
        }
        for name in [inbound, outbound] where name.isEmpty {
            throw UsageError("invalid hop '\(text)': empty domain name; allowed: \(Self.grammar)")
        }
    }

    /// `dscp@edge` → (`dscp`, `edge`).
    static func split(_ s: Substring) -> (String, String?) {
        guard let at = s.firstIndex(of: "@") else { return (String(s), nil) }
        return (String(s[..<at]), String(s[s.index(after: at)...]))
    }
}

extension QoSMapCommand {
    /// `qosmap explain`: a marking's path through one or more hops.
    struct Explain: TextCommand {
        static let configuration = CommandConfiguration(
            commandName: "explain",
            abstract: "Trace a marking through a path of hops, citing the file:line of every cell used.",
            discussion: """
                A hop is --hop \(HopSpec.grammar): the field it trusts and the domain that classifies \
                it, then the fields it writes and the domain that writes them (IN-DOMAIN defaults to \
                default, OUT-DOMAIN to IN-DOMAIN, no ':' writes nothing). A PE that trusts DSCP in edge \
                and writes EXP and 802.1p in core, then a P router that trusts EXP in core and writes DSCP \
                in default, is the first example below. VALUE is a value of the first hop's trusted \
                field (DSCP takes PHB names). With no --hop and no --config, the path is one hop that \
                trusts DSCP in --domain (default: default) and writes it back, as lookup does. --all \
                traces every value and reports merges, lost colors, bleaching and class changes. Exit 0.

                Examples:
                  qosmap explain 46
                  qosmap explain EF --hop PE=dscp@edge:exp,8021p@core \\
                      --hop P=exp@core:dscp@default --tables t
                  qosmap explain --all --hop dscp:8021p@5p3d
                  qosmap explain 46 --config qosmapd.yaml --ingress eth0 --egress eth1
                """)

        @Argument(help: "A value of the first hop's trusted field (omit with --all).")
        var value: String?

        @Option(name: .long, help: ArgumentHelp("A hop: \(HopSpec.grammar).", valueName: "HOP"))
        var hop: [String] = []

        @Option(
            name: .long,
            help: "Without --hop and --config: the domain of the one DSCP hop. (default: default)",
            completion: Completions.domain)
        var domain: String?

        @Flag(name: .long, help: "With an 8021p input: the frame's DEI bit is set.")
        var dei = false

        @Option(
            name: .long,
            help: ArgumentHelp(
                "A qosmapd config: hop 1 is what qosmapd does from --ingress to --egress (then any --hop).",
                valueName: "FILE"), completion: .file())
        var config: String?

        @Option(name: .long, help: "With --config: the interface the packet arrives on.")
        var ingress: String?

        @Option(name: .long, help: "With --config: the interface the packet leaves by.")
        var egress: String?

        @Flag(name: .long, help: "Trace every value of the trusted field and report what the path does.")
        var all = false

        @OptionGroup(title: "With --config, the packet its flow rules (classify:) read")
        var packet: PacketOptions

        @OptionGroup var tableOptions: TableOptions
        @OptionGroup var output: OutputOptions

        func validate() throws {
            if domain != nil && (!hop.isEmpty || config != nil) {
                throw ValidationError(
                    "--domain applies only without --hop and --config (a hop names its domains: dscp@DOMAIN)")
            }
            if config == nil && (ingress != nil || egress != nil) {
                throw ValidationError("--ingress and --egress apply only with --config")
            }
            if config != nil && (ingress == nil || egress == nil) {
                throw ValidationError("--config needs --ingress IF and --egress IF (interface names)")
            }
            if !packet.isEmpty && config == nil {
                throw ValidationError(
                    "--protocol, --source, --destination and ports apply only with --config")
            }
            if packet.dscp != nil { throw ValidationError("--dscp: give the arriving DSCP as VALUE") }
            if !packet.isEmpty && all {
                throw ValidationError("a described packet traces one VALUE, not --all")
            }
            if all && value != nil { throw ValidationError("give VALUE or --all, not both") }
            if !all && value == nil { throw ValidationError("missing VALUE; give a value or --all") }
            for h in hop {
                do { _ = try HopSpec(parsing: h) } catch { throw ValidationError(error.description) }
            }
        }

        /// What hop 1 is when it is qosmapd's, from --config: said in the
        /// trace (trust none, the queue it leaves by).
        struct ConfigHop {
            /// The ingress trusts none: flow rules classify, else BE/green.
            var trustsNone = false
            /// Why hop 1 classified without a rule under trust none.
            var unruled: String?
            /// The egress interface.
            var egress = ""
            /// The queue of a class on the egress, nil without queues.
            var queue: (ServiceClass) -> String? = { _ in nil }
            /// `classify.flows`: what flow behaviour may do to a class's flows.
            var flows = FlowBehaviour()
        }

        /// Everything the command prints.
        func standardOutput() throws -> String {
            var set: TableSet
            var hops: [PolicyHop] = []
            var rule: FlowDecider.Decision?
            var context: ConfigHop?
            var first: Treatment?
            if let config, let ingress, let egress {
                let snapshot = try Self.snapshot(config, tableOptions)
                set = snapshot.tables
                if !packet.isEmpty {
                    rule = try Self.ruleDecision(
                        snapshot, config, packet, value: value ?? "", ingress, egress)
                }
                let trustsNone = snapshot.policy(input: ingress, output: egress).trust.field == nil
                if trustsNone, all, !snapshot.config.classify.rules.isEmpty {
                    // --all would trace the DSCP as if trusted; under trust none only rules classify.
                    throw UsageError(
                        "interface '\(ingress)' trusts none: --all has no trusted field to trace (flow rules classify, else BE/green); allowed: a VALUE, with --protocol, --source, --destination for the rules"
                    )
                }
                // Under trust none only flow rules classify: with rules there is something to explain.
                let rules = !snapshot.config.classify.rules.isEmpty
                hops.append(
                    try Self.configHop(
                        snapshot, ingress: ingress, egress: egress,
                        ruled: rule != nil || (trustsNone && rules)))
                context = ConfigHop(
                    trustsNone: trustsNone, egress: egress,
                    queue: { snapshot.config.queueName(output: egress, $0) },
                    flows: snapshot.config.classify.behaviour)
                if trustsNone, rule == nil {
                    first = Treatment(.be, .green)
                    context?.unruled =
                        packet.isEmpty
                        ? "trust none: no packet described (--protocol, --source, --destination) for the \(snapshot.config.classify.rules.count) flow rule(s)"
                        : "trust none: none of the \(snapshot.config.classify.rules.count) flow rule(s) matched"
                }
            } else {
                set = try tableOptions.load()
            }
            let path = try buildPath(set, first: hops)
            return try Self.render(
                path: path, set: set, value: value, dei: dei, all: all, json: output.json, rule: rule,
                context: context, first: first)
        }

        /// Loads a qosmapd config and its tables as the daemon would (the
        /// same reader as `export nft --config`, not QoSMapDaemon, which the
        /// static `qosmap` cannot link); --tables directories are added to the
        /// config's, --no-system-tables skips the system directory.
        static func snapshot(_ path: String, _ options: TableOptions) throws -> ExportPolicies {
            let config = try ExportConfig.load(path: path)
            return try ExportPolicies(
                config: config, extraTables: options.tables,
                systemDirectory: options.noSystemTables ? nil : TableOptions.systemDirectory)
        }

        /// The hop qosmapd makes of a packet from `ingress` to `egress`
        /// (``PolicySnapshot/policy(input:output:)``): the interface's trust and
        /// domains, writing DSCP when `actions.rewrite-dscp` is on. Under
        /// trust none with flow rules (`ruled`) the trace starts from the DSCP.
        static func configHop(
            _ snapshot: ExportPolicies, ingress: String, egress: String, ruled: Bool = false
        )
            throws -> PolicyHop
        {
            let policy = snapshot.policy(input: ingress, output: egress)
            // A packet a flow rule classified is traced from its DSCP.
            guard let trust = ruled ? .dscp : policy.trust.field else {
                throw UsageError(
                    "interface '\(ingress)' trusts none in the config and it has no flow rules: every packet is BE/green; nothing to trace"
                )
            }
            let writes = snapshot.config.rewriteDSCP && !snapshot.config.markOnly ? policy.rewrite.fields : []
            return PolicyHop(
                label: "\(ingress)->\(egress)", trust: trust, inbound: policy.ingress,
                outbound: policy.egress,
                writes: writes)
        }

        func buildPath(_ set: TableSet, first: [PolicyHop] = []) throws -> PolicyPath {
            var hops = first
            // No hop and no config: one hop that trusts DSCP and writes it back, as lookup does.
            let texts = hop.isEmpty && first.isEmpty ? ["dscp@\(domain ?? "default"):dscp"] : hop
            for text in texts {
                let spec = try HopSpec(parsing: text)
                hops.append(
                    PolicyHop(
                        label: spec.label ?? "", trust: spec.trust,
                        inbound: try resolveDomain(spec.inbound, in: set),
                        outbound: try resolveDomain(spec.outbound, in: set), writes: spec.writes))
            }
            do {
                return try PolicyPath(hops)
            } catch {
                throw UsageError(error.description)
            }
        }

        /// The flow-rule decision for the described packet arriving with DSCP
        /// `value` on `ingress`: nil when no rule (and no connection) classifies it.
        static func ruleDecision(
            _ snapshot: ExportPolicies, _ file: String, _ packet: PacketOptions, value: String,
            _ ingress: String,
            _ egress: String
        ) throws -> FlowDecider.Decision? {
            var p = try packet.packet(ingress: ingress)
            do {
                p.dscp = try DSCP(parsing: value).rawValue
            } catch {
                throw UsageError(error.description)
            }
            let d = try FlowDecider(
                snapshot, file: file, learned: packet.learned, live: try packet.liveLearned()
            ).decide(
                p, ecn: packet.ecn, egress: egress)
            return d?.decision.rule == nil ? nil : d?.decision
        }

        /// Renders one trace or the `--all` analysis, as text or JSON; `rule`
        /// is the flow rule that classified the packet at hop 1.
        static func render(
            path: PolicyPath, set: TableSet, value: String?, dei: Bool, all: Bool, json: Bool,
            rule: FlowDecider.Decision? = nil, context: ConfigHop? = nil, first treatment: Treatment? = nil
        ) throws -> String {
            let first = path.hops[0].trust
            if all {
                let analysis = path.analyze()
                if json { return jsonText(ExplainAllJSON(path: path, analysis: analysis)) + "\n" }
                return allText(path: path, analysis: analysis)
            }
            let raw: UInt8
            do {
                raw = try first.parseValue(value ?? "")
            } catch {
                throw UsageError(error.description)
            }
            if dei && first != .dot1p {
                throw UsageError("--dei applies only when the first hop trusts 8021p, not \(first.name)")
            }
            let trace = path.trace(raw, dei: dei, first: rule?.treatment ?? treatment)
            if json {
                var out = ExplainJSON(path: path, trace: trace, set: set)
                if let context, context.trustsNone {
                    out.hops[0].hop.trust = "none"
                    if let unruled = context.unruled { out.hops[0].classifiedBy = unruled }
                }
                if let rule, let r = rule.rule {
                    out.hops[0].classifiedBy = rule.classifiedBy
                    out.hops[0].rule = ClassifyJSON.Rule(
                        name: r.name, file: r.position.file, line: r.position.line, column: r.position.column,
                        set: r.action.description, viaConnection: rule.viaConnection)
                }
                return jsonText(out) + "\n"
            }
            return traceText(path: path, trace: trace, set: set, rule: rule, context: context)
        }

        /// `hop 2 P`, or `hop 2` for a hop without a label.
        static func name(_ index: Int, _ hop: PolicyHop) -> String {
            "hop \(index + 1)" + (hop.label.isEmpty ? "" : " \(hop.label)")
        }

        static func describe(_ hop: PolicyHop) -> String {
            let writes =
                hop.writes.isEmpty
                ? "writes nothing"
                : "writes \(hop.writes.map(\.name).joined(separator: ", ")) in \(hop.outbound.name)"
            return "trusts \(hop.trust.name) in \(hop.inbound.name), \(writes)"
        }

        static func traceText(
            path: PolicyPath, trace: PathTrace, set: TableSet, rule: FlowDecider.Decision? = nil,
            context: ConfigHop? = nil
        )
            -> String
        {
            var lines = ["\(trace.input.field.name) \(trace.input) through \(path.hops.count) hop(s)"]
            for (i, (hop, h)) in zip(path.hops, trace.hops).enumerated() {
                var text = describe(hop)
                if i == 0, let context, context.trustsNone {
                    // The trace reads the DSCP for the rules; trust itself reads nothing.
                    text = "trusts none (flow rules classify, else BE/green)" + text.drop { $0 != "," }
                }
                lines.append("\(name(i, hop)): \(text)")
                let deiText = h.arrivingDEI.map { " dei \($0 ? 1 : 0)" } ?? ""
                var rows = [
                    ["arrives", "\(hop.trust.name) \(h.arriving)\(deiText)", ""],
                    [
                        "classified", "\(h.treatment)",
                        i == 0 && rule != nil
                            ? "by \(rule!.classifiedBy)"
                            : i == 0 && context?.unruled != nil
                                ? "by \(context!.unruled!)"
                                : "by \(set.source(hop.inbound, .inbound(hop.trust, h.arriving.rawValue)))",
                    ],
                ]
                for (j, v) in h.written.enumerated() {
                    let d = v.field == .dot1p ? h.writtenDEI.map { " dei \($0 ? 1 : 0)" } ?? "" : ""
                    rows.append([
                        j == 0 ? "writes" : "", "\(v.field.name) \(v)\(d)",
                        "by \(set.source(hop.outbound, .outbound(v.field, h.treatment)))",
                    ])
                }
                if h.written.isEmpty { rows.append(["writes", "nothing", ""]) }
                // Flow behaviour may replace hop 1's class: what it would do
                // to this class's flows (a described packet has no history;
                // classify --in runs it over a capture).
                if i == 0, let context, let tests = context.flows.tests(for: h.treatment.serviceClass) {
                    rows.append([
                        "flows", Self.flowsText(tests), "classify.flows for \(h.treatment.serviceClass)",
                    ])
                }
                // qosmapd queues by hop 1's class, on the config's egress.
                if i == 0, let context, let queue = context.queue(h.treatment.serviceClass) {
                    rows.append(["queue", queue, "on \(context.egress)"])
                }
                lines.append(trimmed(table(rows, indent: "  ")))
            }
            lines.append("leaves: \(trace.hops.last!.leaving)")
            return lines.joined(separator: "\n") + "\n"
        }

        /// `bulk above 100 packets/s -> BE/green; interactive at most 500 B average -> AF4/green`.
        static func flowsText(_ b: FlowBehaviour) -> String {
            var parts: [String] = []
            if let bulk = b.bulk {
                var when: [String] = []
                if let pps = bulk.packetsPerSecond { when.append("\(pps) packets/s") }
                if let bytes = bulk.bytes { when.append("\(bytes) bytes") }
                parts.append("bulk above \(when.joined(separator: " or ")) -> \(bulk.treatment)")
            }
            if let i = b.interactive {
                parts.append("interactive at most \(i.maxAverageSize) B average -> \(i.treatment)")
            }
            return parts.joined(separator: "; ")
        }

        static func inputName(_ field: Field, _ v: UInt8) -> String {
            field == .dscp ? DSCP(truncating: v).description : "\(v)"
        }

        static func allText(path: PolicyPath, analysis a: PathAnalysis) -> String {
            let field = path.hops[0].trust
            var out: [String] = []
            let names = path.hops.enumerated().map { i, hop in hop.label.isEmpty ? "hop \(i + 1)" : hop.label
            }
            out.append("path: " + names.joined(separator: " -> "))
            for (i, hop) in path.hops.enumerated() {
                out.append("  \(name(i, hop)): \(describe(hop))")
            }
            out.append("")
            out.append("end-to-end map (\(field.name))")
            var rows = [[field.name.uppercased()] + names + ["LEAVES"]]
            for t in a.traces {
                rows.append(
                    [inputName(field, t.input.rawValue)] + t.hops.map { "\($0.treatment)" }
                        + [t.hops.last!.leaving.description])
            }
            out.append(trimmed(table(rows, indent: "  ")))
            out.append("")
            out.append("merges (\(a.merges.count))")
            for m in a.merges {
                out.append(
                    "  \(name(m.hop - 1, path.hops[m.hop - 1])): \(field.name) \(rangeText(m.inputs.map(Int.init))) "
                        + "-> \(m.to) (from \(m.from) markings)")
            }
            func grouped(_ changes: [PathAnalysis.Change]) -> [String] {
                var keys: [String] = []
                var groups: [String: [Int]] = [:]
                for c in changes {
                    let key = "\(name(c.hop - 1, path.hops[c.hop - 1])): \(c.from) -> \(c.to)"
                    if groups[key] == nil { keys.append(key) }
                    groups[key, default: []].append(Int(c.input))
                }
                return keys.map { "  \($0): \(field.name) \(rangeText(groups[$0]!))" }
            }
            out.append("")
            out.append("colors lost (\(a.colorsLost.count))")
            out += grouped(a.colorsLost)
            out.append("")
            out.append("bleached to BE (\(a.bleached.count))")
            for b in a.bleached {
                out.append(
                    "  \(name(b.hop - 1, path.hops[b.hop - 1])): \(field.name) \(inputName(field, b.input)): \(b.from) -> \(b.to)"
                )
            }
            out.append("")
            let falls = a.classChanges.filter { !$0.rises }
            let rises = a.classChanges.filter(\.rises)
            out.append("class falls (\(falls.count))")
            out += grouped(falls)
            out.append("")
            out.append("class rises (\(rises.count))")
            out += grouped(rises)
            return out.joined(separator: "\n") + "\n"
        }
    }
}

/// One hop of a path in JSON.
struct HopJSON: Encodable {
    var label: String
    var trust: String
    var inboundDomain: String
    var writes: [String]
    var outboundDomain: String

    init(_ hop: PolicyHop) {
        label = hop.label
        trust = hop.trust.name
        inboundDomain = hop.inbound.name
        writes = hop.writes.map(\.name)
        outboundDomain = hop.outbound.name
    }
}

/// A field value in JSON, with the DEI bit when it matters.
struct FieldValueJSON: Encodable {
    var field: String
    var value: Int
    var dei: Bool?
    var source: String?
}

/// `qosmap explain VALUE --json`; the schema is in docs/POLICY-TOOLS.md.
struct ExplainJSON: Encodable {
    struct Step: Encodable {
        var hop: HopJSON
        var arriving: FieldValueJSON
        var treatment: TreatmentJSON
        var classifiedBy: String
        /// The flow rule that classified the packet (hop 1 with --config).
        var rule: ClassifyJSON.Rule?
        var written: [FieldValueJSON]
    }
    var input: FieldValueJSON
    var hops: [Step]
    var leaving: [FieldValueJSON]

    init(path: PolicyPath, trace: PathTrace, set: TableSet) {
        input = FieldValueJSON(
            field: trace.input.field.name, value: Int(trace.input.rawValue),
            dei: trace.input.field == .dot1p ? trace.hops.first?.arrivingDEI ?? false : nil)
        hops = zip(path.hops, trace.hops).map { hop, h in
            Step(
                hop: HopJSON(hop),
                arriving: FieldValueJSON(
                    field: hop.trust.name, value: Int(h.arriving.rawValue), dei: h.arrivingDEI),
                treatment: TreatmentJSON(h.treatment),
                classifiedBy: set.source(hop.inbound, .inbound(hop.trust, h.arriving.rawValue)),
                written: h.written.map { v in
                    FieldValueJSON(
                        field: v.field.name, value: Int(v.rawValue),
                        dei: v.field == .dot1p ? h.writtenDEI : nil,
                        source: set.source(hop.outbound, .outbound(v.field, h.treatment)))
                })
        }
        let last = trace.hops.last!.leaving
        leaving = last.values.map {
            FieldValueJSON(
                field: $0.field.name, value: Int($0.rawValue), dei: $0.field == .dot1p ? last.dei : nil)
        }
    }
}

/// `qosmap explain --all --json`; the schema is in docs/POLICY-TOOLS.md.
struct ExplainAllJSON: Encodable {
    struct Row: Encodable {
        var input: Int
        var treatments: [TreatmentJSON]
        var leaving: [FieldValueJSON]
    }
    struct Merge: Encodable {
        var hop: Int
        var inputs: [Int]
        var from: Int
        var to: String
    }
    struct Change: Encodable {
        var input: Int
        var hop: Int
        var from: TreatmentJSON
        var to: TreatmentJSON
    }
    struct Bleach: Encodable {
        var input: Int
        var hop: Int
        var from: String
        var to: TreatmentJSON
    }
    var field: String
    var path: [HopJSON]
    var map: [Row]
    var merges: [Merge]
    var colorsLost: [Change]
    var bleached: [Bleach]
    var classFalls: [Change]
    var classRises: [Change]

    init(path p: PolicyPath, analysis a: PathAnalysis) {
        field = p.hops[0].trust.name
        path = p.hops.map(HopJSON.init)
        map = a.traces.map { t in
            let last = t.hops.last!.leaving
            return Row(
                input: Int(t.input.rawValue), treatments: t.hops.map { TreatmentJSON($0.treatment) },
                leaving: last.values.map {
                    FieldValueJSON(
                        field: $0.field.name, value: Int($0.rawValue),
                        dei: $0.field == .dot1p ? last.dei : nil)
                })
        }
        merges = a.merges.map {
            Merge(hop: $0.hop, inputs: $0.inputs.map(Int.init), from: $0.from, to: $0.to)
        }
        let change = { (c: PathAnalysis.Change) in
            Change(input: Int(c.input), hop: c.hop, from: TreatmentJSON(c.from), to: TreatmentJSON(c.to))
        }
        colorsLost = a.colorsLost.map(change)
        bleached = a.bleached.map {
            Bleach(input: Int($0.input), hop: $0.hop, from: $0.from, to: TreatmentJSON($0.to))
        }
        classFalls = a.classChanges.filter { !$0.rises }.map(change)
        classRises = a.classChanges.filter(\.rises).map(change)
    }
}
