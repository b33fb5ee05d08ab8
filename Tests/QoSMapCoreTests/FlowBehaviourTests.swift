import QoSMapCore
import Testing

/// The flow-behaviour state machine (`classify.flows`) and its table.
@Suite("Flow behaviour")
struct FlowBehaviourTests {
    static let bulkT = Treatment(.be, .yellow)
    static let interT = Treatment(.af4, .green)
    static let both = FlowBehaviour(
        bulk: .init(packetsPerSecond: 100, bytes: 1_000_000, hold: 5, treatment: bulkT),
        interactive: .init(maxAverageSize: 200, treatment: interT))
    static let s: UInt64 = 1_000_000_000

    /// Sends `n` packets of `size` spread over second `sec` and returns the last verdict.
    static func burst(_ st: inout FlowBehaviourState, _ b: FlowBehaviour, n: Int, size: UInt32, sec: UInt64)
        -> FlowVerdict
    {
        var v = FlowVerdict.none
        for i in 0..<n {
            v = st.update(length: size, segments: 1, now: sec * s + UInt64(i) * (s / UInt64(n + 1)), b)
        }
        return v
    }

    @Test func rateAboveThresholdIsBulkAtThe101stPacketOfASecond() {
        let b = FlowBehaviour(bulk: .init(packetsPerSecond: 100, hold: 5, treatment: Self.bulkT))
        var st = FlowBehaviourState()
        for i in 0..<100 {
            #expect(st.update(length: 1000, segments: 1, now: 10 * Self.s + UInt64(i), b) == .none)
        }
        #expect(st.update(length: 1000, segments: 1, now: 10 * Self.s + 500, b) == .bulk)
        // The next second starts a new bucket; still bulk through second 10 + 5.
        #expect(st.update(length: 1000, segments: 1, now: 11 * Self.s, b) == .bulk)
        #expect(st.update(length: 1000, segments: 1, now: 15 * Self.s + Self.s - 1, b) == .bulk)
        // Restored at the start of second 16: hold (5) s after the end of the last second above.
        #expect(st.update(length: 1000, segments: 1, now: 16 * Self.s, b) == .none)
    }

