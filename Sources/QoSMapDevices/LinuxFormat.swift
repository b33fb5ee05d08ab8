import QoSMapCore

/// The `linux` format: a shell script of iproute2 commands, as far as they
/// express a domain.
///
/// The Linux priority (skb priority, and the DCB priority of `dcb app`) is
/// the service class, ``priority(_:)``: BE 0 … CS7 7. It has no room for a
/// color.
/// - Trust DSCP: `dcb app replace dev PORT dscp-prio DSCP:PRIO …` (all 64);
///   trust IP precedence: the same table, every DSCP taking its precedence's class.
/// - Trust 802.1p: `ip link set dev VLAN type vlan ingress-qos-map PCP:PRIO …`.
/// - Egress 802.1p: `ip link set dev VLAN type vlan egress-qos-map PRIO:PCP …`
///   (each class's green PCP).
/// - Everything else (colors, outbound DSCP, IP precedence and EXP, inbound
///   EXP, DEI) is a loss: `qosmap export nft` or qosmapd write those.
public enum LinuxFormat: DeviceExporter {
    /// `.linux`.
    public static let format = DeviceFormat.linux

    /// The Linux priority a class is carried in: its raw value.
    public static func priority(_ c: ServiceClass) -> UInt8 { c.rawValue }

    /// Writes the script; see the type's description for what is lost.
    public static func export(_ request: ExportRequest) throws(DeviceFormatError) -> DeviceExport {
        let plan = try IOSXRFormat.Plan(request, format: "linux")
        for b in request.bindings where !validInterface(b.interface) {
            throw DeviceFormatError(
                "export linux: invalid interface name '\(b.interface)'; allowed: 1 to 15 letters, digits, "
                    + "and . _ - @ :")
        }
        var out = header(request, plan: plan)
        var losses: [ExportLoss] = []
        if request.bindings.isEmpty {
            out += """
                # PORT: the physical port (dcb app needs a driver with DCB support);
                # VLAN: its 802.1Q sub-interface (ip link ... type vlan needs the 8021q module).
                : "${PORT:?set PORT to the physical port, e.g. PORT=eth0}"
                : "${VLAN:?set VLAN to the VLAN sub-interface, e.g. VLAN=eth0.100}"

                """
            for d in request.domains {
                out += "\n# domain \(d.name), trust dscp: DSCP -> priority (class)\n"
                out += dscpPrio(dev: "\"$PORT\"", d, .dscp) + "\n"
                out +=
                    "# domain \(d.name), trust ip-precedence instead (the same table: use one of the two):\n"
                out += "# " + dscpPrio(dev: "\"$PORT\"", d, .ipPrecedence) + "\n"
                out += "# domain \(d.name), trust 8021p: PCP -> priority (class)\n"
                out += ingressMap(dev: "\"$VLAN\"", d) + "\n"
                out += "# domain \(d.name), egress: priority (class) -> PCP\n"
                out += egressMap(dev: "\"$VLAN\"", d) + "\n"
            }
        } else {
            for b in request.bindings {
                out += "\n# \(b.interface): trust \(b.trust)"
                out += b.trust.field == nil ? "" : " in \(b.inboundDomain)"
                out += ", out \(b.outboundDomain)\n"
                let inbound = try domain(b.inboundDomain, request)
                switch b.trust.field {
                case nil:
                    out +=
                        "# nothing trusted: every PCP gives priority 0 (and no dcb app dscp-prio entries)\n"
                    out += "ip link set dev \(b.interface) type vlan ingress-qos-map "
                    out += (0..<8).map { "\($0):0" }.joined(separator: " ") + "\n"
                case .dscp?, .ipPrecedence?:
                    out += dscpPrio(dev: b.interface, inbound, b.trust.field!) + "\n"
                case .dot1p?:
                    out += ingressMap(dev: b.interface, inbound) + "\n"
                case .exp?:
                    out += "# trust exp: not expressible with iproute2 (see the losses)\n"
                }
                out += egressMap(dev: b.interface, try domain(b.outboundDomain, request)) + "\n"
            }
        }
        for use in plan.ingress {
            if let field = use.field { losses += ingressLosses(use.domain, field) }
        }
        for use in plan.egress { losses += egressLosses(use.domain, rewriteDSCP: use.rewrite) }
        return DeviceExport(text: out, losses: IOSXRFormat.unique(losses))
    }

    static func domain(_ name: String, _ request: ExportRequest) throws(DeviceFormatError) -> DSDomain {
        guard let d = request.domains.first(where: { $0.name == name }) else {
            throw DeviceFormatError("export linux: domain '\(name)' is not loaded")
        }
        return d
    }

    /// A Linux interface name that needs no shell quoting (IFNAMSIZ 16 with the NUL).
    static func validInterface(_ name: String) -> Bool {
        (1...15).contains(name.utf8.count) && name != "." && name != ".."
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._-@:".contains($0)) }
    }

