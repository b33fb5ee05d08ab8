import Foundation
import Logging
import NFQueue
import Prometheus
import Synchronization
import Testing

@testable import QoSMapDaemon

// MARK: kernel queue figures

@Test func kernelQueueStatsParseSkipsMalformedLines() {
    let text = """
            0  11243     3 2 65531    17     4      901  1
         4721 2147483  0 2   128     0     0        5  1
        garbage line here
        7 12
        70000 1 0 2 128 0 0 0 1
        9 -5 0 2 128 0 0 0 1

        """
    let rows = KernelQueueStats.parse(text)
    #expect(rows.count == 2)
    #expect(
        rows[0] == KernelQueueRow(queue: 0, portID: 11243, backlog: 3, queueDropped: 17, userDropped: 4))
    #expect(rows[4721]?.portID == 2_147_483)
    #expect(rows[4721]?.backlog == 0)
    #expect(rows[7] == nil && rows[9] == nil)
}

@Test func kernelQueueDeltasHandleRebindAndRemoval() {
    func row(_ q: UInt16, port: UInt32, backlog: UInt64 = 0, qd: UInt64, ud: UInt64) -> KernelQueueRow {
        KernelQueueRow(queue: q, portID: port, backlog: backlog, queueDropped: qd, userDropped: ud)
    }
    var s = KernelQueueStats()
    // First sight: the kernel instance was made by our bind, so all of it is new.
    #expect(
        s.advance(
            [1: row(1, port: 10, backlog: 5, qd: 3, ud: 1), 2: row(2, port: 99, qd: 8, ud: 8)], queues: [1])
            == [KernelQueueDelta(queue: 1, queueDropped: 3, userDropped: 1, backlog: 5)])
    #expect(
        s.advance([1: row(1, port: 10, qd: 10, ud: 1)], queues: [1])
            == [KernelQueueDelta(queue: 1, queueDropped: 7, userDropped: 0, backlog: 0)])
    // Re-bound by another socket: the new instance counts from 0.
    #expect(
        s.advance([1: row(1, port: 11, qd: 2, ud: 0)], queues: [1])
            == [KernelQueueDelta(queue: 1, queueDropped: 2, userDropped: 0, backlog: 0)])
    // Same port id but lower figures: also a reset.
    #expect(
        s.advance([1: row(1, port: 11, qd: 1, ud: 0)], queues: [1])
            == [KernelQueueDelta(queue: 1, queueDropped: 1, userDropped: 0, backlog: 0)])
    // Unbound: backlog 0, and the next instance counts from 0 again.
    #expect(
        s.advance([:], queues: [1]) == [
            KernelQueueDelta(queue: 1, queueDropped: 0, userDropped: 0, backlog: 0)
        ])
    #expect(
        s.advance([1: row(1, port: 11, backlog: 2, qd: 4, ud: 0)], queues: [1])
            == [KernelQueueDelta(queue: 1, queueDropped: 4, userDropped: 0, backlog: 2)])
    // Removed from the config: its backlog is reported as 0 once.
    #expect(
        s.advance([1: row(1, port: 11, backlog: 2, qd: 4, ud: 0)], queues: [])
            == [KernelQueueDelta(queue: 1, queueDropped: 0, userDropped: 0, backlog: 0)])
    #expect(s.advance([1: row(1, port: 11, backlog: 2, qd: 4, ud: 0)], queues: []).isEmpty)
}

@Test func kernelFiguresReachTheMetrics() {
    let registry = PrometheusCollectorRegistry()
    let metrics = DaemonMetrics(factory: PrometheusMetricsFactory(registry: registry))
    metrics.record([KernelQueueDelta(queue: 3, queueDropped: 5, userDropped: 2, backlog: 7)])
    metrics.record([KernelQueueDelta(queue: 3, queueDropped: 1, userDropped: 0, backlog: 0)])
    let text = registry.emitToString()
    #expect(value(text, #"qosmapd_kernel_queue_dropped_total{queue="3"}"#) == 6)
    #expect(value(text, #"qosmapd_kernel_user_dropped_total{queue="3"}"#) == 2)
    #expect(value(text, #"qosmapd_kernel_queue_backlog{queue="3"}"#) == 0)
}

/// The value of one series in Prometheus text, nil if absent.
func value(_ text: String, _ series: String) -> Double? {
    for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
        return Double(line.dropFirst(series.count + 1))
    }
    return nil
}

// MARK: interface renames

final class Box<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}

