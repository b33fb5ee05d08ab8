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
        let c = try Self.compare(Self.sixFlows(firstPort: 40000, dscp: [46, 26, 0, 46, 26, 46]), seed: seed)
        #expect(c[1] == 0, "six flows in 65,536 entries: no eviction")
    }

    /// Flow rules and flow behaviour together (the copies of `mark_ip` that
    /// call the rules, then the behaviour step): every flow arrives with DSCP
    /// 0, so only the class a rule gives (EF or AF3, replies by connection)
    /// brings it under `apply-to`; a program whose behaviour step saw the
    /// trust class instead would leave these packets alone and differ.
    @Test(arguments: [5 as UInt64, 0xB0_7E])
    func rulesThenBehaviourMatchThePipeline(seed: UInt64) throws {
        let config =
            Self.config + """

                  rules:
                    - name: voice
                      match: {protocol: udp, destination-port: 5001}
                      set: {class: EF}
                    - name: servers
                      match: {protocol: tcp, destination: [198.19.2.9/32, "fd00:2::9/128"]}
                      set: {class: AF3}
                """
        let c = try Self.compare(
            Self.sixFlows(firstPort: 41000, dscp: [0, 0, 0, 0, 0, 0]), seed: seed, config: config)
        #expect(c[0] == 6, "six flows tracked: \(c)")
    }

    /// Per-class tests (`flows.classes`): CS6 bulk only, BE interactive
    /// only, EF and AF3 the defaults (apply-to), AF4 not checked; the
    /// program must pick each class's entry of `qm_bconf` as the pipeline
    /// picks its tests. Of the two small flows (the promoted ones), BE's is
    /// promoted and CS6's is not: about half the changes of the others.
    @Test(arguments: [11 as UInt64, 0xC1A5])
    func perClassTestsMatchThePipeline(seed: UInt64) throws {
        let config =
            Self.config + """

                    classes:
                      CS6: {interactive: none}
                      BE: {bulk: none}
                      AF4: {bulk: none, interactive: none}
                """
        let c = try Self.compare(
            Self.sixFlows(firstPort: 42000, dscp: [48, 34, 46, 26, 0, 48]), seed: seed, config: config,
            minChanged: 500)
        #expect(c[0] == 5, "five flows tracked (AF4's is not checked): \(c)")
    }

    /// Seven flows (v4 and v6) in one set of four ways: both tables must
    /// pick the same victims (the first free way, else the least recent
    /// second), or a flow's history, hence its verdicts, would differ.
    @Test(arguments: [3 as UInt64, 0xE71C])
    func fullSetEvictsAlike(seed: UInt64) throws {
        let want =
            FlowKey(
                FlowPacket(
                    protocolNumber: 6, source: IPAddress(parsing: "198.18.1.1")!,
                    destination: IPAddress(parsing: "198.19.2.9")!, sourcePort: 40000, destinationPort: 5001,
                    dscp: 46)
            ).hash32 & 16383
        var flows: [FlowPacket] = []
        // About 16,384 candidates a flow (bounded: 7 × 16,384 is expected).
        var n = 0
        while flows.count < 7, n < 2_000_000 {
            let v6 = flows.count % 2 == 1
            let p = FlowPacket(
                protocolNumber: flows.count >= 5 ? 17 : 6,
                source: IPAddress(parsing: v6 ? "fd00:1::1" : "198.18.1.1")!,
                destination: IPAddress(parsing: v6 ? "fd00:2::9" : "198.19.2.9")!,
                sourcePort: UInt16(40000 + n % 20000), destinationPort: UInt16(1024 + n / 20000),
                dscp: [46, 26][flows.count % 2])
            if FlowKey(p).hash32 & 16383 == want { flows.append(p) }
            n += 1
        }
        try #require(flows.count == 7)
        let c = try Self.compare(flows, seed: seed)
        #expect(c[1] > 100, "evictions \(c)")
    }

    /// Six flows to port 5001 of one server, alternately v4 and v6, four TCP
    /// then two UDP, from `firstPort` on, arriving with `dscp`.
    static func sixFlows(firstPort: Int, dscp: [UInt8]) -> [FlowPacket] {
        (0..<6).map { i in
            let v6 = i % 2 == 1
            return FlowPacket(
                protocolNumber: i >= 4 ? 17 : 6,
                source: IPAddress(parsing: v6 ? "fd00:1::\(i + 1)" : "198.18.1.\(i + 1)")!,
                destination: IPAddress(parsing: v6 ? "fd00:2::9" : "198.19.2.9")!,
                sourcePort: UInt16(firstPort + i), destinationPort: 5001, dscp: dscp[i])
        }
    }

    /// Feeds 4,000 packets of `flows` (random picks, directions, sizes and
    /// times) to the program and to the pipeline; every packet must leave
    /// alike and every counter agree. Returns the program's counters.
    static func compare(_ flows: [FlowPacket], seed: UInt64, config: String = config, minChanged: Int = 1000)
        throws -> [UInt64]
    {
        let snapshot = try PolicySnapshot(
            config: DaemonConfig.parse(config, file: "x.yaml"), generation: 0,
            systemDirectory: "/nonexistent")
        let bench = try EBPFTestBench(snapshot, interfaces: ["out1": 1, "in1": 5])
        var pipeline = PacketPipeline(interfaceName: { [1: "out1", 5: "in1"][$0] })
        let table = try #require(snapshot.behaviour)
        var r = EBPFFlowProgramTests.Random(state: seed)
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
        #expect(changed > minChanged, "behaviour changed the DSCP of \(changed) packets")
        let c = try bench.behaviourCounts()
        #expect(c[0] == UInt64(pipeline.counts.flows.tracked))
        #expect(c[1] == UInt64(pipeline.counts.flows.evicted), "\(c)")
        #expect(c[2] == UInt64(pipeline.counts.flows.demoted) && c[2] > 0, "\(c)")
        #expect(c[3] == UInt64(pipeline.counts.flows.promoted) && c[3] > 0, "\(c)")
        return c
    }
}
