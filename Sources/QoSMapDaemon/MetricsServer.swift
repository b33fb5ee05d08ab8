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
/// Connections are served concurrently on one event loop; a connection that
/// sends nothing for `idleTimeout` is closed. The path must be exactly
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
    private let state: Mutex<State>

    /// Creates the server; it listens on 127.0.0.1:`port` when run (0: not at
    /// all until ``rebind(port:)`` names a port).
    ///
    /// - Parameter idleTimeout: how long a connection may send nothing before
    ///   it is closed, so idle clients cannot hold resources.
    public init(
        registry: PrometheusCollectorRegistry, port: UInt16, logger: Logger,
        idleTimeout: Duration = .seconds(5)
    ) {
        self.registry = registry
        self.logger = logger
        self.idleTimeout = TimeAmount(idleTimeout)
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
    /// request and then idle out.
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
        let bootstrap = ServerBootstrap(group: Self.group)
            // Lets a restarted daemon take the port while old connections sit in TIME_WAIT.
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 64)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    // First, so it sees raw reads: any bytes count as activity.
                    try pipeline.addHandler(IdleStateHandler(readTimeout: idleTimeout))
                    try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
                    try pipeline.addHandler(MetricsHTTPHandler(registry: registry))
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

/// Answers one connection's requests (the HTTP codec has already parsed and,
/// with pipelining assistance, ordered them).
private final class MetricsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let registry: PrometheusCollectorRegistry
    private var request: HTTPRequestHead?

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
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
