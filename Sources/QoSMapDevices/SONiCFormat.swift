import QoSMapCore

/// The `sonic` format: SONiC config_db JSON.
///
/// Every domain becomes one map of each kind, named after the domain:
/// `DSCP_TO_TC_MAP`, `DOT1P_TO_TC_MAP` and `MPLS_TC_TO_TC_MAP` (ingress, the
/// class of each received value) and `TC_TO_DSCP_MAP` and `TC_TO_DOT1P_MAP`
/// (egress, the green marking of each class). The traffic class is
/// ``ServiceClass/rawValue``: BE 0, AF1 1, AF2 2, AF3 3, AF4 4, EF 5, CS6 6,
/// CS7 7. Bindings become `PORT_QOS_MAP` entries: the trusted field's ingress
/// map (none for trust none: SONiC's port default TC is 0, BE) and the egress
/// maps of the outbound domain (`tc_to_dscp_map` only when DSCP is rewritten).
/// Trust ip-precedence binds a DSCP map derived from the precedence map,
/// named `<domain>_prec`. Table and field names follow sonic-buildimage's
/// `src/sonic-yang-models` and sonic-swss `orchagent/qosorch.h`.
public enum SONiCFormat: DeviceExporter, DeviceImporter {
    /// `.sonic`.
    public static let format = DeviceFormat.sonic

    /// A config_db map table: its name, the qosmap field, the `PORT_QOS_MAP`
    /// field that binds it, and the name SONiC gives the field in messages.
    struct MapTable: Sendable {
        var table: String
        var field: Field
        var portField: String
        var fieldLabel: String
    }

    /// The ingress maps, received value → traffic class.
    static let inboundTables = [
        MapTable(table: "DSCP_TO_TC_MAP", field: .dscp, portField: "dscp_to_tc_map", fieldLabel: "DSCP"),
        MapTable(table: "DOT1P_TO_TC_MAP", field: .dot1p, portField: "dot1p_to_tc_map", fieldLabel: "DOT1P"),
        MapTable(
            table: "MPLS_TC_TO_TC_MAP", field: .exp, portField: "mpls_tc_to_tc_map", fieldLabel: "MPLS TC"),
    ]

    /// The egress maps, traffic class → value (SONiC has no TC-to-MPLS-TC map).
    static let outboundTables = [
        MapTable(table: "TC_TO_DSCP_MAP", field: .dscp, portField: "tc_to_dscp_map", fieldLabel: "DSCP"),
        MapTable(table: "TC_TO_DOT1P_MAP", field: .dot1p, portField: "tc_to_dot1p_map", fieldLabel: "DOT1P"),
    ]

    /// Suffix of the DSCP map derived for a binding that trusts IP precedence.
    static let precedenceSuffix = "_prec"

