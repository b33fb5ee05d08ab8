import BPFClassifier
import Logging
import NFQueue
import QoSMapCore
import QoSMapPacket
import Testing

@testable import QoSMapDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// `dns:` rules in the kernel classifier against the nfqueue pipeline:
/// EBPFFlowProgramTests' config with `dns:` rules first, addresses learned
/// through a ``DNSLearning`` whose masks go both to the pipeline's table and
/// to `qm_fdns4`/`qm_fdns6` (``EBPFDatapath/writeDNS(_:_:_:)``), then the same
/// random packets through both; again after some addresses expire.
@Suite(.enabled(if: getuid() == 0, "loading BPF needs CAP_BPF"))
struct EBPFDNSProgramTests {
    static let config = EBPFFlowProgramTests.config
        .replacing("classify:\n", with: "classify:\n  dns: {snoop: [in1], min-ttl: 0}\n")
        .replacing(
            "  rules:\n",
            with: """
                  rules:
                    - name: zoom-udp
                      match: {protocol: udp, dns: ["*.zoom.us"]}
                      set: {class: EF}
                    - name: video
                      match: {dns: ["*.zoom.us", teams.microsoft.com, cdn.example.net]}
                      set: {class: AF4, color: yellow}

                """)

    @Test(arguments: [7 as UInt64, 0xD45])
    func programMatchesThePipelineWithLearnedAddresses(seed: UInt64) throws {
        let learning = DNSLearning()
        let snapshot = try PolicySnapshot(
            config: DaemonConfig.parse(Self.config, file: "x.yaml"), generation: 0,
            systemDirectory: "/nonexistent", dns: learning)
        #expect(snapshot.flows?.classifier.dnsGroups.count == 2)
        let (maps, tables) = try EBPFFlowProgramTests.load(snapshot)
        learning.setMirror { EBPFDatapath.writeDNS($0, maps, Logger(label: "test")) }
        // Addresses the random packets use (EBPFFlowProgramTests.address).
        let r = DNSLearningTests.reply
        learning.observe(
            try r("a.zoom.us", [], (0..<4).map { "198.18.1.\($0)" }, 100), server: nil, client: nil,
            interface: "in1")
        learning.observe(
            try r("www.example.org", ["cdn.example.net"], (0..<8).map { "198.19.4.\($0)" }, 300), server: nil,
            client: nil, interface: "in1")
        learning.observe(
            try r("b.zoom.us", ["edge.akamai.net"], (0..<4).map { "fd00:9::\($0)" }, 300), server: nil,
            client: nil,
            interface: "in1")
        learning.observe(
            try r("teams.microsoft.com", [], ["fd00:3::1", "fd00:3::2", "198.18.2.5"], 100), server: nil,
            client: nil,
            interface: "in1")
        // Both copies hold the same masks.
        let v4: UInt32 = 0xC612_0101
        #expect(try maps.fdns4.lookup(v4, as: UInt32.self) == 3)
        #expect(try maps.fdns4.lookup(UInt32(0xC613_0402), as: UInt32.self) == 2)
        var pipeline = PacketPipeline(interfaceName: { EBPFFlowProgramTests.interfaces[$0] })
        let t = try EBPFFlowProgramTests.compare(maps, snapshot, &pipeline, seed: seed, count: 6000)
        #expect(t.mismatches == 0, "\(t.mismatches) of \(t.checked); first: \(t.first ?? "")")
        let names = try #require(tables.flows?.names)
        let counts = try EBPFDatapath.ruleCounts(maps, slot: 0, count: names.count)
        #expect(counts.map(\.packets) == pipeline.counts.rulePackets, "packets by rule \(names)")
        // The dns rules classified packets, v4 and v6 among them.
        #expect(counts[0].packets > 50 && counts[1].packets > 50, "\(counts.map(\.packets))")
        // Expire the TTL-100 entries: a.zoom.us's and teams's go; compare again.
        learning.sweep(now: DNSLearning.now() + 150)
        #expect(try maps.fdns4.lookup(v4, as: UInt32.self) == nil)
        #expect(try maps.fdns4.lookup(UInt32(0xC613_0402), as: UInt32.self) == 2)
        let before = pipeline.counts.rulePackets
        let t2 = try EBPFFlowProgramTests.compare(maps, snapshot, &pipeline, seed: seed &+ 1, count: 3000)
        #expect(t2.mismatches == 0, "\(t2.mismatches) of \(t2.checked); first: \(t2.first ?? "")")
        let counts2 = try EBPFDatapath.ruleCounts(maps, slot: 0, count: names.count)
        #expect(counts2.map(\.packets) == pipeline.counts.rulePackets)
        #expect(pipeline.counts.rulePackets[1] > before[1])
    }
}
