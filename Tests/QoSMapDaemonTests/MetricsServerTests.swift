import Logging
import Prometheus
import QoSMapDaemon
import ServiceLifecycleTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// These tests drive a real MetricsServer on loopback with raw blocking
// sockets, so every read has a receive timeout: nothing can hang, and a server
// that does not answer in time fails the test. Serialized so that blocking
// reads never starve the cooperative pool the server's run() needs.
@Suite(.serialized) struct MetricsServerTests {
    @Test func getServesTheRegistry() async throws {
        try await serving { _, registry, port in
            testCounter(registry, "scrapes").increment(by: Int64(41))
            let r = try request(port: port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(r.status == 200)
            #expect(r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
            #expect(r.text.contains("qosmap_test_scrapes_total 41\n"))
            #expect(r.headers["content-length"] == "\(r.body.count)")
        }
    }

    @Test func headHasTheGetLengthAndNoBody() async throws {
        try await serving { _, registry, port in
            testCounter(registry, "head").increment(by: Int64(3))
            let get = try request(port: port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let head = try request(
                port: port, "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(get.status == 200)
            #expect(head.status == 200)
            #expect(get.body.count > 0)
            #expect(head.headers["content-length"] == "\(get.body.count)")
            #expect(head.headers["content-type"] == get.headers["content-type"])
            // Read to EOF: any byte after the header block would be a body.
            #expect(head.body.isEmpty)
        }
    }

    @Test(arguments: [
        ("/metrics", 200), ("/metrics?name=x", 200), ("/metricsXYZ", 404), ("/metrics/", 404), ("/", 404),
        ("/Metrics", 404),
    ])
    func pathsMatchExactly(path: String, status: Int) async throws {
        try await serving { _, _, port in
            let r = try request(port: port, "GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(r.status == status)
        }
    }

    @Test(arguments: ["POST", "PUT", "DELETE"])
    func otherMethodsGet405(method: String) async throws {
        try await serving { _, _, port in
            let r = try request(
                port: port,
                "\(method) /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc")
            #expect(r.status == 405)
            #expect(r.headers["allow"] == "GET, HEAD")
        }
    }

    @Test func requestSplitAcrossWritesIsServed() async throws {
        try await serving { _, registry, port in
            testCounter(registry, "split").increment()
            let fd = try connectLoopback(port: port)
            defer { close(fd) }
            try sendAll(fd, "GET /metr")
            usleep(200_000)
            try sendAll(fd, "ics HTTP/1.1\r\nHo")
            usleep(200_000)
            try sendAll(fd, "st: x\r\nConnection: close\r\n\r\n")
            let r = try readResponse(fd)
            #expect(r.status == 200)
            #expect(r.text.contains("qosmap_test_split_total 1\n"))
        }
    }

    @Test func keepAliveServesSeveralRequestsOnOneConnection() async throws {
        try await serving { _, _, port in
            let fd = try connectLoopback(port: port)
            defer { close(fd) }
            // Two pipelined requests in one write, the second closing: both answered, in order.
            try sendAll(
                fd,
                "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            let raw = try readToEOF(fd)
            let text = String(decoding: raw, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(text.contains("\r\n\r\nHTTP/1.1 404 Not Found\r\n"))
        }
    }

    @Test func idleConnectionsDoNotDelayAScrape() async throws {
        try await serving { _, _, port in
            var idle: [Int32] = []
            defer { idle.forEach { close($0) } }
            for i in 0..<20 {
                let fd = try connectLoopback(port: port)
                idle.append(fd)
                // Half of them start a request and stall.
                if i % 2 == 1 { try sendAll(fd, "GET /metr") }
            }
            // The answer must come within the 2 s receive timeout, or readResponse throws.
            let r = try request(
                port: port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeoutSeconds: 2
            )
            #expect(r.status == 200)
        }
    }

    @Test func idleConnectionIsClosed() async throws {
        try await serving(idleTimeout: .milliseconds(300)) { _, _, port in
            let fd = try connectLoopback(port: port)
            defer { close(fd) }
            try sendAll(fd, "GET /metr")
            // EOF (0) within 3 s means the server closed it; a timeout throws instead.
            var byte: UInt8 = 0
            let n = try withTimeout(fd, seconds: 3) { read(fd, &byte, 1) }
            #expect(n == 0)
        }
    }

    // SIGPIPE is ignored process-wide here as in qosmapd (NIO does it on its first
    // socket; qosmapd's main does it at start), so what this checks is that
    // connection errors end only their connection: the listener keeps serving.
    @Test func clientsThatResetDoNotHurtTheServer() async throws {
        try await serving { _, registry, port in
            // A body of about 1 MB, larger than loopback socket buffers, so the
            // server is still writing when the reset arrives.
            for n in 0..<30_000 {
                testCounter(registry, "bulk\(n)").increment()
            }
            var byte: UInt8 = 0
            for _ in 0..<10 {
                // Resets in the middle of a request.
                let a = try connectLoopback(port: port)
                try sendAll(a, "GET /metrics HTTP/1.1\r\nHo")
                reset(a)
                // Resets right after a complete request, before the answer is written.
                let b = try connectLoopback(port: port)
                try sendAll(b, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                reset(b)
                // Resets while the answer is being written.
                let c = try connectLoopback(port: port)
                try sendAll(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try withTimeout(c, seconds: 3) { read(c, &byte, 1) } == 1)
                reset(c)
            }
            let r = try request(port: port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(r.status == 200)
            #expect(r.body.count > 1_000_000)
            #expect(r.text.contains("qosmap_test_bulk29999_total 1\n"))
        }
    }

    @Test func rebindMovesTheListener() async throws {
        try await serving { server, _, oldPort in
            let newPort = try freePort(excluding: oldPort)
            try server.rebind(port: newPort)
            #expect(server.port == newPort)
            #expect(throws: SocketError.self) { try connectLoopback(port: oldPort) }
            let r = try request(
                port: newPort, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(r.status == 200)
            // Same port: nothing changes.
            try server.rebind(port: newPort)
            #expect(try request(port: newPort, "GET /metrics HTTP/1.0\r\n\r\n").status == 200)
            // Port 0 disables the endpoint.
            try server.rebind(port: 0)
            #expect(server.port == 0)
            #expect(throws: SocketError.self) { try connectLoopback(port: newPort) }
            // And a port brings it back.
            try server.rebind(port: oldPort)
            #expect(try request(port: oldPort, "GET /metrics HTTP/1.0\r\n\r\n").status == 200)
        }
    }

    @Test func failedRebindKeepsTheOldListener() async throws {
        try await serving { server, _, oldPort in
            let holder = try listeningSocket(port: 0)
            defer { close(holder.fd) }
            #expect(holder.port != oldPort)
            #expect(throws: MetricsServerError.self) { try server.rebind(port: holder.port) }
            do {
                try server.rebind(port: holder.port)
            } catch let error as MetricsServerError {
                #expect(error.message == "cannot listen on 127.0.0.1:\(holder.port): Address already in use")
            }
            #expect(server.port == oldPort)
            let r = try request(
                port: oldPort, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(r.status == 200)
        }
    }

    @Test func connectionsBeyondTheLimitAreClosedAtOnce() async throws {
        try await serving(maxConnections: 3) { _, _, port in
            // The probe that found the listener may still hold a place: the
            // server sees its close when it next reads. A scrape the server
            // closes gives its place back before the next accept.
            var settled = false
            for _ in 0..<20 where !settled {
                let r = try request(
                    port: port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                settled = value("qosmapd_metrics_connections_open", in: r) == 1
                if !settled { usleep(100_000) }
            }
            try #require(settled)
            var held: [Int32] = []
            defer { held.forEach { close($0) } }
            for _ in 0..<3 {
                let fd = try connectLoopback(port: port)
                held.append(fd)
                try sendAll(fd, "GET /metr")
            }
            // Accepted after the three (the backlog is first in, first out),
            // so it finds every place taken: EOF at once, not at a timeout.
            let extra = try connectLoopback(port: port)
            defer { close(extra) }
            var byte: UInt8 = 0
            #expect(try withTimeout(extra, seconds: 1) { read(extra, &byte, 1) } == 0)
            // A place given back serves the next scrape, which counts the refusal.
            close(held.removeFirst())
            let (r, refusedScrapes) = try scrapeWithin(seconds: 2, port: port)
            #expect(value("qosmapd_metrics_connections_refused_total", in: r) == Double(1 + refusedScrapes))
            // The two still held and the scrape itself.
            #expect(value("qosmapd_metrics_connections_open", in: r) == 3)
        }
    }

    @Test func aTrickledRequestIsClosedAtTheDeadline() async throws {
        try await serving(idleTimeout: .seconds(10), requestTimeout: .milliseconds(500)) { _, _, port in
            let fd = try connectLoopback(port: port)
            defer { close(fd) }
            try sendAll(fd, "GET /metrics HTTP/1.1\r\n")
            setTimeout(fd, milliseconds: 100)
            let start = ContinuousClock.now
            var closed = false
            var byte: UInt8 = 0
            // A header line every 100 ms keeps the idle timeout away; only
            // the deadline for the whole request can end it.
            for _ in 0..<60 where !closed {
                guard (try? sendAll(fd, "X-Slow: 1\r\n")) != nil else {
                    closed = true
                    break
                }
                let n = read(fd, &byte, 1)
                closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            }
            let elapsed = ContinuousClock.now - start
            #expect(closed)
            // Well before the idle timeout (10 s), with room for a loaded machine.
            #expect(elapsed >= .milliseconds(400) && elapsed < .seconds(5), "closed after \(elapsed)")
            let r = try request(port: port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(value("qosmapd_metrics_connections_timed_out_total", in: r) == 1)
        }
    }

    @Test func eachKeptAliveRequestHasItsOwnDeadline() async throws {
        try await serving(idleTimeout: .seconds(10), requestTimeout: .seconds(1)) { _, _, port in
            let fd = try connectLoopback(port: port)
            defer { close(fd) }
            // Five answers over 1.5 s on one connection: the deadline starts
            // again at each answer, so only a request that is late is cut.
            for _ in 0..<5 {
                try sendAll(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try readOneResponse(fd).status == 200)
                usleep(300_000)
            }
            // Then nothing: closed by the deadline (1 s), not the idle timeout (10 s).
            var byte: UInt8 = 0
            #expect(try withTimeout(fd, seconds: 4) { read(fd, &byte, 1) } == 0)
        }
    }

    @Test func runFailsClearlyWhenThePortIsTaken() async throws {
        let holder = try listeningSocket(port: 0)
        defer { close(holder.fd) }
        let server = MetricsServer(registry: PrometheusCollectorRegistry(), port: holder.port, logger: quiet)
        await #expect(throws: MetricsServerError.self) { try await server.run() }
    }
}

// MARK: - Harness

/// A counter named `qosmap_test_NAME_total`, with label `n` when given.
private func testCounter(_ registry: PrometheusCollectorRegistry, _ name: String, label: String? = nil)
    -> Counter
{
    let descriptor = MetricNameDescriptor(
        namespace: "qosmap_test", metricName: name, unitName: "total", helpText: "")
    if let label {
        return registry.makeCounter(descriptor: descriptor, labels: [("n", label)])
    }
    return registry.makeCounter(descriptor: descriptor)
}

private let quiet = Logger(label: "metrics-test", factory: { _ in SwiftLogNoOpLogHandler() })

/// Starts a MetricsServer on a free loopback port, runs `body` against it,
/// then shuts it down gracefully and checks that `run()` returned and closed
/// the listener.
private func serving(
    idleTimeout: Duration = .seconds(5), requestTimeout: Duration = .seconds(5), maxConnections: Int = 64,
    _ body: (MetricsServer, PrometheusCollectorRegistry, UInt16) throws -> Void
) async throws {
    let registry = PrometheusCollectorRegistry()
    let port = try freePort(excluding: 0)
    let server = MetricsServer(
        registry: registry, port: port, logger: quiet, idleTimeout: idleTimeout,
        requestTimeout: requestTimeout,
        maxConnections: maxConnections)
    try await testGracefulShutdown { trigger in
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.run() }
            try await waitUntilListening(port: port)
            try body(server, registry, port)
            trigger.triggerGracefulShutdown()
            try await group.waitForAll()
        }
    }
    if server.port != 0 {
        #expect(throws: SocketError.self) { try connectLoopback(port: server.port) }
    }
}

// MARK: - Raw loopback sockets

/// A socket call failed; the message names the call and errno's text.
struct SocketError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
    init(_ call: String) { message = "\(call): \(String(cString: strerror(errno)))" }
}

/// One parsed HTTP response.
private struct Response {
    var status: Int
    /// Header names lower-cased.
    var headers: [String: String]
    var body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }
}

private func loopbackAddress(port: UInt16) -> sockaddr_in {
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    addr.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return addr
}

private func setTimeout(_ fd: Int32, seconds: Int) {
    setTimeout(fd, milliseconds: seconds * 1000)
}

private func setTimeout(_ fd: Int32, milliseconds: Int) {
    var tv = timeval(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
}

/// A connected TCP socket to 127.0.0.1:`port` whose reads time out after 3 s.
@discardableResult
private func connectLoopback(port: UInt16) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw SocketError("socket") }
    setTimeout(fd, seconds: 3)
    var addr = loopbackAddress(port: port)
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard rc == 0 else {
        let error = SocketError("connect to 127.0.0.1:\(port)")
        close(fd)
        throw error
    }
    return fd
}

/// A socket listening on 127.0.0.1:`port` (0: any free port), without
/// SO_REUSEADDR so nobody else can bind that port while it is open.
private func listeningSocket(port: UInt16) throws -> (fd: Int32, port: UInt16) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw SocketError("socket") }
    var addr = loopbackAddress(port: port)
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, len) == 0 && listen(fd, 4) == 0 && getsockname(fd, $0, &len) == 0
        }
    }
    guard ok else {
        let error = SocketError("bind/listen 127.0.0.1:\(port)")
        close(fd)
        throw error
    }
    return (fd, UInt16(bigEndian: addr.sin_port))
}

/// A loopback port that was free a moment ago (the kernel's pick).
private func freePort(excluding other: UInt16) throws -> UInt16 {
    for _ in 0..<10 {
        let s = try listeningSocket(port: 0)
        close(s.fd)
        if s.port != other { return s.port }
    }
    throw SocketError("no free port other than \(other)")
}

/// Waits (at most 2 s) until 127.0.0.1:`port` accepts connections.
private func waitUntilListening(port: UInt16) async throws {
    for _ in 0..<100 {
        if let fd = try? connectLoopback(port: port) {
            close(fd)
            return
        }
        try await Task.sleep(for: .milliseconds(20))
    }
    throw SocketError("nothing listens on 127.0.0.1:\(port) after 2 s")
}

private func sendAll(_ fd: Int32, _ text: String) throws {
    let bytes = Array(text.utf8)
    var off = 0
    while off < bytes.count {
        let n = bytes[off...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard n > 0 else { throw SocketError("send") }
        off += n
    }
}

/// Runs a read-like call with a receive timeout; a timeout or error throws.
private func withTimeout(_ fd: Int32, seconds: Int, _ call: () -> Int) throws -> Int {
    setTimeout(fd, seconds: seconds)
    let n = call()
    guard n >= 0 else { throw SocketError("read within \(seconds) s") }
    return n
}

/// Everything until the server closes (at most 4 MiB; each read waits at most
/// the socket's receive timeout).
private func readToEOF(_ fd: Int32) throws -> [UInt8] {
    var all: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while all.count < 4 << 20 {
        let n = read(fd, &chunk, chunk.count)
        guard n >= 0 else { throw SocketError("read") }
        if n == 0 { return all }
        all += chunk[0..<n]
    }
    throw SocketError("response larger than 4 MiB")
}

/// Reads one response from a connection the server closes after it.
private func readResponse(_ fd: Int32) throws -> Response {
    try readResponse(bytes: try readToEOF(fd))
}

/// Parses one whole response.
private func readResponse(bytes raw: [UInt8]) throws -> Response {
    let blankLine = Array("\r\n\r\n".utf8)
    guard raw.count >= 4,
        let end = (0...(raw.count - 4)).first(where: { raw[$0..<($0 + 4)].elementsEqual(blankLine) })
    else {
        throw SocketError("no header block in \(raw.count) bytes")
    }
    let lines = String(decoding: raw[0..<end], as: UTF8.self).split(separator: "\r\n")
    let statusWords = lines.first?.split(separator: " ") ?? []
    guard statusWords.count >= 2, statusWords[0].hasPrefix("HTTP/1."), let status = Int(statusWords[1]) else {
        throw SocketError("bad status line '\(lines.first ?? "")'")
    }
    var headers: [String: String] = [:]
    for line in lines.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        let name = line[..<colon].lowercased()
        headers[name] = line[line.index(after: colon)...].trimmingPrefix(" ").description
    }
    return Response(status: status, headers: headers, body: Array(raw[(end + 4)...]))
}

/// Sends `text` on a new connection and reads the response to EOF, waiting at
/// most `timeoutSeconds` for each read.
private func request(port: UInt16, _ text: String, timeoutSeconds: Int = 3) throws -> Response {
    let fd = try connectLoopback(port: port)
    defer { close(fd) }
    setTimeout(fd, seconds: timeoutSeconds)
    try sendAll(fd, text)
    return try readResponse(fd)
}

/// Reads one response whose length is its Content-Length, leaving the
/// connection open (keep-alive).
private func readOneResponse(_ fd: Int32) throws -> Response {
    var raw: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    let blankLine = Array("\r\n\r\n".utf8)
    while raw.count < 4 << 20 {
        if let end = raw.indices.dropLast(3).first(where: { raw[$0..<($0 + 4)].elementsEqual(blankLine) }) {
            let head = String(decoding: raw[0..<end], as: UTF8.self).lowercased()
            let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingPrefix(" ")) }
            if let length, raw.count >= end + 4 + length {
                return try readResponse(bytes: Array(raw[0..<(end + 4 + length)]))
            }
        }
        let n = read(fd, &chunk, chunk.count)
        guard n > 0 else { throw SocketError("read (\(raw.count) bytes so far)") }
        raw += chunk[0..<n]
    }
    throw SocketError("response larger than 4 MiB")
}

/// A scrape answered within `seconds`, and how many tries were refused
/// before it (one is retried every 100 ms: a closed connection's place is
/// given back asynchronously).
private func scrapeWithin(seconds: Int, port: UInt16) throws -> (Response, refused: Int) {
    for tries in 0..<(seconds * 10) {
        if let r = try? request(
            port: port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeoutSeconds: 1)
        {
            return (r, tries)
        }
        usleep(100_000)
    }
    throw SocketError("no scrape answered within \(seconds) s")
}

/// The value of the sample `name` (no labels) in a Prometheus text body.
private func value(_ name: String, in response: Response) -> Double? {
    response.text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
        .flatMap { Double($0.dropFirst(name.count + 1)) }
}

/// Closes with SO_LINGER 0, so the kernel sends RST instead of FIN.
private func reset(_ fd: Int32) {
    var lingerOff = linger(l_onoff: 1, l_linger: 0)
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lingerOff, socklen_t(MemoryLayout<linger>.size))
    close(fd)
}
