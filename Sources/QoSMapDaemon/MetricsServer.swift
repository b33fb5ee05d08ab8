import Foundation
import Logging
import Prometheus
import ServiceLifecycle

/// Serves `GET /metrics` from a Prometheus registry on 127.0.0.1:port, with
/// plain blocking sockets on one thread (scrapes are rare and tiny).
public struct MetricsServer: Service {
    let registry: PrometheusCollectorRegistry
    let port: UInt16
    let logger: Logger

    /// Creates the server; it listens when run.
    public init(registry: PrometheusCollectorRegistry, port: UInt16, logger: Logger) {
        self.registry = registry
        self.port = port
        self.logger = logger
    }

    /// Listens until graceful shutdown.
    public func run() async throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            throw MetricsServerError(message: "socket: \(String(cString: strerror(errno)))")
        }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        // Loopback only: the counters are not for the network.
        addr.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            let message = "cannot listen on 127.0.0.1:\(port): \(String(cString: strerror(errno)))"
            close(fd)
            throw MetricsServerError(message: message)
        }
        logger.info("metrics endpoint listening", metadata: ["address": "127.0.0.1", "port": "\(port)"])
        let registry = self.registry
        let thread = Thread {
            while true {
                let c = accept(fd, nil, nil)
                if c < 0 {
                    if errno == EINTR { continue }
                    return  // the listening socket was shut down
                }
                var tv = timeval(tv_sec: 2, tv_usec: 0)
                setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                var request = [UInt8](repeating: 0, count: 2048)
                let n = read(c, &request, request.count)
                let line = n > 0 ? String(decoding: request[0..<n], as: UTF8.self) : ""
                var body: [UInt8] = []
                let status: String
                if line.hasPrefix("GET /metrics") {
                    registry.emit(into: &body)
                    status = "200 OK"
                } else {
                    body = Array("only GET /metrics is served\n".utf8)
                    status = "404 Not Found"
                }
                let head =
                    "HTTP/1.1 \(status)\r\nContent-Type: text/plain; version=0.0.4\r\n"
                    + "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
                let out = Array(head.utf8) + body
                var off = 0
                while off < out.count {
                    let w = out[off...].withUnsafeBytes { write(c, $0.baseAddress, $0.count) }
                    if w <= 0 { break }
                    off += w
                }
                close(c)
            }
        }
        thread.start()
        try? await gracefulShutdown()
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}

/// The metrics endpoint could not start.
public struct MetricsServerError: Error, CustomStringConvertible {
    /// What failed.
    public var message: String
    /// The message.
    public var description: String { message }
}
