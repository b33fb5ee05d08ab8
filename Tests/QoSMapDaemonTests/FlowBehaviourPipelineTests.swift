import NFQueue
import QoSMapCore
import QoSMapDaemon
import QoSMapPacket
import Testing

/// The nfqueue datapath with `classify.flows`: the pipeline replaces the
/// class that rules or trust gave with the bulk or interactive one.
@Suite("Flow behaviour on nfqueue")
struct FlowBehaviourPipelineTests {
    static let config = """
        interfaces:
          in1: {}
          out1: {}
        classify:
          flows:
            bulk: {packets-per-second: 20, bytes: 100000000, hold: 5, set: {class: AF1, color: yellow}}
            interactive: {max-average-size: 200, set: {class: AF4}}
            apply-to: [EF, AF3]
        """

    static func decide(
        _ pipeline: inout PacketPipeline, _ snapshot: PolicySnapshot, _ p: FlowPacket, dscp: UInt8,
        payload: Int
    ) -> UInt8 {
        var q = p
        q.dscp = dscp
        var bytes = ProbeFrame.packet(q, ecn: 1, payload: payload)
        bytes.withUnsafeMutableBytes { buf in
            var packet = QueuedPacket(id: 1, inputInterface: 1, outputInterface: 2, payload: buf)
            _ = pipeline.decide(&packet, snapshot: snapshot)
        }
        let tos = p.source.isIPv6 ? (bytes[0] & 0x0F) << 4 | bytes[1] >> 4 : bytes[1]
        #expect(tos & 3 == 1, "ECN kept")
        return tos >> 2
    }

    static func flow(v6: Bool, proto: UInt8 = 6, port: UInt16 = 5001) -> FlowPacket {
        FlowPacket(
            protocolNumber: proto, source: IPAddress(parsing: v6 ? "fd00:1::2" : "198.18.1.2")!,
            destination: IPAddress(parsing: v6 ? "fd00:2::9" : "198.18.2.9")!, sourcePort: 40000,
            destinationPort: port)
    }

    @Test(arguments: [false, true])
    func fastEFFlowIsDemotedInBothDirections(v6: Bool) throws {
        let s = try PolicySnapshot(config: DaemonConfig.parse(Self.config, file: "t.yaml"), generation: 1)
        var pipeline = PacketPipeline(interfaceName: { ["", "in1", "out1"][safe: Int($0)] })
        let p = Self.flow(v6: v6)
        // 60 large EF packets, both directions: at most 20 a second, so
        // whatever second boundary they straddle, one second has more.
        var out: [UInt8] = []
        for i in 0..<60 {
            out.append(Self.decide(&pipeline, s, i % 2 == 0 ? p : p.reversed, dscp: 46, payload: 1200))
        }
        #expect(out.first == 46)
        #expect(out.last == 12, "AF1 yellow leaves as AF12")
        #expect(pipeline.counts.flows.demoted == 1)
        #expect(pipeline.counts.flows.tracked == 1)
    }

    @Test(arguments: [false, true])
    func smallPacketFlowIsPromotedAndBestEffortIsNotTracked(v6: Bool) throws {
        let s = try PolicySnapshot(config: DaemonConfig.parse(Self.config, file: "t.yaml"), generation: 1)
        var pipeline = PacketPipeline(interfaceName: { ["", "in1", "out1"][safe: Int($0)] })
        let p = Self.flow(v6: v6, proto: 17, port: 4000)
        // AF31 (AF3) with 40-byte payloads: interactive -> AF4 green (AF41).
        #expect(Self.decide(&pipeline, s, p, dscp: 26, payload: 40) == 34)
        #expect(pipeline.counts.flows.promoted == 1)
        // BE is not in apply-to: untouched, no entry.
        let be = Self.flow(v6: v6, proto: 17, port: 4001)
        #expect(Self.decide(&pipeline, s, be, dscp: 0, payload: 40) == 0)
        // AF1 neither.
        #expect(Self.decide(&pipeline, s, be, dscp: 10, payload: 40) == 10)
        #expect(pipeline.counts.flows.tracked == 1)
    }

    /// A GSO super-packet counts as its segments (estimated from the
    /// length: nfqueue is not told `gso_segs`); the same bytes without the
    /// GSO flag count as one packet.
    @Test(arguments: [false, true])
    func gsoPacketCountsItsSegments(v6: Bool) throws {
        let s = try PolicySnapshot(config: DaemonConfig.parse(Self.config, file: "t.yaml"), generation: 1)
        var pipeline = PacketPipeline(interfaceName: { ["", "in1", "out1"][safe: Int($0)] })
        var dscps: [UInt8] = []
        for (port, gso) in [(5001, false), (5002, true)] {
            var q = Self.flow(v6: v6, port: UInt16(port))
            q.dscp = 46
            var bytes = ProbeFrame.packet(q, payload: 43_440)  // 30 segments of at most 1,460 bytes
            bytes.withUnsafeMutableBytes { buf in
                var packet = QueuedPacket(
                    id: 1, inputInterface: 1, outputInterface: 2, skbInfo: gso ? [.gso] : [], payload: buf)
                _ = pipeline.decide(&packet, snapshot: s)
            }
            dscps.append((v6 ? (bytes[0] & 0x0F) << 4 | bytes[1] >> 4 : bytes[1]) >> 2)
        }
        #expect(dscps == [46, 12])
        #expect(pipeline.counts.flows.demoted == 1)
    }

