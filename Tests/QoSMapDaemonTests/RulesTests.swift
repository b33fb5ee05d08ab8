import Logging
import NFQueue
import QoSMapCore
import QoSMapDaemon
import Synchronization
import Testing

// `rules: install`: config, rendering, counter parsing, the verdict's pending bit.

@Test func rulesDefaultToExternal() throws {
    let c = try DaemonConfig.parse(DaemonConfig.embeddedDefault, file: "<embedded default>")
    #expect(c.rules.mode == .external)
    #expect(c.rules.verdictClearBit == nil)
    #expect(c.rules.pendingMark == 0x8000_0000)
    #expect(c.rules.hooks == [.forward])
    #expect(c.rules.interfaces == nil)
    #expect(c.rules.table == .security)
    #expect(c.rules.interval == 5)
}

@Test func rulesKeysAreRead() throws {
    let c = try DaemonConfig.parse(
        """
        queues: [2, 3]
        rules:
          mode: install
          pending-mark: 0x4000
          hooks: [forward, output]
          interfaces: [eth0, wan+]
          table: mangle
          interval: 1
        """, file: "x.yaml")
    #expect(c.rules.mode == .install)
    #expect(c.rules.verdictClearBit == 0x4000)
    #expect(c.rules.hooks == [.forward, .output])
    #expect(c.rules.interfaces == ["eth0", "wan+"])
    #expect(c.rules.table == .mangle)
    #expect(c.rules.interval == 1)
}

@Test(arguments: [
    ("rules:\n  mode: auto\n", "x.yaml:2:9: invalid rules mode 'auto'; allowed: external, install"),
    (
        "rules:\n  mode: install\n  pending-mark: 0x3\n",
        "x.yaml:3:17: invalid pending-mark 0x3; allowed: a single bit, e.g. 0x80000000"
    ),
    (
        // The overlap is found once actions (written later) are read, and reported at the bit.
        "rules: {mode: install, pending-mark: 0x20}\nactions: {mark: true}\n",
        "x.yaml:1:38: pending-mark 0x20 overlaps the actions.mark mask 0x3f; allowed: a bit outside it"
    ),
    (
        // No pending-mark written: reported at the mode that asks for it.
        "actions:\n  mark: {mask: 0xff000000}\nrules:\n  mode: install\n",
        "x.yaml:4:9: pending-mark 0x80000000 overlaps the actions.mark mask 0xff000000; allowed: a bit outside it"
    ),
    (
        "queues: [0, 2]\nrules:\n  mode: install\n",
        "x.yaml:3:9: rules: install needs contiguous queue numbers (iptables --queue-balance A:B); queues are [0, 2]"
    ),
    ("rules:\n  hooks: [forward, input]\n", "x.yaml:2:10: invalid hook 'input'; allowed: forward, output"),
    (
        "rules:\n  interfaces: [\"eth0 -j DROP\"]\n",
        "x.yaml:2:15: invalid interface name 'eth0 -j DROP'; allowed: 1-15 letters, digits, '.', '_', '-', '@', ':', and a trailing '+' (wildcard)"
    ),
    ("rules:\n  table: nat\n", "x.yaml:2:10: invalid rules table 'nat'; allowed: security, mangle, filter"),
    (
        "rules:\n  policy: drop\n",
        "x.yaml:2:3: unknown key 'policy' in rules; allowed: mode, pending-mark, hooks, interfaces, table, interval"
    ),
])
func rulesConfigErrorsArePositioned(text: String, message: String) {
    do {
        _ = try DaemonConfig.parse(text, file: "x.yaml")
        Issue.record("accepted: \(text)")
    } catch {
        #expect(error.description == message)
    }
}

@Test(arguments: [
    ([UInt16(0)], "--queue-num 0"), ([7], "--queue-num 7"), ([0, 1], "--queue-balance 0:1"),
    ([5, 3, 4], "--queue-balance 3:5"),
])
func queueOptionsCoverTheQueues(queues: [UInt16], options: String) {
    #expect(RuleSet.queueOptions(queues) == options)
}

