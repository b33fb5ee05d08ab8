import Foundation
import QoSMapCore
import QoSMapDaemon
import QoSMapPacket
import Testing

@testable import QoSMapCLI

/// A config with queues on wan0 (AF4 made pq), CAKE on lan1, none on lan0,
/// and `priority: true`, which the queues override on their egress.
let queueTestConfig = """
    system-tables: false
    interfaces:
      lan0: {trust: dscp}
      lan1: {queues: {rate: 1gbit, discipline: cake}}
      wan0:
        outbound-domain: 5p3d
        queues: {rate: 20mbit, scheduling: {AF4: pq}, replace: true}
    actions:
      priority: true
    classify:
      rules:
        - name: sip
          match: {protocol: udp, destination-port: 5060}
          set: {class: CS6}
    """

/// The body of chain `name` in an nft ruleset (the lines between its braces).
func nftChain(_ text: String, _ name: String) throws -> String {
    let start = try #require(text.range(of: "  chain \(name) {\n")).upperBound
    let end = try #require(text[start...].range(of: "\n  }\n")).lowerBound
    return String(text[start..<end])
}

/// `meta priority set X` of a verdict (`goto CHAIN` or `accept`), nil when none.
func nftPriority(_ text: String, verdict: String) throws -> String? {
    guard verdict.hasPrefix("goto ") else { return nil }
    let body = try nftChain(text, String(verdict.dropFirst(5)))
    guard let line = body.split(separator: "\n").first(where: { $0.contains("meta priority set ") }) else {
        return nil
    }
    return String(line.split(separator: " ").last!)
}

/// The verdict for each DSCP in the `ip dscp` (or `ip6 dscp`) map of the
/// policy chain that pair `input . output` goes to.
func nftDSCPVerdicts(_ text: String, input: String, output: String, family: String) throws -> [UInt8: String]
{
    let key = "\"\(input)\" . \"\(output)\" : goto "
    let from = try #require(text.range(of: key)).upperBound
    let policy = String(text[from...].prefix { $0 != "," && $0 != "\n" })
    let body = try nftChain(text, policy)
    let map = try #require(body.range(of: "    \(family) dscp vmap {\n")).upperBound
    var verdicts: [UInt8: String] = [:]
    for element in body[map...].prefix(while: { $0 != "}" }).split(whereSeparator: { $0 == "," || $0 == "\n" }
    ) {
        let parts = element.split(separator: ":", maxSplits: 1).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard parts.count == 2, let d = UInt8(parts[0]) else { continue }
        verdicts[d] = parts[1]
    }
    return verdicts
}

