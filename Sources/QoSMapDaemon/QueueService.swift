import Logging
import NFQueue
import ServiceLifecycle
import Synchronization
import UnixSignals

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// The daemon: one thread per configured queue deciding packets with the
/// current ``PolicySnapshot``; SIGHUP reloads config, tables, queues and the
/// metrics port as one transaction; graceful shutdown (SIGTERM) stops the
/// threads, which unbind their queues.
public final class QueueService: Service, Sendable {
    /// Where the config comes from: a file, or the embedded default.
    public let configPath: String?
    /// The snapshot in force.
    public let store: PolicyStore
    let metrics: DaemonMetrics
    let logger: Logger
    let notifier: SystemdNotifier
    let metricsEndpoint: (any MetricsEndpoint)?
    private let stopping = Atomic<Bool>(false)
    private let running = Atomic<Int>(0)
    private let generation: Atomic<Int>
    private let links = Mutex<LinkMonitor?>(nil)
    /// The queue numbers that have a thread. A thread leaves this set, under
    /// its lock, only after unbinding; a reload holds the lock from choosing
    /// the queues to bind until its snapshot is committed, so a queue removed
    /// and re-added by two quick reloads is never left without a thread nor
    /// bound twice.
    private let live = Mutex<Set<UInt16>>([])

    /// Loads the config and tables; throws ``ConfigError`` when they are bad.
    /// `metricsEndpoint` is moved when a reload changes `metrics.port`.
    public convenience init(
        configPath: String?, metrics: DaemonMetrics, logger: Logger, notifier: SystemdNotifier,
        metricsEndpoint: (any MetricsEndpoint)? = nil
    ) throws(ConfigError) {
        self.init(
            configPath: configPath, snapshot: try Self.load(configPath, generation: 0), metrics: metrics,
            logger: logger, notifier: notifier, metricsEndpoint: metricsEndpoint)
    }

    /// Starts from an already loaded snapshot (so that the caller can read its
    /// `metrics.port` first); nothing is bound until ``start()``.
    public init(
        configPath: String?, snapshot: PolicySnapshot, metrics: DaemonMetrics, logger: Logger,
        notifier: SystemdNotifier, metricsEndpoint: (any MetricsEndpoint)? = nil
    ) {
        self.configPath = configPath
        self.metrics = metrics
        self.logger = logger
        self.notifier = notifier
        self.metricsEndpoint = metricsEndpoint
        generation = Atomic(snapshot.generation)
        store = PolicyStore(snapshot)
    }

    /// Reads the config (file or embedded default) and builds a snapshot.
    public static func load(_ path: String?, generation: Int) throws(ConfigError) -> PolicySnapshot {
        let config =
            if let path { try DaemonConfig.load(path: path) } else {
                try DaemonConfig.parse(DaemonConfig.embeddedDefault, file: "<embedded default>")
            }
        return try PolicySnapshot(config: config, generation: generation)
    }

    /// Re-reads config and tables, binds the queues new to the config and
    /// moves the metrics endpoint if `metrics.port` changed; only when all of
    /// that worked is the new snapshot committed and are the new queues served.
    /// Queues left out of the config are unbound by their threads after the
    /// commit. On any error the old snapshot, queues and port stay in force.
    /// - Returns: whether the new snapshot was installed.
    @discardableResult
    public func reload() -> Bool {
        notifier.reloading()
        defer { notifier.ready() }
        let next = generation.add(1, ordering: .relaxed).newValue
        let snapshot: PolicySnapshot
        do {
            snapshot = try Self.load(configPath, generation: next)
        } catch {
            for d in error.diagnostics {
                logger.error(
                    "reload failed; keeping the old tables",
                    metadata: ["diagnostic": "\(d.description)", "file": "\(d.file)", "line": "\(d.line)"])
            }
            reloaded(success: false)
            return false
        }
        return live.withLock { live in
            let old = store.snapshot
            let opened: [UInt16: QueueHandoff]
            switch bind(snapshot.config.queues.filter { !live.contains($0) }, snapshot) {
            case .success(let q): opened = q
            case .failure(let e):
                logger.error(
                    "reload failed: a queue cannot be bound; keeping the old config and queues",
                    metadata: ["errors": "\(e.messages.joined(separator: "; "))"])
                reloaded(success: false)
                return false
            }
            let port = snapshot.config.metricsPort
            if let endpoint = metricsEndpoint, endpoint.port != port {
                do {
                    try endpoint.rebind(port: port)
                    logger.info("metrics endpoint moved", metadata: ["port": "\(port)"])
                } catch {
                    close(opened)
                    logger.error(
                        "reload failed: cannot move the metrics endpoint; keeping the old config and queues",
                        metadata: ["port": "\(port)", "error": "\(error)"])
                    reloaded(success: false)
                    return false
                }
            } else if metricsEndpoint == nil, port != old.config.metricsPort {
                logger.warning(
                    "metrics.port changed, but the endpoint was disabled at start; restart qosmapd to apply it",
                    metadata: ["port": "\(port)"])
            }
            store.replace(snapshot)
            DNSLearning.shared.committed(snapshot.config, table: snapshot.flows?.dns, logger: logger)
            for (q, handoff) in opened.sorted(by: { $0.key < $1.key }) {
                live.insert(q)
                spawn(q, handoff)
            }
            reloaded(success: true)
            logger.info(
                "reloaded",
                metadata: [
                    "generation": "\(next)", "domains": "\(snapshot.tables.domains.names)",
                    "queues": "\(snapshot.config.queues)",
                ])
            return true
        }
    }

