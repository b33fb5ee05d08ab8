import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// Why swift-nio (NIOHTTP1) and not Hummingbird: it is the smallest well-kept
// dependency that gives a real HTTP/1.1 parser (split requests, HEAD,
// keep-alive, 400 on garbage), concurrent connections and idle timeouts; a
// framework's router and middleware would be dead weight for one path.

/// Serves `GET /metrics` and `HEAD /metrics` from a Prometheus registry on
/// 127.0.0.1 with swift-nio's HTTP/1.1 server pipeline.
///
/// Connections are served concurrently on one event loop, at most
/// `maxConnections` at once: one accepted beyond that is closed at once. A
/// connection that sends nothing for `idleTimeout`, or whose request is not
/// answered within `requestTimeout` of the connection (or of the previous
/// answer on a kept-alive one), is closed. The path must be exactly
/// `/metrics` (a query is ignored); other paths get 404, other methods 405.
/// ``rebind(port:)`` moves the listener while the server runs.
public final class MetricsServer: Service, MetricsEndpoint, Sendable {
    /// What the listener is doing; guarded by `state`.
    private struct State {
        /// The configured port; 0 means disabled.
        var port: UInt16
        /// The listening channel, when one is open.
        var listener: (any Channel)?
        /// Set once `run()` has seen graceful shutdown: nothing binds again.
        var stopped = false
    }

    // One thread is plenty for scrapes; a group of our own keeps the daemon's
    // packet threads free of NIO's per-core singleton threads. It lives for the
    // whole process, like `MultiThreadedEventLoopGroup.singleton`.
    private static let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    private let registry: PrometheusCollectorRegistry
    private let logger: Logger
    private let idleTimeout: TimeAmount
    private let requestTimeout: TimeAmount
    private let connections: ConnectionLimit
    private let state: Mutex<State>

    /// Creates the server; it listens on 127.0.0.1:`port` when run (0: not at
    /// all until ``rebind(port:)`` names a port). It counts in `registry`
    /// the connections refused at the limit
    /// (`qosmapd_metrics_connections_refused_total`), those closed by a
    /// timeout (`qosmapd_metrics_connections_timed_out_total`) and those
    /// open (`qosmapd_metrics_connections_open`).
    ///
    /// - Parameters:
    ///   - idleTimeout: how long a connection may send nothing before it is
    ///     closed, so idle clients cannot hold resources.
    ///   - requestTimeout: how long a request may take from the connection
    ///     (or the previous answer) to its answer sent, however the client
    ///     trickles its bytes or reads the answer.
    ///   - maxConnections: the connections served at once; with the
    ///     timeouts, what bounds the file descriptors clients can take.
    public init(
        registry: PrometheusCollectorRegistry, port: UInt16, logger: Logger,
        idleTimeout: Duration = .seconds(5), requestTimeout: Duration = .seconds(5), maxConnections: Int = 64
    ) {
        self.registry = registry
        self.logger = logger
        self.idleTimeout = TimeAmount(idleTimeout)
        self.requestTimeout = TimeAmount(requestTimeout)
        self.connections = ConnectionLimit(limit: maxConnections, registry: registry, logger: logger)
        self.state = Mutex(State(port: port))
    }

    /// The configured port; 0 when the endpoint is disabled.
    public var port: UInt16 { state.withLock { $0.port } }

    /// Listens until graceful shutdown, then closes the listener. Throws
    /// ``MetricsServerError`` when the port cannot be bound.
    public func run() async throws {
        // A loopback bind takes microseconds, so doing it synchronously (under
        // the same lock rebind uses) is simpler than racing an async bind
        // against a concurrent rebind.
        try startListening()
        try? await gracefulShutdown()
        stopListening()
    }

    /// Listens on 127.0.0.1:`port` instead (0 disables the endpoint). The new
    /// port is bound before the old listener closes; if the bind fails this
    /// throws ``MetricsServerError`` and the old listener keeps serving. The
    /// current port is a no-op. Safe to call from any thread except the
    /// server's event loop (it waits for the bind).
    public func rebind(port newPort: UInt16) throws {
        try state.withLock { state in
            // Same port: already listening, or run() is about to bind it.
            if newPort == state.port {
                return
            }
            if state.stopped {
                // Shutting down: remember the port, serve nothing.
                state.port = newPort
                return
            }
            let fresh = newPort == 0 ? nil : try bind(port: newPort)
            let old = state.listener
            state.listener = fresh
            state.port = newPort
            if let old {
                try? old.close().wait()
            }
            logger.info(
                "metrics endpoint moved",
                metadata: ["address": "127.0.0.1", "port": "\(newPort)", "enabled": "\(newPort != 0)"])
        }
    }

    /// Binds the configured port unless a listener is already open (a rebind
    /// before `run()`), the port is 0, or shutdown has begun.
    private func startListening() throws {
        try state.withLock { state in
            guard state.listener == nil, state.port != 0, !state.stopped else { return }
            state.listener = try bind(port: state.port)
            logger.info(
                "metrics endpoint listening", metadata: ["address": "127.0.0.1", "port": "\(state.port)"])
        }
    }

