import Foundation
import Logging
import NFQueue
import ServiceLifecycle
import Synchronization
import UnixSignals

/// The daemon: one thread per configured queue deciding packets with the
/// current ``PolicySnapshot``; SIGHUP reloads config and tables atomically;
/// graceful shutdown (SIGTERM) stops the threads, which unbind their queues.
public final class QueueService: Service, Sendable {
    /// Where the config comes from: a file, or the embedded default.
    public let configPath: String?
    /// The snapshot in force.
    public let store: PolicyStore
    let metrics: DaemonMetrics
    let logger: Logger
    let notifier: SystemdNotifier
    private let stopping = Atomic<Bool>(false)
    private let running = Atomic<Int>(0)
    private let generation = Atomic<Int>(0)
    private let startErrors = Mutex<[String]>([])

    /// Loads the config and tables; throws ``ConfigError`` when they are bad.
    public init(configPath: String?, metrics: DaemonMetrics, logger: Logger, notifier: SystemdNotifier)
        throws(ConfigError)
    {
        self.configPath = configPath
        self.metrics = metrics
        self.logger = logger
        self.notifier = notifier
        store = PolicyStore(try Self.load(configPath, generation: 0))
    }

    /// Reads the config (file or embedded default) and builds a snapshot.
    public static func load(_ path: String?, generation: Int) throws(ConfigError) -> PolicySnapshot {
        let config =
            if let path { try DaemonConfig.load(path: path) } else {
                try DaemonConfig.parse(DaemonConfig.embeddedDefault, file: "<embedded default>")
            }
        return try PolicySnapshot(config: config, generation: generation)
    }

    /// Re-reads config and tables; on any error the old snapshot stays in force.
    /// - Returns: whether the new snapshot was installed.
    @discardableResult
    public func reload() -> Bool {
        notifier.reloading()
        defer { notifier.ready() }
        let next = generation.add(1, ordering: .relaxed).newValue
        do {
            let snapshot = try Self.load(configPath, generation: next)
            store.replace(snapshot)
            metrics.reloadSuccesses.increment()
            logger.info(
                "reloaded",
                metadata: ["generation": "\(next)", "domains": "\(snapshot.tables.domains.names)"])
            return true
        } catch {
            metrics.reloadFailures.increment()
            for d in error.diagnostics {
                logger.error(
                    "reload failed; keeping the old tables",
                    metadata: ["diagnostic": "\(d.description)", "file": "\(d.file)", "line": "\(d.line)"])
            }
            return false
        }
    }

    /// Runs the queue threads until graceful shutdown.
    public func run() async throws {
        let snapshot = store.snapshot
        let config = snapshot.config
        startQueues(config.queues, atStart: true)
        // Wait (bounded) until every queue is bound or has failed.
        for _ in 0..<200
        where bound.load(ordering: .relaxed) + startErrors.withLock({ $0.count }) < config.queues.count {
            try? await Task.sleep(for: .milliseconds(10))
        }
        let errors = startErrors.withLock { $0 }
        if !errors.isEmpty {
            stopping.store(true, ordering: .relaxed)
            await waitForThreads()
            throw QueueStartError(messages: errors)
        }
        notifier.ready()
        logger.info(
            "qosmapd ready",
            metadata: [
                "queues": "\(config.queues)", "mark_only": "\(config.markOnly)", "gso": "\(config.gso)",
                "domains": "\(snapshot.tables.domains.names)",
            ])
        let signals = await UnixSignalsSequence(trapping: .sighup)
        for await _ in signals.cancelOnGracefulShutdown() {
            logger.info("SIGHUP: reloading", metadata: ["config": "\(configPath ?? "<embedded default>")"])
            if reload() {
                // Queues new to the config get a thread; removed ones unbind
                // themselves; the others apply changed settings on their thread.
                startQueues(store.snapshot.config.queues, atStart: false)
            }
        }
        notifier.stopping()
        stopping.store(true, ordering: .relaxed)
        await waitForThreads()
        logger.info("queues unbound; exiting")
    }

    private let bound = Atomic<Int>(0)
    /// The queue numbers that have a thread. A thread leaves this set, under
    /// its lock, only after unbinding, so a queue removed and re-added by two
    /// quick reloads is never left without a thread nor bound twice.
    private let live = Mutex<Set<UInt16>>([])

    private func startQueues(_ numbers: [UInt16], atStart: Bool) {
        for q in numbers {
            guard live.withLock({ $0.insert(q).inserted }) else { continue }
            running.add(1, ordering: .relaxed)
            let thread = Thread { [self] in
                self.serve(queue: q, atStart: atStart)
                self.running.subtract(1, ordering: .relaxed)
            }
            thread.name = "qosmapd-queue-\(q)"
            thread.start()
        }
    }

    private func waitForThreads() async {
        // Each thread notices the flag within its receive timeout (250 ms).
        for _ in 0..<300 where running.load(ordering: .relaxed) > 0 {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    private func serve(queue number: UInt16, atStart: Bool) {
        var snapshot = store.snapshot
        let queue: NetfilterQueue
        do {
            queue = try NetfilterQueue(configuration: snapshot.config.queueConfiguration(number))
        } catch {
            logger.error("cannot bind queue", metadata: ["queue": "\(number)", "error": "\(error)"])
            if atStart { startErrors.withLock { $0.append("queue \(number): \(error)") } }
            live.withLock { _ = $0.remove(number) }  // a later reload tries again
            return
        }
        if atStart { bound.add(1, ordering: .relaxed) }
        logger.info("queue bound", metadata: ["queue": "\(number)"])
        var pipeline = PacketPipeline()
        var lastOverrunLog = ContinuousClock.now - .seconds(10)
        var generation = snapshot.generation
        var sentMessages = 0
        var lastFlush = ContinuousClock.now
        while true {
            snapshot = store.snapshot
            if stopping.load(ordering: .relaxed) { break }
            if snapshot.generation != generation {
                generation = snapshot.generation
                if !snapshot.config.queues.contains(number) {
                    flushCounts(queue, &pipeline, &sentMessages)
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
                    flushCounts(queue, &pipeline, &sentMessages)
                    lastFlush = now
                }
            } catch {
                flushCounts(queue, &pipeline, &sentMessages)
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
                    Thread.sleep(forTimeInterval: 0.01)  // no busy loop on a persistent error
                }
            }
        }
        flushCounts(queue, &pipeline, &sentMessages)
        live.withLock {
            queue.close()
            _ = $0.remove(number)
        }
    }

    /// Hands the thread's packet counts and the queue's new verdict messages to swift-metrics.
    private func flushCounts(
        _ queue: NetfilterQueue, _ pipeline: inout PacketPipeline, _ sentMessages: inout Int
    ) {
        metrics.flush(&pipeline.counts)
        let messages = queue.statistics.messages
        if messages != sentMessages {
            metrics.verdictMessages.increment(by: Int64(messages - sentMessages))
            sentMessages = messages
        }
    }

    /// Unbinds a queue that a reload removed, unless a newer reload has put it
    /// back; decided under the ``live`` lock against the latest snapshot.
    private func unbindIfRemoved(_ queue: NetfilterQueue, _ number: UInt16) -> Bool {
        live.withLock {
            guard !store.snapshot.config.queues.contains(number) else { return false }
            queue.close()
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

/// A queue could not be bound at start.
public struct QueueStartError: Error, CustomStringConvertible {
    /// One message per queue.
    public var messages: [String]
    /// The messages, one per line.
    public var description: String { messages.joined(separator: "\n") }
}