    private func reloaded(success: Bool) {
        metrics.reloaded(success: success, at: Date().timeIntervalSince1970)
    }

    /// Binds every configured queue, then starts a thread for each, the link
    /// monitor and the kernel-figures sampler. If any queue cannot be bound,
    /// those bound are closed and nothing runs.
    /// - Throws: ``QueueStartError`` naming each queue and its errno.
    public func start() throws(QueueStartError) {
        let snapshot = store.snapshot
        let opened: [UInt16: QueueHandoff]
        switch bind(snapshot.config.queues, snapshot) {
        case .success(let q): opened = q
        case .failure(let e): throw e
        }
        metrics.loaded(at: Date().timeIntervalSince1970)
        let monitor = LinkMonitor(logger: logger)
        monitor.start()
        links.withLock { $0 = monitor }
        live.withLock { live in
            for (q, handoff) in opened.sorted(by: { $0.key < $1.key }) {
                live.insert(q)
                spawn(q, handoff)
            }
        }
        running.add(1, ordering: .relaxed)
        startThread(name: "qosmapd-kernel-stats") { [self] in
            sample(monitor)
            running.subtract(1, ordering: .relaxed)
        }
    }

    /// Stops every thread (each unbinds its queue) and the link monitor.
    public func stop() async {
        stopping.store(true, ordering: .relaxed)
        await waitForThreads()
        links.withLock { $0?.stop() }
    }

    /// Runs the queue threads until graceful shutdown.
    public func run() async throws {
        try start()
        let snapshot = store.snapshot
        let config = snapshot.config
        notifier.ready()
        logger.info(
            "qosmapd ready",
            metadata: [
                "queues": "\(config.queues)", "mark_only": "\(config.markOnly)",
                "gso": "\(config.effectiveGSO())\(config.gso == nil ? " (auto)" : "")",
                "domains": "\(snapshot.tables.domains.names)",
            ])
        let signals = await UnixSignalsSequence(trapping: .sighup)
        for await _ in signals.cancelOnGracefulShutdown() {
            logger.info("SIGHUP: reloading", metadata: ["config": "\(configPath ?? "<embedded default>")"])
            reload()
        }
        notifier.stopping()
        await stop()
        logger.info("queues unbound; exiting")
    }

    /// Opens `numbers` with `snapshot`'s settings; if one fails, closes those
    /// just opened. Each failure is logged and counted.
    private func bind(
        _ numbers: [UInt16], _ snapshot: PolicySnapshot
    ) -> Result<[UInt16: QueueHandoff], QueueStartError> {
        var opened: [UInt16: QueueHandoff] = [:]
        var errors: [String] = []
        for q in numbers {
            do {
                opened[q] = QueueHandoff(
                    try NetfilterQueue(configuration: snapshot.config.queueConfiguration(q)))
                metrics.queueBound(by: 1)
                logger.info("queue bound", metadata: ["queue": "\(q)"])
            } catch {
                metrics.queueBindFailures.increment()
                logger.error(
                    "cannot bind queue",
                    metadata: ["queue": "\(q)", "errno": "\(error.errno.rawValue)", "error": "\(error)"])
                // The kernel answers EPERM both without CAP_NET_ADMIN and when
                // another socket holds the queue.
                let hint =
                    error.operation == .bindQueue && error.errno == .notPermitted
                    ? " (another process holds the queue, or CAP_NET_ADMIN is missing)" : ""
                errors.append("queue \(q): \(error)\(hint)")
            }
        }
        guard errors.isEmpty else {
            close(opened)
            return .failure(QueueStartError(messages: errors))
        }
        return .success(opened)
    }

    private func close(_ opened: [UInt16: QueueHandoff]) {
        for (q, handoff) in opened {
            handoff.queue.close()
            metrics.queueBound(by: -1)
            logger.info("queue unbound (not committed)", metadata: ["queue": "\(q)"])
        }
    }

    private func spawn(_ number: UInt16, _ handoff: QueueHandoff) {
        running.add(1, ordering: .relaxed)
        let monitor = links.withLock { $0 }
        startThread(name: "qosmapd-queue-\(number)") { [self] in
            self.serve(handoff.queue, number, monitor)
            self.running.subtract(1, ordering: .relaxed)
        }
    }

    /// Every second, hands the kernel's per-queue figures to the metrics;
    /// every 10 s, without a link monitor, marks cached interface names stale.
    private func sample(_ monitor: LinkMonitor) {
        var stats = KernelQueueStats()
        var ticks = 0
        while !stopping.load(ordering: .relaxed) {
            if ticks % 4 == 0, let rows = KernelQueueStats.read() {
                metrics.record(stats.advance(rows, queues: store.snapshot.config.queues))
            }
            if ticks % 40 == 39, !monitor.isListening { monitor.bump() }
            ticks += 1
            sleep(seconds: 0.25)  // short steps: a stop is noticed quickly
        }
    }

