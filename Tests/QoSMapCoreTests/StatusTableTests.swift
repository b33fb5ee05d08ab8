import Testing

@testable import QoSMapCore

/// The table walks `qosmap status` reads (``ConnectionTable/entries(epoch:limit:)``,
/// ``FlowBehaviourTable/entries(limit:)``).
@Suite struct StatusTableTests {
    static func key(_ port: UInt16) -> FlowKey {
        FlowKey(
            protocolNumber: 17, source: IPAddress(ipv4: 0xC612_0101),
            destination: IPAddress(ipv4: 0xC613_0202),
            sourcePort: port, destinationPort: 9)
    }

    @Test func connectionsOfTheEpochAreListedAndCounted() {
        let t = ConnectionTable()
        for p in UInt16(1000)..<1010 { t.record(Self.key(p), rule: Int(p % 3), epoch: 1) }
        t.record(Self.key(2000), rule: 0, epoch: 2)
        let all = t.entries(epoch: 1, limit: 100)
        #expect(all.total == 10)
        #expect(Set(all.entries.map(\.key)) == Set((UInt16(1000)..<1010).map(Self.key)))
        for e in all.entries { #expect(e.rule == Int(e.key.endpoints.aPort % 3)) }
        let cut = t.entries(epoch: 1, limit: 4)
        #expect(cut.total == 10 && cut.entries.count == 4)
    }

    @Test func trackedFlowsAreListedWithTheirState() {
        var b = FlowBehaviour()
        b.interactive = .init(maxAverageSize: 1500, treatment: Treatment(.af4, .green))
        let t = FlowBehaviourTable(b)
        for p in UInt16(1)...5 { _ = t.update(Self.key(p), length: 100, segments: 1, now: 1_000_000_000) }
        let all = t.entries(limit: 10)
        #expect(all.total == 5)
        #expect(all.entries.allSatisfy { $0.state.bytes == 100 && $0.state.last == .interactive })
        #expect(t.entries(limit: 2).entries.count == 2)
    }
}
