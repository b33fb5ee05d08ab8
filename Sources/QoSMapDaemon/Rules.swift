import Logging
import Metrics
import QoSMapTables
import QoSMapYAML
import ServiceLifecycle
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// The `rules:` section: who owns the NFQUEUE rules, and with `install` how
/// qosmapd writes them.
///
/// With `install`, a packet the queue rule takes first gets a *pending* bit in
/// its skb mark; qosmapd's verdict clears it. A packet the kernel lets through
/// without a verdict (queue full with fail-open, or no listener with
/// `--queue-bypass`) continues at the next hook entry with the bit still set,
/// and a rule in mangle POSTROUTING counts it and clears the bit. The kernel
/// itself counts neither.
public struct RulesConfig: Sendable, Equatable {
    /// Who writes the NFQUEUE rules.
    public enum Mode: String, Sendable, CaseIterable {
        /// The operator's own iptables rules; qosmapd cannot count fail-open.
        case external
        /// qosmapd adds, replaces and removes its own rules and reads their counters.
        case install
    }

    /// A netfilter hook the queue rule is jumped from.
    public enum Hook: String, Sendable, CaseIterable {
        /// Forwarded traffic (`FORWARD`).
        case forward
        /// Host-originated traffic (`OUTPUT`).
        case output

        /// The built-in chain name.
        public var chain: String { rawValue.uppercased() }
    }

    /// The table holding the queue rule.
    public enum Table: String, Sendable, CaseIterable {
        /// After the filter table (priority 50): only packets the firewall
        /// accepted are queued, and an accept verdict skips no user rule
        /// except later security-table ones.
        case security
        /// Before the filter table (priority -150); a verdict skips the rest of mangle.
        case mangle
        /// The filter table (priority 0); a verdict skips the rest of the
        /// filter chain, that is the firewall's own rules after position 1.
        case filter
    }

    /// Who writes the rules; `external` keeps them the operator's.
    public var mode = Mode.external
    /// The skb mark bit set before queueing and cleared by the verdict.
    public var pendingMark: UInt32 = 0x8000_0000
    /// The hooks whose chains jump to the queue rule.
    public var hooks: [Hook] = [.forward]
    /// Egress interfaces (`-o`) to queue; nil: the config's `interfaces:`
    /// names, or every interface but `lo` when there are none.
    public var interfaces: [String]?
    /// The table holding the queue rule.
    public var table = Table.security
    /// Seconds between counter readings.
    public var interval = 5
    /// Where keys were written, for errors found once the whole config is read.
    var positions: [String: TableDiagnostic] = [:]

    /// Creates the default: `mode: external`.
    public init() {}

    /// The bit a verdict clears, or nil when qosmapd does not own the rules.
    @inlinable public var verdictClearBit: UInt32? { mode == .install ? pendingMark : nil }
}

extension ConfigParser {
    /// An interface name iptables takes after `-o` (and nothing that could
    /// break the restore script): 1-15 characters, a trailing `+` is a wildcard.
    static func validInterfaceName(_ s: String) -> Bool {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@:")
        let body = s.hasSuffix("+") ? s.dropLast() : Substring(s)
        return (1...15).contains(s.count) && !body.isEmpty && body.allSatisfy(allowed.contains)
    }

    mutating func position(_ node: Node) -> TableDiagnostic {
        TableDiagnostic(file: file, line: node.mark.line, column: node.mark.column, message: "")
    }