    /// Closes the listener for good. Accepted connections finish their
    /// request (within the request timeout) and then idle out.
    private func stopListening() {
        state.withLock { state in
            state.stopped = true
            if let listener = state.listener {
                try? listener.close().wait()
                state.listener = nil
            }
        }
    }

    /// Opens a listening channel on 127.0.0.1:`port`.
    private func bind(port: UInt16) throws -> any Channel {
        let registry = self.registry
        let idleTimeout = self.idleTimeout
        let requestTimeout = self.requestTimeout
        let connections = self.connections
        let bootstrap = ServerBootstrap(group: Self.group)
            // Lets a restarted daemon take the port while old connections sit in TIME_WAIT.
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ConnectionLimitHandler(connections))
                }
            }
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    // First, so it sees raw reads: any bytes count as activity.
                    try pipeline.addHandler(IdleStateHandler(readTimeout: idleTimeout))
                    try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
                    try pipeline.addHandler(
                        MetricsHTTPHandler(
                            registry: registry, requestTimeout: requestTimeout, connections: connections))
                }
            }
        do {
            // Loopback only: the counters are not for the network.
            return try bootstrap.bind(host: "127.0.0.1", port: Int(port)).wait()
        } catch {
            let reason: String
            if let io = error as? IOError {
                reason = String(cString: strerror(io.errnoCode))
            } else {
                reason = "\(error)"
            }
            throw MetricsServerError(message: "cannot listen on 127.0.0.1:\(port): \(reason)")
        }
    }
}

/// The connections the endpoint holds, across listeners (a rebind leaves the
/// old listener's connections to finish), and their counters.
final class ConnectionLimit: Sendable {
    private struct State {
        var open = 0
        /// Refusals since the last log line about them.
        var unlogged = 0
        var lastLog: ContinuousClock.Instant?
        var lastAcceptFailureLog: ContinuousClock.Instant?
    }

    /// The connections served at once.
    let limit: Int
    private let state = Mutex(State())
    private let refused: Counter
    private let timedOut: Counter
    private let openGauge: Gauge
    private let logger: Logger

    init(limit: Int, registry: PrometheusCollectorRegistry, logger: Logger) {
        self.limit = limit
        self.logger = logger
        // On the registry itself, not through swift-metrics: the server is
        // given its registry, and tests read these from their own. No help
        // text, like the daemon's other metrics.
        func name(_ metric: String, _ unit: String) -> MetricNameDescriptor {
            MetricNameDescriptor(namespace: "qosmapd", metricName: metric, unitName: unit, helpText: "")
        }
        refused = registry.makeCounter(descriptor: name("metrics_connections_refused", "total"))
        timedOut = registry.makeCounter(descriptor: name("metrics_connections_timed_out", "total"))
        openGauge = registry.makeGauge(descriptor: name("metrics_connections", "open"))
    }

    /// Takes a place for a new connection, or counts it refused when every
    /// place is taken. Logs the first refusal, then at most one line a
    /// minute: a client that opens thousands must not flood the journal.
    func admit() -> Bool {
        let now = ContinuousClock.now
        let (admitted, open, toLog) = state.withLock { s -> (Bool, Int, Int?) in
            if s.open < limit {
                s.open += 1
                return (true, s.open, nil)
            }
            s.unlogged += 1
            guard s.lastLog.map({ now - $0 >= .seconds(60) }) ?? true else { return (false, s.open, nil) }
            defer { s.unlogged = 0 }
            s.lastLog = now
            return (false, s.open, s.unlogged)
        }
        if admitted {
            openGauge.set(Int64(open))
        } else {
            refused.increment()
            if let toLog {
                logger.warning(
                    "metrics endpoint at its connection limit; closing new connections at once",
                    metadata: ["limit": "\(limit)", "refused": "\(toLog)"])
            }
        }
        return admitted
    }

    /// Gives back the place of a connection that closed.
    func release() {
        openGauge.set(
            Int64(
                state.withLock { s in
                    s.open -= 1
                    return s.open
                }))
    }

    /// Counts a connection closed by the idle or the request timeout.
    func timedOutConnection() { timedOut.increment() }

    /// Logs, at most once a minute, that accepts pause for `pause` after
    /// failing with `code` (EMFILE: the process is out of descriptors).
    func acceptFailed(_ code: Int32, pause: TimeAmount) {
        let now = ContinuousClock.now
        let log = state.withLock { s in
            guard s.lastAcceptFailureLog.map({ now - $0 >= .seconds(60) }) ?? true else { return false }
            s.lastAcceptFailureLog = now
            return true
        }
        if log {
            logger.error(
                "metrics endpoint cannot accept connections; pausing accepts",
                metadata: [
                    "error": "\(String(cString: strerror(code))) (errno \(code))",
                    "pause_ms": "\(pause.nanoseconds / 1_000_000)",
                ])
        }
    }
}

