import Logging
import NIOCore
import NIOPosix
import Prometheus
import QoSMapCore
import QoSMapPacket
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

/// What a ``StatusServer`` answers with: the daemon's state cut at a limit.
/// Called on the server's event loop thread, never on a packet thread.
public typealias StatusSource = @Sendable (_ limit: Int) -> StatusReport

/// Serves `qosmap status` on a Unix stream socket (`status: {socket:}`):
/// one request per connection (a ``StatusRequest``, one JSON line of at
/// most ``maxRequest`` bytes; the connection is closed at ``deadline``), answered with one JSON
/// ``StatusReport`` (or ``StatusReply`` with an error), then closed.
///
/// Two locks keep others out: the socket file is mode 0660, owned by
/// qosmapd's user and the configured group (root only without one), and
/// each request's peer (`SO_PEERCRED`) must be root, qosmapd's user, or a
/// member of the group; a refused peer gets an error answer, never state.
/// At most ``maxConnections`` are served at once; more are closed at once.
public final class StatusServer: Service, Sendable {
    /// The largest request accepted, in bytes (a request is about 30).
    public static let maxRequest = 1024
    /// The time a connection lasts at most, request and answer included: a
    /// client that sends nothing, or never reads its answer, cannot hold one
    /// of the ``maxConnections`` places longer.
    public static let deadline = TimeAmount.seconds(5)
    /// Connections served at once.
    /// The directory of the default socket, `/run/qosmapd` (the unit's
    /// `RuntimeDirectory=qosmapd`).
    static let packagedDirectory = "/run/qosmapd"
    public static let maxConnections = 16

    // Its own thread, like MetricsServer's: never a packet thread.
    private static let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    private let path: String
    private let groupID: gid_t?
    private let groupName: String?
    private let source: StatusSource
    private let logger: Logger
    private let open = OpenConnections()
    private let listener: any Channel

    /// Binds `path` at once (so that a bad path fails the start in one
    /// line) and sets its owner and mode; an old socket file there is
    /// replaced. Throws ``StatusServerError`` naming the path and errno.
    public init(path: String, group: String?, logger: Logger, source: @escaping StatusSource) throws {
        self.path = path
        self.source = source
        self.logger = logger
        groupName = group
        if let group {
            guard let g = getgrnam(group) else {
                throw StatusServerError(message: "status socket \(path): unknown group '\(group)'")
            }
            groupID = g.pointee.gr_gid
        } else {
            groupID = nil
        }
        // The packaged default's directory, which the unit's RuntimeDirectory=
        // makes, is made for a qosmapd run by hand too (any other directory
        // must exist: a typo is not silently created).
        if path.hasPrefix(Self.packagedDirectory + "/") { mkdir(Self.packagedDirectory, 0o755) }
        // A socket file left by a killed daemon is removed; any other file is not.
        var st = stat()
        if lstat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFSOCK else {
                throw StatusServerError(
                    message: "cannot bind status socket \(path): a file that is not a socket is there")
            }
            unlink(path)
        }
        let limit = Self.maxConnections
        let counter = open
        let gid = groupID
        let src = source
        let bootstrap = ServerBootstrap(group: Self.group)
            .serverChannelOption(.backlog, value: 16)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        StatusHandler(group: gid, open: counter, limit: limit, source: src))
                }
            }
        // The mode is set before listen(2) can accept anyone: umask 0117
        // around bind leaves 0660 (the unit's UMask=0077 would give 0600).
        let old = umask(0o117)
        defer { umask(old) }
        do {
            listener = try bootstrap.bind(unixDomainSocketPath: path, cleanupExistingSocketFile: false).wait()
        } catch {
            let reason =
                (error as? IOError).map {
                    "\(String(cString: strerror($0.errnoCode))) (errno \($0.errnoCode))"
                } ?? "\(error)"
            throw StatusServerError(message: "cannot bind status socket \(path): \(reason)")
        }
        if let gid, chown(path, geteuid(), gid) != 0 {
            let e = errno
            try? listener.close().wait()
            unlink(path)
            throw StatusServerError(
                message:
                    "cannot give status socket \(path) to group '\(group ?? "")': \(String(cString: strerror(e))) (errno \(e)); the unit needs SupplementaryGroups=\(group ?? "")"
            )
        }
        logger.info("status socket listening", metadata: ["path": "\(path)", "group": "\(group ?? "-")"])
    }

    /// Serves until graceful shutdown, then closes the listener and removes the socket file.
    public func run() async throws {
        try? await gracefulShutdown()
        try? await listener.close()
        unlink(path)
    }
}

