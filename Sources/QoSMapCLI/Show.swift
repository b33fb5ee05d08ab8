import ArgumentParser
import QoSMapCore
import QoSMapTables

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

extension QoSMapCommand {
    /// `qosmap show <domain>`: a domain's tables laid out like the reference's.
    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract: "Show a domain's inbound and outbound tables.",
            discussion: """
                Examples:
                  qosmap show default
                  qosmap show 5p3d --field 8021p
                  qosmap show default --field dscp --direction outbound --json
                """)

        enum Direction: String, ExpressibleByArgument, CaseIterable {
            case inbound, outbound
        }

        @Argument(help: "The domain's name (see 'qosmap domains').", completion: Completions.domain)
        var domain: String

        @Option(name: .long, help: "Only this field.")
        var field: Field?

        @Option(name: .long, help: "Only this direction (inbound, outbound).")
        var direction: Direction?

        @Flag(name: .long, help: "Only the cells that differ from the imported domain, with file:line.")
        var overrides = false

        @OptionGroup var tableOptions: TableOptions
        @OptionGroup var output: OutputOptions

        func run() throws {
            let set = try tableOptions.load()
            let d = try resolveDomain(domain, in: set)
            if overrides {
                print(try OverridesView.render(d, set: set, json: output.json), terminator: "")
                return
            }
            let fields = field.map { [$0] } ?? Field.allCases
            let showIn = direction != .outbound
            let showOut = direction != .inbound
            if output.json {
                print(jsonText(ShowJSON(domain: d, fields: fields, inbound: showIn, outbound: showOut)))
                return
            }
            var sections: [String] = []
            sections.append(
                "domain \(d.name) (\(d.origin), \(d.isEditable ? "editable" : "not editable"), dei \(d.dropEligibility))"
                    + (d.summary.isEmpty ? "" : "\n\(d.summary)"))
            for f in fields {
                if showIn { sections.append(inboundText(d, f)) }
                if showOut { sections.append(outboundText(d, f)) }
                if showOut, f == .dot1p, d.dropEligibility == .color { sections.append(deiText(d)) }
            }
            print(sections.joined(separator: "\n\n"))
        }

        func inboundText(_ d: DSDomain, _ f: Field) -> String {
            // With color in DEI, an S-tag's DEI=1 changes the color: one more column.
            let withDEI = f == .dot1p && d.dropEligibility == .color
            var rows = [[f == .dscp ? "DSCP" : f.name.uppercased(), "Service", "Color"]]
            if f == .dscp { rows[0].insert("PHB", at: 1) }
            if withDEI { rows[0].append("Color (DEI 1)") }
            for v in 0..<f.valueCount {
                let t = d.classify(f, UInt8(v))
                var row = ["\(v)", t.serviceClass.name, t.color.name]
                if f == .dscp { row.insert(DSCP(truncating: UInt8(v)).name ?? "-", at: 1) }
                if withDEI { row.append(d.classify(pcp: PCP(truncating: UInt8(v)), dei: true).color.name) }
                rows.append(row)
            }
            return "inbound \(f.name) -> service class and color\n" + table(rows, indent: "  ")
        }

        func outboundText(_ d: DSDomain, _ f: Field) -> String {
            var rows = [["Service", "Green", "Yellow", "Red"]]
            for sc in ServiceClass.allCases {
                rows.append(
                    [sc.name]
                        + Color.allCases.map { c in
                            d.mark(f, for: Treatment(sc, c)).description
                        })
            }
            return "outbound service class and color -> \(f.name)\n" + table(rows, indent: "  ")
        }

        /// The S-tag DEI written per class and color (a domain with `dei: color`).
        func deiText(_ d: DSDomain) -> String {
            var rows = [["Service", "Green", "Yellow", "Red"]]
            for sc in ServiceClass.allCases {
                rows.append([sc.name] + Color.allCases.map { d.dei(for: Treatment(sc, $0)) ? "1" : "0" })
            }
            return "outbound service class and color -> S-tag DEI\n" + table(rows, indent: "  ")
        }
    }
}

struct ShowJSON: Encodable {
    struct InboundRow: Encodable {
        var value: Int
        var serviceClass: String
        var color: String
        /// For 8021p in a domain with `dei: color`: the color when the S-tag's DEI is 1.
        var colorDEI: String?
    }
    struct OutboundRow: Encodable {
        var serviceClass: String
        var green: Int
        var yellow: Int
        var red: Int
    }
    var domain: String
    var description: String
    var origin: String
    var editable: Bool
    var dei: String
    var inbound: [String: [InboundRow]]?
    var outbound: [String: [OutboundRow]]?

    init(domain d: DSDomain, fields: [Field], inbound: Bool, outbound: Bool) {
        domain = d.name
        description = d.summary
        origin = d.origin.description
        editable = d.isEditable
        dei = d.dropEligibility.name
        if inbound {
            var map: [String: [InboundRow]] = [:]
            for f in fields {
                map[f.name] = (0..<f.valueCount).map { v in
                    let t = d.classify(f, UInt8(v))
                    let withDEI = f == .dot1p && d.dropEligibility == .color
                    return InboundRow(
                        value: v, serviceClass: t.serviceClass.name, color: t.color.name,
                        colorDEI: withDEI
                            ? d.classify(pcp: PCP(truncating: UInt8(v)), dei: true).color.name : nil)
                }
            }
            self.inbound = map
        }
        if outbound {
            var map: [String: [OutboundRow]] = [:]
            for f in fields {
                map[f.name] = ServiceClass.allCases.map { sc in
                    OutboundRow(
                        serviceClass: sc.name, green: Int(d.mark(f, for: Treatment(sc, .green)).rawValue),
                        yellow: Int(d.mark(f, for: Treatment(sc, .yellow)).rawValue),
                        red: Int(d.mark(f, for: Treatment(sc, .red)).rawValue))
                }
                if f == .dot1p, d.dropEligibility == .color {
                    map["dei"] = ServiceClass.allCases.map { sc in
                        func bit(_ c: Color) -> Int { d.dei(for: Treatment(sc, c)) ? 1 : 0 }
                        return OutboundRow(
                            serviceClass: sc.name, green: bit(.green), yellow: bit(.yellow), red: bit(.red))
                    }
                }
            }
            self.outbound = map
        }
    }
}