/// On the listening channel: closes each accepted connection beyond the
/// limit before it is registered or read (it costs the accept and a close),
/// gives a connection's place back when it closes, and pauses accepting
/// while the process is out of descriptors.
private final class ConnectionLimitHandler: ChannelInboundHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel

    /// How long accepting pauses after an accept failed for want of
    /// descriptors or memory.
    static let pause = TimeAmount.seconds(1)

    private let connections: ConnectionLimit
    private var paused = false

    init(_ connections: ConnectionLimit) { self.connections = connections }

    /// An accept that fails with EMFILE or ENFILE leaves the connection
    /// queued, so the listener stays readable and the loop would call
    /// accept4 again at once, for as long as the descriptors are short.
    /// NIO's `AcceptBackoffHandler` does not stop that here: it delays the
    /// next read request, but the channel still has one pending after a
    /// failed accept and so stays registered for readability. Turning
    /// `autoRead` off unregisters it; the connections wait in the backlog.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let io = error as? IOError, [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(io.errnoCode) else {
            context.fireErrorCaught(error)
            return
        }
        connections.acceptFailed(io.errnoCode, pause: Self.pause)
        guard !paused, let options = context.channel.syncOptions else { return }
        paused = true
        try? options.setOption(.autoRead, value: false)
        context.eventLoop.assumeIsolated().scheduleTask(in: Self.pause) { [self] in
            paused = false
            // A listener closed meanwhile (a rebind) refuses the option; nothing to resume.
            try? context.channel.syncOptions?.setOption(.autoRead, value: true)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let child = unwrapInboundIn(data)
        guard connections.admit() else {
            child.close(promise: nil)
            return
        }
        let connections = self.connections
        child.closeFuture.whenComplete { _ in connections.release() }
        context.fireChannelRead(data)
    }
}

/// Answers one connection's requests (the HTTP codec has already parsed and,
/// with pipelining assistance, ordered them), each within the request
/// timeout.
private final class MetricsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let registry: PrometheusCollectorRegistry
    private let requestTimeout: TimeAmount
    private let connections: ConnectionLimit
    private var request: HTTPRequestHead?
    /// Closes the connection unless the pending request is answered first.
    private var deadline: Scheduled<Void>?

    init(registry: PrometheusCollectorRegistry, requestTimeout: TimeAmount, connections: ConnectionLimit) {
        self.registry = registry
        self.requestTimeout = requestTimeout
        self.connections = connections
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { armDeadline(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        armDeadline(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    /// Starts the time the next answer must be sent in. The idle timeout
    /// alone let a client that sends a byte now and then hold its
    /// connection, and its descriptor, for ever.
    private func armDeadline(_ context: ChannelHandlerContext) {
        deadline?.cancel()
        let channel = context.channel
        let connections = self.connections
        deadline = context.eventLoop.scheduleTask(in: requestTimeout) {
            connections.timedOutConnection()
            channel.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            request = head
        case .body:
            // No request has a use for a body; dropping each piece keeps memory flat.
            break
        case .end:
            if let head = request {
                respond(context: context, to: head)
            }
            request = nil
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            connections.timedOutConnection()
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset or a write to a closed peer ends this connection only.
        context.close(promise: nil)
    }

    private func respond(context: ChannelHandlerContext, to head: HTTPRequestHead) {
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        var headers = HTTPHeaders()
        var body: [UInt8] = []
        let status: HTTPResponseStatus
        if path != "/metrics" {
            status = .notFound
            body = Array("not found: '\(path)'; only /metrics is served\n".utf8)
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        } else if head.method == .GET || head.method == .HEAD {
            status = .ok
            registry.emit(into: &body)
            headers.add(name: "Content-Type", value: "text/plain; version=0.0.4; charset=utf-8")
        } else {
            status = .methodNotAllowed
            body = Array("method \(head.method.rawValue) not allowed; allowed: GET, HEAD\n".utf8)
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            headers.add(name: "Allow", value: "GET, HEAD")
        }
        // HEAD gets the GET length with no body, as RFC 9110 says.
        headers.add(name: "Content-Length", value: "\(body.count)")
        let keepAlive = head.isKeepAlive
        if !keepAlive {
            headers.add(name: "Connection", value: "close")
        } else if head.version == .http1_0 {
            headers.add(name: "Connection", value: "keep-alive")
        }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))),
            promise: nil)
        if head.method != .HEAD && !body.isEmpty {
            context.write(
                wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))),
                promise: nil)
        }
        let sent = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            sent.whenComplete { _ in channel.close(promise: nil) }
        } else {
            // Answered: the next request has its own time, from now.
            sent.assumeIsolated().whenSuccess { [self] in
                if context.channel.isActive { armDeadline(context) }
            }
        }
    }
}

/// The metrics endpoint could not start or move.
public struct MetricsServerError: Error, CustomStringConvertible {
    /// What failed, e.g. "cannot listen on 127.0.0.1:9464: Address already in use".
    public var message: String
    /// The message.
    public var description: String { message }
}