@Suite("export nft and export tc with queues")
struct QueueExportTests {
    /// Every DSCP, both families, leaving by wan0: the nft chain sets the
    /// skb priority qosmapd's datapaths set for the packet's class (from
    /// `DaemonConfig.queuePriorities`, and the class from the daemon's
    /// snapshot policy); leaving by lan0 (no queues) it is still the PCP.
    @Test func nftPriorityIsTheQueueOfTheClass() throws {
        let config = try ExportConfig.parse(queueTestConfig, file: "q.yaml")
        let policies = try ExportPolicies(config: config, extraTables: [], systemDirectory: nil)
        let text = NFTRuleset(policies: policies, table: "qosmap", priority: -150, source: "q.yaml").text
        var daemon = try DaemonConfig.parse(queueTestConfig, file: "q.yaml")
        daemon.tables = []
        let snapshot = try PolicySnapshot(config: daemon, generation: 1)
        let queued = try #require(daemon.queuePriorities(output: "wan0"))
        var seen = Set<String>()
        for (family, keyword) in [(NFTRuleset.Family.v4, "ip"), (.v6, "ip6")] {
            let toWAN = try nftDSCPVerdicts(text, input: "lan0", output: "wan0", family: keyword)
            let toLAN = try nftDSCPVerdicts(text, input: "wan0", output: "lan0", family: keyword)
            #expect(toWAN.count == 64 && toLAN.count == 64)
            for d in UInt8(0)..<64 {
                var packet = NFTRuleset.header(family, dscp: d)
                let wan = PacketMarker.remark(
                    &packet, format: .ip, policy: snapshot.policy(input: "lan0", output: "wan0"))
                let want = TCHandle(rawValue: queued[Int(wan.treatment.serviceClass.rawValue)]).description
                #expect(
                    try nftPriority(text, verdict: toWAN[d] ?? "") == want, "\(keyword) dscp \(d) -> wan0")
                seen.insert(want)
                var again = NFTRuleset.header(family, dscp: d)
                let lan = PacketMarker.remark(
                    &again, format: .ip, policy: snapshot.policy(input: "wan0", output: "lan0"))
                let pcp = snapshot.policy(input: "wan0", output: "lan0").egress.pcp(for: lan.treatment)
                #expect(
                    try nftPriority(text, verdict: toLAN[d] ?? "") == "0:\(pcp.rawValue)", "dscp \(d) -> lan0"
                )
            }
        }
        // The classes the default domain gives these DSCPs: every leaf but none other.
        #expect(
            seen == Set(ServiceClass.allCases.map { "7173:\(String(0x10 + Int($0.rawValue), radix: 16))" }))
        // Fixed points: EF, AF4 (pq here, same leaf), BE.
        let v4 = try nftDSCPVerdicts(text, input: "lan0", output: "wan0", family: "ip")
        #expect(try nftPriority(text, verdict: v4[46]!) == "7173:15")
        #expect(try nftPriority(text, verdict: v4[34]!) == "7173:14")
        #expect(try nftPriority(text, verdict: v4[0]!) == "7173:10")
        // The flow rule's chain (CS6) puts its packets into CS6's leaf on wan0.
        #expect(text.contains("meta priority set 7173:16"))
        // CAKE on lan1: the tin's priority, 7173:(tin + 1) in diffserv8.
        let toCake = try nftDSCPVerdicts(text, input: "lan0", output: "lan1", family: "ip")
        #expect(try nftPriority(text, verdict: toCake[46]!) == "7173:6")
        #expect(try nftPriority(text, verdict: toCake[0]!) == "7173:1")
    }

    /// The script for a 20mbit HTB with the issue's default scheduling: the
    /// values worked out from the tree's rules (pq-max 50 % = 10mbit, pq
    /// leaves 1 % of it, wfq 10mbit split 30:25:20:15:10, quanta 152 bytes
    /// per weight point, bfifo 100 ms of the ceil).
    @Test func tcScriptHasThePlansValues() throws {
        let yaml = "interfaces:\n  eth1: {queues: {rate: 20mbit}}\n"
        let config = try ExportConfig.parse(yaml, file: "t.yaml")
        let text = TCScript(queues: config.queues, leaf: .bfifo, source: "t.yaml").text
        let lines = text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map {
            String($0.split(separator: "#").first!).trimmingCharacters(in: .whitespaces)
        }
        #expect(lines.first == "qdisc add dev eth1 root handle 7173: htb default 10 r2q 10")
        let expected = [
            "class replace dev eth1 parent 7173: classid 7173:1 htb rate 20mbit ceil 20mbit prio 0 quantum 1514",
            "class replace dev eth1 parent 7173:1 classid 7173:2 htb rate 10mbit ceil 10mbit prio 0 quantum 1514",
            "class replace dev eth1 parent 7173:2 classid 7173:17 htb rate 100kbit ceil 10mbit prio 0 quantum 1514",
            "class replace dev eth1 parent 7173:2 classid 7173:15 htb rate 100kbit ceil 10mbit prio 2 quantum 1514",
            "class replace dev eth1 parent 7173:1 classid 7173:3 htb rate 10mbit ceil 20mbit prio 0 quantum 1514",
            "class replace dev eth1 parent 7173:3 classid 7173:14 htb rate 3mbit ceil 20mbit prio 3 quantum 4560",
            "class replace dev eth1 parent 7173:3 classid 7173:10 htb rate 1mbit ceil 20mbit prio 3 quantum 1520",
            "qdisc replace dev eth1 parent 7173:10 handle 10: bfifo limit 250000",
            "qdisc replace dev eth1 parent 7173:15 handle 15: bfifo limit 125000",
        ]
        for line in expected { #expect(lines.contains(line), "\(line)\n\(text)") }
        #expect(lines.count == 1 + 11 + 8)
        // fq_codel leaves: CoDel's 5 ms / 100 ms at these rates.
        let codel = TCScript(queues: config.queues, leaf: .fqCodel, source: "t.yaml").text
        #expect(
            codel.contains(
                "qdisc replace dev eth1 parent 7173:14 handle 14: fq_codel target 5000us interval 100000us ecn\n"
            ))
        #expect(!codel.contains("bfifo"))
    }

    /// Every leaf class id the script creates is the priority export nft
    /// sets for that class; `replace: true` replaces the root; CAKE is one line.
    @Test func tcScriptAgreesWithThePriorities() throws {
        let config = try ExportConfig.parse(queueTestConfig, file: "q.yaml")
        let text = TCScript(queues: config.queues, leaf: .fqCodel, source: "q.yaml").text
        #expect(text.contains("\nqdisc replace dev wan0 root handle 7173: htb default 10 r2q 10\n"))
        #expect(text.contains("\nqdisc add dev lan1 root handle 7173: cake bandwidth 1gbit diffserv8\n"))
        #expect(!text.contains("dev lan0"))
        let priorities = try #require(config.queuePriorities(output: "wan0"))
        for serviceClass in ServiceClass.allCases {
            let id = TCHandle(rawValue: priorities[Int(serviceClass.rawValue)])
            #expect(text.contains(" classid \(id) htb "), "\(serviceClass) \(id)")
            #expect(text.contains("dev wan0 parent \(id) handle "), "\(serviceClass) leaf")
        }
        // AF4 made pq is served in the pq parent, third after CS7 and CS6... and EF.
        #expect(text.contains("parent 7173:2 classid 7173:14 htb rate 100kbit ceil 10mbit prio 3 "))
    }

    @Test func tcRefusals() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qm-tc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let none = dir.appendingPathComponent("none.yaml").path
        try "interfaces:\n  eth0: {}\n".write(toFile: none, atomically: true, encoding: .utf8)
        let r = try qosmap(["export", "tc", "--config", none])
        #expect(r.status == 65)
        #expect(r.err.hasPrefix("\(none): no interface has queues:; allowed:"), "\(r.err)")
        #expect(r.err.split(separator: "\n").count == 1)
        let good = dir.appendingPathComponent("q.yaml").path
        try queueTestConfig.write(toFile: good, atomically: true, encoding: .utf8)
        let leaf = try qosmap(["export", "tc", "--config", good, "--leaf", "gred"])
        #expect(leaf.status == 64)
        #expect(leaf.err.contains("invalid --leaf 'gred'; allowed: fq_codel, bfifo"), "\(leaf.err)")
        #expect(try qosmap(["export", "tc"]).status == 64)
        #expect(try qosmap(["export", "nft", "--config", good, "--leaf", "bfifo"]).status == 64)
        // Download queues: built on the IFB and classified by u32 there; the
        // nft export says so in a comment; with cake (tins by skb priority
        // only) refused, as qosmapd refuses it without ebpf.
        let ingress = dir.appendingPathComponent("i.yaml").path
        try "interfaces:\n  eth0: {queues: {rate: 10mbit, ingress-rate: 5mbit}}\n".write(
            toFile: ingress, atomically: true, encoding: .utf8)
        let i = try qosmap(["export", "tc", "--config", ingress, "--no-system-tables"])
        #expect(i.status == 0, "\(i.err)")
        #expect(i.out.contains("qdisc add dev qmi-eth0 root handle 7173: htb default 10"), "\(i.out)")
        #expect(
            i.out.contains(
                "filter add dev qmi-eth0 parent 7173: prio 1 protocol ip u32 match u32 0x00200000 0x00fc0000 at 0 classid 7173:11  # trust dscp -> AF1"
            ), "\(i.out)")
        #expect(
            i.out.contains(
                "filter add dev eth0 ingress prio 29044 protocol all u32 match u32 0 0 action mirred egress redirect dev qmi-eth0"
            ))
        let n = try qosmap(["export", "nft", "--config", ingress, "--no-system-tables"])
        #expect(n.status == 0, "\(n.err)")
        #expect(n.out.contains("# Download queues of eth0 (ingress-rate): not in this ruleset"), "\(n.out)")
        let cake = dir.appendingPathComponent("c.yaml").path
        try "interfaces:\n  eth0: {queues: {rate: 10mbit, ingress-rate: 5mbit, discipline: cake}}\n".write(
            toFile: cake, atomically: true, encoding: .utf8)
        let c = try qosmap(["export", "tc", "--config", cake])
        #expect(c.status == 65)
        #expect(
            c.err.hasPrefix(
                "\(cake):2:10: ingress-rate of 'eth0' with discipline: cake is built by qosmapd's ebpf datapath only"
            ),
            "\(c.err)")
        // -o: written whole on success; an existing file is kept on failure.
        let out = dir.appendingPathComponent("q.tc").path
        #expect(try qosmap(["export", "tc", "--config", good, "-o", out]).status == 0)
        let written = try String(contentsOfFile: out, encoding: .utf8)
        #expect(written.hasPrefix("# qosmap export tc --config \(good) --leaf fq_codel\n"))
        #expect(try qosmap(["export", "tc", "--config", none, "-o", out]).status == 65)
        #expect(try String(contentsOfFile: out, encoding: .utf8) == written)
    }
}

