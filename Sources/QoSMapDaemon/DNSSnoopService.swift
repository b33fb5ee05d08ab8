import Logging
import PacketSocket
import QoSMapPacket
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Reads the DNS traffic of the snooped interfaces (a ``PacketSocket`` per
/// interface, filtered in the kernel to UDP/TCP port 53) on one thread, and
/// calls `onReply` for every reply that answers a query seen on the same
/// interface (``DNSSnooper``). An interface that does not exist yet, or goes
/// away, is retried every second and logged, never fatal. A process that may
/// not open packet sockets at all cannot snoop: qosmapd checks that at start
/// (``startupProblem()``) and refuses to start. Graceful shutdown or
/// cancellation stops the thread, which closes the sockets.
public final class DNSSnoopService: Service, Sendable {
    let logger: Logger
    let limits: DNSSnoopLimits
    let onReply: @Sendable (DNSObservedReply) -> Void
    /// Runs first on the snooping thread (tests enter a network namespace there).
    let threadSetup: (@Sendable () -> Void)?
    private let wanted: Mutex<[String]>
    private let published = Mutex(DNSSnoopCounters())
    private let open = Mutex<[String]>([])
    private let stopping = Atomic<Bool>(false)
    private let finished = Mutex<(done: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    /// Packets read from one socket before the others get their turn.
    static let batch = 64
    /// The read buffer: a whole GRO packet of a reassembled TCP stream fits.
    static let bufferSize = 256 * 1024

    /// A service snooping `interfaces`; `onReply` runs on the snooping thread
    /// and must not block for long (packets queue in the socket meanwhile, and
    /// the kernel drops them when its receive buffer is full).
    public convenience init(
        interfaces: [String], limits: DNSSnoopLimits = DNSSnoopLimits(), logger: Logger,
        onReply: @escaping @Sendable (DNSObservedReply) -> Void
    ) {
        self.init(interfaces: interfaces, limits: limits, logger: logger, threadSetup: nil, onReply: onReply)
    }

    /// A service whose thread runs `threadSetup` before opening anything.
    init(
        interfaces: [String], limits: DNSSnoopLimits, logger: Logger, threadSetup: (@Sendable () -> Void)?,
        onReply: @escaping @Sendable (DNSObservedReply) -> Void
    ) {
        self.threadSetup = threadSetup
        self.logger = logger
        self.limits = limits
        self.onReply = onReply
        wanted = Mutex(interfaces)
    }

    /// The interfaces to snoop from now on (a reload): sockets of interfaces
    /// left out are closed, new ones opened, within a second.
    public func setInterfaces(_ interfaces: [String]) { wanted.withLock { $0 = interfaces } }

    /// The interfaces being snooped (as configured, present or not).
    public var interfaces: [String] { wanted.withLock { $0 } }

    /// The configured interfaces that have an open socket now.
    public var openInterfaces: [String] { open.withLock { $0 } }

    /// The counters so far (published by the snooping thread after every batch of packets).
    public var counters: DNSSnoopCounters { published.withLock { $0 } }

    /// Runs the snooping thread until graceful shutdown or cancellation, then
    /// waits for it to close its sockets.
    public func run() async throws {
        startThread(name: "qosmapd-dns") { [self] in
            threadSetup?()
            snoop()
            let waiter = finished.withLock {
                $0.done = true
                return $0.waiter
            }
            waiter?.resume()
        }
        try? await gracefulShutdown()
        stopping.store(true, ordering: .relaxed)
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let done = finished.withLock {
                if !$0.done { $0.waiter = c }
                return $0.done
            }
            if done { c.resume() }
        }
        logger.info("DNS snooping stopped")
    }

    /// An open socket and the interface it reads.
    private struct Snooped {
        var socket: PacketSocket
        var interface: DNSSnoopInterface
    }

    /// The thread: poll the sockets (250 ms, to notice a stop), read each
    /// ready one in batches, and once a second reopen what is missing and
    /// expire old queries and streams.
    private func snoop() {
        var snooper = DNSSnooper(limits: limits)
        var sockets: [Snooped] = []
        var failures: [String: String] = [:]  // the last error logged per interface, to log changes only
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferSize, alignment: 16)
        defer { buffer.deallocate() }
        var lastCheck: UInt64 = 0
        var fds: [pollfd] = []
        while !stopping.load(ordering: .relaxed) {
            let now = monotonicNanoseconds()
            if lastCheck == 0 || now &- lastCheck >= 1_000_000_000 {
                lastCheck = now
                reconcile(&sockets, &failures)
                snooper.expire(now: now)
                publish(snooper.counters, sockets)
                fds = sockets.map { pollfd(fd: $0.socket.fileDescriptor, events: Int16(POLLIN), revents: 0) }
            }
            let ready = fds.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), 250) }
            guard ready > 0 else {
                if ready < 0, errno != EINTR {
                    logger.error("poll failed", metadata: ["error": "\(String(cString: strerror(errno)))"])
                    sleep(seconds: 0.25)
                }
                continue
            }
            for (k, pfd) in fds.enumerated() where pfd.revents != 0 {
                let s = sockets[k]
                for _ in 0..<Self.batch {
                    let received: ReceivedPacket?
                    do {
                        received = try s.socket.receive(into: buffer)
                    } catch {
                        // ENETDOWN when the interface goes down or away; the
                        // once-a-second check reopens it if it was replaced.
                        logger.warning(
                            "DNS snooping: read failed",
                            metadata: ["interface": "\(s.interface.name)", "error": "\(error)"])
                        break
                    }
                    guard let rx = received else { break }
                    // On loopback each packet is seen leaving and then arriving: read it once.
                    if rx.isLoopback && rx.isOutgoing { continue }
                    if rx.isTruncated {
                        snooper.counters.frames &+= 1
                        snooper.counters.framesTruncated &+= 1
                        continue
                    }
                    snooper.frame(
                        UnsafeRawBufferPointer(rebasing: buffer[0..<rx.length]), format: .ip,
                        interface: s.interface, now: monotonicNanoseconds(), deliver: onReply)
                }
                fds[k].revents = 0
            }
            publish(snooper.counters, nil)
        }
        sockets.removeAll()  // closes them
        open.withLock { $0 = [] }
    }

    private func publish(_ counters: DNSSnoopCounters, _ sockets: [Snooped]?) {
        published.withLock { p in
            // The published copy keeps its own `refused` storage, so the
            // snooper's array stays uniquely referenced and its next refusal
            // does not copy it (an allocation per batch otherwise).
            var own = p.refused
            p = counters
            for i in own.indices where i < counters.refused.count { own[i] = counters.refused[i] }
            p.refused = own
        }
        if let sockets { open.withLock { $0 = sockets.map(\.interface.name) } }
    }

    /// Opens a socket for each wanted interface that has none (or whose
    /// index changed: it was deleted and created again), closes the others.
    private func reconcile(_ sockets: inout [Snooped], _ failures: inout [String: String]) {
        let names = wanted.withLock { $0 }
        sockets.removeAll { s in
            let keep =
                names.contains(s.interface.name)
                && PacketSocket.interfaceIndex(s.interface.name) == s.interface.index
            if !keep {
                logger.info(
                    "DNS snooping: interface closed", metadata: ["interface": "\(s.interface.name)"])
            }
            return !keep
        }
        for name in names where !sockets.contains(where: { $0.interface.name == name }) {
            let failure: String
            var permanent: String? = nil
            if let index = PacketSocket.interfaceIndex(name) {
                do {
                    let socket = try PacketSocket(interfaceIndex: index, filter: .dnsPort53)
                    sockets.append(
                        Snooped(socket: socket, interface: DNSSnoopInterface(index: index, name: name)))
                    failures[name] = nil
                    logger.info(
                        "DNS snooping: interface opened",
                        metadata: ["interface": "\(name)", "index": "\(index)"])
                    continue
                } catch {
                    failure = "\(error)"
                    if case .permanent(let why) = Self.classify(error) { permanent = why }
                }
            } else {
                failure = "no such interface"
            }
            guard failures[name] != failure else { continue }
            failures[name] = failure
            if let permanent {
                // Checked at start (startupProblem), so only a process that
                // lost the right since gets here; retrying cannot help, and
                // saying it would is what hid this under systemd.
                logger.error("\(permanent)", metadata: ["interface": "\(name)"])
            } else {
                logger.warning(
                    "DNS snooping: cannot open the interface; retrying every second",
                    metadata: ["interface": "\(name)", "error": "\(failure)"])
            }
        }
    }
}

