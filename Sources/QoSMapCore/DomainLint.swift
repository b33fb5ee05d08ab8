/// One problem `qosmap lint` finds in a domain.
public struct LintFinding: Sendable, Equatable {
    /// How serious a finding is.
    public enum Severity: String, Sendable, Equatable, Comparable {
        /// Breaks a MUST of the standard cited.
        case error
        /// Goes against a recommendation.
        case warning
        /// Differs from the reference's default domain.
        case info

        /// Errors first.
        public static func < (a: Severity, b: Severity) -> Bool { a.order < b.order }
        var order: Int {
            switch self {
            case .error: 0
            case .warning: 1
            case .info: 2
            }
        }
    }

    /// The rule's identifier, e.g. `ef-highest`.
    public var rule: String
    /// The severity.
    public var severity: Severity
    /// The cell the finding is about (its `file:line` comes from the provenance).
    public var cell: DomainCell
    /// The standard and section the rule rests on, e.g. `RFC 2597 §2`.
    public var reference: String
    /// What is wrong, naming the values.
    public var message: String
    /// Whether the reference's default domain makes the same choice: the finding
    /// is documented, not a mistake of this domain, and does not fail `lint`.
    public var isReferenceChoice: Bool = false
}

/// Checks a domain against the DiffServ standards: `qosmap lint`.
public enum DomainLint {
    /// The rules, with the standard each rests on.
    public static let rules: [(id: String, reference: String, summary: String)] = [
        ("ef-highest", "RFC 3246 §2", "EF (DSCP 46) is in the highest class below network control"),
        ("af-drop-order", "RFC 2597 §2", "AFx1, AFx2, AFx3 have non-decreasing drop precedence"),
        ("le-below-be", "RFC 8622 §4", "LE (DSCP 1) is not treated better than BE (DSCP 0)"),
        ("cs6-cs7-kept", "RFC 2474 §4.2.2.2", "CS6 and CS7 are not bleached to BE"),
        ("va-with-ef", "RFC 5865 §4", "VOICE-ADMIT (DSCP 44) is treated like EF"),
        ("round-trip", "RFC 2474 §3", "every class is written with a value that classifies back to it"),
        ("reference-default", "reference tables 1-4", "the cell equals the reference's default domain"),
    ]

    static func reference(of rule: String) -> String {
        rules.first { $0.id == rule }?.reference ?? ""
    }

    /// Every finding for `domain`; with `reference` (the built-in default as
    /// shipped), cells that differ from it are reported too, and findings that
    /// the reference shares are marked ``LintFinding/isReferenceChoice``.
    public static func lint(_ domain: DSDomain, reference: DSDomain? = nil) -> [LintFinding] {
        var findings = standardFindings(domain)
        if let reference {
            let shared = standardFindings(reference)
            for i in findings.indices {
                let f = findings[i]
                findings[i].isReferenceChoice = shared.contains {
                    $0.rule == f.rule && $0.cell == f.cell
                        && domain.value(of: f.cell) == reference.value(of: f.cell)
                }
            }
            for change in DomainDiff(reference, domain).changes {
                findings.append(
                    LintFinding(
                        rule: "reference-default", severity: .info, cell: change.cell,
                        reference: Self.reference(of: "reference-default"),
                        message:
                            "\(change.cell) is \(change.new); the reference's default domain has \(change.old)"
                    ))
            }
        }
        return findings
    }

    static func finding(
        _ rule: String, _ severity: LintFinding.Severity, _ cell: DomainCell, _ message: String
    ) -> LintFinding {
        LintFinding(
            rule: rule, severity: severity, cell: cell, reference: reference(of: rule), message: message)
    }

    static func standardFindings(_ d: DSDomain) -> [LintFinding] {
        var out: [LintFinding] = []
        let c = { (v: UInt8) in d.classify(.dscp, v) }
        // EF: no class other than network control may outrank it.
        let ef = c(46)
        if ef.serviceClass >= .cs6 {
            out.append(
                finding(
                    "ef-highest", .warning, .inbound(.dscp, 46), "EF (46) is \(ef), a network-control class"))
        } else if let v = (0..<64).map(UInt8.init).first(where: {
            let s = c($0).serviceClass
            return s > ef.serviceClass && s < .cs6
        }) {
            out.append(
                finding(
                    "ef-highest", .warning, .inbound(.dscp, 46),
                    "EF (46) is \(ef), below \(c(v).serviceClass) given to DSCP \(v)"))
        }
        // AF drop precedence: AFx3 must not be greener than AFx2, nor AFx2 than AFx1.
        for x in 1...4 {
            let codes = [1, 2, 3].map { UInt8(8 * x + 2 * $0) }
            for (lo, hi) in [(codes[0], codes[1]), (codes[1], codes[2])] where c(hi).color < c(lo).color {
                out.append(
                    finding(
                        "af-drop-order", .error, .inbound(.dscp, hi),
                        "\(DSCP(truncating: hi)) is \(c(hi).color), greener than \(DSCP(truncating: lo)) (\(c(lo).color))"
                    ))
            }
        }
        // LE below BE.
        let le = c(1)
        let be = c(0)
        if le.serviceClass > be.serviceClass || (le.serviceClass == be.serviceClass && le.color < be.color) {
            out.append(
                finding(
                    "le-below-be", .warning, .inbound(.dscp, 1),
                    "LE (1) is \(le), better than BE (0) at \(be)"))
        }
        // CS6 and CS7 bleached, inbound and outbound.
        for v: UInt8 in [48, 56] where c(v).serviceClass == .be {
            out.append(
                finding(
                    "cs6-cs7-kept", .error, .inbound(.dscp, v),
                    "\(DSCP(truncating: v)) is classified \(c(v)), bleached to best effort"))
        }
        for sc: ServiceClass in [.cs6, .cs7] {
            let t = Treatment(sc, .green)
            if d.dscp(for: t).rawValue == 0 {
                out.append(
                    finding("cs6-cs7-kept", .error, .outbound(.dscp, t), "\(t) is written as DSCP 0 (BE)"))
            }
        }
        // VOICE-ADMIT rides with EF.
        if c(44).serviceClass != ef.serviceClass {
            out.append(
                finding(
                    "va-with-ef", .warning, .inbound(.dscp, 44),
                    "VOICE-ADMIT (44) is \(c(44)), not with EF (46) at \(ef)"))
        }
        // Round trip: each class's green value classifies back to the class.
        for f in Field.allCases {
            for sc in ServiceClass.allCases {
                let t = Treatment(sc, .green)
                let v = d.mark(f, for: t)
                let back = d.classify(f, v.rawValue)
                if back.serviceClass != sc {
                    out.append(
                        finding(
                            "round-trip", .warning, .outbound(f, t),
                            "\(t) is written as \(f.name) \(v), which classifies back as \(back)"))
                }
            }
        }
        return out
    }
}