    /// Reads the `rules:` mapping.
    mutating func rules(_ node: Node, into config: inout DaemonConfig) {
        var r = RulesConfig()
        r.positions["rules"] = position(node)
        let keys = ["mode", "pending-mark", "hooks", "interfaces", "table", "interval"]
        for (_, v, k) in mapping(node, "rules", allowed: keys) ?? [] {
            r.positions[k] = position(v)
            switch k {
            case "mode":
                guard let s = scalar(v, "a rules mode") else { continue }
                guard let m = RulesConfig.Mode(rawValue: s) else {
                    error(v, "invalid rules mode '\(s)'; allowed: external, install")
                    continue
                }
                r.mode = m
            case "pending-mark":
                guard let m = integer(v, "pending-mark", 1...Int(UInt32.max)) else { continue }
                guard m.nonzeroBitCount == 1 else {
                    error(
                        v,
                        "invalid pending-mark 0x\(String(m, radix: 16)); allowed: a single bit, e.g. 0x80000000"
                    )
                    continue
                }
                r.pendingMark = UInt32(m)
            case "hooks":
                var hooks: [RulesConfig.Hook] = []
                for s in strings(v, "hooks") {
                    guard let h = RulesConfig.Hook(rawValue: s) else {
                        error(v, "invalid hook '\(s)'; allowed: forward, output")
                        continue
                    }
                    if !hooks.contains(h) { hooks.append(h) }
                }
                if hooks.isEmpty, diagnostics.isEmpty {
                    error(v, "expected at least one hook: forward, output")
                }
                r.hooks = hooks
            case "interfaces":
                let names = strings(v, "interface names")
                for n in names where !Self.validInterfaceName(n) {
                    error(
                        v,
                        "invalid interface name '\(n)'; allowed: 1-15 letters, digits, '.', '_', '-', '@', ':', and a trailing '+' (wildcard)"
                    )
                }
                r.interfaces = names
            case "table":
                guard let s = scalar(v, "a table name") else { continue }
                guard let t = RulesConfig.Table(rawValue: s) else {
                    error(v, "invalid rules table '\(s)'; allowed: security, mangle, filter")
                    continue
                }
                r.table = t
            default:  // interval
                r.interval = integer(v, "rules interval", 1...3600) ?? 5
            }
        }
        config.rules = r
    }

    /// Checks what `rules: install` needs from the rest of the config, once
    /// all of it is read (`actions.mark` may come after `rules`).
    mutating func checkRules(_ config: DaemonConfig) {
        let r = config.rules
        guard r.mode == .install, diagnostics.isEmpty else { return }
        let at = r.positions["pending-mark"] ?? r.positions["mode"] ?? r.positions["rules"]
        func report(_ d: TableDiagnostic?, _ message: String) {
            var d = d ?? TableDiagnostic(file: file, line: 1, column: 1, message: "")
            d.message = message
            yaml.diagnostics.append(d)
        }
        if let mark = config.mark, mark.mask & r.pendingMark != 0 {
            report(
                at,
                "pending-mark 0x\(String(r.pendingMark, radix: 16)) overlaps the actions.mark mask 0x\(String(mark.mask, radix: 16)); allowed: a bit outside it"
            )
        }
        let qs = config.queues.sorted()
        if let lo = qs.first, let hi = qs.last, Int(hi) - Int(lo) + 1 != qs.count {
            report(
                r.positions["mode"],
                "rules: install needs contiguous queue numbers (iptables --queue-balance A:B); queues are \(config.queues)"
            )
        }
        if r.interfaces == nil {
            for n in config.interfaces.keys.sorted() where !Self.validInterfaceName(n) {
                report(
                    r.positions["mode"],
                    "interface '\(n)' cannot be an iptables -o name; set rules.interfaces to valid names (1-15 letters, digits, '.', '_', '-', '@', ':')"
                )
            }
        }
    }
}

/// An address family and its iptables commands.
public enum RuleFamily: String, Sendable, CaseIterable {
    /// IPv4: `iptables-restore`, `iptables-save`.
    case ipv4
    /// IPv6: `ip6tables-restore`, `ip6tables-save`.
    case ipv6

    /// The restore command's name.
    public var restore: String { self == .ipv4 ? "iptables-restore" : "ip6tables-restore" }
    /// The save command's name.
    public var save: String { self == .ipv4 ? "iptables-save" : "ip6tables-save" }
}

/// Readings of the installed rules' packet counters, IPv4 and IPv6 together.
public struct RuleCounters: Sendable, Equatable {
    /// Packets the queue rules matched: queued, plus those the kernel let
    /// through without a verdict.
    public var queued: UInt64 = 0
    /// Packets that passed the queue rule without a verdict: fail-open (queue
    /// full) plus bypass (no listener), as counted in mangle POSTROUTING.
    public var unverdicted: UInt64 = 0
    /// Queue rules found in the reading (0: the rules are gone).
    public var queueRules = 0

