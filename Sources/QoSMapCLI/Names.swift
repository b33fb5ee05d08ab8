import ArgumentParser
import QoSMapCore

extension QoSMapCommand {
    /// `qosmap names`: the DSCP names `lookup` and the table files accept.
    struct Names: TextCommand {
        static let configuration = CommandConfiguration(
            commandName: "names",
            abstract: "List the DSCP PHB names and vendor spellings with their values.",
            discussion: """
                Examples:
                  qosmap names
                  qosmap names --json
                """)

        @OptionGroup var output: OutputOptions

        struct Row: Encodable {
            var name: String
            var dscp: Int
            var binary: String
            var tos: String
            /// The standard name a vendor spelling stands for; nil for a PHB name.
            var standard: String?
        }

        static var rows: [Row] {
            func row(_ name: String, _ d: DSCP, _ standard: String?) -> Row {
                let bits = String(d.rawValue, radix: 2)
                let tos = String(d.rawValue << 2, radix: 16)
                return Row(
                    name: name, dscp: Int(d.rawValue),
                    binary: String(repeating: "0", count: 6 - bits.count) + bits,
                    tos: "0x" + String(repeating: "0", count: 2 - tos.count) + tos, standard: standard)
            }
            return DSCP.phbNames.map { row($0.name, $0.dscp, nil) }
                + DSCP.vendorNames.map { row($0.name.lowercased(), $0.dscp, $0.standard) }
        }

        func standardOutput() throws -> String {
            if output.json { return jsonText(Self.rows) + "\n" }
            let lines =
                [["NAME", "DSCP", "BINARY", "TOS", "SAME AS"]]
                + Self.rows.map { [$0.name, "\($0.dscp)", $0.binary, $0.tos, $0.standard ?? "-"] }
            return table(lines) + "\n"
        }
    }
}
