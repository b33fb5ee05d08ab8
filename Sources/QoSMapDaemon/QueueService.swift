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
        let old = store.snapshot
        let next = generation.add(1, ordering: .relaxed).newValue
        do {
            let snapshot = try Self.load(configPath, generation: next)
            if snapshot.config.queues != old.config.queues
                || snapshot.config.maxLength != old.config.maxLength
                || snapshot.config.markOnly != old.config.markOnly || snapshot.config.gso != old.config.gso
            {
                logger.warning(
                    "queue settings changed; they apply at the next restart",
                    metadata: ["queues": "\(snapshot.config.queues)"])
            }
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
        for q in config.queues {
            running.add(1, ordering: .relaxed)
            let thread = Thread { [self] in
                self.serve(queue: q, config: config)
                self.running.subtract(1, ordering: .relaxed)
            }
            thread.name = "qosmapd-queue-\(q)"
            thread.start()
        }
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
            reload()
        }
        notifier.stopping()
        stopping.store(true, ordering: .relaxed)
        await waitForThreads()
        logger.info("queues unbound; exiting")
    }

    private let bound = Atomic<Int>(0)

    private func waitForThreads() async {
        // Each thread notices the flag within its receive timeout (250 ms).
        for _ in 0..<300 where running.load(ordering: .relaxed) > 0 {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    private func serve(queue number: UInt16, config: DaemonConfig) {
        let configuration = NetfilterQueue.Configuration(
            queueNumber: number,
            // Mark-only needs the IP header alone; 128 bytes covers IPv6 with room.
            copyMode: .packet(range: config.markOnly ? 128 : 0xFFFF),
            flags: NetfilterQueue.Flags(rawValue: 0)
                .union(config.failOpen ? .failOpen : []).union(config.gso ? .gso : []),
            maximumLength: config.maxLength, receiveBufferSize: config.receiveBuffer,
            noENOBUFS: config.noENOBUFS)
        let queue: NetfilterQueue
        do {
            queue = try NetfilterQueue(configuration: configuration)
        } catch {
            logger.error("cannot bind queue", metadata: ["queue": "\(number)", "error": "\(error)"])
            startErrors.withLock { $0.append("queue \(number): \(error)") }
            return
        }
        bound.add(1, ordering: .relaxed)
        logger.debug("queue bound", metadata: ["queue": "\(number)"])
        var pipeline = PacketPipeline()
        var lastOverrunLog = ContinuousClock.now - .seconds(10)
        while !stopping.load(ordering: .relaxed) {
            let snapshot = store.snapshot
            do {
                let n = try queue.receive { packet in pipeline.decide(&packet, snapshot: snapshot) }
                if n > 0 { metrics.flush(&pipeline.counts) }
            } catch {
                metrics.flush(&pipeline.counts)
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
        queue.close()
    }
}

/// A queue could not be bound at start.
public struct QueueStartError: Error, CustomStringConvertible {
    /// One message per queue.
    public var messages: [String]
    /// The messages, one per line.
    public var description: String { messages.joined(separator: "\n") }
}
