import ArgumentParser
import QoSMapCore
import QoSMapDevices
import QoSMapTables

extension QoSMapCommand {
    /// `qosmap export nft`: an nftables ruleset in a table of the tool's own;
    /// `export tc`: the egress queues of a qosmapd config as a `tc -batch` script.
    struct Export: TextCommand {
        static let configuration = CommandConfiguration(
            commandName: "export",
            abstract:
                "Print an nftables ruleset, a tc script of the queues, or a SONiC, Junos, IOS-XR or Linux configuration of the same policy.",
            discussion: """
                Without --config (mark-only mode): the mark carries class and color (bit 5 set, class in \
                bits 4-2, color in bits 1-0, at the mask's lowest bit); a verdict map on it jumps to one \
                chain per class and color, each setting the domain's outbound DSCP (ECN is kept). \
                With --config qosmapd.yaml: the same markings qosmapd would give, with no daemon: a \
                forward-hook chain maps iifname . oifname to one chain per distinct DSCP table, whose \
                ip dscp and ip6 dscp verdict maps go to one chain per distinct action (DSCP, mark, \
                priority); interfaces the config does not name get its defaults. The config's \
                classify: rules come first in each such chain: a match counts in the named counter \
                rule-NAME and keeps its rule number in the conntrack mark (connection-mark-mask), \
                so that the connection's other packets get the same class and color; a config nft \
                cannot mark exactly as qosmapd does is refused (docs/CLASSIFY.md). The table carries \
                the comment "managed by qosmap" and must be named qosmap...; the output replaces it in \
                one transaction. An interface with queues: gets, on its egress, meta priority set to \
                its class's queue (7173:MINOR), as qosmapd's datapaths set it; queues win over \
                actions.priority.

                tc (needs --config): a tc -batch script that builds the queues: of every interface as \
                qosmapd does: root qdisc 7173: (htb with a class per service class, or cake \
                diffserv8), added (replaced with queues.replace: true), classes and leaves replaced. \
                --leaf chooses the leaf under each HTB class: fq_codel (the default; Debian's kernels \
                have it) or bfifo (100 ms of the class's ceil) for a kernel without fq_codel; qosmapd \
                finds this out itself, a script cannot. Packets reach the classes only through the \
                skb priority that qosmapd or export nft --config sets.

                Device formats (sonic: config_db JSON; junos: set class-of-service lines; iosxr: MQC; \
                linux: ip link egress-qos-map and dcb app commands) write --domain (default: default), \
                or with --config every domain the qosmapd config uses and its interface bindings. \
                What a format cannot hold is listed on standard error (--strict: exit 65 instead).

                Examples:
                  qosmap export nft | nft -f -
                  qosmap export nft --domain 5p3d --mask 0x3f00 --priority mangle
                  qosmap export nft --config qosmapd.yaml --priority filter+10 | nft -f -
                  qosmap export tc --config qosmapd.yaml -o queues.tc && tc -batch queues.tc
                  qosmap export sonic --domain 5p3d > qos.json
                  qosmap export junos --config qosmapd.yaml
                """)

        @Argument(help: "The format: nft, tc, \(DeviceFormat.allowedNames).")
        var format: String

        @Flag(
            name: .long,
            help: "Device formats: fail (exit 65) instead of warning when the format cannot hold every cell.")
        var strict = false

        @Option(name: .long, help: "The outbound DS domain whose DSCP values are written (mark-only mode).")
        var domain: String?

        @Option(
            name: .long,
            help: "The mark mask qosmapd uses (actions.mark.mask; mark-only mode), e.g. 0x3f or 0xfc00.")
        var mask: String?

        @Option(
            name: .long,
            help: ArgumentHelp(
                "A qosmapd config: export its whole marking for the kernel, no daemon needed.",
                valueName: "FILE"), completion: .file())
        var config: String?

        @Option(
            name: .long,
            help: "The nftables table name (family inet): qosmap, or qosmap followed by letters, digits, _.")
        var table: String = "qosmap"

        @Option(
            name: .long,
            help: ArgumentHelp(
                "The chain priority (postrouting without --config, forward with it): \(ChainPriority.allowed).",
                valueName: "priority"))
        var priority: String = "-150"

        /// `--priority` as a number (checked in `validate()`).
        var chainPriority: Int { ChainPriority(argument: priority)?.value ?? -150 }

