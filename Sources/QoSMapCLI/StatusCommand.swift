import ArgumentParser
import QoSMapCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// The system denies what the command needs (the status socket's
/// permissions, or qosmapd refusing the caller): one line, exit 77 (EX_NOPERM).
public struct PermissionError: Error, CustomStringConvertible {
    /// The line naming what was refused.
    public var description: String

    /// Creates the error.
    public init(_ description: String) { self.description = description }
}

/// The status socket's options (`status`, `classify --live`, `explain --live`).
struct StatusSocketOptions: ParsableArguments {
    /// Where the packaged unit's daemon listens when `status: {socket:}` names it.
    static let defaultSocket = "/run/qosmapd/status.sock"

    @Option(
        name: .long,
        help: ArgumentHelp(
            "qosmapd's status socket (its config's status.socket; default \(defaultSocket)).",
            valueName: "PATH"))
    var socket: String = StatusSocketOptions.defaultSocket
}

/// A client of qosmapd's status socket: one request, one answer, closed.
enum StatusClient {
    /// The largest answer read (a full report of 100,000 entries per list is
    /// about 40 MB; the default limit gives tens of kilobytes).
    static let maxAnswer = 64 << 20
    /// The time the daemon has to answer.
    static let timeoutSeconds = 10

    /// Asks the daemon at `path` for its state, at most `limit` entries per list.
    /// - Throws: ``UnavailableError`` (no socket, no daemon, no answer: exit
    ///   69), ``PermissionError`` (refused: exit 77), ``DataError`` (an
    ///   answer this build cannot read: exit 65).
    static func fetch(_ path: String, limit: Int) throws -> StatusReport {
        let answer = try exchange(path, request: StatusRequest(limit: limit))
        return try decode(answer, path: path)
    }

    /// Decodes an answer: a refusal or error is thrown as one line.
    static func decode(_ answer: [UInt8], path: String) throws -> StatusReport {
        let data = Data(answer)
        guard let head = try? JSONDecoder().decode(StatusReply.self, from: data) else {
            throw DataError("qosmap: error: status socket \(path): the answer is not a status report")
        }
        if let error = head.error {
            if error.hasPrefix("permission denied") {
                throw PermissionError("status socket \(path): qosmapd refused: \(error)")
            }
            throw UnavailableError("status socket \(path): qosmapd answered: \(error)")
        }
        guard head.version == StatusReport.version else {
            throw DataError(
                "qosmap: error: status socket \(path): answer version \(head.version); this qosmap reads \(StatusReport.version)"
            )
        }
        do { return try JSONDecoder().decode(StatusReport.self, from: data) } catch {
            throw DataError("qosmap: error: status socket \(path): cannot read the report: \(error)")
        }
    }

    /// One line naming the socket and errno; 77 for EACCES/EPERM, 69 otherwise.
    static func failure(_ path: String, _ what: String, _ code: Int32) -> any Error {
        let line =
            "status socket \(path): cannot \(what): \(String(cString: strerror(code))) (errno \(code))"
            + (code == ENOENT || code == ECONNREFUSED ? "; is qosmapd running with status.socket set?" : "")
        return code == EACCES || code == EPERM ? PermissionError(line) : UnavailableError(line)
    }

    /// Connects, sends `request` as one JSON line, reads until the daemon closes.
    static func exchange(_ path: String, request: StatusRequest) throws -> [UInt8] {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw UsageError("invalid --socket '\(path)'; allowed: a path of at most 107 bytes")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure(path, "open a socket", errno) }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else { throw failure(path, "connect", errno) }
        var line = Array((try? JSONEncoder().encode(request)) ?? Data())
        line.append(UInt8(ascii: "\n"))
        var sent = 0
        while sent < line.count {
            let n = line[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw failure(path, "send the request", errno)
            }
            sent += n
        }
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    throw UnavailableError("status socket \(path): no answer within \(timeoutSeconds) s")
                }
                throw failure(path, "read the answer", errno)
            }
            if n == 0 { break }
            answer += chunk[..<n]
            guard answer.count <= maxAnswer else {
                throw DataError("qosmap: error: status socket \(path): answer longer than \(maxAnswer) bytes")
            }
        }
        guard !answer.isEmpty else {
            throw UnavailableError("status socket \(path): qosmapd closed the connection without an answer")
        }
        return answer
    }
}

extension StatusReport {
    /// The report as `qosmap status` prints it: a section per list, each
    /// saying how many entries there are and when some were left out.
    public var text: String {
        var out = "qosmapd status (datapath \(datapath))\n"
        func header<E>(_ title: String, _ list: List<E>) {
            out += "\n\(title): \(list.total)"
            if list.truncated { out += " (showing \(list.items.count); raise --limit for more)" }
            if let note = list.note { out += " (\(note))" }
            out += "\n"
        }
        func rows(_ r: [[String]]) {
            guard r.count > 1 else { return }
            out += table(r, indent: "  ") + "\n"
        }
        header("learned DNS addresses", dns)
        rows(
            [["ADDRESS", "NAME", "QUESTION", "TTL", "EXPIRES IN", "RULES"]]
                + dns.items.map {
                    [
                        $0.address, $0.name, $0.question, "\($0.ttl) s", "\($0.expiresIn) s",
                        $0.rules.joined(separator: ","),
                    ]
                })
        header("connections", connections)
        rows([["FLOW", "RULE"]] + connections.items.map { [$0.flow.text, $0.rule] })
        header("tracked flows", flows)
        rows(
            [["FLOW", "STATE", "PACKETS/S", "BYTES", "AVG SIZE"]]
                + flows.items.map {
                    [$0.flow.text, $0.state, "\($0.packets)", "\($0.bytes)", "\($0.averageSize)"]
                })
        out += "\nrule counters: \(rules.count)\n"
        rows([["RULE", "PACKETS", "BYTES"]] + rules.map { [$0.name, "\($0.packets)", "\($0.bytes ?? 0)"] })
        out += "\nclass counters (class/color/action): \(classes.count)\n"
        rows([["CLASS", "PACKETS"]] + classes.map { [$0.name, "\($0.packets)"] })
        return out
    }
}

extension QoSMapCommand {
    /// `qosmap status`: what the running qosmapd knows.
    struct Status: TextCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract:
                "Show what the running qosmapd knows: learned DNS addresses, connections, flows, counters.",
            discussion: """
                Reads qosmapd's status socket (its config's status: {socket: PATH}; the
                daemon serves none by default). Root, qosmapd's user and the config's
                status.group may read it. Each list is cut at --limit entries, and says so.

                Examples:
                  qosmap status
                  qosmap status --json --limit 1000 --socket /run/qosmapd/status.sock

                Exit status: 0 success; 69 no daemon answers on the socket (missing,
                refused, no answer within 10 s); 77 permission denied (by the socket's
                mode or by qosmapd); 65 an answer this qosmap cannot read.
                """)

        @OptionGroup var status: StatusSocketOptions

        @Option(name: .long, help: "The most entries of each list to show (default 300).")
        var limit: Int = 300

        @OptionGroup var output: OutputOptions

        func validate() throws {
            guard (0...100_000).contains(limit) else {
                throw ValidationError("invalid --limit '\(limit)'; allowed: 0-100000")
            }
        }

        func standardOutput() throws -> String {
            let report = try StatusClient.fetch(status.socket, limit: limit)
            return output.json ? jsonText(report) + "\n" : report.text
        }
    }
}