    /// Whether `name` matches the SONiC YANG map-name pattern
    /// `[a-zA-Z0-9]{1}([-a-zA-Z0-9_]{0,31})`.
    static func isMapName(_ name: String) -> Bool {
        let u = Array(name.utf8)
        let alnum = { (b: UInt8) in
            (0x30...0x39).contains(b) || (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b)
        }
        guard let first = u.first, alnum(first), u.count <= 32 else { return false }
        return u.dropFirst().allSatisfy { alnum($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }

    // MARK: Export

    /// Writes the domains (and bindings) as config_db JSON, keys sorted, four-space indent.
    public static func export(_ request: ExportRequest) throws(DeviceFormatError) -> DeviceExport {
        typealias Node = SONiCJSONWriter.Node
        var tables: [String: [String: Node]] = [:]
        var losses: [ExportLoss] = []
        var byName: [String: DSDomain] = [:]
        let precedenceTrusted = Set(
            request.bindings.filter { $0.trust == .ipPrecedence }.map(\.inboundDomain))
        for d in request.domains where byName[d.name] == nil {
            guard isMapName(d.name) else {
                throw DeviceFormatError(
                    "export sonic: domain name '\(d.name)' is not a SONiC map name; allowed: a letter or digit, then up to 31 letters, digits, - and _"
                )
            }
            byName[d.name] = d
            for t in inboundTables {
                tables[t.table, default: [:]][d.name] = inboundMap(d, t.field)
            }
            for t in outboundTables {
                tables[t.table, default: [:]][d.name] = outboundMap(d, t.field)
            }
            losses += Self.losses(d, precedenceDerived: precedenceTrusted.contains(d.name))
        }
        var ports: [String: Node] = [:]
        for b in request.bindings {
            guard let inbound = byName[b.inboundDomain], byName[b.outboundDomain] != nil else {
                let missing = byName[b.inboundDomain] == nil ? b.inboundDomain : b.outboundDomain
                throw DeviceFormatError(
                    "export sonic: interface \(b.interface) binds domain '\(missing)', which is not exported")
            }
            guard ports[b.interface] == nil else {
                throw DeviceFormatError("export sonic: interface \(b.interface) is bound twice")
            }
            var fields: [String: Node] = [:]
            switch b.trust {
            case .none:
                break  // no ingress map: SONiC's port default TC 0 (BE)
            case .field(.ipPrecedence):
                let name = inbound.name + precedenceSuffix
                guard isMapName(name), byName[name] == nil else {
                    throw DeviceFormatError(
                        "export sonic: interface \(b.interface) trusts ip-precedence in '\(inbound.name)', but the derived map name '\(name)' is taken or longer than 32 characters"
                    )
                }
                tables["DSCP_TO_TC_MAP", default: [:]][name] = precedenceMap(inbound)
                fields["dscp_to_tc_map"] = .string(name)
            case .field(let f):
                // inboundTables covers every field but ip-precedence (handled above).
                if let t = inboundTables.first(where: { $0.field == f }) {
                    fields[t.portField] = .string(b.inboundDomain)
                }
            }
            if b.rewrite { fields["tc_to_dscp_map"] = .string(b.outboundDomain) }
            fields["tc_to_dot1p_map"] = .string(b.outboundDomain)
            ports[b.interface] = .object(fields)
        }
        var root: [String: Node] = tables.mapValues { .object($0) }
        if !ports.isEmpty { root["PORT_QOS_MAP"] = .object(ports) }
        return DeviceExport(text: SONiCJSONWriter.text(.object(root)), losses: losses)
    }

    /// Received value → traffic class, every value of the field.
    static func inboundMap(_ d: DSDomain, _ field: Field) -> SONiCJSONWriter.Node {
        var m: [String: SONiCJSONWriter.Node] = [:]
        for v in 0..<field.valueCount {
            m[String(v)] = .string(String(d.classify(field, UInt8(v)).serviceClass.rawValue))
        }
        return .object(m)
    }

    /// Traffic class → the green cell's value.
    static func outboundMap(_ d: DSDomain, _ field: Field) -> SONiCJSONWriter.Node {
        var m: [String: SONiCJSONWriter.Node] = [:]
        for c in ServiceClass.allCases {
            m[String(c.rawValue)] = .string(String(d.mark(field, for: Treatment(c, .green)).rawValue))
        }
        return .object(m)
    }

    /// Each DSCP → the class of its precedence (its top 3 bits): how SONiC,
    /// which has no precedence map, classifies on IP precedence.
    static func precedenceMap(_ d: DSDomain) -> SONiCJSONWriter.Node {
        var m: [String: SONiCJSONWriter.Node] = [:]
        for v in 0..<64 {
            m[String(v)] = .string(String(d.classify(.ipPrecedence, UInt8(v >> 3)).serviceClass.rawValue))
        }
        return .object(m)
    }

    /// What config_db cannot hold of `d`, one summary line per kind of loss.
    static func losses(_ d: DSDomain, precedenceDerived: Bool) -> [ExportLoss] {
        var out: [ExportLoss] = []
        // Inbound colors: the maps give a traffic class only.
        var colorFields: [Field] = [.dscp, .dot1p, .exp]
        if precedenceDerived { colorFields.append(.ipPrecedence) }
        let colored = colorFields.compactMap { f -> String? in
            let n = (0..<f.valueCount).filter { d.classify(f, UInt8($0)).color != .green }.count
            return n == 0 ? nil : "\(f.name) \(n) of \(f.valueCount)"
        }
        if !colored.isEmpty {
            out.append(
                ExportLoss(
                    domain: d.name, what: "inbound color",
                    detail:
                        "SONiC ingress maps hold a traffic class only; yellow/red values exported as their class: "
                        + colored.joined(separator: ", ")))
        }
        // Outbound colors: one value per traffic class, the green one.
        let byColor = outboundTables.compactMap { t -> String? in
            let classes = ServiceClass.allCases.filter { c in
                let green = d.mark(t.field, for: Treatment(c, .green))
                return d.mark(t.field, for: Treatment(c, .yellow)) != green
                    || d.mark(t.field, for: Treatment(c, .red)) != green
            }
            return classes.isEmpty
                ? nil
                : "\(t.field.name) for "
                    + classes.map { "\($0.name) (TC \($0.rawValue))" }.joined(separator: ", ")
        }
        if !byColor.isEmpty {
            out.append(
                ExportLoss(
                    domain: d.name, what: "outbound color",
                    detail:
                        "TC_TO_DSCP_MAP and TC_TO_DOT1P_MAP hold one value per traffic class; the green value is exported, yellow/red differ: "
                        + byColor.joined(separator: "; ")))
        }
        out.append(
            ExportLoss(
                domain: d.name, what: "outbound exp",
                detail:
                    "SONiC config_db has no traffic-class-to-MPLS-TC map; the EXP marks of 8 classes are not exported"
            ))
        if !precedenceDerived {
            let differ = (0..<64).filter {
                d.classify(.dscp, UInt8($0)).serviceClass
                    != d.classify(.ipPrecedence, UInt8($0 >> 3)).serviceClass
            }.count
            if differ > 0 {
                out.append(
                    ExportLoss(
                        domain: d.name, what: "inbound ip-precedence",
                        detail:
                            "SONiC has no precedence map and DSCP_TO_TC_MAP reads all 6 bits; \(differ) of 64 DSCPs classify differently from their precedence; the precedence map is not exported"
                    ))
            }
        }
        let precedenceDiffers = ServiceClass.allCases.filter {
            let t = Treatment($0, .green)
            return d.mark(.ipPrecedence, for: t).rawValue != d.mark(.dscp, for: t).rawValue >> 3
        }
        if !precedenceDiffers.isEmpty {
            out.append(
                ExportLoss(
                    domain: d.name, what: "outbound ip-precedence",
                    detail: "SONiC rewrites the whole DSCP; the precedence marks of "
                        + precedenceDiffers.map(\.name).joined(separator: ", ")
                        + " differ from the top 3 bits of their DSCP and are not exported"))
        }
        if d.dropEligibility == .color {
            out.append(
                ExportLoss(
                    domain: d.name, what: "dei",
                    detail:
                        "SONiC maps neither read nor write the 802.1Q DEI bit; the domain's dei: color is not exported"
                ))
        }
        return out
    }

    // MARK: Import

    /// Reads the QoS map tables of a config_db JSON (a whole config_db or just
    /// those tables), one ``ImportedDomain`` per map name across the tables,
    /// sorted by name. Other tables, `PORT_QOS_MAP` included, are skipped.
    ///
    /// Ingress cells have no color; egress cells are the green cell of each
    /// class. A traffic class 8–15 (valid in SONiC, beyond qosmap's 0–7) is an
    /// `unmapped` line; anything else out of range is an error.
    public static func parse(_ text: String, file: String) throws(DeviceFormatError) -> [ImportedDomain] {
        var parser = SONiCJSONParser(text)
        let root: SONiCJSONValue
        do {
            root = try parser.parseDocument()
        } catch {
            throw place(error.offset, in: text, file: file, "invalid JSON: \(error.message)")
        }
        guard case .object(let tables) = root.kind else {
            throw place(
                root.offset, in: text, file: file,
                "config_db JSON must be an object of tables, found \(root.typeName)")
        }
        var domains: [String: ImportedDomain] = [:]
        for (table, _, value) in tables {
            let inbound = inboundTables.first { $0.table == table }
            let outbound = outboundTables.first { $0.table == table }
            guard let spec = inbound ?? outbound else { continue }
            guard case .object(let maps) = value.kind else {
                throw place(
                    value.offset, in: text, file: file,
                    "\(table) must be an object of maps, found \(value.typeName)")
            }
            for (name, _, mapValue) in maps {
                guard case .object(let entries) = mapValue.kind else {
                    throw place(
                        mapValue.offset, in: text, file: file,
                        "\(table) \"\(name)\" must be an object of \(inbound != nil ? spec.fieldLabel : "TC") keys, found \(mapValue.typeName)"
                    )
                }
                var d = domains[name] ?? ImportedDomain(name: name)
                for (key, keyOffset, v) in entries {
                    let context = "\(table) \"\(name)\""
                    if inbound != nil {
                        guard let value = number(key), value <= spec.field.maxValue else {
                            throw place(
                                keyOffset, in: text, file: file,
                                "\(context): invalid \(spec.fieldLabel) key \"\(key)\"; allowed: 0-\(spec.field.maxValue)"
                            )
                        }
                        let tc = try trafficClass(
                            v, context: "\(context) \(spec.fieldLabel) \(value)", text: text, file: file)
                        if let c = ServiceClass(rawValue: UInt8(tc)) {
                            d.setInbound(spec.field, UInt8(value), .init(c, nil))
                        } else {
                            d.unmapped.append(
                                unmappedLine(
                                    v.offset, text, file,
                                    "\(context): \(spec.fieldLabel) \(value) -> TC \(tc)"))
                        }
                    } else {
                        guard let tc = number(key), tc <= 15 else {
                            throw place(
                                keyOffset, in: text, file: file,
                                "\(context): invalid TC key \"\(key)\"; allowed: 0-15")
                        }
                        guard let raw = leafString(v), let value = number(raw), value <= spec.field.maxValue
                        else {
                            throw place(
                                v.offset, in: text, file: file,
                                "\(context) TC \(tc): invalid \(spec.fieldLabel) \(leafString(v).map { "\"\($0)\"" } ?? v.typeName); allowed: 0-\(spec.field.maxValue)"
                            )
                        }
                        if let c = ServiceClass(rawValue: UInt8(tc)) {
                            d.setOutbound(spec.field, Treatment(c, .green), UInt8(value))
                        } else {
                            d.unmapped.append(
                                unmappedLine(
                                    keyOffset, text, file,
                                    "\(context): TC \(tc) -> \(spec.fieldLabel) \(value)"))
                        }
                    }
                }
                domains[name] = d
            }
        }
        return domains.keys.sorted(by: SONiCJSONWriter.ordered).compactMap { domains[$0] }
    }

