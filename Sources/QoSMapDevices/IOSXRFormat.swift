import QoSMapCore

/// The `iosxr` format: Cisco IOS-XR MQC class-maps and policy-maps.
///
/// - Ingress, one policy per (domain, trusted field): `class-map match-any`
///   per (class, color) group of received values, and a policy that sets
///   `qos-group` = ``ServiceClass/rawValue`` (BE 0 … CS7 7) and
///   `discard-class` = ``Color/rawValue`` (green 0, yellow 1, red 2). Values
///   that map to BE green fall to `class-default`, which sets 0 and 0.
/// - Egress, one policy per domain: `class-map match-all` on `qos-group` and
///   `discard-class` per (class, color) (BE green is `class-default`), setting
///   `dscp`, `cos` and `mpls experimental imposition` (and `dei 1` for yellow
///   and red when the domain carries color in DEI).
/// - With bindings: `interface X` with `service-policy input|output`.
///
/// Names: ``ingressPolicyName(domain:field:)``, ``egressPolicyName(domain:rewriteDSCP:)``,
/// ``egressClassName(_:)``. See docs/devices/iosxr.md for the vendor pages.
public enum IOSXRFormat: DeviceExporter {
    /// `.iosxr`.
    public static let format = DeviceFormat.iosxr

    /// The ingress policy of an interface that trusts nothing: every packet is
    /// qos-group 0, discard-class 0 (BE green).
    public static let untrustedPolicy = "qosmap-untrusted-in"

    /// Most values one `match` statement carries: 8 on CRS and ASR 9000 (NCS
    /// 5500 takes 64), so a longer group is split over several class-maps.
    public static let valuesPerMatch = 8

    /// The IOS-XR word for a field in names: `dscp`, `prec`, `cos`, `exp`.
    public static func keyword(_ field: Field) -> String {
        switch field {
        case .dscp: "dscp"
        case .ipPrecedence: "prec"
        case .dot1p: "cos"
        case .exp: "exp"
        }
    }

    /// The `match` statement for a field, before its values.
    static func matchStatement(_ field: Field) -> String {
        switch field {
        case .dscp: "match dscp"
        case .ipPrecedence: "match precedence"
        case .dot1p: "match cos"
        case .exp: "match mpls experimental topmost"
        }
    }

    /// `qosmap-DOMAIN-FIELD-in`, e.g. `qosmap-default-dscp-in`.
    public static func ingressPolicyName(domain: String, field: Field) -> String {
        "qosmap-\(domain)-\(keyword(field))-in"
    }

    /// `qosmap-DOMAIN-out`, or `qosmap-DOMAIN-keep-dscp-out` for interfaces
    /// that do not rewrite the DSCP (qosmapd's `rewrite-dscp: false`).
    public static func egressPolicyName(domain: String, rewriteDSCP: Bool = true) -> String {
        rewriteDSCP ? "qosmap-\(domain)-out" : "qosmap-\(domain)-keep-dscp-out"
    }

    /// The shared egress class-map of a class and color, e.g. `qosmap-EF-green`;
    /// nil for BE green, which is the egress policies' `class-default`.
    public static func egressClassName(_ t: Treatment) -> String? {
        t == .bestEffort ? nil : "qosmap-\(t.serviceClass.name)-\(t.color.name)"
    }

    /// The discard-class a color is carried in: green 0, yellow 1, red 2.
    public static func discardClass(_ color: Color) -> UInt8 { color.rawValue }

    /// Writes the class-maps, policy-maps and bindings; the only loss is an
    /// outbound IP-precedence map that differs from the DSCP's top bits.
    public static func export(_ request: ExportRequest) throws(DeviceFormatError) -> DeviceExport {
        let plan = try Plan(request, format: "iosxr")
        for b in request.bindings where b.interface.isEmpty || b.interface.contains(where: \.isWhitespace) {
            throw DeviceFormatError(
                "export iosxr: invalid interface name '\(b.interface)'; allowed: no spaces")
        }
        var out = header(request, plan: plan)
        var losses: [ExportLoss] = []
        for use in plan.ingress {
            if let field = use.field {
                out += ingress(use.domain, field)
            } else {
                out += untrusted()
            }
        }
        if !plan.egress.isEmpty { out += egressClassMaps() }
        for use in plan.egress {
            out += egress(use.domain, rewriteDSCP: use.rewrite)
            if use.rewrite, let loss = precedenceLoss(use.domain) { losses.append(loss) }
        }
        for b in request.bindings {
            out += "interface \(b.interface)\n"
            out +=
                " service-policy input "
                + (b.trust.field.map { ingressPolicyName(domain: b.inboundDomain, field: $0) }
                    ?? untrustedPolicy)
                + "\n"
            out +=
                " service-policy output \(egressPolicyName(domain: b.outboundDomain, rewriteDSCP: b.rewrite))\n"
            out += "!\n"
        }
        return DeviceExport(text: out, losses: unique(losses))
    }

