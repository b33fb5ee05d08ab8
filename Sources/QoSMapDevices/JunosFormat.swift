import QoSMapCore

/// The `junos` format: `set class-of-service …` lines (docs/devices/junos.md).
///
/// Each domain becomes classifiers and rewrite rules named `qosmap-DOMAIN`
/// of the types `dscp`, `dscp-ipv6`, `ieee-802.1` (plus `ieee-802.1ad` when
/// the domain carries color in DEI), `exp` and `inet-precedence`; classes are
/// the forwarding classes `be` … `cs7` on queues 0–7, colors the loss
/// priorities low, medium-high and high. Every cell is expressible, so a
/// domain export is exact; only some interface bindings lose something.
public enum JunosFormat: DeviceExporter, DeviceImporter {
    /// `.junos`.
    public static let format = DeviceFormat.junos

    /// The configuration prefix of every statement written.
    static let cos = "set class-of-service"

    /// The code-point types a domain is exported as.
    static func types(_ domain: DSDomain) -> [JunosCodeType] {
        [.dscp, .dscpIPv6, .ieee8021] + (domain.dropEligibility == .color ? [.ieee8021ad] : []) + [
            .exp, .inetPrecedence,
        ]
    }

    /// The treatment a received code point of `type` gets in `domain`
    /// (802.1ad code points are PCP then DEI).
    static func classify(_ domain: DSDomain, _ type: JunosCodeType, _ value: UInt8) -> Treatment {
        type == .ieee8021ad
            ? domain.classify(pcp: PCP(truncating: value >> 1), dei: value & 1 == 1)
            : domain.classify(type.field, value)
    }

    /// The code point `type` is written with for a treatment in `domain`.
    static func mark(_ domain: DSDomain, _ type: JunosCodeType, _ t: Treatment) -> UInt8 {
        let v = domain.mark(type.field, for: t).rawValue
        return type == .ieee8021ad ? v << 1 | (domain.dei(for: t) ? 1 : 0) : v
    }

    /// Writes the forwarding classes, each domain's classifiers and rewrite
    /// rules, and the interface bindings; bindings Junos cannot express
    /// exactly are in the losses.
    public static func export(_ request: ExportRequest) throws(DeviceFormatError) -> DeviceExport {
        var lines = [
            "# qosmap Junos class-of-service" + (request.command.isEmpty ? "" : ": \(request.command)"),
            "# Forwarding classes be af1 af2 af3 af4 ef cs6 cs7 on queues 0-7 (the qosmap class numbers).",
            "# Loss priority: green low, yellow medium-high, red high; tri-color makes medium-high configurable.",
            "\(cos) tri-color",
        ]
        for sc in ServiceClass.allCases {
            lines.append(
                "\(cos) forwarding-classes class \(JunosNames.forwardingClass(sc)) queue-num \(sc.rawValue)")
        }
        var byName: [String: DSDomain] = [:]
        for domain in request.domains where byName[domain.name] == nil {
            byName[domain.name] = domain
            lines += domainLines(domain)
        }
        var losses: [ExportLoss] = []
        if !request.bindings.isEmpty {
            lines.append("# Interface bindings (unit 0 of each interface the qosmapd config names).")
        }
        for b in request.bindings {
            guard let inbound = byName[b.inboundDomain], byName[b.outboundDomain] != nil else {
                throw DeviceFormatError(
                    "export junos: interface \(b.interface) uses domain \(b.inboundDomain)/\(b.outboundDomain), which the request does not hold"
                )
            }
            let unit = "\(cos) interfaces \(quoted(b.interface)) unit 0"
            let inName = JunosNames.mapName(domain: inbound.name)
            switch b.trust {
            case .none:
                // A fixed classifier: every packet to be, loss priority left low (green).
                lines.append("\(unit) forwarding-class \(JunosNames.forwardingClass(.be))")
            case .field(.dscp):
                lines.append("\(unit) classifiers dscp \(inName)")
                lines.append("\(unit) classifiers dscp-ipv6 \(inName)")
            case .field(.ipPrecedence):
                lines.append("\(unit) classifiers inet-precedence \(inName)")
                losses.append(
                    ExportLoss(
                        domain: inbound.name, what: "trust ip-precedence on \(b.interface)",
                        detail:
                            "Junos inet-precedence classifiers read IPv4 only; IPv6 packets get the interface's default classification"
                    ))
            case .field(.dot1p):
                let type: JunosCodeType = inbound.dropEligibility == .color ? .ieee8021ad : .ieee8021
                lines.append("\(unit) classifiers \(type.rawValue) \(inName)")
            case .field(.exp):
                lines.append("\(unit) classifiers exp \(inName)")
            }
            if b.rewrite {
                let outName = JunosNames.mapName(domain: b.outboundDomain)
                lines.append("\(unit) rewrite-rules dscp \(outName)")
                lines.append("\(unit) rewrite-rules dscp-ipv6 \(outName)")
            }
        }
        return DeviceExport(text: lines.joined(separator: "\n") + "\n", losses: losses)
    }

    /// One domain's classifiers (one statement per class and loss priority,
    /// its code points in a list) and rewrite rules (one per class and color).
    static func domainLines(_ domain: DSDomain) -> [String] {
        let name = JunosNames.mapName(domain: domain.name)
        var lines = [
            "# Domain \(domain.name) (dei \(domain.dropEligibility.name)): classifiers and rewrite rules \(name)"
        ]
        for type in types(domain) {
            var byTreatment: [Treatment: [UInt8]] = [:]
            for v in 0..<(1 << type.bitCount) {
                byTreatment[classify(domain, type, UInt8(v)), default: []].append(UInt8(v))
            }
            for t in Treatment.allCells {
                guard let values = byTreatment[t] else { continue }
                lines.append(
                    "\(cos) classifiers \(type.rawValue) \(name) forwarding-class \(JunosNames.forwardingClass(t.serviceClass)) loss-priority \(JunosLossPriority(t.color).rawValue) code-points [ \(values.map(type.bits).joined(separator: " ")) ]"
                )
            }
        }
        for type in types(domain) {
            for t in Treatment.allCells {
                lines.append(
                    "\(cos) rewrite-rules \(type.rawValue) \(name) forwarding-class \(JunosNames.forwardingClass(t.serviceClass)) loss-priority \(JunosLossPriority(t.color).rawValue) code-point \(type.bits(mark(domain, type, t)))"
                )
            }
        }
        return lines
    }

    /// A name as a `set` word: quoted when it holds a blank, a quote or a bracket.
    static func quoted(_ name: String) -> String {
        name.contains(where: { " \t\"[]".contains($0) }) || name.isEmpty ? "\"\(name)\"" : name
    }
}
