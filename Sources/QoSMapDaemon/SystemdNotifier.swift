#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// sd_notify without libsystemd: one datagram to `$NOTIFY_SOCKET`.
public struct SystemdNotifier: Sendable {
    /// The socket path (`@` for the abstract namespace), or nil when not under systemd.
    public let path: String?

    /// Reads `NOTIFY_SOCKET` from the environment.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// `READY=1`.
    public func ready() { send("READY=1") }

    /// `RELOADING=1` with `MONOTONIC_USEC` (systemd 253+ Type=notify-reload needs the
    /// timestamp; Type=notify, which the unit uses, accepts it too).
    public func reloading() {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let usec = UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
        send("RELOADING=1\nMONOTONIC_USEC=\(usec)")
    }

    /// `STOPPING=1`.
    public func stopping() { send("STOPPING=1") }

    /// Sends a state string; returns whether it was delivered.
    @discardableResult
    public func send(_ state: String) -> Bool {
        guard let path else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }  // abstract socket
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return false }
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: bytes) }
        let len = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        let sent = state.utf8CString.withUnsafeBufferPointer { msg in
            withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, msg.baseAddress, msg.count - 1, 0, $0, len)
                }
            }
        }
        return sent >= 0
    }
}