@Test func linkGenerationDropsCachedInterfaceNames() throws {
    let c = try DaemonConfig.parse(
        "system-tables: false\ninterfaces:\n  untrusted: {trust: none}\n", file: "x")
    let snapshot = try PolicySnapshot(config: c, generation: 0)
    let name = Box("trusted")
    let lookups = Box(0)
    let links = Box(0)
    var pipeline = PacketPipeline(
        interfaceName: { _ in
            lookups.value += 1
            return name.value
        }, linkGeneration: { links.value })
    func decide() -> UInt8 {
        var bytes = ipv4UDP(tos: 0xB8)  // EF
        bytes.withUnsafeMutableBytes { buf in
            var packet = QueuedPacket(id: 1, inputInterface: 5, outputInterface: 6, payload: buf)
            _ = pipeline.decide(&packet, snapshot: snapshot)
        }
        return bytes[1] >> 2
    }
    #expect(decide() == 46)  // trusted: EF kept
    name.value = "untrusted"  // renamed: same ifindex, new name
    #expect(decide() == 46)  // still cached: no link notification yet
    let before = lookups.value
    links.value += 1  // RTM_NEWLINK
    #expect(decide() == 0)  // trust none: remarked best effort
    #expect(lookups.value == before + 2)  // both interfaces re-resolved once
    #expect(decide() == 0)
    #expect(lookups.value == before + 2)  // and cached again
}

@Test func netlinkWalkFindsLinkMessages() {
    func header(_ len: UInt32, _ type: UInt16) -> [UInt8] {
        withUnsafeBytes(of: len) { Array($0) } + withUnsafeBytes(of: type) { Array($0) }
            + [UInt8](repeating: 0, count: 10)
    }
    let newAddr = header(20, 20) + [0, 0, 0, 0]  // RTM_NEWADDR
    #expect(!LinkMonitor.containsLinkChange(ArraySlice(newAddr)))
    #expect(LinkMonitor.containsLinkChange(ArraySlice(newAddr + header(16, 16))))  // RTM_NEWLINK
    #expect(LinkMonitor.containsLinkChange(ArraySlice(header(16, 17))))  // RTM_DELLINK
    #expect(!LinkMonitor.containsLinkChange(ArraySlice(header(8, 16).prefix(15))))  // short: ignored
}

// MARK: system tables and table files

func temporaryDirectory(_ tag: String) throws -> String {
    let dir = NSTemporaryDirectory() + "qosmapd-\(tag)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

@Test(arguments: [true, false])
func systemTablesLoadFirstUnlessTurnedOff(enabled: Bool) throws {
    let system = try temporaryDirectory("system")
    let user = try temporaryDirectory("user")
    defer {
        try? FileManager.default.removeItem(atPath: system)
        try? FileManager.default.removeItem(atPath: user)
    }
    try "domain: voice\nimport: default\ninbound:\n  dscp:\n    44: [EF, green]\n".write(
        toFile: system + "/voice.yaml", atomically: true, encoding: .utf8)
    // A user directory may build on a system domain, as with the CLI.
    try "domain: mine\nimport: voice\n".write(toFile: user + "/mine.yaml", atomically: true, encoding: .utf8)
    let c = try DaemonConfig.parse("tables: [\(user)]\nsystem-tables: \(enabled)\n", file: "x")
    #expect(c.systemTables == enabled)
    if enabled {
        let s = try PolicySnapshot(config: c, generation: 0, systemDirectory: system)
        #expect(s.tables.domains["voice"] != nil && s.tables.domains["mine"] != nil)
    } else {
        #expect(throws: ConfigError.self) {
            try PolicySnapshot(config: c, generation: 0, systemDirectory: system)
        }
        let d = try DaemonConfig.parse("system-tables: false\n", file: "x")
        let s = try PolicySnapshot(config: d, generation: 0, systemDirectory: system)
        #expect(s.tables.domains["voice"] == nil)
    }
    // A missing system directory is skipped, as by the CLI.
    let none = try DaemonConfig.parse("system-tables: true\n", file: "x")
    _ = try PolicySnapshot(config: none, generation: 0, systemDirectory: system + "/absent")
}