@Test func installScriptOnACleanSystem() throws {
    let c = try DaemonConfig.parse("queues: [0, 1]\nrules: {mode: install}\n", file: "x.yaml")
    #expect(
        RuleSet.script(c, save: "") == """
            *mangle
            :QOSMAPD_COUNT - [0:0]
            -A QOSMAPD_COUNT -m mark --mark 0x80000000/0x80000000 -j MARK --and-mark 0x7fffffff
            -I POSTROUTING 1 -j QOSMAPD_COUNT
            COMMIT
            *security
            :QOSMAPD - [0:0]
            :QOSMAPD_QUEUE - [0:0]
            -A QOSMAPD ! -o lo -j QOSMAPD_QUEUE
            -A QOSMAPD_QUEUE -j MARK --or-mark 0x80000000
            -A QOSMAPD_QUEUE -j NFQUEUE --queue-balance 0:1 --queue-bypass
            -I FORWARD 1 -j QOSMAPD
            COMMIT

            """)
}

@Test func interfacesComeFromTheConfigUnlessGiven() throws {
    let fromConfig = try DaemonConfig.parse(
        """
        interfaces: {wan0: {trust: none}, lan0: {}}
        rules: {mode: install, hooks: [forward, output], table: mangle, pending-mark: 0x100}
        """, file: "x.yaml")
    #expect(
        RuleSet.wanted(fromConfig, table: "mangle").lines == [
            "-A QOSMAPD -o lan0 -j QOSMAPD_QUEUE",
            "-A QOSMAPD -o wan0 -j QOSMAPD_QUEUE",
            "-A QOSMAPD_QUEUE -j MARK --or-mark 0x100",
            "-A QOSMAPD_QUEUE -j NFQUEUE --queue-num 0 --queue-bypass",
            "-I FORWARD 1 -j QOSMAPD",
            "-I OUTPUT 1 -j QOSMAPD",
            "-A QOSMAPD_COUNT -m mark --mark 0x100/0x100 -j MARK --and-mark 0xfffffeff",
            "-I POSTROUTING 1 -j QOSMAPD_COUNT",
        ])
    #expect(RuleSet.wanted(fromConfig, table: "security").lines.isEmpty)
    let given = try DaemonConfig.parse(
        "interfaces: {wan0: {trust: none}}\nrules: {mode: install, interfaces: [ppp+]}\n", file: "x.yaml")
    #expect(RuleSet.wanted(given, table: "security").lines.first == "-A QOSMAPD -o ppp+ -j QOSMAPD_QUEUE")
}

/// What `iptables-save -c` (1.8.9, nf_tables) printed after an install, plus
/// a leftover qosmapd chain in filter from an earlier `table: filter`.
let savedAfterInstall = """
    # Generated by iptables-save v1.8.9 (nf_tables) on Sun Nov 22 06:36:43 2026
    *filter
    :INPUT ACCEPT [0:0]
    :FORWARD DROP [5:300]
    :OUTPUT ACCEPT [0:0]
    :QOSMAPD - [0:0]
    :QOSMAPD_QUEUE - [0:0]
    [9:540] -A FORWARD -i lan0 -j ACCEPT
    [2:120] -A FORWARD -j QOSMAPD
    [2:120] -A QOSMAPD ! -o lo -j QOSMAPD_QUEUE
    [2:120] -A QOSMAPD_QUEUE -j MARK --set-xmark 0x80000000/0x80000000
    [2:120] -A QOSMAPD_QUEUE -j NFQUEUE --queue-num 0 --queue-bypass
    COMMIT
    # Completed on Sun Nov 22 06:36:43 2026
    *security
    :INPUT ACCEPT [0:0]
    :FORWARD ACCEPT [0:0]
    :OUTPUT ACCEPT [0:0]
    :QOSMAPD - [0:0]
    :QOSMAPD_QUEUE - [0:0]
    [700:42000] -A FORWARD -j QOSMAPD
    [700:42000] -A FORWARD -j QOSMAPD
    [700:42000] -A QOSMAPD ! -o lo -j QOSMAPD_QUEUE
    [700:42000] -A QOSMAPD_QUEUE -j MARK --set-xmark 0x80000000/0x80000000
    [700:42000] -A QOSMAPD_QUEUE -j NFQUEUE --queue-balance 0:1 --queue-bypass
    COMMIT
    *mangle
    :PREROUTING ACCEPT [0:0]
    :POSTROUTING ACCEPT [0:0]
    :QOSMAPD_COUNT - [0:0]
    [1000:60000] -A POSTROUTING -j QOSMAPD_COUNT
    [336:20160] -A QOSMAPD_COUNT -m mark --mark 0x80000000/0x80000000 -j MARK --set-xmark 0x0/0x80000000
    COMMIT
    """