    private func waitForThreads() async {
        // Each thread notices the flag within its receive timeout (250 ms).
        for _ in 0..<300 where running.load(ordering: .relaxed) > 0 {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    private func serve(_ queue: NetfilterQueue, _ number: UInt16, _ monitor: LinkMonitor?) {
        var snapshot = store.snapshot
        var pipeline = PacketPipeline(linkGeneration: monitor.map { m in { m.generation } })
        var lastOverrunLog = ContinuousClock.now - .seconds(10)
        var generation = snapshot.generation
        var sent = NetfilterQueue.Statistics()
        var lastFlush = ContinuousClock.now
        while true {
            snapshot = store.snapshot
            if stopping.load(ordering: .relaxed) { break }
            if snapshot.generation != generation {
                generation = snapshot.generation
                // Rule counts belong to the old snapshot's rule names.
                flushCounts(queue, &pipeline, &sent)
                if !snapshot.config.queues.contains(number) {
                    if unbindIfRemoved(queue, number) { return }
                }
                apply(snapshot, to: queue, number, &pipeline)
            }
            do {
                let n = try queue.receive { packet in pipeline.decide(&packet, snapshot: snapshot) }
                // Counters reach swift-metrics every 100 ms, and at once when
                // idle: flushing scans every cell, too much to do per packet.
                let now = ContinuousClock.now
                if n == 0 || now - lastFlush > .milliseconds(100) {
                    flushCounts(queue, &pipeline, &sent)
                    lastFlush = now
                }
            } catch {
                flushCounts(queue, &pipeline, &sent)
                switch (error.operation, error.errno) {
                case (.receive, .noBufferSpace):
                    metrics.enobufs.increment()
                    // Rate-limited: an overrun storm must not become a log storm.
                    if ContinuousClock.now - lastOverrunLog > .seconds(5) {
                        lastOverrunLog = .now
                        logger.warning(
                            "receive overrun (ENOBUFS); packets were lost", metadata: ["queue": "\(number)"])
                    }
                case (.verdict, _):
                    metrics.verdictErrors.increment()
                default:
                    logger.error("queue error", metadata: ["queue": "\(number)", "error": "\(error)"])
                    sleep(seconds: 0.01)  // no busy loop on a persistent error
                }
            }
        }
        flushCounts(queue, &pipeline, &sent)
        live.withLock {
            queue.close()
            metrics.queueBound(by: -1)
            _ = $0.remove(number)
        }
    }

    /// Hands the thread's packet counts and the queue's new verdict messages to swift-metrics.
    private func flushCounts(
        _ queue: NetfilterQueue, _ pipeline: inout PacketPipeline, _ sent: inout NetfilterQueue.Statistics
    ) {
        metrics.flush(&pipeline.counts)
        metrics.flush(queue.statistics, since: &sent)
    }

    /// Unbinds a queue that a reload removed, unless a newer reload has put it
    /// back; decided under the ``live`` lock against the latest snapshot.
    private func unbindIfRemoved(_ queue: NetfilterQueue, _ number: UInt16) -> Bool {
        live.withLock {
            guard !store.snapshot.config.queues.contains(number) else { return false }
            queue.close()
            metrics.queueBound(by: -1)
            $0.remove(number)
            logger.info("queue removed from the config; unbound", metadata: ["queue": "\(number)"])
            return true
        }
    }

    /// Applies a reloaded config's queue settings to the bound queue, deciding
    /// with the new snapshot any packet that arrives meanwhile.
    private func apply(
        _ snapshot: PolicySnapshot, to queue: NetfilterQueue, _ number: UInt16,
        _ pipeline: inout PacketPipeline
    ) {
        let wanted = snapshot.config.queueConfiguration(number)
        guard wanted != queue.configuration else { return }
        do {
            try queue.reconfigure(wanted) { packet in pipeline.decide(&packet, snapshot: snapshot) }
            metrics.queueReconfigurations.increment()
            logger.info(
                "queue settings applied",
                metadata: [
                    "queue": "\(number)", "max_length": "\(wanted.maximumLength)",
                    "copy_mode": "\(wanted.copyMode)", "flags": "\(wanted.flags.rawValue)",
                ])
        } catch {
            metrics.queueReconfigurationFailures.increment()
            logger.error(
                "queue settings not applied; the old ones stay",
                metadata: ["queue": "\(number)", "error": "\(error)"])
        }
    }
}

/// Moves an open queue from the thread that bound it (start or reload) to
/// the thread that serves it; the binding thread never touches it again.
final class QueueHandoff: @unchecked Sendable {
    let queue: NetfilterQueue
    init(_ queue: NetfilterQueue) { self.queue = queue }
}

/// Queues could not be bound (at start, or on a reload that then failed).
public struct QueueStartError: Error, CustomStringConvertible {
    /// One message per queue.
    public var messages: [String]
    /// The messages, one per line.
    public var description: String { messages.joined(separator: "\n") }
}
