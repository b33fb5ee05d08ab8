import Foundation
import QoSMapPacket
import QoSMapTables
import Testing

// The README's "Use it as a library" example, compiled here; the test below
// checks that the README shows exactly these lines.
// README begin
/// Remarks an IPv4 or IPv6 packet in place with a domain from `directory`:
/// its DSCP gives class and color, and the domain's DSCP for them is written.
func remark(_ packet: inout [UInt8], domain name: String, tables directory: String) throws -> RemarkResult {
    // The built-in domains plus the directory's *.yaml files (pass
    // TableLoader.systemDirectory to read /etc/qosmap/domains.d too, as the CLI
    // does). A bad file throws TableLoadError: one `file:line:column: message`
    // per problem.
    let tables = try TableLoader.load(directories: [directory], systemDirectory: nil)
    let domain = try tables.domains.domain(named: name)
    // The result's treatment is the class and color (say EF/green); its
    // status tells whether a byte changed. ECN bits are never touched.
    return PacketMarker.remark(&packet, format: .ip, policy: MarkingPolicy(trust: .dscp, ingress: domain))
}
// README end

struct LibraryExampleTests {
    /// The example runs: VOICE-ADMIT (44) is EF in the user's domain, so it
    /// leaves as EF (46), with the ECN bits and a valid header checksum kept.
    @Test func readmeExampleRemarksWithAUserDomain() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-readme-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "domain: voice-edge\nimport: default\ninbound:\n  dscp:\n    44: [EF, green]\n".write(
            to: dir.appendingPathComponent("voice.yaml"), atomically: true, encoding: .utf8)
        var packet = ipv4(tos: 44 << 2 | 1)
        let result = try remark(&packet, domain: "voice-edge", tables: dir.path)
        #expect(result.status == .rewritten)
        #expect(result.treatment == Treatment(.ef, .green))
        #expect(packet[1] == 46 << 2 | 1)
        #expect(packet == ipv4(tos: 46 << 2 | 1))
        // In the built-in default domain 44 is not EF: the user file made the difference.
        var plain = ipv4(tos: 44 << 2)
        _ = PacketMarker.remark(&plain, format: .ip, policy: MarkingPolicy(ingress: defaultDomain))
        #expect(plain[1] != 46 << 2)
    }

    /// The README shows the code above, line for line.
    @Test func readmeShowsTheCompiledExample() throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let source = try String(contentsOf: here, encoding: .utf8).split(
            separator: "\n", omittingEmptySubsequences: false)
        let begin = try #require(source.firstIndex(of: "// README begin"))
        let end = try #require(source.firstIndex(of: "// README end"))
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false)
        let section = try #require(readme.firstIndex(of: "## Use it as a library"))
        let open = try #require(readme[section...].firstIndex(of: "```swift"))
        let close = try #require(readme[(open + 1)...].firstIndex(of: "```"))
        let shown = readme[(open + 1)..<close].filter { !$0.hasPrefix("import ") && !$0.isEmpty }
        #expect(Array(shown) == Array(source[(begin + 1)..<end]))
    }
}
