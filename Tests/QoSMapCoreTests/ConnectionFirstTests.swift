import QoSMapCore
import Testing

/// Connection first (issue 39): one definition, ``ConnectionTable/resolve``,
/// and lint's view of rules that only see replies.
@Suite("connection first")
struct ConnectionFirstTests {
    static func rule(_ name: String, _ match: FlowMatch, connection: Bool = true) -> FlowRule {
        FlowRule(name: name, match: match, action: .treatment(.bestEffort), connection: connection)
    }
    static let query = FlowKey(
        protocolNumber: 17, source: IPAddress(ipv4: 0xC612_0101), destination: IPAddress(ipv4: 0xC613_0209),
        sourcePort: 40000, destinationPort: 53)
    static let reply = FlowKey(
        protocolNumber: 17, source: IPAddress(ipv4: 0xC613_0209), destination: IPAddress(ipv4: 0xC612_0101),
        sourcePort: 53, destinationPort: 40000)

    /// dns (0, connection) and a catch-all (1, connection): the query records
    /// dns; its reply, which the catch-all matches, keeps dns. A
    /// `connection: false` rule (2) that matches first wins over the record.
    @Test func theRecordWinsOverLaterConnectionRules() {
        let table = ConnectionTable()
        let keeps: (Int) -> Bool = { $0 != 2 }
        let q = table.resolve(Self.query, matched: 0, keepsConnection: keeps, epoch: 0)
        #expect(q?.index == 0 && q?.viaConnection == false)
        let r = table.resolve(Self.reply, matched: 1, keepsConnection: keeps, epoch: 0)
        #expect(r?.index == 0 && r?.viaConnection == true)
        let none = table.resolve(Self.reply, matched: nil, keepsConnection: keeps, epoch: 0)
        #expect(none?.index == 0 && none?.viaConnection == true)
        let direction = table.resolve(Self.reply, matched: 2, keepsConnection: keeps, epoch: 0)
        #expect(direction?.index == 2 && direction?.viaConnection == false)
        // Another epoch (a reload) forgets: the catch-all takes and records it.
        let fresh = table.resolve(Self.reply, matched: 1, keepsConnection: keeps, epoch: 1)
        #expect(fresh?.index == 1 && fresh?.viaConnection == false)
        #expect(table.lookup(Self.query, epoch: 1) == 1)
    }

    /// A connection without a record takes nothing from an unmatched packet.
    @Test func noRuleNoRecord() {
        let table = ConnectionTable()
        #expect(table.resolve(Self.query, matched: nil, keepsConnection: { _ in true }, epoch: 0) == nil)
        #expect(table.lookup(Self.query, epoch: 0) == nil)
    }

    /// lint's replies-of: a source-port rule that mirrors an earlier
    /// destination-port rule; not a catch-all, not a mirror of a
    /// `connection: false` rule, not a rule that is wider than the mirror.
    @Test func repliesOf() {
        let set = FlowRuleSet(rules: [
            Self.rule("dns", FlowMatch(protocols: [17], destinationPorts: [PortRange(53, 53)])),
            Self.rule(
                "ntp", FlowMatch(protocols: [17], destinationPorts: [PortRange(123, 123)]), connection: false),
            Self.rule("dns-replies", FlowMatch(protocols: [17], sourcePorts: [PortRange(53, 53)])),
            Self.rule("ntp-replies", FlowMatch(protocols: [17], sourcePorts: [PortRange(123, 123)])),
            Self.rule("low-ports", FlowMatch(protocols: [17], sourcePorts: [PortRange(1, 1023)])),
            Self.rule("udp", FlowMatch(protocols: [17])),
        ])
        let found = set.repliesOf().map { "\(set.rules[$0.rule].name)<\(set.rules[$0.of].name)" }
        #expect(found == ["dns-replies<dns"])
    }
}
