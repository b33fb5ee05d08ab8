import ArgumentParser
import QoSMapCore
import QoSMapTables

extension QoSMapCommand {
    /// `qosmap lookup <field> <value>` and `qosmap lookup class <class>`.
    struct Lookup: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "lookup",
            abstract:
                "Map a marking to class and color (inbound), or a class and color to markings (outbound).",
            discussion: """
                Fields: dscp, ip-precedence (prec), 8021p (pcp, dot1p), exp (mpls-exp).
                Values: decimal, 0x.., 0b..; for DSCP also six binary digits (101110)
                or a PHB name (EF, AF41, CS6, LE, VA, DF; Junos be, nc1, nc2; Cisco
                default; see 'qosmap names').
                Profiles: qci, 5qi, app and service look up a standards profile
                (defaults 3gpp-qci, 3gpp-5qi, gsma-ir34, rfc4594; 'qosmap profile list').

                Examples:
                  qosmap lookup dscp 46                  inbound: class and color
                  qosmap lookup 8021p 3 --dei --domain 5p3d
                  qosmap lookup class AF4 --color yellow outbound: every field's mark
                  qosmap lookup qci 1 --json
                  qosmap lookup app voip --profile gsma-ir34
                """)

        @Argument(
            help: "A field (dscp, ip-precedence, 8021p, exp, or an alias), or 'class'.",
            completion: Completions.lookupKind)
        var kind: String

        @Argument(help: "The field's value, or the service class for 'class'.")
        var value: String

        @Option(name: .long, help: "The color for an outbound lookup ('class'). (default: green)")
        var color: Color?

        @Option(name: .long, help: "The DS domain.", completion: Completions.domain)
        var domain: String = "default"

        @Option(
            name: .long,
            help: "With an inbound lookup: write the outbound fields in this domain (default: --domain).")
        var egressDomain: String?

        @Flag(name: .long, help: "With an 8021p lookup: the frame's DEI bit is set.")
        var dei = false

        @Option(
            name: .long, help: "The standards profile for a qci, 5qi, app or service lookup.",
            completion: Completions.profile)
        var profile: String?

        @OptionGroup var tableOptions: TableOptions
        @OptionGroup var output: OutputOptions

        enum Query {
            case inbound(Field, UInt8)
            case outbound(Treatment)
            case profile(ProfileQuery)
        }

        func query() throws -> Query {
            if let q = try ProfileQuery(kind: kind, value: value) { return .profile(q) }
            if kind.lowercased() == "class" {
                guard let sc = ServiceClass(name: value) else {
                    throw UsageError(
                        "unknown service class '\(value)'; allowed: \(ServiceClass.allowedNames)")
                }
                return .outbound(Treatment(sc, color ?? .green))
            }
            guard let field = Field(name: kind) else {
                throw UsageError(
                    "unknown field '\(kind)'; allowed: \(Field.allowedNames), class, qci, 5qi, app, service")
            }
            do {
                return .inbound(field, try field.parseValue(value))
            } catch {
                throw UsageError(error.description)
            }
        }

        func validate() throws {
            let query: Query
            do {
                query = try self.query()
            } catch let error as UsageError {
                throw ValidationError(error.description)
            }
            if dei, case .inbound(.dot1p, _) = query {
            } else if dei {
                throw ValidationError("--dei applies only to an 8021p lookup, not '\(kind)'")
            }
            if egressDomain != nil, case .inbound = query {
            } else if egressDomain != nil {
                throw ValidationError(
                    "--egress-domain applies only to an inbound field lookup, not '\(kind)'")
            }
            if color != nil, case .outbound = query {
            } else if color != nil {
                throw ValidationError("--color applies only to 'lookup class', not '\(kind)'")
            }
            if profile != nil, case .profile = query {
            } else if profile != nil {
                throw ValidationError(
                    "--profile applies only to a qci, 5qi, app or service lookup, not '\(kind)'")
            }
        }

        func run() throws {
            let query = try query()
            let needsProfiles = if case .profile = query { true } else { false }
            let set = try tableOptions.load(profiles: needsProfiles)
            let d = try resolveDomain(domain, in: set)
            if dei, d.dropEligibility != .color {
                printError(
                    "qosmap: warning: domain '\(d.name)' ignores DEI (dei: \(d.dropEligibility.name)); --dei changes nothing"
                )
            }
            switch query {
            case .profile(let q):
                try runProfileLookup(q, set: set, domain: d)
            case .inbound(let field, let raw):
                let t =
                    field == .dot1p
                    ? d.classify(pcp: PCP(truncating: raw), dei: dei) : d.classify(field, raw)
                let egress = try egressDomain.map { try resolveDomain($0, in: set) } ?? d
                let marks = OutboundMarks(domain: egress, treatment: t)
                if output.json {
                    print(
                        jsonText(
                            InboundJSON(
                                domain: d.name, field: field.name, value: Int(raw),
                                dei: field == .dot1p ? dei : nil,
                                serviceClass: t.serviceClass.name,
                                color: t.color.name, outbound: marks.dictionary,
                                egressDomain: egressDomain == nil ? nil : egress.name)))
                } else {
                    // A name is echoed as given (DF, not CS0), in its standard spelling.
                    let shown =
                        field != .dscp
                        ? "\(raw)"
                        : DSCP.standardName(value).map { "\(raw) (\($0))" }
                            ?? DSCP(truncating: raw).description
                    let deiText = field == .dot1p && dei ? " dei 1" : ""
                    print(
                        "domain \(d.name): \(field.name) \(shown)\(deiText) -> service class \(t.serviceClass.name), color \(t.color.name)"
                    )
                    print("outbound \(t) in domain \(egress.name):")
                    print(marks.text)
                }
            case .outbound(let t):
                let marks = OutboundMarks(domain: d, treatment: t)
                if output.json {
                    print(
                        jsonText(
                            OutboundJSON(
                                domain: d.name, serviceClass: t.serviceClass.name, color: t.color.name,
                                dscp: marks.dscp, ipPrecedence: marks.precedence, dot1p: marks.pcp,
                                dei: marks.deiMeaningful ? (marks.dei ? 1 : 0) : nil, exp: marks.exp)))
                } else {
                    print("outbound \(t) in domain \(d.name):")
                    print(marks.text)
                }
            }
        }
    }
}

