import BPFClassifier
import NFQueue
import QoSMapCore
import QoSMapPacket
import Testing

@testable import QoSMapDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// `classify.flows` in the kernel classifier (`BPF_PROG_TEST_RUN`) against
/// the nfqueue pipeline: the same packets of a few flows (v4 and v6, TCP and
/// UDP, both directions, EF, AF3 and BE, sizes from 40 to 1,400 bytes) at the
/// same times, fed to both (`qm_bconf.test_now` and
/// ``FlowBehaviourTable/testNow``: a test run cannot set the kernel's clock).
/// Every packet must leave byte for byte alike, and the counters agree.
@Suite(.enabled(if: getuid() == 0, "loading BPF needs CAP_BPF"))
struct EBPFBehaviourProgramTests {
    static let config = """
        datapath: ebpf
        interfaces:
          in1: {}
          out1: {}
        classify:
          flows:
            bulk: {packets-per-second: 20, bytes: 400000, hold: 2, set: {class: AF1, color: yellow}}
            interactive: {max-average-size: 150, set: {class: AF4}}
            apply-to: [EF, AF3]
        """

    @Test(arguments: [7 as UInt64, 0xF10E])
    func programMatchesThePipeline(seed: UInt64) throws {
        let snapshot = try PolicySnapshot(
            config: DaemonConfig.parse(Self.config, file: "x.yaml"), generation: 0,
            systemDirectory: "/nonexistent")
        let bench = try EBPFTestBench(snapshot, interfaces: ["out1": 1, "in1": 5])
        var pipeline = PacketPipeline(interfaceName: { [1: "out1", 5: "in1"][$0] })
        let table = try #require(snapshot.behaviour)
        var r = EBPFFlowProgramTests.Random(state: seed)
        var flows: [FlowPacket] = []
        for i in 0..<6 {
            let v6 = i % 2 == 1
            flows.append(
                FlowPacket(
                    protocolNumber: i >= 4 ? 17 : 6,
                    source: IPAddress(parsing: v6 ? "fd00:1::\(i + 1)" : "198.18.1.\(i + 1)")!,
                    destination: IPAddress(parsing: v6 ? "fd00:2::9" : "198.19.2.9")!,
                    sourcePort: UInt16(40000 + i), destinationPort: 5001, dscp: [46, 26, 0, 46, 26, 46][i]))
        }
        var now: UInt64 = 1_000 * 1_000_000_000
        var mismatches = 0
        var first: String?
        var changed = 0
        for n in 0..<4000 {
            // Mostly 1-10 ms apart (about 30 a second per flow, above the 20 of bulk), sometimes a pause of 1-4 s.
            now +=
                r.below(40) == 0
                ? UInt64(1 + r.below(4)) * 1_000_000_000 : UInt64(1 + r.below(10)) * 1_000_000
            let f = r.below(flows.count)
            var p = flows[f]
            if r.below(2) == 0 { p = p.reversed }
            let small = f >= 4 || r.below(3) == 0
            let ip = ProbeFrame.packet(
                p, ecn: UInt8(r.below(4)), payload: small ? r.below(60) : 200 + r.below(1200))
            table.testNow.store(now, ordering: .relaxed)
            try bench.setTime(now)
            var expected = ip
            _ = expected.withUnsafeMutableBytes { buf in
                var q = QueuedPacket(id: 1, inputInterface: 5, outputInterface: 1, payload: buf)
                return pipeline.decide(&q, snapshot: snapshot)
            }
            let frame: [UInt8] =
                [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1] + (p.source.isIPv6 ? [0x86, 0xDD] : [8, 0])
            let run = try bench.run(frame + ip, ifindex: 1, ingressIfindex: 5)
            let got = Array(run.packet.dropFirst(14))
            if got != ip { changed += 1 }
            if got != expected {
                mismatches += 1
                if first == nil {
                    first = "packet \(n) \(p) at \(now): got \(got.prefix(2)), want \(expected.prefix(2))"
                }
            }
        }
        #expect(mismatches == 0, "\(mismatches) of 4000; first: \(first ?? "")")
        #expect(changed > 1000, "behaviour changed the DSCP of \(changed) packets")
        let c = try bench.behaviourCounts()
        #expect(c[0] == UInt64(pipeline.counts.flows.tracked))
        #expect(c[2] == UInt64(pipeline.counts.flows.demoted) && c[2] > 0, "\(c)")
        #expect(c[3] == UInt64(pipeline.counts.flows.promoted) && c[3] > 0, "\(c)")
    }
}