/// `explain` and `classify` name the queue on an egress with queues; explain
/// under trust none with flow rules traces instead of refusing (issue 39).
@Suite("explain and classify name the queue")
struct QueueNamingTests {
    static func withConfig(_ text: String, _ body: (String) throws -> Void) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qm-qn-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("q.yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        try body(path)
    }

    @Test func explainNamesTheQueue() throws {
        try Self.withConfig(queueTestConfig) { path in
            let base = ["explain", "--config", path, "--ingress", "lan0", "--no-system-tables"]
            let ef = try qosmap(base + ["46", "--egress", "wan0"])
            #expect(ef.status == 0, "\(ef.err)")
            #expect(ef.out.contains(" 7173:15 (EF, pq)  on wan0\n"), "\(ef.out)")
            // AF4 is pq on wan0.
            let af4 = try qosmap(base + ["34", "--egress", "wan0"])
            #expect(af4.out.contains(" 7173:14 (AF4, pq)  on wan0\n"), "\(af4.out)")
            let cake = try qosmap(base + ["46", "--egress", "lan1"])
            #expect(cake.out.contains(" 7173:6 (EF, cake diffserv8 tin 5)  on lan1\n"), "\(cake.out)")
            let none = try qosmap(base + ["46", "--egress", "lan0"])
            #expect(none.status == 0 && !none.out.contains("queue"), "\(none.out)")
        }
    }