/// What a failed attempt to open a snooping socket means.
public enum DNSSnoopOpenFailure: Sendable, Equatable {
    /// May pass later: the interface does not exist yet or went away
    /// (`ENODEV`, `ENXIO`, `ENETDOWN`), or memory or descriptors are short.
    /// Retried every second.
    case transient
    /// Cannot pass while the process runs: it may not open packet sockets at
    /// all. The text is one line naming what to grant.
    case permanent(String)
}

extension DNSSnoopService {
    /// Sorts an error of ``PacketSocket``: only `socket(AF_PACKET)` refused
    /// to the process is permanent (`EPERM` or `EACCES`: no `CAP_NET_RAW`;
    /// `EAFNOSUPPORT`: a seccomp filter such as systemd's
    /// `RestrictAddressFamilies=` without `AF_PACKET`, or no `CONFIG_PACKET`).
    /// Every other error names one interface or a passing shortage.
    public static func classify(_ error: PacketSocketError) -> DNSSnoopOpenFailure {
        guard error.operation == .open else { return .transient }
        let what = "DNS snooping (classify.dns.snoop) cannot open AF_PACKET sockets: \(error.errno)"
        switch error.errno.rawValue {
        case EPERM, EACCES:
            return .permanent(
                "\(what); grant qosmapd CAP_NET_RAW (qosmapd.service: AmbientCapabilities= and CapabilityBoundingSet=)"
            )
        case EAFNOSUPPORT:
            return .permanent(
                "\(what); allow AF_PACKET (qosmapd.service: RestrictAddressFamilies=), or use a kernel with CONFIG_PACKET"
            )
        default:
            return .transient
        }
    }

    /// The one-line reason this process can never snoop, or nil if it may
    /// open packet sockets (``PacketSocket/checkAvailable()``). qosmapd asks
    /// at start when the config snoops, and exits rather than start a
    /// service whose `dns:` rules could never match.
    public static func startupProblem() -> String? {
        do {
            try PacketSocket.checkAvailable()
            return nil
        } catch {
            if case .permanent(let why) = classify(error) { return why }
            return nil  // a shortage: the snooping thread retries
        }
    }
}

/// `clock_gettime(CLOCK_MONOTONIC)` in nanoseconds.
func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}
