import Logging
import QoSMapPacket
import ServiceLifecycle
import Synchronization

/// Reads the DNS traffic of the snooped interfaces (an `AF_PACKET` socket per
/// interface, filtered in the kernel to UDP/TCP port 53) on one thread, and
/// calls `onReply` for every reply that answers a query seen on the same
/// interface. An interface that does not exist yet, or goes away, is retried
/// every second and logged, never fatal. Graceful shutdown stops the thread.
public final class DNSSnoopService: Service, Sendable {
    let logger: Logger
    let onReply: @Sendable (DNSObservedReply) -> Void
    private let wanted: Mutex<[String]>
    private let published = Mutex(DNSSnoopCounters())

    /// A service snooping `interfaces`; `onReply` runs on the snooping thread
    /// and must not block for long (frames queue in the socket meanwhile).
    public init(
        interfaces: [String], logger: Logger, onReply: @escaping @Sendable (DNSObservedReply) -> Void
    ) {
        self.logger = logger
        self.onReply = onReply
        wanted = Mutex(interfaces)
    }

    /// The interfaces to snoop from now on (a reload): sockets of interfaces
    /// left out are closed, new ones opened, within a second.
    public func setInterfaces(_ interfaces: [String]) { wanted.withLock { $0 = interfaces } }

    /// The interfaces being snooped (as configured, present or not).
    public var interfaces: [String] { wanted.withLock { $0 } }

    /// The counters so far (published by the snooping thread after every batch of frames).
    public var counters: DNSSnoopCounters { published.withLock { $0 } }

    /// Runs until graceful shutdown or cancellation.
    public func run() async throws {
        // Contract only in this commit: the reading thread comes next.
        try? await gracefulShutdown()
    }
}
