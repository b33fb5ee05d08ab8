import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// Watches rtnetlink link notifications (`RTMGRP_LINK` on a `NETLINK_ROUTE`
/// socket) on its own thread and bumps ``generation`` on every
/// `RTM_NEWLINK`/`RTM_DELLINK`, so that the queue threads drop their cached
/// interface names after a rename without a SIGHUP. With `trafficControl` it
/// also listens to `RTMGRP_TC` (qdiscs and filters added or deleted) and calls
/// `onChange`, so that the ebpf datapath repairs its filters at once.
public final class LinkMonitor: Sendable {
    private let value = Atomic<Int>(0)
    private let stopping = Atomic<Bool>(false)
    private let running = Atomic<Bool>(false)
    private let fd: Int32
    private let logger: Logger
    private let trafficControl: Bool
    private let onChange: (@Sendable () -> Void)?

    /// Whether the rtnetlink socket is open; when not, names are refreshed
    /// only when ``bump()`` is called (the daemon does so every 10 s).
    public var isListening: Bool { fd >= 0 }

    /// Changes whenever a link may have been added, removed or renamed.
    public var generation: Int { value.load(ordering: .relaxed) }

    // <linux/netlink.h> and <linux/rtnetlink.h>, which Glibc does not import.
    private static let netlinkRoute: Int32 = 0  // NETLINK_ROUTE
    private static let groupLink: UInt32 = 1  // RTMGRP_LINK
    private static let groupTC: UInt32 = 8  // RTMGRP_TC
    private static let newLink: UInt16 = 16  // RTM_NEWLINK
    private static let delLink: UInt16 = 17  // RTM_DELLINK
    /// RTM_NEWQDISC, RTM_DELQDISC, RTM_NEWTFILTER, RTM_DELTFILTER.
    private static let tcTypes: Set<UInt16> = [36, 37, 44, 45]

    /// `struct sockaddr_nl`.
    private struct SockaddrNL {
        var family = sa_family_t(AF_NETLINK)
        var pad: UInt16 = 0
        var pid: UInt32 = 0
        var groups: UInt32 = 0
    }

    /// Opens and binds the socket (`socket(AF_NETLINK, SOCK_RAW|SOCK_CLOEXEC,
    /// NETLINK_ROUTE)`, `bind` to `RTMGRP_LINK`, and `RTMGRP_TC` with
    /// `trafficControl`); on failure logs a warning and listens to nothing.
    /// `onChange` runs on the monitor's thread after each message that matters
    /// (and after lost notifications): keep it short.
    public init(logger: Logger, trafficControl: Bool = false, onChange: (@Sendable () -> Void)? = nil) {
        self.logger = logger
        self.trafficControl = trafficControl
        self.onChange = onChange
        let s = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), Self.netlinkRoute)
        guard s >= 0 else {
            logger.warning(
                "cannot open the rtnetlink socket; interface renames are seen within 10 s",
                metadata: ["error": "\(String(cString: strerror(errno)))"])
            fd = -1
            return
        }
        var addr = SockaddrNL(groups: Self.groupLink | (trafficControl ? Self.groupTC : 0))
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(s, $0, socklen_t(MemoryLayout<SockaddrNL>.size))
            }
        }
        // A receive timeout lets the thread notice a stop request.
        var tv = timeval(tv_sec: 0, tv_usec: 250_000)
        guard bound == 0,
            setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size)) == 0
        else {
            logger.warning(
                "cannot bind the rtnetlink socket to RTMGRP_LINK; interface renames are seen within 10 s",
                metadata: ["error": "\(String(cString: strerror(errno)))"])
            close(s)
            fd = -1
            return
        }
        fd = s
    }

    /// Marks every cached name stale.
    public func bump() { value.add(1, ordering: .relaxed) }

    /// Starts the listening thread (no-op without a socket).
    public func start() {
        guard fd >= 0, !running.exchange(true, ordering: .relaxed) else { return }
        startThread(name: "qosmapd-links") { [self] in listen() }
    }

    /// Stops the thread; it closes the socket within its receive timeout.
    public func stop() {
        // Idempotent: the socket is closed once, here or by the thread.
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        if fd >= 0, !running.load(ordering: .relaxed) { close(fd) }
    }

    private func listen() {
        var buf = [UInt8](repeating: 0, count: 32 * 1024)
        while !stopping.load(ordering: .relaxed) {
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                if Self.containsLinkChange(buf[..<n]) {
                    bump()
                    onChange?()
                } else if trafficControl, Self.contains(Self.tcTypes, buf[..<n]) {
                    onChange?()
                }
                continue
            }
            switch errno {
            case EAGAIN, EINTR: continue
            case ENOBUFS:  // notifications were lost: any name may be stale
                bump()
                onChange?()
            default:
                logger.error(
                    "rtnetlink receive failed", metadata: ["error": "\(String(cString: strerror(errno)))"])
                sleep(seconds: 0.25)  // no busy loop on a persistent error
                bump()
                onChange?()
            }
        }
        close(fd)
    }

    /// Whether a datagram holds an `RTM_NEWLINK` or `RTM_DELLINK` message
    /// (walks the `nlmsghdr`s: len u32, type u16, flags u16, seq u32, pid u32).
    static func containsLinkChange(_ bytes: ArraySlice<UInt8>) -> Bool {
        contains([newLink, delLink], bytes)
    }

    /// Whether a datagram holds a message of one of `types`.
    static func contains(_ types: Set<UInt16>, _ bytes: ArraySlice<UInt8>) -> Bool {
        var i = bytes.startIndex
        while bytes.endIndex - i >= 16 {
            // Netlink headers are in host byte order.
            let (len, type) = bytes[i..<i + 6].withUnsafeBytes {
                (Int($0.loadUnaligned(as: UInt32.self)), $0.loadUnaligned(fromByteOffset: 4, as: UInt16.self))
            }
            if types.contains(type) { return true }
            guard len >= 16 else { return false }
            i += (len + 3) & ~3  // NLMSG_ALIGN
        }
        return false
    }
}