    /// The issue's case: promote small BE flows, leave CS6 alone (it was
    /// "promoted" to AF41, a demotion, with one global block), and still
    /// demote a fast CS6 flow.
    static let perClassConfig = """
        interfaces:
          in1: {}
          out1: {}
        classify:
          flows:
            bulk: {packets-per-second: 20, hold: 5, set: {class: BE}}
            interactive: {max-average-size: 200, set: {class: AF4}}
            apply-to: []
            classes:
              CS6: {interactive: none}
              BE: {bulk: none}
        """

    @Test(arguments: [false, true])
    func testsArePerClass(v6: Bool) throws {
        let s = try PolicySnapshot(
            config: DaemonConfig.parse(Self.perClassConfig, file: "t.yaml"), generation: 1)
        var pipeline = PacketPipeline(interfaceName: { ["", "in1", "out1"][safe: Int($0)] })
        // Small CS6 packets (DNS-like): CS6 has no interactive test.
        let dns = Self.flow(v6: v6, proto: 17, port: 53)
        for _ in 0..<5 { #expect(Self.decide(&pipeline, s, dns, dscp: 48, payload: 40) == 48) }
        // Small BE packets: promoted to AF4 green (AF41).
        let game = Self.flow(v6: v6, proto: 17, port: 3074)
        #expect(Self.decide(&pipeline, s, game, dscp: 0, payload: 40) == 34)
        // Many fast BE packets: BE has no bulk test, so it is never demoted
        // (it stays promoted while small, and is BE when large).
        let be = Self.flow(v6: v6, proto: 6, port: 8080)
        var beOut: [UInt8] = []
        for _ in 0..<60 { beOut.append(Self.decide(&pipeline, s, be, dscp: 0, payload: 1200)) }
        #expect(!beOut.contains(46) && beOut.last == 0)
        // Fast CS6: the default bulk test demotes it to BE.
        let fast = Self.flow(v6: v6, proto: 6, port: 5001)
        var out: [UInt8] = []
        for i in 0..<60 {
            out.append(Self.decide(&pipeline, s, i % 2 == 0 ? fast : fast.reversed, dscp: 48, payload: 1200))
        }
        #expect(out.first == 48 && out.last == 0)
        #expect(pipeline.counts.flows.demoted == 1)
        #expect(pipeline.counts.flows.promoted == 1)
        // AF4 is in no list and apply-to is empty: not checked, not tracked.
        let af4 = Self.flow(v6: v6, proto: 17, port: 9000)
        let tracked = pipeline.counts.flows.tracked
        #expect(Self.decide(&pipeline, s, af4, dscp: 34, payload: 40) == 34)
        #expect(pipeline.counts.flows.tracked == tracked)
    }

    @Test func perClassTestsInheritAndSwitchOff() throws {
        let b = try DaemonConfig.parse(Self.perClassConfig, file: "t.yaml").classify.behaviour
        let bulk = FlowBehaviour.Bulk(packetsPerSecond: 20, hold: 5, treatment: Treatment(.be, .green))
        let interactive = FlowBehaviour.Interactive(maxAverageSize: 200, treatment: Treatment(.af4, .green))
        #expect(b.tests(for: .cs6) == FlowBehaviour(bulk: bulk, applyTo: 1 << ServiceClass.cs6.rawValue))
        #expect(b.tests(for: .be) == FlowBehaviour(interactive: interactive, applyTo: 1))
        #expect(b.tests(for: .ef) == nil && b.tests(for: .af4) == nil)
        #expect(!b.isEmpty && b.perClass.compactMap { $0 }.count == 2)
        // A class with both tests off is not checked, even in apply-to.
        let off = try DaemonConfig.parse(
            """
            classify:
              flows:
                bulk: {packets-per-second: 20, set: {class: BE}}
                apply-to: [EF]
                classes:
                  EF: {bulk: none}
            """, file: "t.yaml"
        ).classify.behaviour
        #expect(off.isEmpty && !off.applies(to: .ef))
    }

    @Test(arguments: [
        (
            "classify:\n  flows:\n    classes:\n      XX: {bulk: none}\n",
            "t.yaml:4:7: invalid service class 'XX' in flows.classes; allowed: BE, AF1, AF2, AF3, AF4, EF, CS6, CS7"
        ),
        (
            "classify:\n  flows:\n    classes:\n      EF: {bulk: none}\n      EF: {interactive: none}\n",
            "t.yaml:5:7: duplicate key 'EF' (first at line 4, column 7)"
        ),
        (
            "classify:\n  flows:\n    classes:\n      EF: {burst: none}\n",
            "t.yaml:4:12: unknown key 'burst' in flows.classes.EF; allowed: bulk, interactive"
        ),
        (
            "classify:\n  flows:\n    classes:\n      EF: {bulk: {hold: 3, set: {class: BE}}}\n",
            "t.yaml:4:18: flows.bulk needs a threshold; allowed: packets-per-second: N, bytes: N, or both"
        ),
    ])
    func perClassErrorsArePositioned(text: String, message: String) {
        do {
            _ = try DaemonConfig.parse(text, file: "t.yaml")
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.description == message)
        }
    }