    /// Creates a reading.
    public init(queued: UInt64 = 0, unverdicted: UInt64 = 0, queueRules: Int = 0) {
        self.queued = queued
        self.unverdicted = unverdicted
        self.queueRules = queueRules
    }

    /// Adds another family's (or an earlier rule set's) reading.
    public static func + (a: RuleCounters, b: RuleCounters) -> RuleCounters {
        RuleCounters(
            queued: a.queued &+ b.queued, unverdicted: a.unverdicted &+ b.unverdicted,
            queueRules: a.queueRules + b.queueRules)
    }
}

/// The pure part: rendering iptables-restore scripts and reading
/// iptables-save text. Unit-tested on sample text.
public enum RuleSet {
    /// The chain jumped from the hooks: selects packets by egress interface.
    public static let selectChain = "QOSMAPD"
    /// Sets the pending bit and queues.
    public static let queueChain = "QOSMAPD_QUEUE"
    /// mangle POSTROUTING: counts and clears the pending bit.
    public static let countChain = "QOSMAPD_COUNT"
    static let ourChains = [selectChain, queueChain, countChain]
    /// The tables a queue chain may have been left in by an earlier config.
    static let tables = ["filter", "mangle", "security"]

    /// One rule of iptables-save output.
    public struct SavedRule: Sendable, Equatable {
        /// The `[packets:bytes]` packet count, when saved with `-c`.
        public var packets: UInt64
        /// The chain after `-A`.
        public var chain: String
        /// The rest of the rule, as saved.
        public var spec: String
        /// Creates a rule.
        public init(packets: UInt64, chain: String, spec: String) {
            self.packets = packets
            self.chain = chain
            self.spec = spec
        }

        /// The `-j` target, if any.
        public var target: String? {
            let t = spec.split(separator: " ")
            guard let i = t.firstIndex(of: "-j"), i + 1 < t.count else { return nil }
            return String(t[i + 1])
        }
    }

    /// One table of iptables-save output.
    public struct SavedTable: Sendable, Equatable {
        /// Declared chains (built-in and user).
        public var chains: [String] = []
        /// The rules, in order.
        public var rules: [SavedRule] = []
    }

    /// Parses `iptables-save [-c]` text into tables by name.
    public static func parseSave(_ text: String) -> [String: SavedTable] {
        var tables: [String: SavedTable] = [:]
        var current: String?
        for raw in text.split(separator: "\n") {
            // iptables-save writes ASCII: blanks are spaces and tabs.
            var line = raw.drop { $0 == " " || $0 == "\t" }
            while line.last == " " || line.last == "\t" { line = line.dropLast() }
            if line.hasPrefix("*") {
                let name = String(line.dropFirst())
                if tables[name] == nil { tables[name] = SavedTable() }
                current = name
                continue
            }
            guard let t = current else { continue }
            if line.hasPrefix(":") {
                let name = line.dropFirst().split(separator: " ").first.map(String.init) ?? ""
                tables[t]!.chains.append(name)
                continue
            }
            var packets: UInt64 = 0
            if line.hasPrefix("["), let close = line.firstIndex(of: "]") {
                let counts = line[line.index(after: line.startIndex)..<close].split(separator: ":")
                packets = counts.first.flatMap { UInt64($0) } ?? 0
                line = line[line.index(after: close)...].drop { $0 == " " }
            }
            guard line.hasPrefix("-A ") else { continue }
            let rest = line.dropFirst(3)
            let chain = rest.prefix { $0 != " " }
            let spec = rest.dropFirst(chain.count).drop { $0 == " " }
            tables[t]!.rules.append(SavedRule(packets: packets, chain: String(chain), spec: String(spec)))
        }
        return tables
    }

    /// The mark as iptables writes it.
    static func hex(_ v: UInt32) -> String { "0x" + String(v, radix: 16) }

