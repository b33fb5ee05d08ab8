import Foundation
import QoSMapCore
import QoSMapDaemon
import Testing

/// docs/QOSIFY.md's translation of qosify's default policy is a config
/// qosmapd accepts, with the classes and per-class flow tests it says.
@Test func qosifyDefaultPolicyIsAValidConfig() throws {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    let doc = try String(contentsOf: root.appendingPathComponent("docs/QOSIFY.md"), encoding: .utf8)
        .split(separator: "\n", omittingEmptySubsequences: false)
    let first = try #require(doc.firstIndex { $0.hasPrefix("# qosify's default policy for qosmapd") })
    let close = try #require(doc[first...].firstIndex(of: "```"))
    let config = try DaemonConfig.parse(doc[first..<close].joined(separator: "\n"), file: "QOSIFY.md")
    #expect(config.classify.rules.map(\.name) == ["dns", "ntp", "ssh", "default-udp"])
    let flows = config.classify.behaviour
    // voice (CS6): bulk only, to BE; best effort: promotion to video (AF4) only.
    #expect(flows.tests(for: .cs6)?.bulk?.packetsPerSecond == 100)
    #expect(flows.tests(for: .cs6)?.interactive == nil)
    #expect(flows.tests(for: .be)?.interactive?.maxAverageSize == 500)
    #expect(flows.tests(for: .be)?.bulk == nil)
    #expect(flows.tests(for: .af4) == nil && flows.tests(for: .ef) == nil)
    #expect(config.interfaceQueues["wan0"]?.config.ingressRate?.bitsPerSecond == 100_000_000)
}
