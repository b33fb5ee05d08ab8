import Foundation
import QoSMapDaemon
import Testing

/// Issue 39 item 8: a relative `tables:` directory is read from the config
/// file's directory, not the working directory (a daemon started from `/`
/// said `domains:1:1: cannot read table directory`).
@Suite("relative tables: paths")
struct RelativeTablesTests {
    @Test func resolvedBesideTheConfig() throws {
        let c = try DaemonConfig.parse("tables: [domains, /abs/x, ../up]\n", file: "/etc/qosmap/qosmapd.yaml")
        #expect(c.tables == ["/etc/qosmap/domains", "/abs/x", "/etc/qosmap/../up"])
        let here = try DaemonConfig.parse("tables: domains\n", file: "qosmapd.yaml")
        #expect(here.tables == ["domains"], "a config in the working directory: unchanged")
    }

    @Test func loadedFromAnotherWorkingDirectory() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmapd-rel-\(UUID())")
        try FileManager.default.createDirectory(
            at: dir.appendingPathComponent("domains"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "domain: gold\nimport: default\n".write(
            to: dir.appendingPathComponent("domains/gold.yaml"), atomically: true, encoding: .utf8)
        let config = dir.appendingPathComponent("qosmapd.yaml")
        try "tables: [domains]\nsystem-tables: false\ninterfaces:\n  eth0: {domain: gold}\n".write(
            to: config, atomically: true, encoding: .utf8)
        // The test runs in the package's directory, not `dir`.
        #expect(FileManager.default.currentDirectoryPath != dir.path)
        let snapshot = try QueueService.load(config.path, generation: 0)
        #expect(snapshot.tables.domains.names.contains("gold"))
    }
}
