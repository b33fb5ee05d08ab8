import Foundation
import QoSMapDaemon
import Testing

/// The README's home-router example ("Queues: a home router with upload and
/// download shaping") is a config qosmapd accepts, with the rates it says.
@Test func readmeRouterExampleIsAValidConfig() throws {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        .split(separator: "\n", omittingEmptySubsequences: false)
    let first = try #require(
        readme.firstIndex { $0.hasPrefix("# /etc/qosmap/qosmapd.yaml on a router with wan0") })
    let close = try #require(readme[first...].firstIndex(of: "```"))
    let text = readme[first..<close].joined(separator: "\n")
    let config = try DaemonConfig.parse(text, file: "README.md")
    let wan = try #require(config.interfaceQueues["wan0"]?.config)
    #expect(wan.rate.bitsPerSecond == 38_000_000)
    #expect(wan.ingressRate?.bitsPerSecond == 190_000_000)
    #expect(wan.pqMaxPercent == 30)
    #expect(config.classify.rules.count == 3)
}