        @Option(
            name: .long,
            help: ArgumentHelp(
                "tc: the leaf under each HTB class: \(TCLeaf.allowedNames) (default fq_codel, which Debian's kernels have; bfifo where the kernel has no fq_codel).",
                valueName: "kind"))
        var leaf: String?

        @Option(
            name: [.short, .customLong("output")],
            help: ArgumentHelp(
                "Write here, through a temporary file renamed on success (default: standard output).",
                valueName: "FILE"))
        var output: String?

        @OptionGroup var tableOptions: TableOptions

        func validate() throws {
            if leaf != nil, format != "tc" {
                throw ValidationError("--leaf applies to tc only; allowed with \(format): no --leaf")
            }
            if format == "tc" {
                if let leaf, TCLeaf(rawValue: leaf) == nil {
                    throw ValidationError("invalid --leaf '\(leaf)'; allowed: \(TCLeaf.allowedNames)")
                }
                guard config != nil else {
                    throw ValidationError("export tc needs --config FILE: the queues: of a qosmapd config")
                }
                for (flag, given) in [
                    ("--domain", domain != nil), ("--mask", mask != nil), ("--strict", strict),
                ]
                where given {
                    throw ValidationError("\(flag) does not apply to tc; allowed: --config, --leaf, -o")
                }
                return
            }
            if DeviceFormat(argument: format) != nil {
                if mask != nil {
                    throw ValidationError(
                        "--mask applies to nft only; allowed with \(format): --domain, --config, --strict")
                }
                return
            }
            guard format == "nft" else {
                throw ValidationError(
                    "invalid format '\(format)'; allowed: nft, tc, \(DeviceFormat.allowedNames)")
            }
            if strict {
                throw ValidationError(
                    "--strict applies to device formats only; allowed: \(DeviceFormat.allowedNames)")
            }
            if let problem = NFTIdentifier.problem(table) { throw ValidationError(problem) }
            guard ChainPriority(argument: priority) != nil else {
                throw ValidationError("invalid --priority '\(priority)'; allowed: \(ChainPriority.allowed)")
            }
            if config != nil, domain != nil || mask != nil {
                throw ValidationError(
                    "--\(domain != nil ? "domain" : "mask") does not apply with --config; allowed: the config's domains and actions.mark"
                )
            }
        }

        /// Prints ``standardOutput()``, or writes it to `-o` (renamed into
        /// place on success only, so a failed export leaves the old file).
        func run() throws {
            let text = try standardOutput()
            if let output, output != "-" {
                try writeTextAtomically(text, to: output)
            } else {
                print(text, terminator: "")
            }
        }

        func standardOutput() throws -> String {
            if let device = DeviceFormat(argument: format) { return try deviceExport(device) }
            if format == "tc", let config { return try exportTC(config) }
            if let config { return try exportConfig(config) }
            let maskText = mask ?? "0x3f"
            guard let m = parseInteger(Substring(maskText)), let m32 = UInt32(exactly: m) else {
                throw UsageError("invalid --mask '\(maskText)'; allowed: a 32-bit value such as 0x3f")
            }
            let encoding: MarkEncoding
            do {
                encoding = try MarkEncoding(mask: m32)
            } catch {
                throw UsageError(error.description)
            }
            let set = try tableOptions.load()
            let d = try resolveDomain(domain ?? "default", in: set)
            return Self.nftRules(domain: d, encoding: encoding, table: table, priority: chainPriority)
        }

        func exportConfig(_ path: String) throws -> String {
            let config = try ExportConfig.load(path: path)
            if config.interfaces.values.contains(where: { $0.trust == .dot1p }), let mark = config.mark,
                mark.mask & config.carry.mask != 0
            {
                throw DataError(
                    "\(path): pcp-carry-mask \(Self.hex(config.carry.mask)) overlaps actions.mark mask \(Self.hex(mark.mask)); allowed: disjoint bits"
                )
            }
            // What nft cannot do as qosmapd does is refused, never marked otherwise.
            let refused = NFTFlowRules.refusals(config.classify, hooks: config.hooks, priority: chainPriority)
            if !refused.isEmpty { throw DataError(refused.joined(separator: "\n")) }
            let policies = try ExportPolicies(
                config: config, extraTables: tableOptions.tables,
                systemDirectory: tableOptions.noSystemTables ? nil : TableOptions.systemDirectory)
            return NFTRuleset(policies: policies, table: table, priority: chainPriority, source: path).text
        }