@Test func countersAreReadFromSaveText() {
    let c = RuleSet.counters(save: savedAfterInstall)
    #expect(c.queued == 702)  // both tables' NFQUEUE rules; the MARK and jump rules are not counted
    #expect(c.unverdicted == 336)
    #expect(c.queueRules == 2)
    #expect(RuleSet.counters(save: "") == RuleCounters())
    let parsed = RuleSet.parseSave(savedAfterInstall)
    #expect(parsed["filter"]?.rules.first == .init(packets: 9, chain: "FORWARD", spec: "-i lan0 -j ACCEPT"))
    #expect(parsed["security"]?.chains == ["INPUT", "FORWARD", "OUTPUT", "QOSMAPD", "QOSMAPD_QUEUE"])
}

@Test func replaceDeletesLeftoversInOneTransaction() throws {
    let c = try DaemonConfig.parse("rules: {mode: install, interfaces: [r1]}\n", file: "x.yaml")
    #expect(
        RuleSet.script(c, save: savedAfterInstall) == """
            *filter
            :QOSMAPD - [0:0]
            :QOSMAPD_QUEUE - [0:0]
            -D FORWARD -j QOSMAPD
            -X QOSMAPD
            -X QOSMAPD_QUEUE
            COMMIT
            *mangle
            :QOSMAPD_COUNT - [0:0]
            -D POSTROUTING -j QOSMAPD_COUNT
            -A QOSMAPD_COUNT -m mark --mark 0x80000000/0x80000000 -j MARK --and-mark 0x7fffffff
            -I POSTROUTING 1 -j QOSMAPD_COUNT
            COMMIT
            *security
            :QOSMAPD - [0:0]
            :QOSMAPD_QUEUE - [0:0]
            -D FORWARD -j QOSMAPD
            -D FORWARD -j QOSMAPD
            -A QOSMAPD -o r1 -j QOSMAPD_QUEUE
            -A QOSMAPD_QUEUE -j MARK --or-mark 0x80000000
            -A QOSMAPD_QUEUE -j NFQUEUE --queue-num 0 --queue-bypass
            -I FORWARD 1 -j QOSMAPD
            COMMIT

            """)
    // External: everything of qosmapd's goes; nothing else is touched.
    let external = try DaemonConfig.parse("", file: "x.yaml")
    let removal = try #require(RuleSet.script(external, save: savedAfterInstall))
    #expect(!removal.contains("-A ") && !removal.contains("-I "))
    #expect(removal.components(separatedBy: "\n-X ").count - 1 == 5)
    #expect(!removal.contains("lan0"))
    #expect(RuleSet.script(external, save: "*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n") == nil)
}

@Test(arguments: [
    (UInt64?.none, UInt64(5), UInt64(5)), (5, 5, 0), (5, 12, 7),
    (12, 3, 3),  // rules re-created by someone else: everything read is new
])
func metricIncreaseSurvivesResets(old: UInt64?, new: UInt64, increase: UInt64) {
    #expect(RuleMetrics.increase(from: old, to: new) == increase)
}