    static func header(_ request: ExportRequest, plan: Plan) -> String {
        var h = "! qosmap export iosxr: Cisco IOS-XR MQC for domain "
        h += plan.domainNames.joined(separator: ", ") + "\n"
        if !request.command.isEmpty { h += "! Generated by: \(request.command)\n" }
        h += """
            ! qos-group = service class: BE 0, AF1 1, AF2 2, AF3 3, AF4 4, EF 5, CS6 6, CS7 7.
            ! discard-class = color: green 0, yellow 1, red 2.
            ! match dscp / match precedence without ipv4|ipv6 match IPv4 and IPv6 alike.
            ! Egress class-maps match qos-group and discard-class; BE green is class-default.
            !

            """
        return h
    }

    /// The received values of a field grouped by the class and color they map
    /// to, in ``Treatment/allCells`` order.
    static func groups(_ d: DSDomain, _ field: Field) -> [(Treatment, [UInt8])] {
        var by: [Treatment: [UInt8]] = [:]
        for v in 0..<field.valueCount { by[d.classify(field, UInt8(v)), default: []].append(UInt8(v)) }
        return Treatment.allCells.compactMap { t in by[t].map { (t, $0) } }
    }

    static func chunks(_ values: [UInt8]) -> [[UInt8]] {
        stride(from: 0, to: values.count, by: valuesPerMatch).map {
            Array(values[$0..<min($0 + valuesPerMatch, values.count)])
        }
    }

    static func setLines(_ t: Treatment) -> String {
        "  set qos-group \(t.serviceClass.rawValue)\n  set discard-class \(discardClass(t.color))\n"
    }

    /// One ingress policy: class-maps for every group but BE green, then the policy.
    static func ingress(_ d: DSDomain, _ field: Field) -> String {
        let prefix = "qosmap-\(d.name)-\(keyword(field))"
        var maps = ""
        var classes = ""
        // DEI=1 turns green into yellow (DSDomain.classify(pcp:dei:)); these
        // match-all classes come first because a policy takes the first match.
        if field == .dot1p, d.dropEligibility == .color {
            for (t, values) in groups(d, field) where t.color == .green {
                let name = "\(prefix)-\(t.serviceClass.name)-dei"
                maps += "class-map match-all \(name)\n \(matchStatement(field)) "
                maps += values.map(String.init).joined(separator: " ") + "\n match dei 1\n end-class-map\n!\n"
                classes += " class \(name)\n" + setLines(Treatment(t.serviceClass, .yellow)) + " !\n"
            }
        }
        for (t, values) in groups(d, field) where t != .bestEffort {
            for (i, chunk) in chunks(values).enumerated() {
                let name = "\(prefix)-\(t.serviceClass.name)-\(t.color.name)" + (i == 0 ? "" : "-\(i + 1)")
                maps += "class-map match-any \(name)\n \(matchStatement(field)) "
                maps += chunk.map(String.init).joined(separator: " ") + "\n end-class-map\n!\n"
                classes += " class \(name)\n" + setLines(t) + " !\n"
            }
        }
        var policy = "policy-map \(ingressPolicyName(domain: d.name, field: field))\n" + classes
        policy += " class class-default\n" + setLines(.bestEffort) + " !\n end-policy-map\n!\n"
        return maps + policy
    }

    static func untrusted() -> String {
        "policy-map \(untrustedPolicy)\n class class-default\n" + setLines(.bestEffort)
            + " !\n end-policy-map\n!\n"
    }