        /// `export tc --config`: the queues of every interface that has
        /// them; a config without any, or with a name tc cannot take, is
        /// refused in one line (exit 65).
        func exportTC(_ path: String) throws -> String {
            let config = try ExportConfig.load(path: path)
            if !config.ingressRateRefusals.isEmpty {
                throw DataError(config.ingressRateRefusals.joined(separator: "\n"))
            }
            guard !config.queues.isEmpty else {
                throw DataError(
                    "\(path): no interface has queues:; allowed: a config with interfaces.NAME.queues (rate, scheduling, pq-max, discipline, replace)"
                )
            }
            for name in config.queues.keys.sorted() {
                if let problem = TCScript.nameProblem(name) { throw DataError("\(path): \(problem)") }
            }
            // Downloads (ingress-rate) are classified on their IFB by u32
            // filters from each interface's trust and domain and the rules,
            // as qosmapd's nfqueue datapath classifies them.
            var download: [String: DownloadClassifierPlan] = [:]
            if config.queues.values.contains(where: { $0.ingressRate != nil }) {
                let policies = try ExportPolicies(
                    config: config, extraTables: tableOptions.tables,
                    systemDirectory: tableOptions.noSystemTables ? nil : TableOptions.systemDirectory)
                for (name, queues) in config.queues where queues.ingressRate != nil {
                    guard let plan = try? queues.htbPlan(.ingress, major: QueueConfig.qosmapdMajor) else {
                        continue
                    }
                    let (trust, domain) = policies.inbound[name] ?? (config.trust, policies.defaultDomain)
                    let classifier = DownloadClassifierPlan(
                        interface: name, trust: trust, domain: domain, rules: config.classify, plan: plan)
                    download[name] = classifier
                    if let line = classifier.notice(
                        interface: name, ifb: DownloadClassifierPlan.ifbName(for: name))
                    {
                        writeStandardError("qosmap: note: \(line)\n")
                    }
                }
            }
            return TCScript(
                queues: config.queues, download: download,
                leaf: TCLeaf(rawValue: leaf ?? "fq_codel") ?? .fqCodel, source: path
            )
            .text
        }

        static func hex(_ v: UInt32) -> String { "0x" + String(v, radix: 16) }

        /// The lines that replace table `table` atomically: declare it (so the
        /// delete cannot fail on a first load), delete it, define it anew.
        static func tableHeader(_ table: String) -> String {
            "table inet \(table) { comment \"\(NFTIdentifier.marker)\"; }\ndelete table inet \(table)\n"
                + "table inet \(table) {\n  comment \"\(NFTIdentifier.marker)\"\n"
        }

        /// The ruleset text: one chain per cell, a vmap from the masked mark.
        static func nftRules(domain: DSDomain, encoding: MarkEncoding, table: String, priority: Int) -> String
        {
            var out = "# qosmap export nft --domain \(domain.name) --mask \(hex(encoding.mask))\n"
            out += "# DSCP from the skb mark written by qosmapd; ECN bits are kept.\n"
            out += tableHeader(table)
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

/// The table names this command accepts: the tool's own namespace.
///
/// nft cannot test a table's comment inside a transaction, and declaring a
/// table with a comment does not fail on an existing table without one, so
/// the `delete table` the output starts with would wipe any table of that
/// name. Only names starting with `qosmap` are taken, and every table written
/// carries ``marker`` so that a reader can tell.
enum NFTIdentifier {
    /// The table comment on every table this tool writes.
    static let marker = "managed by qosmap"
    /// nft's `NFT_NAME_MAXLEN` is 256 bytes with the terminating NUL.
    static let maxLength = 255

    /// Why `s` is refused as a table name, or nil when it is fine.
    static func problem(_ s: String) -> String? {
        if s.utf8.count > maxLength {
            return
                "invalid --table: \(s.utf8.count) characters; allowed: at most \(maxLength) (nft's NFT_NAME_MAXLEN)"
        }
        let ok = s.unicodeScalars.allSatisfy {
            ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") || $0 == "_"
        }
        guard ok, s.hasPrefix("qosmap") else {
            return "invalid --table '\(s)'; allowed: qosmap, or qosmap followed by letters, digits and _ "
                + "(the tool replaces only tables of its own)"
        }
        return nil
    }
}