    @Test func exactlyTheRateIsNotBulk() {
        let b = FlowBehaviour(bulk: .init(packetsPerSecond: 100, hold: 5, treatment: Self.bulkT))
        var st = FlowBehaviourState()
        for sec in 1...5 { #expect(Self.burst(&st, b, n: 100, size: 1000, sec: UInt64(sec)) == .none) }
    }

    @Test func staysBulkWhileAboveAndHoldCountsFromTheLastSecondAbove() {
        let b = FlowBehaviour(bulk: .init(packetsPerSecond: 50, hold: 3, treatment: Self.bulkT))
        var st = FlowBehaviourState()
        for sec in 100...110 { #expect(Self.burst(&st, b, n: 80, size: 1400, sec: UInt64(sec)) == .bulk) }
        // Slows to 10 packets a second: bulk through second 113, then restored.
        for sec in 111...113 { #expect(Self.burst(&st, b, n: 10, size: 1400, sec: UInt64(sec)) == .bulk) }
        #expect(Self.burst(&st, b, n: 10, size: 1400, sec: 114) == .none)
    }

    @Test func gsoSegmentsCountAsPackets() {
        let b = FlowBehaviour(bulk: .init(packetsPerSecond: 100, hold: 1, treatment: Self.bulkT))
        var st = FlowBehaviourState()
        // Three 44-segment super-packets are 132 packets: bulk at the third.
        #expect(st.update(length: 64000, segments: 44, now: 7 * Self.s, b) == .none)
        #expect(st.update(length: 64000, segments: 44, now: 7 * Self.s + 1, b) == .none)
        #expect(st.update(length: 64000, segments: 44, now: 7 * Self.s + 2, b) == .bulk)
        #expect(st.packets == 132)
    }

    @Test func bytesPastTheLimitIsBulkUntilIdleLongerThanHold() {
        let b = FlowBehaviour(bulk: .init(bytes: 10_000, hold: 2, treatment: Self.bulkT))
        var st = FlowBehaviourState()
        for i in 0..<10 {
            #expect(st.update(length: 1000, segments: 1, now: 50 * Self.s + UInt64(i), b) == .none)
        }
        #expect(st.update(length: 1, segments: 1, now: 50 * Self.s + 20, b) == .bulk)
        // Slow but still sending: stays bulk (bytes keep counting).
        #expect(st.update(length: 100, segments: 1, now: 52 * Self.s, b) == .bulk)
        #expect(st.update(length: 100, segments: 1, now: 54 * Self.s, b) == .bulk)
        // Idle 3 s (> hold 2): the byte count starts over.
        #expect(st.update(length: 100, segments: 1, now: 57 * Self.s, b) == .none)
        #expect(st.bytes == 100)
    }

    @Test func ewmaIsSevenEighthsOldPlusOneEighthNew() {
        let b = FlowBehaviour(interactive: .init(maxAverageSize: 200, treatment: Self.interT))
        var st = FlowBehaviourState()
        #expect(st.update(length: 100, segments: 1, now: Self.s, b) == .interactive)
        #expect(st.averageSize == 100)
        #expect(st.update(length: 1500, segments: 1, now: Self.s, b) == .none)
        #expect(st.averageSize == 275)
        // 275 > 200: no longer interactive.
        #expect(st.update(length: 275, segments: 1, now: Self.s, b) == .none)
        // Small packets bring it down: 275 -> 246 -> 221 -> 199 -> 180.
        var sizes: [UInt32] = []
        for _ in 0..<4 {
            _ = st.update(length: 50, segments: 1, now: Self.s, b)
            sizes.append(st.averageSize)
        }
        #expect(sizes == [246, 221, 199, 180])
        #expect(st.update(length: 50, segments: 1, now: Self.s, b) == .interactive)
    }

    @Test func averageAtTheLimitIsInteractive() {
        let b = FlowBehaviour(interactive: .init(maxAverageSize: 200, treatment: Self.interT))
        var st = FlowBehaviourState()
        #expect(st.update(length: 200, segments: 1, now: 0, b) == .interactive)
        var st2 = FlowBehaviourState()
        #expect(st2.update(length: 201, segments: 1, now: 0, b) == .none)
    }

    @Test func gsoPacketIsOneSampleOfItsSegmentSize() {
        let b = FlowBehaviour(interactive: .init(maxAverageSize: 200, treatment: Self.interT))
        var st = FlowBehaviourState()
        _ = st.update(length: 6000, segments: 4, now: 0, b)
        #expect(st.averageSize == 1500)
    }

    @Test func bulkWinsOverInteractive() {
        var st = FlowBehaviourState()
        // 150 small packets in one second: interactive by size, bulk by rate.
        var verdicts: [FlowVerdict] = []
        for i in 0..<150 {
            verdicts.append(st.update(length: 60, segments: 1, now: 3 * Self.s + UInt64(i), Self.both))
        }
        #expect(verdicts[0] == .interactive && verdicts[99] == .interactive)
        #expect(verdicts[100...].allSatisfy { $0 == .bulk })
    }

    static func key(_ n: Int, v6: Bool = false) -> FlowKey {
        let a = v6 ? IPAddress(parsing: "fd00:1::2")! : IPAddress(parsing: "198.18.1.2")!
        let d = v6 ? IPAddress(parsing: "fd00:2::9")! : IPAddress(parsing: "198.18.2.9")!
        return FlowKey(
            protocolNumber: 17, source: a, destination: d, sourcePort: UInt16(n & 0xFFFF),
            destinationPort: UInt16(n >> 16))
    }

    @Test(arguments: [false, true])
    func bothDirectionsShareOneState(v6: Bool) {
        let t = FlowBehaviourTable(Self.both)
        let p = FlowPacket(
            protocolNumber: 6, source: IPAddress(parsing: v6 ? "fd00:1::2" : "198.18.1.2")!,
            destination: IPAddress(parsing: v6 ? "fd00:2::9" : "198.18.2.9")!, sourcePort: 40000,
            destinationPort: 443)
        var events: [FlowBehaviourEvent] = []
        for i in 0..<101 {
            let dir = i % 2 == 0 ? p : p.reversed
            events.append(t.update(FlowKey(dir), length: 1500, segments: 1, now: 9 * Self.s + UInt64(i)))
        }
        #expect(events.filter(\.created).count == 1)
        #expect(events[100].verdict == .bulk && events[100].demoted)
        #expect(events.filter(\.demoted).count == 1)
        #expect(t.state(FlowKey(p.reversed))?.packets == 101)
    }

    @Test func promotedAndDemotedCountTransitions() {
        let t = FlowBehaviourTable(Self.both)
        let k = Self.key(1)
        let first = t.update(k, length: 60, segments: 1, now: Self.s)
        #expect(first.created && first.promoted && first.verdict == .interactive)
        #expect(!t.update(k, length: 60, segments: 1, now: Self.s).promoted)
        var demotions = 0
        for i in 0..<200 where t.update(k, length: 60, segments: 1, now: Self.s + UInt64(i)).demoted {
            demotions += 1
        }
        #expect(demotions == 1)
        // Hold over: interactive again, a second promotion.
        #expect(t.update(k, length: 60, segments: 1, now: 7 * Self.s).promoted)
    }

    @Test func fullSetEvictsTheLeastRecentlyUsed() {
        let t = FlowBehaviourTable(Self.both)
        // Find five keys in one set (set = hash & 16383).
        var same: [FlowKey] = []
        let want = Self.key(0).hash32 & 16383
        var n = 0
        while same.count < 5 {
            let k = Self.key(n)
            if k.hash32 & 16383 == want { same.append(k) }
            n += 1
        }
        for (i, k) in same.prefix(4).enumerated() {
            let e = t.update(k, length: 100, segments: 1, now: UInt64(10 + i) * Self.s)
            #expect(e.created && !e.evicted)
        }
        // Key 0 (last used at second 10) is refreshed at 20; key 1 (second 11) is now the oldest.
        #expect(!t.update(same[0], length: 100, segments: 1, now: 20 * Self.s).created)
        let e = t.update(same[4], length: 100, segments: 1, now: 21 * Self.s)
        #expect(e.created && e.evicted)
        #expect(t.state(same[1]) == nil)
        #expect(t.state(same[0]) != nil && t.state(same[2]) != nil && t.state(same[3]) != nil)
        // The evicted flow comes back as a new flow with no history.
        let back = t.update(same[1], length: 100, segments: 1, now: 22 * Self.s)
        #expect(back.created && back.evicted)
        #expect(t.state(same[1])?.packets == 1)
    }

    @Test(arguments: [
        (1500, 52, 1500, UInt32(1)), (1501, 52, 1500, 2), (63764, 52, 1500, 44), (63765, 52, 1500, 45),
        (100, 28, 1500, 1),
        (2948 + 52, 52, 1500, 3),
    ])
    func gsoEstimate(length: Int, header: Int, mtu: Int, expected: UInt32) {
        #expect(FlowBehaviour.estimatedSegments(length: length, headerLength: header, mtu: mtu) == expected)
    }

    @Test func applyToDefaultsToAllButBestEffort() {
        let b = FlowBehaviour(bulk: .init(packetsPerSecond: 100, hold: 5, treatment: Self.bulkT))
        #expect(!b.applies(to: .be))
        #expect(ServiceClass.allCases.filter { b.applies(to: $0) }.count == 7)
        // Without a test nothing is checked, whatever apply-to says.
        #expect(FlowBehaviour().isEmpty && !FlowBehaviour().applies(to: .ef))
        #expect(FlowBehaviour().applyToClasses.count == 7)
    }
}