    /// The NFQUEUE target's queue options: `--queue-num N` for one queue,
    /// `--queue-balance A:B` for a contiguous set (the config refuses others).
    public static func queueOptions(_ queues: [UInt16]) -> String {
        let qs = queues.sorted()
        guard let lo = qs.first, let hi = qs.last, lo != hi else { return "--queue-num \(qs.first ?? 0)" }
        return "--queue-balance \(lo):\(hi)"
    }

    /// The egress interfaces `rules: install` queues: `rules.interfaces`, else
    /// the config's `interfaces:` names; empty means every interface but `lo`.
    public static func interfaces(_ config: DaemonConfig) -> [String] {
        config.rules.interfaces ?? config.interfaces.keys.sorted()
    }

    /// The rules qosmapd wants in `table`, as `-A`/`-I` lines (empty for external).
    public static func wanted(_ config: DaemonConfig, table: String) -> (chains: [String], lines: [String]) {
        let r = config.rules
        guard r.mode == .install else { return ([], []) }
        var chains: [String] = []
        var lines: [String] = []
        if table == r.table.rawValue {
            chains += [selectChain, queueChain]
            let names = interfaces(config)
            if names.isEmpty {
                lines.append("-A \(selectChain) ! -o lo -j \(queueChain)")
            } else {
                lines += names.map { "-A \(selectChain) -o \($0) -j \(queueChain)" }
            }
            lines.append("-A \(queueChain) -j MARK --or-mark \(hex(r.pendingMark))")
            lines.append("-A \(queueChain) -j NFQUEUE \(queueOptions(config.queues)) --queue-bypass")
            // Position 1: ahead of the operator's rules in this table.
            lines += r.hooks.map { "-I \($0.chain) 1 -j \(selectChain)" }
        }
        if table == "mangle" {
            chains.append(countChain)
            let bit = hex(r.pendingMark)
            lines.append(
                "-A \(countChain) -m mark --mark \(bit)/\(bit) -j MARK --and-mark \(hex(~r.pendingMark))")
            lines.append("-I POSTROUTING 1 -j \(countChain)")
        }
        return (chains, lines)
    }

    /// The `iptables-restore --noflush` script that turns the current state
    /// (`save`, from `iptables-save`) into the config's: every jump to a
    /// qosmapd chain is deleted, qosmapd's chains are declared (which creates
    /// or flushes them) and refilled, and chains no longer wanted are deleted.
    /// One transaction per family, so a replace never leaves a gap. Returns
    /// nil when nothing is to be done (external mode, nothing left over).
    public static func script(_ config: DaemonConfig, save: String) -> String? {
        let saved = parseSave(save)
        var out: [String] = []
        for table in tables {
            let have = saved[table] ?? SavedTable()
            let existing = ourChains.filter(have.chains.contains)
            let want = wanted(config, table: table)
            guard !existing.isEmpty || !want.chains.isEmpty else { continue }
            out.append("*\(table)")
            for c in ourChains where existing.contains(c) || want.chains.contains(c) {
                out.append(":\(c) - [0:0]")
            }
            for rule in have.rules
            where !ourChains.contains(rule.chain) && rule.target.map(ourChains.contains) == true {
                out.append("-D \(rule.chain) \(rule.spec)")
            }
            out += want.lines
            for c in existing where !want.chains.contains(c) { out.append("-X \(c)") }
            out.append("COMMIT")
        }
        return out.isEmpty ? nil : out.joined(separator: "\n") + "\n"
    }

    /// Reads the counters of qosmapd's rules from `iptables-save -c` text (any
    /// tables): the NFQUEUE rules' packets and the counting rule's packets.
    public static func counters(save: String) -> RuleCounters {
        var c = RuleCounters()
        for (_, table) in parseSave(save) {
            for rule in table.rules {
                if rule.chain == queueChain, rule.target == "NFQUEUE" {
                    c.queued &+= rule.packets
                    c.queueRules += 1
                } else if rule.chain == countChain {
                    c.unverdicted &+= rule.packets
                }
            }
        }
        return c
    }