@Test func unreadableTableFileNamesTheErrno() throws {
    let dir = try temporaryDirectory("tables")
    defer { try? FileManager.default.removeItem(atPath: dir) }
    try FileManager.default.createDirectory(atPath: dir + "/a.yaml", withIntermediateDirectories: false)
    let c = try DaemonConfig.parse("system-tables: false\ntables: [\(dir)]\n", file: "x")
    do {
        _ = try PolicySnapshot(config: c, generation: 0)
        Issue.record("a directory was read as a table file")
    } catch {
        #expect(error.description == "\(dir)/a.yaml:1:1: cannot read table file: Is a directory (errno 21)")
    }
    try FileManager.default.removeItem(atPath: dir + "/a.yaml")
    try Data([0x64, 0xFF, 0xFE]).write(to: URL(fileURLWithPath: dir + "/b.yaml"))
    do {
        _ = try PolicySnapshot(config: c, generation: 0)
        Issue.record("invalid bytes accepted")
    } catch {
        #expect(error.description == "\(dir)/b.yaml:1:1: table file is not UTF-8 text")
    }
}

/// What qosmapd reads at start and on SIGHUP (`QueueService.load`): a config
/// it cannot read is reported with the errno, at `file:1:1`.
@Test func unreadableConfigNamesTheErrno() throws {
    let dir = try temporaryDirectory("config")
    defer { try? FileManager.default.removeItem(atPath: dir) }
    func message(_ path: String) -> String? {
        do {
            _ = try QueueService.load(path, generation: 1)
            return nil
        } catch {
            return error.description
        }
    }
    #expect(message(dir) == "\(dir):1:1: cannot read config: Is a directory (errno 21)")
    #expect(
        message(dir + "/absent.yaml")
            == "\(dir)/absent.yaml:1:1: cannot read config: No such file or directory (errno 2)")
    try Data([0x71, 0xFF, 0xFE]).write(to: URL(fileURLWithPath: dir + "/bytes.yaml"))
    #expect(message(dir + "/bytes.yaml") == "\(dir)/bytes.yaml:1:1: config is not UTF-8 text")
    // Root reads a mode 000 file; the errno is then checked by tools/e2e/72-metrics-clients.
    if getuid() != 0 {
        try "queues: [0]\n".write(toFile: dir + "/locked.yaml", atomically: true, encoding: .utf8)
        chmod(dir + "/locked.yaml", 0)
        #expect(
            message(dir + "/locked.yaml")
                == "\(dir)/locked.yaml:1:1: cannot read config: Permission denied (errno 13)")
    }
}

/// Errors found after parsing name the config's file too.
@Test func errorsAfterParsingNameTheFile() throws {
    var config = try DaemonConfig.parse("queues: [0]\n", file: "/etc/qosmap/q.yaml")
    #expect(config.file == "/etc/qosmap/q.yaml")
    // A config changed in code after parsing: a domain no file declared.
    config.domain = "nowhere"
    do {
        _ = try PolicySnapshot(config: config, generation: 0, systemDirectory: "/nonexistent")
        Issue.record("an unknown domain was accepted")
    } catch {
        #expect(
            error.description.hasPrefix("/etc/qosmap/q.yaml:1:1: unknown domain 'nowhere'; known domains: "))
    }
}

// MARK: atomic reload (binds real queues: root only)

/// The queue's row in /proc/net/netfilter/nfnetlink_queue (nil when unbound).
func kernelRow(_ queue: UInt16) -> KernelQueueRow? { KernelQueueStats.read()?[queue] }

