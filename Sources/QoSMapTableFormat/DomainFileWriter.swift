import QoSMapCore

/// Writes a domain as a table file that ``TableLoader`` reads back into an
/// equal domain (`qosmap import` output).
public enum DomainFileWriter {
    /// The YAML text of `domain`: every cell, one line per received value and
    /// one per class (a `{green, yellow, red}` map when the colors differ).
    ///
    /// - Parameter header: comment lines put first (without `#`).
    public static func text(for domain: DSDomain, header: [String] = []) -> String {
        var out = header.map { $0.isEmpty ? "#\n" : "# \($0)\n" }.joined()
        out += "domain: \(quoted(domain.name))\n"
        if !domain.summary.isEmpty { out += "description: \(quoted(domain.summary))\n" }
        out += "editable: true\n"
        out += "dei: \(domain.dropEligibility.name)\n"
        out += "\ninbound:\n"
        for field in Field.allCases {
            out += "  \(field.name):\n"
            for v in 0..<field.valueCount {
                let t = domain.classify(field, UInt8(v))
                out += "    \(v): [\(t.serviceClass.name), \(t.color.name)]\n"
            }
        }
        out += "\noutbound:\n"
        for field in Field.allCases {
            out += "  \(field.name):\n"
            for sc in ServiceClass.allCases {
                let values = Color.allCases.map { domain.mark(field, for: Treatment(sc, $0)).rawValue }
                if Set(values).count == 1 {
                    out += "    \(sc.name): \(values[0])\n"
                } else {
                    out += "    \(sc.name): {green: \(values[0]), yellow: \(values[1]), red: \(values[2])}\n"
                }
            }
        }
        return out
    }

    /// A YAML scalar that reads back as the same string.
    static func quoted(_ s: String) -> String {
        let plain = s.unicodeScalars.allSatisfy {
            ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9")
                || "-_.".unicodeScalars.contains($0)
        }
        if plain, !s.isEmpty, let first = s.unicodeScalars.first, !("0"..."9").contains(first),
            !["true", "false", "yes", "no", "null", "on", "off"].contains(s.lowercased())
        {
            return s
        }
        var escaped = ""
        for c in s {
            if c == "\\" || c == "\"" { escaped.append("\\") }
            escaped.append(c)
        }
        return "\"\(escaped)\""
    }
}