/// A status socket that could not be set up: one line naming the path and the cause.
public struct StatusServerError: Error, CustomStringConvertible {
    /// The line.
    public var message: String
    /// The line.
    public var description: String { message }
}

/// The connections a server holds, shared with its handlers.
final class OpenConnections: Sendable {
    let count = Atomic<Int>(0)
}

/// One connection: reads a request line, checks the peer, answers, closes.
private final class StatusHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let group: gid_t?
    private let open: OpenConnections
    private let limit: Int
    private let source: StatusSource
    private var buffer: [UInt8] = []
    private var admitted = false
    private var answered = false
    private var deadline: Scheduled<Void>?

    init(group: gid_t?, open: OpenConnections, limit: Int, source: @escaping StatusSource) {
        self.group = group
        self.open = open
        self.limit = limit
        self.source = source
    }

    func channelActive(context: ChannelHandlerContext) {
        let n = open.count.wrappingAdd(1, ordering: .relaxed).newValue
        admitted = true
        guard n <= limit else {
            context.close(promise: nil)
            return
        }
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: StatusServer.deadline) {
            channel.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        if admitted { open.count.wrappingSubtract(1, ordering: .relaxed) }
        admitted = false
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered else { return }
        var bytes = unwrapInboundIn(data)
        buffer += bytes.readBytes(length: bytes.readableBytes) ?? []
        if let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
            answered = true
            answer(context, request: Array(buffer[..<end]))
        } else if buffer.count > StatusServer.maxRequest {
            answered = true
            reply(context, StatusReply(error: "request longer than \(StatusServer.maxRequest) bytes"))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {}

    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }

    /// The peer's credentials (`SO_PEERCRED`), then the report or a refusal.
    private func answer(_ context: ChannelHandlerContext, request: [UInt8]) {
        guard let provider = context.channel as? any SocketOptionProvider else {
            reply(context, StatusReply(error: "cannot read the peer's credentials"))
            return
        }
        let group = self.group
        let future: EventLoopFuture<PeerCredentials> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        future.whenComplete { result in
            let (handler, context) = bound.value
            handler.decide(context, result, request: request, group: group)
        }
    }

    private func decide(
        _ context: ChannelHandlerContext, _ result: Result<PeerCredentials, any Error>, request: [UInt8],
        group: gid_t?
    ) {
        switch result {
        case .failure(let e):
            self.reply(context, StatusReply(error: "cannot read the peer's credentials: \(e)"))
        case .success(let cred):
            guard Self.allowed(cred, group: group) else {
                self.reply(
                    context,
                    StatusReply(
                        error:
                            "permission denied: uid \(cred.uid) is not root, qosmapd's user or in the status group"
                    ))
                return
            }
            guard let req = try? JSONDecoder().decode(StatusRequest.self, from: Data(request)) else {
                self.reply(context, StatusReply(error: "bad request; allowed: {\"version\":1,\"limit\":N}"))
                return
            }
            guard req.version == StatusReport.version else {
                self.reply(
                    context,
                    StatusReply(
                        error: "unsupported status version \(req.version); allowed: \(StatusReport.version)"))
                return
            }
            let report = self.source(max(0, min(req.limit, 100_000)))
            self.send(context, (try? JSONEncoder().encode(report)).map { Array($0) } ?? [])
        }
    }

    /// Root, qosmapd's own user, or the group as primary or supplementary group.
    static func allowed(_ cred: PeerCredentials, group: gid_t?) -> Bool {
        if cred.uid == 0 || cred.uid == geteuid() { return true }
        guard let group else { return false }
        if cred.gid == group { return true }
        // Supplementary groups: from the group database, as login gave them.
        guard let pw = getpwuid(cred.uid), let name = pw.pointee.pw_name else { return false }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(name, cred.gid, &groups, &count) < 0 {
            groups = [gid_t](repeating: 0, count: Int(count))
            guard getgrouplist(name, cred.gid, &groups, &count) >= 0 else { return false }
        }
        return groups.prefix(Int(count)).contains(group)
    }

    private func reply(_ context: ChannelHandlerContext, _ r: StatusReply) {
        send(context, (try? JSONEncoder().encode(r)).map { Array($0) } ?? [])
    }

    private func send(_ context: ChannelHandlerContext, _ bytes: [UInt8]) {
        var out = context.channel.allocator.buffer(capacity: bytes.count + 1)
        out.writeBytes(bytes)
        out.writeInteger(UInt8(ascii: "\n"))
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(out)).whenComplete { _ in channel.close(promise: nil) }
    }
}
