#if canImport(Glibc)
    import Glibc
#endif

/// One qosmapd per interface: a listening Unix socket bound to the abstract
/// name `qosmapd/interface/NAME`. Abstract names belong to the network
/// namespace, as interface names do, and the kernel frees the name when the
/// holder dies however it dies, so a SIGKILL leaves no stale lock. A second
/// daemon that cannot bind learns the holder's pid from `SO_PEERCRED` by
/// connecting; the holder ``drain()``s those probes.
public final class InterfaceLock: Sendable {
    /// The interface name the lock is for.
    public let interface: String
    private let fd: Int32

    /// What ``acquire(_:)`` found.
    public enum Outcome: Sendable {
        /// The lock is now this process's, until the value is released.
        case acquired(InterfaceLock)
        /// Another process holds it: its pid (as this pid namespace sees it;
        /// nil if it cannot be told).
        case held(pid: Int32?)
    }

    private init(interface: String, fd: Int32) {
        self.interface = interface
        self.fd = fd
    }

    deinit { close(fd) }

    /// The abstract address for `interface` (a leading NUL in `sun_path`)
    /// and its length.
    private static func address(_ interface: String) -> (sockaddr_un, socklen_t) {
        var a = sockaddr_un()
        a.sun_family = sa_family_t(AF_UNIX)
        let name = Array("qosmapd/interface/\(interface)".utf8.prefix(100))
        withUnsafeMutableBytes(of: &a.sun_path) { path in
            path[0] = 0
            for (i, b) in name.enumerated() { path[i + 1] = b }
        }
        let length = MemoryLayout<sa_family_t>.size + 1 + name.count
        return (a, socklen_t(length))
    }

    /// Takes the lock for `interface`, or tells who holds it.
    /// - Throws: ``InterfaceLockError`` when no Unix socket can be made or bound
    ///   for another reason than a holder.
    public static func acquire(_ interface: String) throws(InterfaceLockError) -> Outcome {
        let fd = socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw InterfaceLockError(interface: interface, call: "socket", errno: errno) }
        var (a, length) = address(interface)
        let bound = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        if bound == 0 {
            guard listen(fd, 8) == 0 else {
                let e = errno
                close(fd)
                throw InterfaceLockError(interface: interface, call: "listen", errno: e)
            }
            return .acquired(InterfaceLock(interface: interface, fd: fd))
        }
        let e = errno
        close(fd)
        guard e == EADDRINUSE else { throw InterfaceLockError(interface: interface, call: "bind", errno: e) }
        return .held(pid: holder(interface))
    }

    /// The pid of the process listening on `interface`'s name: a connection's
    /// `SO_PEERCRED` is the listener's. Nil when it cannot be told (its
    /// backlog is full, or it is in another pid namespace).
    static func holder(_ interface: String) -> Int32? {
        let fd = socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var (a, length) = address(interface)
        let connected = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
        }
        guard connected == 0 else { return nil }
        var cred = PeerCredentials()
        var size = socklen_t(MemoryLayout<PeerCredentials>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &size) == 0, cred.pid > 0 else { return nil }
        return cred.pid
    }

    /// Accepts and closes the probes of other daemons (``holder(_:)``), so
    /// that the backlog never fills; non-blocking, a few at a time.
    public func drain() {
        for _ in 0..<16 {
            // accept4 is GNU-only in Glibc's module; the fd is closed at once.
            let c = accept(fd, nil, nil)
            guard c >= 0 else { return }
            close(c)
        }
    }
}

/// `struct ucred` (`<sys/socket.h>` with `_GNU_SOURCE`, which Glibc's module
/// does not import): what `SO_PEERCRED` returns (here and for the status socket).
struct PeerCredentials: BitwiseCopyable, Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// A lock socket could not be made (not a lock that someone holds).
public struct InterfaceLockError: Error, CustomStringConvertible {
    /// The interface the lock was for.
    public var interface: String
    /// The failed call.
    public var call: String
    /// Its errno.
    public var errno: Int32

    /// `cannot lock interface NAME: CALL: strerror (errno N)`.
    public var description: String {
        "cannot lock interface \(interface): \(call): \(String(cString: strerror(errno))) (errno \(errno))"
    }
}
