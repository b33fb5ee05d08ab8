import Foundation
import Testing

/// Issue 39 item 8: `qosmap --config` readers resolve a relative `tables:`
/// directory against the config file's directory, as qosmapd does.
@Suite("qosmap --config with relative tables:")
struct RelativeTablesCLITests {
    @Test func tablesBesideTheConfig() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-rel-\(UUID())")
        try FileManager.default.createDirectory(
            at: dir.appendingPathComponent("domains"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "domain: gold\nimport: default\n".write(
            to: dir.appendingPathComponent("domains/gold.yaml"), atomically: true, encoding: .utf8)
        let config = dir.appendingPathComponent("qosmapd.yaml").path
        try "tables: [domains]\nsystem-tables: false\ninterfaces:\n  eth0: {domain: gold}\n".write(
            toFile: config, atomically: true, encoding: .utf8)
        #expect(FileManager.default.currentDirectoryPath != dir.path)
        for args in [["export", "nft", "--config", config], ["lint", "--config", config]] {
            let r = try qosmap(args)
            #expect(r.status == 0, "\(args): \(r.err)")
            #expect(!r.err.contains("cannot read table directory"), "\(args): \(r.err)")
        }
    }
}
