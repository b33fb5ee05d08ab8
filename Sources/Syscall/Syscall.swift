import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The one way NFQueue and PacketSocket call the system, as swift-system's
/// `valueOrErrno` and `_retryOnInterrupt` together (both internal to it):
/// runs `call`, a C function that reports failure with a negative result and
/// `errno`, again while it fails with `EINTR` (a signal is never an error
/// here), and throws any other errno. Inlinable: it is on NFQueue's per-packet
/// receive and verdict path.
@inlinable @inline(__always) @discardableResult
public func retryingOnInterrupt<Value: BinaryInteger>(_ call: () -> Value) throws(Errno) -> Value {
    while true {
        let result = call()
        if result >= 0 { return result }
        let error = Errno(rawValue: errno)
        if error != .interrupted { throw error }
    }
}

/// ``retryingOnInterrupt(_:)`` for a C function that reports failure with
/// `NULL` and `errno` (`mnl_socket_open`).
@inlinable @inline(__always) @discardableResult
public func retryingOnInterrupt<Value>(_ call: () -> Value?) throws(Errno) -> Value {
    while true {
        if let result = call() { return result }
        let error = Errno(rawValue: errno)
        if error != .interrupted { throw error }
    }
}