    /// A traffic class value: a string (or number) 0–15, SONiC's `tc_type`.
    static func trafficClass(_ v: SONiCJSONValue, context: String, text: String, file: String)
        throws(DeviceFormatError)
        -> Int
    {
        guard let raw = leafString(v), let tc = number(raw), tc <= 15 else {
            throw place(
                v.offset, in: text, file: file,
                "\(context): invalid TC \(leafString(v).map { "\"\($0)\"" } ?? v.typeName); allowed: 0-15")
        }
        return tc
    }

    /// A leaf's text: config_db writes strings; a bare number is read too.
    static func leafString(_ v: SONiCJSONValue) -> String? {
        switch v.kind {
        case .string(let s), .number(let s): s
        default: nil
        }
    }

    /// A decimal number of at most 3 digits, or nil.
    static func number(_ s: String) -> Int? {
        guard !s.isEmpty, s.utf8.count <= 3, s.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            return nil
        }
        return Int(s)
    }

    /// An error at a byte offset of `text`.
    static func place(_ offset: Int, in text: String, file: String, _ message: String) -> DeviceFormatError {
        let p = SONiCJSONParser.position(of: offset, in: text)
        return DeviceFormatError(file: file, line: p.line, column: p.column, message)
    }

    /// An `unmapped` line: `file:line: WHAT: qosmap classes are TC 0-7 …`.
    static func unmappedLine(_ offset: Int, _ text: String, _ file: String, _ what: String) -> String {
        let p = SONiCJSONParser.position(of: offset, in: text)
        return
            "\(file):\(p.line): \(what): qosmap has traffic classes 0-7 (BE ... CS7) only; cell taken from the base"
    }
}