@Test(arguments: [
    // (rules, packet mark, actions.mark, expected verdict mark)
    ("install", UInt32?.some(0x8000_0000), false, UInt32?.some(0)),
    ("install", 0x8000_1200, false, 0x1200),
    ("install", 0x8000_1200, true, 0x1200 | 0x34),  // EF green under mask 0x3f
    ("external", 0x8000_1200, false, nil),
    ("external", 0x8000_1200, true, 0x8000_1234),
])
func verdictClearsThePendingBitKeepingOtherBits(
    mode: String, mark: UInt32?, markAction: Bool, want: UInt32?
) throws {
    let config = try DaemonConfig.parse(
        "rules: {mode: \(mode)}\nactions: {mark: \(markAction)}\n", file: "x.yaml")
    let snapshot = try PolicySnapshot(config: config, generation: 0)
    var pipeline = PacketPipeline(interfaceName: { _ in nil })
    var bytes = ipv4UDP(tos: 0xB8)  // EF: kept, so no payload comes back
    bytes.withUnsafeMutableBytes { buf in
        var packet = QueuedPacket(id: 1, mark: mark, payload: buf)
        #expect(pipeline.decide(&packet, snapshot: snapshot).mark == want)
    }
}

@Test func malformedPacketsGetThePendingBitClearedToo() throws {
    let config = try DaemonConfig.parse("rules: {mode: install}\n", file: "x.yaml")
    let snapshot = try PolicySnapshot(config: config, generation: 0)
    var pipeline = PacketPipeline(interfaceName: { _ in nil })
    var bytes: [UInt8] = [0x45, 0x08, 0, 200, 0, 0]
    bytes.withUnsafeMutableBytes { buf in
        var packet = QueuedPacket(id: 7, mark: 0x8000_0001, payload: buf)
        let verdict = pipeline.decide(&packet, snapshot: snapshot)
        #expect(verdict.decision == .accept && verdict.payload == nil && verdict.mark == 1)
    }
    #expect(pipeline.counts.total(.malformed) == 1)
}

/// A fake iptables: records every call and answers saves from `saves`.
final class FakeIptables: Sendable {
    let calls = Mutex<[String]>([])
    let saves: Mutex<[String: String]>
    let failRestore: String?

    init(saves: [String: String] = [:], failRestore: String? = nil) {
        self.saves = Mutex(saves)
        self.failRestore = failRestore
    }

    var runner: CommandRunner {
        CommandRunner { name, arguments, input in
            self.calls.withLock { $0.append(([name] + arguments).joined(separator: " ")) }
            if name.hasSuffix("-restore") {
                if let f = self.failRestore, name == f {
                    throw RuleError(
                        "/usr/sbin/\(name) --noflush failed (status 2): iptables-restore: line 3 failed")
                }
                #expect(input?.hasSuffix("COMMIT\n") == true)
                return ""
            }
            let all = self.saves.withLock { $0[name] ?? "" }
            // `-t TABLE` saves that table alone, as iptables-save does.
            guard let t = arguments.firstIndex(of: "-t") else { return all }
            return all.components(separatedBy: "\n*").first { $0.hasPrefix(arguments[t + 1] + "\n") }
                .map { "*" + $0 } ?? ""
        }
    }
}

@Test func managerInstallsCountsAcrossReplacesAndRemoves() throws {
    let fake = FakeIptables()
    let manager = RuleManager(logger: Logger(label: "test"), runner: fake.runner)
    let config = try DaemonConfig.parse("rules: {mode: install}\n", file: "x.yaml")
    #expect(manager.counters() == nil)  // nothing installed by us
    try manager.apply(config)
    #expect(manager.isInstalled)
    #expect(
        fake.calls.withLock { $0 } == [
            "iptables-save -c", "iptables-restore --noflush", "ip6tables-save -c",
            "ip6tables-restore --noflush",
        ])
    // v4 has counted 700 queued / 336 unverdicted, v6 nothing yet. Readings
    // look at the configured table (security) and mangle only.
    fake.saves.withLock { $0["iptables-save"] = savedAfterInstall }
    #expect(manager.counters() == RuleCounters(queued: 700, unverdicted: 336, queueRules: 1))
    // A replace (reload) re-creates the rules with zero counts: the old ones
    // are carried over, from every table (the filter leftover's 2 included).
    try manager.apply(config)
    fake.saves.withLock { $0["iptables-save"] = "" }
    #expect(manager.counters()?.queued == 702)
    #expect(manager.counters()?.unverdicted == 336)
    fake.calls.withLock { $0.removeAll() }
    manager.remove()
    #expect(!manager.isInstalled)
    // The saves show nothing of qosmapd's left, so no restore runs.
    #expect(fake.calls.withLock { $0 } == ["iptables-save -c", "ip6tables-save -c"])
    manager.remove()  // idempotent, and runs nothing once removed
    #expect(fake.calls.withLock { $0.count } == 2)
}