    @Test func reloadForgetsBehaviour() throws {
        let p = Self.flow(v6: false)
        var pipeline = PacketPipeline(interfaceName: { ["", "in1", "out1"][safe: Int($0)] })
        let s1 = try PolicySnapshot(config: DaemonConfig.parse(Self.config, file: "t.yaml"), generation: 1)
        for _ in 0..<60 { _ = Self.decide(&pipeline, s1, p, dscp: 46, payload: 1200) }
        #expect(Self.decide(&pipeline, s1, p, dscp: 46, payload: 1200) == 12)
        let s2 = try PolicySnapshot(config: DaemonConfig.parse(Self.config, file: "t.yaml"), generation: 2)
        #expect(Self.decide(&pipeline, s2, p, dscp: 46, payload: 1200) == 46)
    }

    @Test(arguments: [
        (
            "classify:\n  flows:\n    bulk: {hold: 5, set: {class: BE}}\n",
            "t.yaml:3:11: flows.bulk needs a threshold; allowed: packets-per-second: N, bytes: N, or both"
        ),
        (
            "classify:\n  flows:\n    bulk: {packets-per-second: 0, set: {class: BE}}\n",
            "t.yaml:3:32: invalid packets-per-second '0'; allowed: 1-4294967295"
        ),
        (
            "classify:\n  flows:\n    bulk: {packets-per-second: 10, set: {dscp: CS1}}\n",
            "t.yaml:3:41: flows.bulk.set takes a class; allowed: {class: C, color: K}"
        ),
        (
            "classify:\n  flows:\n    interactive: {max-average-size: 10, set: {class: AF4}}\n",
            "t.yaml:3:37: invalid max-average-size (bytes) '10'; allowed: 20-65535"
        ),
        (
            "classify:\n  flows:\n    interactive: {set: {class: AF4}}\n",
            "t.yaml:3:18: flows.interactive needs max-average-size; allowed: max-average-size: 20-65535"
        ),
        (
            "classify:\n  flows:\n    apply-to: [EF, XX]\n",
            "t.yaml:3:20: invalid service class 'XX'; allowed: BE, AF1, AF2, AF3, AF4, EF, CS6, CS7"
        ),
        (
            "classify:\n  flows:\n    bulk: {pps: 10}\n",
            "t.yaml:3:12: unknown key 'pps' in flows.bulk; allowed: packets-per-second, bytes, hold, set"
        ),
        (
            "classify:\n  flows:\n    bulk: {packets-per-second: 10, hold: 90000, set: {class: BE}}\n",
            "t.yaml:3:42: invalid hold (seconds) '90000'; allowed: 0-86400"
        ),
    ])
    func errorsArePositioned(text: String, message: String) {
        do {
            _ = try DaemonConfig.parse(text, file: "t.yaml")
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.description == message)
        }
    }

    @Test func parsesTheIssueExample() throws {
        let c = try DaemonConfig.parse(
            """
            classify:
              flows:
                bulk:        {packets-per-second: 100, bytes: 10000000, hold: 5, set: {class: BE, color: yellow}}
                interactive: {max-average-size: 200, set: {class: AF4}}
                apply-to: [EF, AF4, AF3]
            """, file: "t.yaml")
        let b = c.classify.behaviour
        #expect(
            b.bulk
                == .init(
                    packetsPerSecond: 100, bytes: 10_000_000, hold: 5, treatment: Treatment(.be, .yellow)))
        #expect(b.interactive == .init(maxAverageSize: 200, treatment: Treatment(.af4, .green)))
        #expect(b.applyToClasses == [.af3, .af4, .ef])
        #expect(try DaemonConfig.parse("trust: dscp\n", file: "t.yaml").classify.behaviour.isEmpty)
    }
}
