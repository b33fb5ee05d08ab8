import QoSMapCore

extension JunosFormat {
    /// One classified code point: its class, loss priority and line.
    struct ClassifiedPoint {
        var serviceClass: ServiceClass
        var loss: JunosLossPriority
        var line: Int
    }

    /// One rewrite cell: the code point written and its line.
    struct RewritePoint {
        var value: UInt8
        var line: Int
    }

    /// Everything read for one family (domain): classifiers and rewrite rules
    /// by type, with the names they had.
    struct Family {
        var key: String
        var classifiers: [JunosCodeType: [UInt8: ClassifiedPoint]] = [:]
        var classifierNames: [JunosCodeType: String] = [:]
        var rewrites: [JunosCodeType: [Treatment: RewritePoint]] = [:]
        var rewriteNames: [JunosCodeType: String] = [:]
        var unmapped: [String] = []
    }

    /// The words of one line and a cursor over them, for errors at a column.
    struct Line {
        var tokens: [JunosToken]
        var index = 0
        var file: String
        var number: Int
        var endColumn: Int

        /// The next word, or an error naming what was expected there.
        mutating func next(_ expected: String) throws(DeviceFormatError) -> JunosToken {
            guard index < tokens.count else {
                let after = tokens.last.map { " after '\($0.text)'" } ?? ""
                throw DeviceFormatError(
                    file: file, line: number, column: endColumn, "missing \(expected)\(after)")
            }
            index += 1
            return tokens[index - 1]
        }

        /// Whether words remain.
        var atEnd: Bool { index >= tokens.count }

        /// An error at a word.
        func error(_ token: JunosToken, _ message: String) -> DeviceFormatError {
            DeviceFormatError(file: file, line: number, column: token.column, message)
        }

        /// The next word, which must be `keyword`.
        mutating func expect(_ keyword: String) throws(DeviceFormatError) {
            let t = try next("'\(keyword)'")
            guard t.text == keyword, !t.quoted else {
                throw error(t, "unexpected '\(t.text)'; allowed: \(keyword)")
            }
        }
    }