    @Test func classifyNamesTheQueue() throws {
        try Self.withConfig(queueTestConfig) { path in
            let args = [
                "classify", "--config", path, "--ingress", "lan0", "--egress", "wan0", "--protocol", "udp",
                "--source", "198.18.1.1", "--destination", "198.19.2.1", "--destination-port", "5060",
                "--no-system-tables",
            ]
            let r = try qosmap(args)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out.contains("queue 7173:16 (CS6, pq)"), "\(r.out)")
            #expect(!r.out.contains("priority"), "the queue's id is the priority: \(r.out)")
            let j = try qosmap(args + ["--json"])
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(j.out.utf8)) as? [String: Any])
            #expect((object["leaves"] as? [String: Any])?["priority"] as? Int == 0x7173_0016)
        }
    }

    /// Issue 39 a: trust none and flow rules, no packet described: BE/green
    /// traced, not exit 64.
    @Test func explainTrustNoneWithRules() throws {
        let yaml = queueTestConfig.replacingOccurrences(
            of: "lan0: {trust: dscp}", with: "lan0: {trust: none}")
        try Self.withConfig(yaml) { path in
            let r = try qosmap([
                "explain", "46", "--config", path, "--ingress", "lan0", "--egress", "wan0",
                "--no-system-tables",
            ])
            #expect(r.status == 0, "\(r.err)")
            #expect(
                r.out.contains(
                    "hop 1 lan0->wan0: trusts none (flow rules classify, else BE/green), writes dscp in 5p3d"),
                "\(r.out)")
            #expect(r.out.contains("BE/green"), "\(r.out)")
            #expect(r.out.contains("by trust none: no packet described"), "\(r.out)")
            #expect(r.out.contains(" 7173:10 (BE, wfq 10)  on wan0\n"), "\(r.out)")
            // --all would trace the DSCP as trusted: refused under trust none.
            let all = try qosmap([
                "explain", "--all", "--config", path, "--ingress", "lan0", "--egress", "wan0",
                "--no-system-tables",
            ])
            #expect(all.status == 64)
            #expect(
                all.err.contains("interface 'lan0' trusts none: --all has no trusted field"), "\(all.err)")
        }
    }
}