    static func header(_ request: ExportRequest, plan: IOSXRFormat.Plan) -> String {
        var h = "#!/bin/sh\n# qosmap export linux: iproute2 commands for domain "
        h += plan.domainNames.joined(separator: ", ") + "\n"
        if !request.command.isEmpty { h += "# Generated by: \(request.command)\n" }
        h += """
            # Linux priority (skb priority, DCB priority) = service class:
            #   BE 0, AF1 1, AF2 2, AF3 3, AF4 4, EF 5, CS6 6, CS7 7 (no color).
            # Colors, DEI, inbound EXP and outbound DSCP, IP precedence and EXP have no
            # iproute2 form: the nft datapath writes them (qosmap export nft --config
            # qosmapd.yaml), as does qosmapd. Routed packets get their skb priority
            # from the TOS again (ip_forward), so egress-qos-map sees the class only
            # where something sets it (nft meta priority, tc skbedit, SO_PRIORITY).

            """
        return h
    }

    /// `dcb app replace dev DEV dscp-prio …`: every DSCP's class, read from the
    /// DSCP map or from the precedence (top three bits) map.
    static func dscpPrio(dev: String, _ d: DSDomain, _ field: Field) -> String {
        let pairs = (0..<64).map { v -> String in
            let t = field == .dscp ? d.classify(.dscp, UInt8(v)) : d.classify(.ipPrecedence, UInt8(v >> 3))
            return "\(v):\(priority(t.serviceClass))"
        }
        return "dcb app replace dev \(dev) dscp-prio " + pairs.joined(separator: " ")
    }

    static func ingressMap(dev: String, _ d: DSDomain) -> String {
        "ip link set dev \(dev) type vlan ingress-qos-map "
            + (0..<8).map { "\($0):\(priority(d.classify(.dot1p, UInt8($0)).serviceClass))" }
            .joined(separator: " ")
    }

    static func egressMap(dev: String, _ d: DSDomain) -> String {
        "ip link set dev \(dev) type vlan egress-qos-map "
            + ServiceClass.allCases.map { "\(priority($0)):\(d.pcp(for: Treatment($0, .green)).rawValue)" }
            .joined(separator: " ")
    }

    static func ingressLosses(_ d: DSDomain, _ field: Field) -> [ExportLoss] {
        if field == .exp {
            return [
                ExportLoss(
                    domain: d.name, what: "inbound exp",
                    detail: "8 of 8 values: iproute2 has no MPLS TC classification; use qosmapd or nft")
            ]
        }
        var losses: [ExportLoss] = []
        let colored = (0..<field.valueCount).filter { d.classify(field, UInt8($0)).color != .green }.count
        if colored > 0 {
            losses.append(
                ExportLoss(
                    domain: d.name, what: "color of inbound \(field.name)",
                    detail:
                        "\(colored) of \(field.valueCount) values are yellow or red; the Linux priority carries "
                        + "the class only"))
        }
        if field == .dot1p, d.dropEligibility == .color {
            losses.append(
                ExportLoss(
                    domain: d.name, what: "inbound DEI",
                    detail: "the domain reads DEI=1 as yellow; ingress-qos-map keys on the PCP only"))
        }
        return losses
    }

    static func egressLosses(_ d: DSDomain, rewriteDSCP: Bool) -> [ExportLoss] {
        let nft = "Linux has no egress map for it outside nft and qosmapd: use qosmap export nft --config"
        var losses: [ExportLoss] = []
        if rewriteDSCP {
            losses.append(ExportLoss(domain: d.name, what: "outbound dscp", detail: "24 of 24 cells: \(nft)"))
            losses.append(
                ExportLoss(domain: d.name, what: "outbound ip-precedence", detail: "24 of 24 cells: \(nft)"))
        }
        losses.append(
            ExportLoss(
                domain: d.name, what: "outbound exp",
                detail:
                    "24 of 24 cells: iproute2 sets no MPLS TC (ip route encap mpls takes labels and ttl only)"
            ))
        let differ = Treatment.allCells.filter {
            $0.color != .green && d.pcp(for: $0) != d.pcp(for: Treatment($0.serviceClass, .green))
        }
        if !differ.isEmpty {
            losses.append(
                ExportLoss(
                    domain: d.name, what: "color of outbound 8021p",
                    detail:
                        "\(differ.count) of 16 yellow/red cells differ from their class's green PCP "
                        + "(first \(differ[0])); egress-qos-map keys on the class, so they are sent as green")
            )
        }
        if d.dropEligibility == .color {
            losses.append(
                ExportLoss(
                    domain: d.name, what: "outbound DEI",
                    detail: "16 yellow/red cells should be sent with DEI=1; egress-qos-map sets the PCP only")
            )
        }
        return losses
    }
}