extension QoSMapCommand {
    /// `qosmap domains`: every domain with its origin and editability.
    struct Domains: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "domains", abstract: "List the DS domains.",
            discussion: """
                Examples:
                  qosmap domains
                  qosmap domains --tables ./my-domains --json
                """)

        @OptionGroup var tableOptions: TableOptions
        @OptionGroup var output: OutputOptions

        struct Row: Encodable {
            /// The domain's name, under the key every other command uses.
            var domain: String
            /// The same, under the key the README first documented.
            var name: String
            var origin: String
            var editable: Bool
            var dei: String
            var imports: String?
            var description: String
        }

        func run() throws {
            let set = try tableOptions.load()
            let rows = set.domains.domains.map {
                Row(
                    domain: $0.name, name: $0.name, origin: $0.origin.description, editable: $0.isEditable,
                    dei: $0.dropEligibility.name, imports: set.provenance[$0.name]?.imports,
                    description: $0.summary)
            }
            if output.json {
                print(jsonText(rows))
                return
            }
            print(
                table(
                    [["NAME", "ORIGIN", "EDITABLE", "DEI", "IMPORTS", "DESCRIPTION"]]
                        + rows.map {
                            [
                                $0.name, $0.origin, $0.editable ? "yes" : "no", $0.dei, $0.imports ?? "-",
                                $0.description,
                            ]
                        }))
        }
    }

    /// `qosmap validate FILE...`: check table files, every problem as
    /// `file:line:column: message`.
    struct Validate: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "validate",
            abstract:
                "Check table files; print every problem as file:line:column: message (exit 65 on errors).",
            discussion: """
                The files are checked on top of the domains of /etc/qosmap/domains.d
                and --tables, so a file may import a domain defined there. A directory
                checks every *.yaml and *.yml file in it; one with none is an error.

                Examples:
                  qosmap validate my-domain.yaml
                  qosmap validate /etc/qosmap/domains.d
                  qosmap validate child.yaml --tables ./base --json
                """)

        @Argument(
            help: "Domain files to check (YAML). Directories check every *.yaml in them.", completion: .file()
        )
        var files: [String]

        @OptionGroup var tableOptions: TableOptions
        @OptionGroup var output: OutputOptions

        func validate() throws {
            if files.isEmpty { throw ValidationError("missing FILE; give one or more table files") }
        }

        struct DiagnosticJSON: Encodable {
            var file: String
            var line: Int
            var column: Int
            var severity: String
            var message: String
        }

        struct ResultJSON: Encodable {
            var files: Int
            var valid: Bool
            var diagnostics: [DiagnosticJSON]
        }

        func run() throws {
            var sources: [TableSource] = []
            var diagnostics: [TableDiagnostic] = []
            for path in files {
                if isDirectory(path) {
                    let read = TableLoader.readTableDirectory(path)
                    sources += read.sources
                    diagnostics += read.unreadable
                    if read.sources.isEmpty && read.unreadable.isEmpty {
                        diagnostics.append(
                            TableDiagnostic(
                                file: path, line: 1, column: 1,
                                message: "no table files (*.yaml, *.yml) in this directory"))
                    }
                } else {
                    do {
                        sources.append(try TableLoader.source(atPath: path))
                    } catch {
                        diagnostics += error.diagnostics
                    }
                }
            }
            // The domains the files may import: the system directory and --tables,
            // without the files being checked.
            let base: TableSet
            do {
                let (set, skipped) = try TableLoader.loadSkippingBrokenSystemFiles(
                    directories: tableOptions.tables,
                    systemDirectory: tableOptions.noSystemTables ? nil : TableOptions.systemDirectory,
                    onto: TableLoader.builtIn, excluding: Set(sources.map(\.path)))
                for line in TableOptions.skippedWarnings(skipped) { printError(line) }
                base = set
            } catch {
                throw DataError(error.description)
            }
            do {
                diagnostics += try TableLoader.load(sources, onto: base).warnings
            } catch {
                diagnostics += error.diagnostics
            }
            diagnostics.sort { ($0.file, $0.line, $0.column) < ($1.file, $1.line, $1.column) }
            let failed = diagnostics.contains { $0.severity == .error }
            if output.json {
                let rows = diagnostics.map {
                    DiagnosticJSON(
                        file: $0.file, line: $0.line, column: $0.column,
                        severity: $0.severity == .error ? "error" : "warning", message: $0.message)
                }
                print(jsonText(ResultJSON(files: sources.count, valid: !failed, diagnostics: rows)))
                if failed { throw ExitCode(ExitStatus.dataError) }
                return
            }
            if failed { throw DataError(diagnostics.map(\.description).joined(separator: "\n")) }
            for d in diagnostics { printError(d.description) }
            print("\(sources.count) file(s) valid")
        }
    }
}