    /// The queue numbers that `-j NFQUEUE` rules in iptables-save text feed:
    /// `--queue-num N`, every queue of `--queue-balance A:B`, and queue 0 for
    /// a rule with neither (the target's default).
    public static func fedQueues(save: String) -> Set<UInt16> {
        var fed: Set<UInt16> = []
        for (_, table) in parseSave(save) {
            for rule in table.rules where rule.target == "NFQUEUE" {
                let t = rule.spec.split(separator: " ")
                if let i = t.firstIndex(of: "--queue-num"), i + 1 < t.count, let q = UInt16(t[i + 1]) {
                    fed.insert(q)
                } else if let i = t.firstIndex(of: "--queue-balance"), i + 1 < t.count {
                    let ends = t[i + 1].split(separator: ":").compactMap { UInt16($0) }
                    if ends.count == 2, ends[0] <= ends[1] { fed.formUnion(ends[0]...ends[1]) }
                } else {
                    fed.insert(0)
                }
            }
        }
        return fed
    }
}

/// A failed rule command: the command line, its exit status and stderr.
public struct RuleError: Error, Sendable, CustomStringConvertible {
    /// One line naming the command and what it said.
    public var description: String

    /// Creates an error.
    public init(_ description: String) { self.description = description }
}

/// Runs a command with optional standard input and returns its standard output.
public struct CommandRunner: Sendable {
    /// Runs `name` (looked up on PATH) with arguments and input.
    public var run: @Sendable (_ name: String, _ arguments: [String], _ input: String?) throws -> String

    /// Creates a runner from a function (tests pass a fake).
    public init(
        run: @escaping @Sendable (_ name: String, _ arguments: [String], _ input: String?) throws -> String
    ) {
        self.run = run
    }

