import Foundation
import Testing

/// `qosmap` reads table directories through the same loader as `qosmapd`, so
/// an unreadable file gives the daemon's text (errno named, positioned) and
/// exit 65.
@Test func cliReportsAnUnreadableTableFileAsTheDaemonDoes() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-cli-tables-\(UUID())")
    try FileManager.default.createDirectory(
        at: dir.appendingPathComponent("a.yaml"), withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    for args in [["domains", "--tables", dir.path], ["validate", dir.path]] {
        let result = try qosmap(args)
        #expect(result.status == 65, "\(args)")
        #expect(
            result.err
                == "\(dir.path)/a.yaml:1:1: cannot read table file: Is a directory (errno 21)\n",
            "\(args)")
    }
}