    /// Reads every classifier and rewrite-rule family of a `set`-format
    /// configuration; other `set` lines and `#` comments are skipped.
    public static func parse(_ text: String, file: String) throws(DeviceFormatError) -> [ImportedDomain] {
        var families: [Family] = []
        var custom: [JunosCodeType: [String: UInt8]] = [:]
        func family(_ name: String) -> Int {
            let key = JunosNames.family(name)
            if let i = families.firstIndex(where: { $0.key == key }) { return i }
            families.append(Family(key: key))
            return families.count - 1
        }
        // `\r\n` is one Character, so split on every newline kind.
        var lines: [Line] = []
        var inactive: [[String]] = []
        for (offset, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
            .enumerated()
        {
            let number = offset + 1
            let trimmed = raw.drop(while: { $0 == " " || $0 == "\t" })
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            var line = Line(
                tokens: try junosTokens(raw, file: file, line: number), file: file, number: number,
                endColumn: raw.count + 1)
            let verb = try line.next("'set'")
            switch verb.text {
            case "set": lines.append(line)
            // `display set` shows deactivated statements as `set` plus `deactivate`.
            case "deactivate": inactive.append(line.tokens.dropFirst().map(\.text))
            default:
                throw line.error(
                    verb, "unexpected '\(verb.text)'; allowed: set and deactivate statements and # comments")
            }
        }
        for var line in lines {
            let words = line.tokens.map(\.text)
            if inactive.contains(where: { !$0.isEmpty && words.dropFirst().starts(with: $0) }) { continue }
            guard line.tokens.count > 1, line.tokens[1].text == "class-of-service" else { continue }
            line.index = 2
            let section = try line.next("a class-of-service statement")
            switch section.text {
            case "classifiers":
                let type = try codeType(&line, "classifier")
                let nameToken = try line.next("a classifier name")
                let f = family(nameToken.text)
                families[f].classifierNames[type] = families[f].classifierNames[type] ?? nameToken.text
                try classifierStatement(&line, type, nameToken.text, &families[f], custom[type] ?? [:])
            case "rewrite-rules":
                let type = try codeType(&line, "rewrite rule")
                let nameToken = try line.next("a rewrite-rule name")
                let f = family(nameToken.text)
                families[f].rewriteNames[type] = families[f].rewriteNames[type] ?? nameToken.text
                try rewriteStatement(&line, type, &families[f], custom[type] ?? [:])
            case "code-point-aliases":
                let type = try codeType(&line, "code-point alias")
                let alias = try line.next("an alias name")
                let bits = try line.next("the alias's bits")
                guard let v = type.parse(bits.text), bits.text.allSatisfy({ $0 == "0" || $0 == "1" }) else {
                    throw line.error(
                        bits,
                        "invalid \(type.rawValue) bits '\(bits.text)'; allowed: \(type.bitCount) binary digits"
                    )
                }
                custom[type, default: [:]][alias.text.lowercased()] = v
            default:
                // forwarding-classes, interfaces, schedulers, tri-color…: not part of a domain.
                continue
            }
        }
        return families.map { resolve($0, file: file) }
    }

    /// Reads a classifier or rewrite-rule type word.
    static func codeType(_ line: inout Line, _ what: String) throws(DeviceFormatError) -> JunosCodeType {
        let t = try line.next("a \(what) type")
        guard let type = JunosCodeType(rawValue: t.text) else {
            throw line.error(t, "unknown \(what) type '\(t.text)'; allowed: \(JunosCodeType.allowedNames)")
        }
        return type
    }

    /// Reads `forwarding-class FC loss-priority LP`; nil class when FC has
    /// no qosmap class (reported in the family's unmapped lines).
    static func classAndLoss(
        _ line: inout Line, _ family: inout Family, _ what: String
    ) throws(DeviceFormatError) -> (ServiceClass?, JunosLossPriority)? {
        if line.atEnd { return nil }
        let keyword = try line.next("'forwarding-class'")
        if keyword.text == "import" {
            let from = try line.next("a classifier name or default")
            family.unmapped.append(
                "\(line.file):\(line.number): \(what) imports '\(from.text)'; its code points are not read")
            return nil
        }
        guard keyword.text == "forwarding-class" else {
            throw line.error(keyword, "unexpected '\(keyword.text)'; allowed: forwarding-class, import")
        }
        let fc = try line.next("a forwarding-class name")
        if line.atEnd { return nil }
        try line.expect("loss-priority")
        let lpToken = try line.next("a loss priority")
        guard let lp = JunosLossPriority(rawValue: lpToken.text) else {
            throw line.error(
                lpToken, "unknown loss priority '\(lpToken.text)'; allowed: \(JunosLossPriority.allowedNames)"
            )
        }
        let sc = JunosNames.serviceClass(fc.text)
        if sc == nil {
            family.unmapped.append(
                "\(line.file):\(line.number): forwarding class '\(fc.text)' has no qosmap class (allowed: \(JunosNames.allowedForwardingClasses)); its \(what) cells are not imported"
            )
        }
        return (sc, lp)
    }

    /// `… classifiers TYPE NAME forwarding-class FC loss-priority LP code-points (V | [ V … ])`.
    static func classifierStatement(
        _ line: inout Line, _ type: JunosCodeType, _ name: String, _ family: inout Family,
        _ custom: [String: UInt8]
    ) throws(DeviceFormatError) {
        guard let (sc, lp) = try classAndLoss(&line, &family, "\(type.rawValue) classifier \(name)") else {
            return
        }
        if line.atEnd { return }
        try line.expect("code-points")
        var values: [JunosToken] = []
        let first = try line.next("code points")
        if first.text == "[", !first.quoted {
            while true {
                let t = try line.next("']'")
                if t.text == "]", !t.quoted { break }
                values.append(t)
            }
            if values.isEmpty {
                throw line.error(first, "empty code-point list; allowed: [ \(type.allowedValues) … ]")
            }
        } else {
            values = [first]
        }
        if !line.atEnd {
            let extra = try line.next("")
            throw line.error(extra, "unexpected '\(extra.text)' after the code points; allowed: end of line")
        }
        if lp == .mediumLow {
            family.unmapped.append(
                "\(line.file):\(line.number): loss-priority medium-low has no qosmap color; read as yellow")
        }
        for t in values {
            guard let v = type.parse(t.text, custom: custom) else {
                throw line.error(
                    t, "invalid \(type.rawValue) code point '\(t.text)'; allowed: \(type.allowedValues)")
            }
            if let earlier = family.classifiers[type]?[v] {
                throw line.error(
                    t,
                    "\(type.rawValue) code point '\(t.text)' is already classified at line \(earlier.line); allowed: each code point once"
                )
            }
            if let sc {
                family.classifiers[type, default: [:]][v] = ClassifiedPoint(
                    serviceClass: sc, loss: lp, line: line.number)
            }
        }
    }

    /// `… rewrite-rules TYPE NAME forwarding-class FC loss-priority LP code-point V`.
    static func rewriteStatement(
        _ line: inout Line, _ type: JunosCodeType, _ family: inout Family, _ custom: [String: UInt8]
    ) throws(DeviceFormatError) {
        guard let (sc, lp) = try classAndLoss(&line, &family, "\(type.rawValue) rewrite rule") else { return }
        if line.atEnd { return }
        try line.expect("code-point")
        let t = try line.next("a code point")
        guard let v = type.parse(t.text, custom: custom) else {
            throw line.error(
                t, "invalid \(type.rawValue) code point '\(t.text)'; allowed: \(type.allowedValues)")
        }
        if !line.atEnd {
            let extra = try line.next("")
            throw line.error(extra, "unexpected '\(extra.text)' after the code point; allowed: end of line")
        }
        if lp == .mediumLow {
            family.unmapped.append(
                "\(line.file):\(line.number): rewrite for loss-priority medium-low has no qosmap color; not imported"
            )
            return
        }
        guard let sc else { return }
        family.rewrites[type, default: [:]][Treatment(sc, lp.color)] = RewritePoint(
            value: v, line: line.number)
    }

    /// A family's cells as an import: each field from its first type, the
    /// second compared and any difference reported; the DEI policy from the
    /// 802.1ad maps (or `ignore` when only 802.1 maps exist).
    static func resolve(_ f: Family, file: String) -> ImportedDomain {
        var d = ImportedDomain(name: f.key)
        d.unmapped = f.unmapped
        let pairs: [(Field, JunosCodeType, JunosCodeType)] = [
            (.dscp, .dscp, .dscpIPv6), (.ipPrecedence, .inetPrecedence, .inetPrecedence),
            (.dot1p, .ieee8021, .ieee8021ad), (.exp, .exp, .exp),
        ]
        for (field, first, second) in pairs {
            // 802.1ad code points with DEI 0 are the PCP map.
            func inbound(_ type: JunosCodeType) -> [UInt8: ClassifiedPoint] {
                let all = f.classifiers[type] ?? [:]
                guard type == .ieee8021ad else { return all }
                var pcp: [UInt8: ClassifiedPoint] = [:]
                for (v, p) in all where v & 1 == 0 { pcp[v >> 1] = p }
                return pcp
            }
            let a = inbound(first)
            let b = second == first ? [:] : inbound(second)
            let chosen = a.isEmpty ? b : a
            for (v, p) in chosen { d.setInbound(field, v, .init(p.serviceClass, p.loss.color)) }
            if !a.isEmpty, !b.isEmpty {
                let differing = Set(a.keys).union(b.keys).sorted().filter { v in
                    a[v]?.serviceClass != b[v]?.serviceClass || a[v]?.loss.color != b[v]?.loss.color
                }
                if let v = differing.first {
                    let line = b[v]?.line ?? a[v]?.line ?? 0
                    d.unmapped.append(
                        "\(file):\(line): \(second.rawValue) classifier \(f.classifierNames[second] ?? "") differs from \(first.rawValue) classifier \(f.classifierNames[first] ?? "") at \(differing.count) code points; qosmap has one \(field.name) map: the \(first.rawValue) one is imported"
                    )
                }
            }
            func outbound(_ type: JunosCodeType) -> [Treatment: RewritePoint] {
                let all = f.rewrites[type] ?? [:]
                guard type == .ieee8021ad else { return all }
                return all.mapValues { RewritePoint(value: $0.value >> 1, line: $0.line) }
            }
            let ra = outbound(first)
            let rb = second == first ? [:] : outbound(second)
            let rchosen = ra.isEmpty ? rb : ra
            for (t, p) in rchosen { d.setOutbound(field, t, p.value) }
            if !ra.isEmpty, !rb.isEmpty {
                let differing = Treatment.allCells.filter { ra[$0]?.value != rb[$0]?.value }
                if let t = differing.first {
                    d.unmapped.append(
                        "\(file):\(rb[t]?.line ?? ra[t]?.line ?? 0): \(second.rawValue) rewrite rule \(f.rewriteNames[second] ?? "") differs from \(first.rawValue) rewrite rule \(f.rewriteNames[first] ?? "") at \(differing.count) class/color cells; the \(first.rawValue) one is imported"
                    )
                }
            }
        }
        resolveDEI(f, &d, file: file)
        return d
    }

    /// The DEI policy: `color` when the 802.1ad classifier raises green to
    /// yellow on DEI 1 (and its rewrite sets DEI for yellow and red), `ignore`
    /// when DEI changes nothing or only 802.1 maps exist; otherwise reported.
    static func resolveDEI(_ f: Family, _ d: inout ImportedDomain, file: String) {
        let ad = f.classifiers[.ieee8021ad] ?? [:]
        let adRewrite = f.rewrites[.ieee8021ad] ?? [:]
        var colorOK = true
        var ignoreOK = true
        var firstBad = 0
        for pcp in UInt8(0)..<8 {
            guard let p0 = ad[pcp << 1], let p1 = ad[pcp << 1 | 1] else { continue }
            let c0 = p0.loss.color
            let raised: Color = c0 == .green ? .yellow : c0
            let same = p1.serviceClass == p0.serviceClass
            if !(same && p1.loss.color == raised) {
                colorOK = false
                if firstBad == 0 { firstBad = p1.line }
            }
            if !(same && p1.loss.color == c0) { ignoreOK = false }
        }
        var rewriteColor = true
        var rewriteIgnore = true
        for (t, p) in adRewrite {
            let dei = p.value & 1 == 1
            if dei != (t.color != .green) { rewriteColor = false }
            if dei { rewriteIgnore = false }
        }
        let hasAd = !ad.isEmpty || !adRewrite.isEmpty
        if hasAd {
            if colorOK && rewriteColor {
                d.dropEligibility = .color
            } else if ignoreOK && rewriteIgnore {
                d.dropEligibility = .ignore
            } else {
                let line = firstBad != 0 ? firstBad : adRewrite.values.map(\.line).min() ?? 0
                d.unmapped.append(
                    "\(file):\(line): ieee-802.1ad maps use DEI neither as qosmap's dei color (DEI 1 raises green to yellow; rewrite sets DEI for yellow and red) nor as dei ignore; the DEI policy is not imported"
                )
            }
        } else if f.classifiers[.ieee8021] != nil || f.rewrites[.ieee8021] != nil {
            d.dropEligibility = .ignore
        }
    }
}
