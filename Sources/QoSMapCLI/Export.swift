import ArgumentParser
import QoSMapCore
import QoSMapTables

extension QoSMapCommand {
    /// `qosmap export nft`: nftables rules that set DSCP from qosmapd's mark.
    struct Export: TextCommand {
        static let configuration = CommandConfiguration(
            commandName: "export",
            abstract:
                "Print nftables rules that set DSCP from the skb mark written by qosmapd (mark-only mode).",
            discussion: """
                The mark carries class and color (see MarkEncoding: bit 5 set, class in bits 4-2, color \
                in bits 1-0, at the mask's lowest bit). The rules dispatch on it with a verdict map to one \
                chain per class and color, each setting the domain's outbound DSCP (ECN is kept). \
                Load with: qosmap export nft | nft -f -
                """)

        @Argument(help: "The format: nft.")
        var format: String

        @Option(name: .long, help: "The outbound DS domain whose DSCP values are written.")
        var domain: String = "default"

        @Option(name: .long, help: "The mark mask qosmapd uses (actions.mark.mask).")
        var mask: String = "0x3f"

        @Option(name: .long, help: "The nftables table name (family inet).")
        var table: String = "qosmap"

        @Option(name: .long, help: "The postrouting chain priority.")
        var priority: Int = -150

        @OptionGroup var tableOptions: TableOptions

        func validate() throws {
            guard format == "nft" else { throw ValidationError("invalid format '\(format)'; allowed: nft") }
            guard NFTIdentifier.isValid(table) else {
                throw ValidationError("invalid --table '\(table)'; allowed: letters, digits and _")
            }
        }

        func standardOutput() throws -> String {
            guard let m = parseInteger(Substring(mask)), let m32 = UInt32(exactly: m) else {
                throw UsageError("invalid --mask '\(mask)'; allowed: a 32-bit value such as 0x3f")
            }
            let encoding: MarkEncoding
            do {
                encoding = try MarkEncoding(mask: m32)
            } catch {
                throw UsageError(error.description)
            }
            let set = try tableOptions.load()
            let d = try resolveDomain(domain, in: set)
            return Self.nftRules(domain: d, encoding: encoding, table: table, priority: priority)
        }

        static func hex(_ v: UInt32) -> String { "0x" + String(v, radix: 16) }

        /// The ruleset text: one chain per cell, a vmap from the masked mark.
        static func nftRules(domain: DSDomain, encoding: MarkEncoding, table: String, priority: Int) -> String
        {
            var out = "# qosmap export nft --domain \(domain.name) --mask \(hex(encoding.mask))\n"
            out += "# DSCP from the skb mark written by qosmapd; ECN bits are kept.\n"
            out += "table inet \(table)\ndelete table inet \(table)\ntable inet \(table) {\n"
            for t in Treatment.allCells {
                let dscp = domain.dscp(for: t).rawValue
                out += "  chain \(chainName(t)) {\n"
                out += "    meta nfproto ipv4 ip dscp set \(dscp)\n"
                out += "    meta nfproto ipv6 ip6 dscp set \(dscp)\n"
                out += "  }\n"
            }
            out += "  chain postrouting {\n"
            out += "    type filter hook postrouting priority \(priority); policy accept;\n"
            let entries = Treatment.allCells.map { "\(hex(encoding.value(for: $0))) : jump \(chainName($0))" }
            out += "    meta mark & \(hex(encoding.mask)) vmap { " + entries.joined(separator: ", ") + " }\n"
            out += "  }\n}\n"
            return out
        }

        static func chainName(_ t: Treatment) -> String {
            "dscp_\(t.serviceClass.name.lowercased())_\(t.color.name)"
        }
    }
}

/// nft identifiers this command accepts.
enum NFTIdentifier {
    static func isValid(_ s: String) -> Bool {
        !s.isEmpty && s.count <= 64
            && s.unicodeScalars.allSatisfy {
                ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") || $0 == "_"
            }
    }
}
