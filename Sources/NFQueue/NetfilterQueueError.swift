import SystemPackage

/// A failed queue operation and its errno.
public struct NetfilterQueueError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The step that failed.
    public enum Operation: String, Sendable, Hashable {
        /// `mnl_socket_open`.
        case open
        /// `mnl_socket_bind`.
        case bind
        /// `setsockopt` (`NETLINK_NO_ENOBUFS`, `SO_RCVBUFFORCE`, `SO_RCVTIMEO`).
        case setSocketOption = "setsockopt"
        /// `NFQNL_CFG_CMD_BIND`.
        case bindQueue = "bind queue"
        /// `NFQNL_CFG_CMD_UNBIND`.
        case unbindQueue = "unbind queue"
        /// Copy mode, flags and maxlen.
        case configureQueue = "configure queue"
        /// `mnl_socket_recvfrom`.
        case receive
        /// Sending a verdict, or the kernel rejecting one.
        case verdict
    }

    /// The step that failed.
    public var operation: Operation
    /// Why: swift-system's `Errno`, e.g. `.notPermitted` (EPERM) without
    /// CAP_NET_ADMIN, `.noBufferSpace` (ENOBUFS) after a receive overrun,
    /// `.noSuchFileOrDirectory` (ENOENT) for a verdict on an unknown packet id.
    public var errno: Errno

    /// Creates an error.
    public init(operation: Operation, errno: Errno) {
        self.operation = operation
        self.errno = errno
    }

    /// `nfqueue <operation>: <strerror> (errno N)`.
    public var description: String { "nfqueue \(operation.rawValue): \(errno) (errno \(errno.rawValue))" }
}