/// Waits (at most 3 s) until `condition` holds.
func eventually(_ condition: () -> Bool) async -> Bool {
    for _ in 0..<300 {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

final class FakeEndpoint: MetricsEndpoint, @unchecked Sendable {
    private let state: Mutex<(port: UInt16, fail: Bool, calls: Int)>
    init(port: UInt16) { state = Mutex((port, false, 0)) }
    var port: UInt16 { state.withLock { $0.port } }
    var calls: Int { state.withLock { $0.calls } }
    func failing(_ fail: Bool) { state.withLock { $0.fail = fail } }
    func rebind(port: UInt16) throws {
        try state.withLock {
            $0.calls += 1
            if $0.fail { throw CocoaError(.fileWriteUnknown) }
            $0.port = port
        }
    }
}

/// A service on a config file in a fresh directory, with its own registry.
struct Harness {
    let dir: String
    let path: String
    let registry = PrometheusCollectorRegistry()
    let service: QueueService

    init(_ config: String, endpoint: (any MetricsEndpoint)? = nil) throws {
        dir = try temporaryDirectory("reload")
        path = dir + "/qosmapd.yaml"
        try config.write(toFile: path, atomically: true, encoding: .utf8)
        service = try QueueService(
            configPath: path, metrics: DaemonMetrics(factory: PrometheusMetricsFactory(registry: registry)),
            logger: Logger(label: "test"), notifier: SystemdNotifier(environment: [:]),
            metricsEndpoint: endpoint)
    }

    func write(_ config: String) throws { try config.write(toFile: path, atomically: true, encoding: .utf8) }
    func metric(_ series: String) -> Double? { value(registry.emitToString(), series) }
    func remove() { try? FileManager.default.removeItem(atPath: dir) }
}

@Test func reloadToAQueueHeldElsewhereFailsAndKeepsTheOldQueue() async throws {
    guard getuid() == 0 else { return }  // binding needs CAP_NET_ADMIN
    let h = try Harness("queues: [4721]\nsystem-tables: false\nmetrics: {port: 0}\n")
    defer { h.remove() }
    try h.service.start()
    let ours = try #require(kernelRow(4721)).portID
    #expect(h.metric("qosmapd_queues_bound") == 1)
    #expect(h.metric("qosmapd_last_reload_success") == 1)  // the load at start

    let holder = try NetfilterQueue(configuration: .init(queueNumber: 4722, receiveTimeoutMilliseconds: 10))
    let theirs = try #require(kernelRow(4722)).portID
    try h.write("queues: [4722]\nsystem-tables: false\nmetrics: {port: 0}\n")
    #expect(!h.service.reload())
    #expect(h.service.store.snapshot.config.queues == [4721])
    try? await Task.sleep(for: .milliseconds(400))  // longer than a queue thread's receive timeout
    #expect(kernelRow(4721)?.portID == ours)  // still bound by the daemon
    #expect(kernelRow(4722)?.portID == theirs)
    #expect(h.metric(#"qosmapd_reloads_total{result="failure"}"#) == 1)
    #expect(h.metric(#"qosmapd_reloads_total{result="success"}"#) ?? 0 == 0)
    #expect(h.metric("qosmapd_queue_bind_failures_total") == 1)
    #expect(h.metric("qosmapd_queues_bound") == 1)
    #expect(h.metric("qosmapd_last_reload_success") == 0)
    #expect(h.metric("qosmapd_last_reload_timestamp_seconds") ?? 0 > 1_700_000_000)

    // Once released, the same reload succeeds: the new queue first, then the old one goes.
    holder.close()
    #expect(h.service.reload())
    // The holder closed, so a binding now is the daemon's (it may reuse the freed port id).
    #expect(kernelRow(4722) != nil)
    #expect(await eventually { kernelRow(4721) == nil })
    #expect(await eventually { h.metric("qosmapd_queues_bound") == 1 })
    #expect(h.metric(#"qosmapd_reloads_total{result="success"}"#) == 1)
    #expect(h.metric("qosmapd_last_reload_success") == 1)
    // The sampler labels configured queues only.
    #expect(await eventually { h.metric(#"qosmapd_kernel_queue_backlog{queue="4722"}"#) != nil })
    #expect(h.metric(#"qosmapd_kernel_queue_backlog{queue="4721"}"#) != nil)  // was configured
    await h.service.stop()
    #expect(kernelRow(4722) == nil)
    #expect(h.metric("qosmapd_queues_bound") == 0)
}

@Test func startFailsWhenAQueueIsHeld() throws {
    guard getuid() == 0 else { return }
    let holder = try NetfilterQueue(configuration: .init(queueNumber: 4725, receiveTimeoutMilliseconds: 10))
    defer { holder.close() }
    let h = try Harness("queues: [4726, 4725]\nsystem-tables: false\nmetrics: {port: 0}\n")
    defer { h.remove() }
    do {
        try h.service.start()
        Issue.record("start bound a held queue")
    } catch {
        #expect(
            error.description == "queue 4725: nfqueue bind queue: Operation not permitted (errno 1)"
                + " (another process holds the queue, or CAP_NET_ADMIN is missing)")
    }
    #expect(kernelRow(4726) == nil)  // the one that bound was closed again
    #expect(h.metric("qosmapd_queues_bound") == 0)
    #expect(h.metric("qosmapd_queue_bind_failures_total") == 1)
}

@Test func reloadMovesTheMetricsEndpointOrFails() async throws {
    guard getuid() == 0 else { return }
    let endpoint = FakeEndpoint(port: 19464)
    let h = try Harness("queues: [4723]\nsystem-tables: false\nmetrics: {port: 19464}\n", endpoint: endpoint)
    defer { h.remove() }
    try h.service.start()
    #expect(h.service.reload())  // same port: not moved
    #expect(endpoint.calls == 0)

    endpoint.failing(true)
    try h.write("queues: [4723, 4724]\nsystem-tables: false\nmetrics: {port: 19465}\n")
    #expect(!h.service.reload())
    #expect(endpoint.calls == 1 && endpoint.port == 19464)
    #expect(kernelRow(4724) == nil)  // bound for the reload, closed when it failed
    #expect(h.service.store.snapshot.config.metricsPort == 19464)
    #expect(h.metric(#"qosmapd_reloads_total{result="failure"}"#) == 1)
    #expect(h.metric("qosmapd_queues_bound") == 1)

    endpoint.failing(false)
    #expect(h.service.reload())
    #expect(endpoint.port == 19465)
    #expect(kernelRow(4723) != nil && kernelRow(4724) != nil)
    #expect(h.metric("qosmapd_queues_bound") == 2)
    await h.service.stop()
    #expect(kernelRow(4723) == nil && kernelRow(4724) == nil)
}

// MARK: link monitor (root: uses its own network namespace)

@discardableResult
func ip(_ args: String...) throws -> Int32 {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
    p.arguments = args
    try p.run()
    p.waitUntilExit()
    return p.terminationStatus
}

/// A monitor whose socket lives in namespace `ns`: made on a thread that
/// enters `ns` (setns affects the calling thread only) and then exits.
func monitor(in ns: String) -> LinkMonitor? {
    let result = Mutex<LinkMonitor?>(nil)
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        defer { done.signal() }
        let fd = open("/run/netns/\(ns)", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        // Glibc's Swift module leaves out the GNU-only setns(2).
        guard let sym = dlsym(nil, "setns") else { return }
        let setns = unsafeBitCast(sym, to: (@convention(c) (Int32, Int32) -> Int32).self)
        guard setns(fd, 0x4000_0000) == 0 else { return }  // CLONE_NEWNET
        let m = LinkMonitor(logger: Logger(label: "test"))
        result.withLock { $0 = m }
    }
    thread.start()
    done.wait()
    return result.withLock { $0 }
}

@Test func linkMonitorSeesLinksAddedAndRenamed() async throws {
    guard getuid() == 0 else { return }
    let ns = "qmreload\(getpid())"
    try #require(try ip("netns", "add", ns) == 0)
    defer { _ = try? ip("netns", "del", ns) }
    let m = try #require(monitor(in: ns))
    #expect(m.isListening)
    m.start()
    defer { m.stop() }
    let g0 = m.generation
    try #require(try ip("-n", ns, "link", "add", "qmr0", "type", "veth", "peer", "name", "qmr0p") == 0)
    #expect(await eventually { m.generation > g0 })
    let g1 = m.generation
    try #require(try ip("-n", ns, "link", "set", "qmr0", "name", "qmr1") == 0)
    #expect(await eventually { m.generation > g1 })
    // A link in another namespace is not this monitor's business.
    try? await Task.sleep(for: .milliseconds(300))
    let g2 = m.generation
    let other = "qmreload\(getpid())b"
    try #require(try ip("netns", "add", other) == 0)
    defer { _ = try? ip("netns", "del", other) }
    try #require(try ip("-n", other, "link", "add", "qmr2", "type", "veth", "peer", "name", "qmr2p") == 0)
    try? await Task.sleep(for: .milliseconds(300))
    #expect(m.generation == g2)
}

/// A reload whose rules are bad keeps the old rules (and says where the fault is).
@Test func reloadWithABadFlowRuleKeepsTheOldRules() throws {
    let good = """
        system-tables: false
        metrics: {port: 0}
        classify:
          rules:
            - {name: voip, match: {protocol: udp, destination-port: 5060}, set: {class: EF}}
        """
    let h = try Harness(good)
    defer { h.remove() }
    #expect(h.service.store.snapshot.flows?.rules.map(\.name) == ["voip"])
    try h.write(good.replacingOccurrences(of: "protocol: udp", with: "protocol: udpp"))
    #expect(!h.service.reload())
    #expect(h.service.store.snapshot.flows?.rules.map(\.name) == ["voip"])
    #expect(h.metric("qosmapd_last_reload_success") == 0)
    try h.write(good.replacingOccurrences(of: "name: voip", with: "name: sip"))
    #expect(h.service.reload())
    #expect(h.service.store.snapshot.flows?.rules.map(\.name) == ["sip"])
}