    /// The 23 shared egress class-maps (every class and color but BE green).
    static func egressClassMaps() -> String {
        Treatment.allCells.compactMap { t in
            egressClassName(t).map {
                "class-map match-all \($0)\n match qos-group \(t.serviceClass.rawValue)\n"
                    + " match discard-class \(discardClass(t.color))\n end-class-map\n!\n"
            }
        }.joined()
    }

    /// One egress policy: every class and color's DSCP (unless kept), PCP and EXP.
    static func egress(_ d: DSDomain, rewriteDSCP: Bool) -> String {
        var s = "policy-map \(egressPolicyName(domain: d.name, rewriteDSCP: rewriteDSCP))\n"
        let order = Treatment.allCells.filter { $0 != .bestEffort } + [.bestEffort]
        for t in order {
            s += " class \(egressClassName(t) ?? "class-default")\n"
            if rewriteDSCP { s += "  set dscp \(d.dscp(for: t).rawValue)\n" }
            s += "  set cos \(d.pcp(for: t).rawValue)\n"
            if d.dropEligibility == .color, t.color != .green { s += "  set dei 1\n" }
            s += "  set mpls experimental imposition \(d.exp(for: t).rawValue)\n !\n"
        }
        return s + " end-policy-map\n!\n"
    }

    /// IOS-XR writes the DSCP, whose top three bits are the precedence: an
    /// outbound precedence map that says otherwise cannot be honoured.
    static func precedenceLoss(_ d: DSDomain) -> ExportLoss? {
        let differ = Treatment.allCells.filter {
            d.precedence(for: $0).rawValue != d.dscp(for: $0).rawValue >> 3
        }
        guard !differ.isEmpty else { return nil }
        return ExportLoss(
            domain: d.name, what: "outbound ip-precedence",
            detail:
                "\(differ.count) of 24 cells differ from the precedence bits of their DSCP "
                + "(first \(differ[0])); set dscp writes the precedence, so they are sent as the DSCP's")
    }
}

extension IOSXRFormat {
    /// Which policies an export writes: ingress (domain, trusted field or nil for
    /// none) and egress (domain, DSCP rewrite) pairs, each once, in first-use order
    /// (shared with ``LinuxFormat``).
    struct Plan {
        struct Ingress {
            var domain: DSDomain
            var field: Field?
        }
        struct Egress {
            var domain: DSDomain
            var rewrite: Bool
        }
        var ingress: [Ingress] = []
        var egress: [Egress] = []
        var domainNames: [String] = []

        /// Without bindings: every field of every domain, rewriting; with
        /// bindings: what the bindings use.
        init(_ request: ExportRequest, format: String) throws(DeviceFormatError) {
            guard !request.domains.isEmpty else {
                throw DeviceFormatError("export \(format): no domain to export")
            }
            func domain(_ name: String, _ b: DeviceBinding) throws(DeviceFormatError) -> DSDomain {
                guard let d = request.domains.first(where: { $0.name == name }) else {
                    throw DeviceFormatError(
                        "export \(format): interface \(b.interface) names domain '\(name)', which is not loaded"
                    )
                }
                return d
            }
            if request.bindings.isEmpty {
                for d in request.domains {
                    ingress += Field.allCases.map { Ingress(domain: d, field: $0) }
                    egress.append(Egress(domain: d, rewrite: true))
                }
            } else {
                for b in request.bindings {
                    let i = try domain(b.inboundDomain, b)
                    let known = ingress.contains {
                        $0.field == b.trust.field && ($0.field == nil || $0.domain.name == i.name)
                    }
                    if !known {
                        ingress.append(Ingress(domain: i, field: b.trust.field))
                    }
                    let o = try domain(b.outboundDomain, b)
                    if !egress.contains(where: { $0.domain.name == o.name && $0.rewrite == b.rewrite }) {
                        egress.append(Egress(domain: o, rewrite: b.rewrite))
                    }
                }
            }
            for name in ingress.filter({ $0.field != nil }).map(\.domain.name) + egress.map(\.domain.name)
            where !domainNames.contains(name) {
                domainNames.append(name)
            }
        }
    }

    /// The losses without repeats, in first-seen order.
    static func unique(_ losses: [ExportLoss]) -> [ExportLoss] {
        var seen: [ExportLoss] = []
        for l in losses where !seen.contains(l) { seen.append(l) }
        return seen
    }
}