@Test func managerReportsTheFailedCommand() throws {
    let fake = FakeIptables(failRestore: "ip6tables-restore")
    let manager = RuleManager(logger: Logger(label: "test"), runner: fake.runner)
    let config = try DaemonConfig.parse("rules: {mode: install}\n", file: "x.yaml")
    do {
        try manager.apply(config)
        Issue.record("apply succeeded")
    } catch {
        #expect("\(error)".hasPrefix("/usr/sbin/ip6tables-restore --noflush failed (status 2): "))
    }
    #expect(manager.isInstalled)  // v4 went in; the caller removes it on a failed start
}

/// The runner reads both streams as they come: a child that fills the stderr
/// pipe before finishing stdout must not stall; no input is /dev/null; a
/// child killed by a signal is a failure.
@Test func systemRunnerDrainsBothStreams() throws {
    let out = try CommandRunner.system.run(
        "sh", ["-c", "head -c 100000 /dev/zero | tr '\\0' e >&2; head -c 200000 /dev/zero | tr '\\0' o"], nil)
    #expect(out.utf8.count == 200_000 && out.allSatisfy { $0 == "o" })
    #expect(try CommandRunner.system.run("cat", [], nil) == "")
    #expect(throws: RuleError.self) { try CommandRunner.system.run("sh", ["-c", "kill -KILL $$"], nil) }
}

@Test func systemRunnerPassesInputAndReportsStderr() throws {
    #expect(CommandRunner.which("sh")?.hasPrefix("/") == true)
    #expect(CommandRunner.which("qosmapd-no-such-command") == nil)
    #expect(try CommandRunner.system.run("cat", [], "*mangle\nCOMMIT\n") == "*mangle\nCOMMIT\n")
    do {
        _ = try CommandRunner.system.run(
            "sh", ["-c", "echo out; echo bad line >&2; echo more >&2; exit 3"], nil)
        Issue.record("a failing command succeeded")
    } catch {
        let sh = try #require(CommandRunner.which("sh"))
        #expect(
            "\(error)"
                == "\(sh) -c echo out; echo bad line >&2; echo more >&2; exit 3 failed (status 3): bad line; more"
        )
    }
    do {
        _ = try CommandRunner.system.run("qosmapd-no-such-command", [], nil)
        Issue.record("a missing command ran")
    } catch {
        #expect("\(error)".hasPrefix("qosmapd-no-such-command: not found on PATH ("))
    }
}

/// Which queues external NFQUEUE rules feed, as iptables-save prints them.
@Test(
    arguments: [
        ("-A FORWARD -j NFQUEUE --queue-num 7 --queue-bypass", [7]),
        ("-A FORWARD -o eth1 -j NFQUEUE --queue-balance 2:4 --queue-bypass", [2, 3, 4]),
        ("-A FORWARD -j NFQUEUE", [0]),
        ("-A FORWARD -j ACCEPT", []),
        ("-A FORWARD -m comment --comment \"--queue-num 9\" -j ACCEPT", []),
    ] as [(String, [UInt16])])
func fedQueuesAreReadFromSaveText(rule: String, fed: [UInt16]) {
    let save = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n\(rule)\nCOMMIT\n"
    #expect(RuleSet.fedQueues(save: save) == Set(fed))
}