/// What every field is written as for one class and color.
struct OutboundMarks {
    var dscp: Int
    var precedence: Int
    var pcp: Int
    var dei: Bool
    var exp: Int
    var deiMeaningful: Bool

    init(domain d: DSDomain, treatment t: Treatment) {
        dscp = Int(d.dscp(for: t).rawValue)
        precedence = Int(d.precedence(for: t).rawValue)
        pcp = Int(d.pcp(for: t).rawValue)
        dei = d.dei(for: t)
        exp = Int(d.exp(for: t).rawValue)
        deiMeaningful = d.dropEligibility == .color
    }

    /// The marks by field name, with the S-tag `dei` (0 or 1) when the domain carries color in DEI.
    var dictionary: [String: Int] {
        var d = ["dscp": dscp, "ip-precedence": precedence, "8021p": pcp, "exp": exp]
        if deiMeaningful { d["dei"] = dei ? 1 : 0 }
        return d
    }

    var text: String {
        let pcpText = deiMeaningful ? "\(pcp) (S-tag DEI \(dei ? 1 : 0))" : "\(pcp)"
        return table(
            [
                ["dscp", DSCP(truncating: UInt8(dscp)).description],
                ["ip-precedence", "\(precedence)"],
                ["8021p", pcpText],
                ["exp", "\(exp)"],
            ], indent: "  ")
    }
}

struct InboundJSON: Encodable {
    var domain: String
    var field: String
    var value: Int
    /// The DEI input of an 8021p lookup; absent for other fields.
    var dei: Bool?
    var serviceClass: String
    var color: String
    var outbound: [String: Int]
    /// Present when `--egress-domain` wrote the outbound fields.
    var egressDomain: String?
}

struct OutboundJSON: Encodable {
    var domain: String
    var serviceClass: String
    var color: String
    var dscp: Int
    var ipPrecedence: Int
    var dot1p: Int
    /// The S-tag DEI written (0 or 1), when the domain carries color in DEI.
    var dei: Int?
    var exp: Int

    enum CodingKeys: String, CodingKey {
        case domain, serviceClass, color, dscp, exp, dei
        case ipPrecedence = "ip-precedence"
        case dot1p = "8021p"
    }
}