    /// The absolute path of `name` on PATH (default `/usr/sbin:/usr/bin:/sbin:/bin`).
    public static func which(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/sbin:/usr/bin:/sbin:/bin"
        for dir in path.split(separator: ":") where dir.hasPrefix("/") {
            let candidate = "\(dir)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// Runs the real command (`posix_spawn`, see ``runChild(_:_:input:)``).
    public static let system = CommandRunner { name, arguments, input in
        guard let path = which(name) else {
            throw RuleError(
                "\(name): not found on PATH (\(ProcessInfo.processInfo.environment["PATH"] ?? "unset")); install iptables"
            )
        }
        let line = ([path] + arguments).joined(separator: " ")
        // Written and closed before launch: a script this small fits in the
        // pipe buffer, so no write blocks, and none can raise SIGPIPE.
        let bytes = input.map { Array($0.utf8) }
        if let bytes, bytes.count >= 60_000 {
            throw RuleError("\(line): rule script of \(bytes.count) bytes is too long; allowed: under 60000")
        }
        let child: ChildResult
        switch runChild(path, arguments, input: bytes) {
        case .success(let result): child = result
        case .failure(let error): throw RuleError("\(line): cannot run: \(error)")
        }
        guard child.exited, child.status == 0 else {
            let said = String(decoding: child.stderr, as: UTF8.self).split(separator: "\n").joined(
                separator: "; ")
            throw RuleError("\(line) failed (status \(child.status)): \(said)")
        }
        return String(decoding: child.stdout, as: UTF8.self)
    }
}

/// Installs, replaces and removes qosmapd's own NFQUEUE rules (`rules:
/// install`) for IPv4 and IPv6, and reads their counters.
///
/// The coordinator calls ``apply(_:)`` at start (after the queues are bound,
/// ideally) and after every successful reload, ``remove()`` at exit, and
/// ``publish(into:)`` periodically (``RuleService`` does the last two).
public final class RuleManager: Sendable {
    private struct State {
        /// The rules config installed by this process, nil when none is.
        var installed: DaemonConfig?
        /// Counts of rule sets this process replaced or removed, so that
        /// ``counters()`` never goes backwards on a replace.
        var banked = RuleCounters()
        /// Whether the last reading failed (to log a failure once).
        var failing = false
    }

    private let state = Mutex(State())
    private let logger: Logger
    private let runner: CommandRunner

    /// Creates a manager; `runner` runs iptables commands (tests pass a fake).
    public init(logger: Logger, runner: CommandRunner = .system) {
        self.logger = logger
        self.runner = runner
    }

    /// Whether this process has rules installed.
    public var isInstalled: Bool { state.withLock { $0.installed != nil } }

    /// Makes the system's rules match the config: with `install`, replaces
    /// qosmapd's rules (and any left by an earlier, killed instance) in one
    /// `iptables-restore --noflush` transaction per family; with `external`,
    /// removes rules this process installed and otherwise does nothing.
    /// - Throws: ``RuleError`` naming the failed command and its stderr.
    public func apply(_ config: DaemonConfig) throws {
        try state.withLock { s in
            guard config.rules.mode == .install else {
                if s.installed != nil { removeLocked(&s) }
                return
            }
            for family in RuleFamily.allCases {
                let save = try runner.run(family.save, ["-c"], nil)
                if s.installed != nil { s.banked = s.banked + RuleSet.counters(save: save) }
                if let script = RuleSet.script(config, save: save) {
                    _ = try runner.run(family.restore, ["--noflush"], script)
                }
                s.installed = config
            }
            logger.info(
                "NFQUEUE rules installed",
                metadata: [
                    "table": "\(config.rules.table.rawValue)", "hooks": "\(config.rules.hooks.map(\.chain))",
                    "interfaces": "\(RuleSet.interfaces(config))",
                    "queue": "\(RuleSet.queueOptions(config.queues))",
                    "pending_mark": "\(RuleSet.hex(config.rules.pendingMark))",
                ])
        }
    }

    /// Removes every qosmapd rule and chain, v4 and v6, if this process
    /// installed rules (errors are logged); otherwise does nothing.
    public func remove() {
        state.withLock { s in
            if s.installed != nil { removeLocked(&s) }
        }
    }

    private func removeLocked(_ s: inout State) {
        var external = DaemonConfig()
        external.rules.mode = .external
        for family in RuleFamily.allCases {
            do {
                let save = try runner.run(family.save, ["-c"], nil)
                if s.installed != nil { s.banked = s.banked + RuleSet.counters(save: save) }
                if let script = RuleSet.script(external, save: save) {
                    _ = try runner.run(family.restore, ["--noflush"], script)
                    logger.info("NFQUEUE rules removed", metadata: ["family": "\(family.rawValue)"])
                }
            } catch {
                logger.error("cannot remove NFQUEUE rules", metadata: ["error": "\(error)"])
            }
        }
        s.installed = nil
    }

    /// The installed rules' counters since this process first installed them
    /// (v4 + v6, carried across replaces), or nil when no rules are installed
    /// by this process or they cannot be read.
    public func counters() -> RuleCounters? {
        state.withLock { s in
            guard let config = s.installed else { return nil }
            var c = s.banked
            let tables = Set([config.rules.table.rawValue, "mangle"]).sorted()
            do {
                for family in RuleFamily.allCases {
                    for table in tables {
                        c = c + RuleSet.counters(save: try runner.run(family.save, ["-c", "-t", table], nil))
                    }
                }
            } catch {
                if !s.failing {
                    logger.error("cannot read NFQUEUE rule counters", metadata: ["error": "\(error)"])
                }
                s.failing = true
                return nil
            }
            if s.failing { logger.info("NFQUEUE rule counters readable again") }
            s.failing = false
            return c
        }
    }

    /// The configured queues that no iptables or ip6tables NFQUEUE rule feeds
    /// (with `rules: external`, a queue nothing sends to marks nothing, and
    /// the kernel says nothing of it); nil when the rules cannot be read.
    public func unfedQueues(_ config: DaemonConfig) -> [UInt16]? {
        var fed: Set<UInt16> = []
        do {
            for family in RuleFamily.allCases {
                fed.formUnion(RuleSet.fedQueues(save: try runner.run(family.save, [], nil)))
            }
        } catch {
            logger.debug(
                "cannot read the ruleset to check the queues are fed", metadata: ["error": "\(error)"])
            return nil
        }
        return config.queues.filter { !fed.contains($0) }
    }

    /// Reads the counters and hands the increase to `metrics`.
    public func publish(into metrics: RuleMetrics) {
        if let c = counters() { metrics.record(c) }
    }
}

/// The rule counters as monotonic swift-metrics counters:
/// `qosmapd_rule_queued_packets_total` and `qosmapd_failopen_packets_total`.
public final class RuleMetrics: Sendable {
    private let queued: Counter
    private let failOpen: Counter
    private let last = Mutex<RuleCounters?>(nil)
    private let fedGauges = Mutex<[UInt16: Gauge]>([:])

    /// Creates the counters with the bootstrapped metrics backend.
    public init() {
        queued = Counter(label: "qosmapd_rule_queued_packets_total")
        failOpen = Counter(label: "qosmapd_failopen_packets_total")
    }

    /// The increase from one reading to the next. A smaller reading means the
    /// rules were re-created (by someone else: our own replaces are carried
    /// over), so all of it is new.
    public static func increase(from old: UInt64?, to new: UInt64) -> UInt64 {
        guard let old, new >= old else { return new }
        return new - old
    }

    /// Sets `qosmapd_queue_fed{queue}` to 1 or 0 for each configured queue.
    public func recordFed(queues: [UInt16], unfed: [UInt16]) {
        fedGauges.withLock { gauges in
            for q in queues {
                let g = gauges[q] ?? Gauge(label: "qosmapd_queue_fed", dimensions: [("queue", "\(q)")])
                gauges[q] = g
                g.record(unfed.contains(q) ? 0 : 1)
            }
        }
    }

    /// Adds the increase since the previous reading.
    public func record(_ reading: RuleCounters) {
        let old = last.withLock { l in
            defer { l = reading }
            return l
        }
        let q = Self.increase(from: old?.queued, to: reading.queued)
        let f = Self.increase(from: old?.unverdicted, to: reading.unverdicted)
        if q > 0 { queued.increment(by: Int64(clamping: q)) }
        if f > 0 { failOpen.increment(by: Int64(clamping: f)) }
    }
}

/// Keeps `rules: install` in force while the daemon runs: re-applies the rules
/// after every successful reload (a new ``PolicyStore`` generation), publishes
/// the counters every `rules.interval` seconds, and removes the rules on
/// graceful shutdown. Register it after ``QueueService`` in the service group,
/// so that it shuts down first and no packet meets an unbound queue.
public struct RuleService: Service {
    let manager: RuleManager
    let store: PolicyStore
    let metrics: RuleMetrics
    let logger: Logger

    /// Creates the service.
    public init(manager: RuleManager, store: PolicyStore, metrics: RuleMetrics, logger: Logger) {
        self.manager = manager
        self.store = store
        self.metrics = metrics
        self.logger = logger
    }

    /// Polls the store every 250 ms and the counters every interval, until graceful shutdown.
    public func run() async throws {
        var generation = store.snapshot.generation
        var nextReading = ContinuousClock.now
        checkFed(store.snapshot.config)
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let snapshot = store.snapshot
            if snapshot.generation != generation {
                generation = snapshot.generation
                checkFed(snapshot.config)
                do {
                    // A failed transaction leaves the old rules in force.
                    try manager.apply(snapshot.config)
                } catch {
                    logger.error(
                        "reload: NFQUEUE rules not replaced; the old ones stay",
                        metadata: ["error": "\(error)"])
                }
            }
            if ContinuousClock.now >= nextReading {
                manager.publish(into: metrics)
                nextReading = .now + .seconds(snapshot.config.rules.interval)
            }
            try? await Task.sleep(for: .milliseconds(250))
        }
        manager.publish(into: metrics)
        manager.remove()
    }

    /// With external rules, warns about (and gauges) configured queues that
    /// no rule feeds; installed rules feed every queue by construction.
    func checkFed(_ config: DaemonConfig) {
        guard config.rules.mode == .external, let unfed = manager.unfedQueues(config) else { return }
        metrics.recordFed(queues: config.queues, unfed: unfed)
        for q in unfed {
            logger.warning(
                "no iptables or ip6tables NFQUEUE rule feeds this queue; nothing reaches it",
                metadata: ["queue": "\(q)"])
        }
    }
}
