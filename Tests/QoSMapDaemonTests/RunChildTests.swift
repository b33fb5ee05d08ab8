import Foundation
import Testing

@testable import QoSMapDaemon

/// runChild's children inherit standard input, output and error only: a
/// child that daemonizes (dnsmasq in DNSSnoopServiceTests) once kept the
/// metrics listener open after qosmapd closed it, and connections to the
/// closed port still succeeded.
@Test func childrenInheritNoOtherDescriptor() throws {
    var fds: [Int32] = [-1, -1]
    #expect(pipe(&fds) == 0)  // not close-on-exec
    defer { for fd in fds { close(fd) } }
    let own = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")
    #expect(own.contains(String(fds[0])) && own.contains(String(fds[1])))
    let r = try runChild("/bin/ls", ["/proc/self/fd"], input: nil).get()
    #expect(r.exited && r.status == 0)
    let inherited = String(decoding: r.stdout, as: UTF8.self).split(separator: "\n").compactMap { Int32($0) }
    // 0-2, and the directory ls itself opened to list.
    #expect(inherited.filter { $0 > 3 }.isEmpty, "\(inherited)")
    #expect(!inherited.contains(fds[0]) && !inherited.contains(fds[1]))
}
