import Foundation
import QoSMapCore
import QoSMapDaemon
import QoSMapPacket
import QoSMapTables
import Testing

@testable import QoSMapCLI

/// Test configs for `qosmap export nft --config`: name, YAML. Their domains
/// come from the built-ins and `Golden/nft-tables` (the `site` domain).
let nftTestConfigs: [(String, String)] = [
    (
        "nft-2x2",
        """
        system-tables: false
        trust: dscp
        domain: default
        interfaces:
          in1: {trust: dscp}
          in2: {trust: none}
          out1: {outbound-domain: default}
          out2: {outbound-domain: site}
        actions:
          mark: true
          priority: true
        """
    ),
    ("nft-empty", "system-tables: false\n"),
    ("nft-classify", nftClassifyConfig),
    (
        // Trust 8021p (qosmapd takes it with datapath: ebpf): a netdev ingress
        // chain on lo, which exists wherever `nft -c` runs.
        "nft-8021p",
        """
        system-tables: false
        datapath: ebpf
        interfaces:
          lo: {trust: 8021p, inbound-domain: 5p3d}
          out1: {outbound-domain: site}
        actions:
          mark: {mask: 0xff}
          priority: true
        ebpf: {pcp-carry-mask: 0x1f00}
        """
    ),
    (
        "nft-markonly-5p3d",
        """
        system-tables: false
        trust: ip-precedence
        domain: 5p3d
        interfaces:
          wan0: {trust: none, outbound-domain: site}
        actions:
          mark: {mask: 0x3f00}
          mark-only: true
        rules:
          mode: install
          hooks: [forward, output]
        """
    ),
    (
        "nft-norewrite",
        """
        system-tables: false
        interfaces:
          eth0: {domain: site, trust: ip-precedence}
        actions:
          rewrite-dscp: false
          priority: true
        """
    ),
]

let nftTablesDirectory = goldenDirectory.appendingPathComponent("nft-tables").path

/// The ruleset for a test config, generated in-process.
func nftRuleset(_ name: String, _ yaml: String, table: String = "qosmap") throws -> String {
    let config = try ExportConfig.parse(yaml, file: name + ".yaml")
    let policies = try ExportPolicies(config: config, extraTables: [nftTablesDirectory], systemDirectory: nil)
    return NFTRuleset(policies: policies, table: table, priority: -150, source: name + ".yaml").text
}

/// Runs `nft -c -f -` on `text`: nil when accepted, else nft's complaint.
func nftCheck(_ text: String) throws -> String? {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: nftPath)
    p.arguments = ["-c", "-f", "-"]
    let input = Pipe()
    let errors = Pipe()
    p.standardInput = input
    p.standardError = errors
    p.standardOutput = FileHandle.nullDevice
    try p.run()
    input.fileHandleForWriting.write(Data(text.utf8))
    try input.fileHandleForWriting.close()
    let err = errors.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return p.terminationStatus == 0 ? nil : String(decoding: err, as: UTF8.self)
}

let nftPath =
    ["/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft"].first { FileManager.default.isExecutableFile(atPath: $0) }
    ?? "/usr/sbin/nft"
/// `nft -c` talks to the kernel (a transaction it aborts), so it needs root.
let nftCheckable = FileManager.default.isExecutableFile(atPath: nftPath) && geteuid() == 0

@Suite("qosmap export nft --config")
struct NFTExportTests {
    @Test(arguments: nftTestConfigs.map(\.0))
    func golden(name: String) throws {
        let yaml = try #require(nftTestConfigs.first { $0.0 == name }?.1)
        try expectGolden(try nftRuleset(name, yaml), "export-\(name).nft")
    }

    /// The export's per-pair policies are qosmapd's: same config reader
    /// result, same `PolicySnapshot.policy(input:output:)` decisions for every
    /// interface pair (named ones and an unnamed one) and every DSCP.
    @Test(arguments: nftTestConfigs.map(\.0))
    func policiesEqualQosmapd(name: String) throws {
        let yaml = try #require(nftTestConfigs.first { $0.0 == name }?.1)
        let mine = try ExportConfig.parse(yaml, file: "x.yaml")
        let exported = try ExportPolicies(
            config: mine, extraTables: [nftTablesDirectory], systemDirectory: nil)
        var daemonConfig = try DaemonConfig.parse(yaml, file: "x.yaml")
        daemonConfig.tables = [nftTablesDirectory]
        let snapshot = try PolicySnapshot(config: daemonConfig, generation: 1)
        #expect(mine.mark == daemonConfig.mark)
        #expect(mine.priority == daemonConfig.priority)
        #expect((mine.rewriteDSCP && !mine.markOnly) == daemonConfig.rewriteDSCP)
        #expect(mine.hooks.sorted() == daemonConfig.rules.hooks.map(\.rawValue).sorted())
        let names: [String?] = mine.interfaces.keys.sorted() + [nil, "unnamed0"]
        #expect(Set(mine.interfaces.keys) == Set(daemonConfig.interfaces.keys))
        #expect(mine.installRules == (daemonConfig.rules.mode == .install))
        #expect(mine.ruleInterfaces == daemonConfig.rules.interfaces)
        for i in names {
            for o in names {
                let a = exported.policy(input: i, output: o)
                let b = snapshot.policy(input: i, output: o)
                #expect(
                    a.trust == b.trust && a.ingress.name == b.ingress.name && a.egress.name == b.egress.name)
                for d in UInt8(0)..<64 {
                    for family in NFTRuleset.Family.allCases {
                        var p1 = NFTRuleset.header(family, dscp: d)
                        var p2 = p1
                        let r1 = PacketMarker.remark(&p1, format: .ip, policy: a)
                        let r2 = PacketMarker.remark(&p2, format: .ip, policy: b)
                        #expect(r1 == r2 && p1 == p2, "\(name) \(i ?? "-") -> \(o ?? "-") dscp \(d)")
                        #expect(r1.originalDSCP?.rawValue == d, "the \(family) header carries DSCP \(d)")
                    }
                }
            }
        }
    }

    /// Bad marking keys give the daemon's messages, positioned.
    @Test(arguments: [
        "trust: 8021p\n", "actions:\n  mark: {mask: 0x7}\n", "interfaces:\n  eth0: {colour: red}\n",
        "colour: red\n", "actions: [1]\n",
    ])
    func errorsEqualQosmapd(yaml: String) {
        var mine = ""
        var theirs = ""
        do { _ = try ExportConfig.parse(yaml, file: "x.yaml") } catch { mine = "\(error)" }
        do { _ = try DaemonConfig.parse(yaml, file: "x.yaml") } catch { theirs = "\(error)" }
        #expect(!mine.isEmpty)
        #expect(mine == theirs)
    }

    /// `queues:` is read by qosmapd's reader: the same configs, the same
    /// skb priority per class and interface, the same messages.
    @Test func queuesAreReadAsQosmapdReadsThem() throws {
        let yaml =
            "interfaces:\n  wan0: {queues: {rate: 20mbit, scheduling: {AF4: pq}}}\n  lan0: {queues: {rate: 1gbit, discipline: cake}}\n  eth9: {}\n"
        let mine = try ExportConfig.parse(yaml, file: "x.yaml")
        let theirs = try DaemonConfig.parse(yaml, file: "x.yaml")
        #expect(mine.queues == theirs.interfaceQueues.mapValues(\.config))
        for name in ["wan0", "lan0", "eth9", "none0"] {
            #expect(mine.queuePriorities(output: name) == theirs.queuePriorities(output: name), "\(name)")
        }
        // AF4 made pq: its leaf is 7173:14 all the same (the minor is the class's rank).
        #expect(mine.queuePriorities(output: "wan0")?[Int(ServiceClass.af4.rawValue)] == 0x7173_0014)
        #expect(mine.queuePriorities(output: "eth9") == nil)
        let bad = "interfaces:\n  wan0: {queues: {rate: 20, pq-max: 0%}}\n"
        var a = ""
        var b = ""
        do { _ = try ExportConfig.parse(bad, file: "x.yaml") } catch { a = "\(error)" }
        do { _ = try DaemonConfig.parse(bad, file: "x.yaml") } catch { b = "\(error)" }
        #expect(a.hasPrefix("x.yaml:2:"))
        #expect(a == b)
    }

    @Test func unknownDomainIsPositioned() throws {
        let config = try ExportConfig.parse("interfaces:\n  eth0: {outbound-domain: nope}\n", file: "x.yaml")
        #expect {
            _ = try ExportPolicies(config: config, extraTables: [], systemDirectory: nil)
        } throws: { "\($0)".hasPrefix("x.yaml:2:27: unknown domain 'nope'; known domains: default, 5p3d") }
    }

    /// The 2x2 config's tables really differ per pair (so the test above and
    /// the e2e matrix can tell a wrong pair from a right one).
    @Test func pairsDiffer() throws {
        let yaml = try #require(nftTestConfigs.first { $0.0 == "nft-2x2" }?.1)
        let text = try nftRuleset("nft-2x2", yaml)
        /// The body of the policy chain the pair `in . out` goes to.
        func table(_ i: String, _ o: String) throws -> String {
            let key = "\"\(i)\" . \"\(o)\" : goto "
            let start = try #require(text.range(of: key)).upperBound
            let chain = text[start...].prefix { $0 != "," && $0 != "\n" }
            let body = try #require(text.range(of: "  chain \(chain) {\n")).upperBound
            let end = try #require(text.range(of: "\n  }\n", range: body..<text.endIndex)).lowerBound
            return String(text[body..<end])
        }
        // in2 trusts nothing: every DSCP from in2 to out1 becomes BE (0).
        #expect(try table("in2", "out1").contains(" 46 : goto ip_d0_m20_p0"))
        #expect(try table("in2", "out1").contains(" 46 : goto ip6_d0_m20_p0"))
        // in1 -> out2 writes the site domain's EF (40); in1 -> out1 keeps 46.
        #expect(try table("in1", "out2").contains(" 46 : goto ip_d40_m34_p5"))
        #expect(try table("in1", "out2").contains(" 46 : goto ip6_d40_m34_p5"))
        #expect(try table("in1", "out1").contains(" 46 : goto ip_m34_p5"))
    }

    @Test(arguments: [
        (
            ["export", "nft", "--table", "1abc"],
            "invalid --table '1abc'; allowed: qosmap, or qosmap followed by"
        ),
        (
            ["export", "nft", "--table", "filter"],
            "invalid --table 'filter'; allowed: qosmap, or qosmap followed by"
        ),
        (["export", "nft", "--table", "qosmap-x"], "invalid --table 'qosmap-x'"),
        (
            ["export", "nft", "--table", "qosmap" + String(repeating: "a", count: 294)],
            "invalid --table: 300 characters; allowed: at most 255 (nft's NFT_NAME_MAXLEN)"
        ),
        (
            ["export", "nft", "--config", "x.yaml", "--domain", "5p3d"],
            "--domain does not apply with --config"
        ),
        (["export", "nft", "--config", "x.yaml", "--mask", "0x3f"], "--mask does not apply with --config"),
    ])
    func usageErrors(args: [String], message: String) {
        let result = qosmapInProcess(args)
        #expect(result.status == 64)
        #expect(result.out == "")
        #expect(result.err.hasPrefix("qosmap: error: " + message), "\(result.err)")
        #expect(result.err.split(separator: "\n").count == 1)
    }

    @Test func missingConfigIsDataError() {
        let result = qosmapInProcess(["export", "nft", "--config", "/nonexistent/q.yaml"])
        #expect(result.status == 65)
        #expect(
            result.err == "/nonexistent/q.yaml:1:1: cannot read config: No such file or directory (errno 2)\n"
        )
    }

    /// The errno of the read itself (FoundationEssentials' reader left one
    /// from another call: "Inappropriate ioctl for device" for a directory).
    @Test func configThatIsADirectoryNamesTheErrno() {
        let result = qosmapInProcess(["export", "nft", "--config", "/"])
        #expect(result.status == 65)
        #expect(result.err == "/:1:1: cannot read config: Is a directory (errno 21)\n")
    }

    @Test func ownTableAccepted() {
        let name = "qosmap_" + String(repeating: "a", count: 248)
        let result = qosmapInProcess(["export", "nft", "--table", name, "--no-system-tables"])
        #expect(result.status == 0)
        #expect(result.out.contains("table inet \(name) {\n  comment \"managed by qosmap\"\n"))
    }

    @Test(.enabled(if: nftCheckable), arguments: nftTestConfigs.map(\.0))
    func nftAcceptsConfig(name: String) throws {
        let yaml = try #require(nftTestConfigs.first { $0.0 == name }?.1)
        let problem = try nftCheck(try nftRuleset(name, yaml, table: "qosmap_check"))
        #expect(problem == nil, "\(problem ?? "")")
    }

    /// Every built-in domain, in mark-only mode and as a whole config.
    @Test(.enabled(if: nftCheckable), arguments: TableLoader.builtInDomains.domains.names)
    func nftAcceptsDomain(domain: String) throws {
        let markOnly = qosmapInProcess([
            "export", "nft", "--domain", domain, "--table", "qosmap_check", "--no-system-tables",
        ])
        #expect(markOnly.status == 0)
        #expect(try nftCheck(markOnly.out) == nil)
        let whole = try nftRuleset("d", "system-tables: false\ndomain: \(domain)\n", table: "qosmap_check")
        #expect(try nftCheck(whole) == nil)
    }
}
