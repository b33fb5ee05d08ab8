import QoSMapCore
import Testing

/// A domain whose every value classifies as its own precedence-like class
/// (value >> 3 for DSCP, the value for the 3-bit fields) and writes each class
/// back as its raw value (DSCP: class << 3).
func identityDomain(_ name: String) throws -> DSDomain {
    var b = DomainBuilder(name: name)
    for f in Field.allCases {
        for v in 0..<f.valueCount {
            let sc = ServiceClass(rawValue: UInt8(f == .dscp ? v >> 3 : v))!
            b.setInbound(f, UInt8(v), Treatment(sc, .green))
        }
        for t in Treatment.allCells {
            b.setOutbound(f, t, f == .dscp ? t.serviceClass.rawValue << 3 : t.serviceClass.rawValue)
        }
    }
    return try b.build()
}

@Suite("PolicyPath, Marking, DomainProvenance, DomainDiff")
struct PolicyPathTests {
    /// DSCP and IP precedence share the ToS bits.
    @Test func markingCouplesDSCPAndPrecedence() {
        var m = Marking()
        m.write(.dscp(.ef))
        #expect(m[.ipPrecedence]?.rawValue == 5)
        m.write(.ipPrecedence(IPPrecedence(truncating: 3)))
        // Precedence 3 in the top bits, EF's low three bits (46 & 7 = 6) kept.
        #expect(m[.dscp]?.rawValue == UInt8(30))
        #expect(m[.exp] == nil)
    }

    @Test func pathChecksEveryTrustedFieldIsCarried() throws {
        let d = try identityDomain("id")
        #expect(throws: PolicyPathError.empty) { try PolicyPath([]) }
        #expect(throws: PolicyPathError.fieldNotCarried(hop: 2, field: .dot1p, carried: [.exp])) {
            try PolicyPath([
                PolicyHop(label: "", trust: .exp, inbound: d, outbound: d, writes: []),
                PolicyHop(label: "", trust: .dot1p, inbound: d, outbound: d, writes: []),
            ])
        }
        // Writing precedence carries DSCP too.
        _ = try PolicyPath([
            PolicyHop(label: "", trust: .exp, inbound: d, outbound: d, writes: [.ipPrecedence]),
            PolicyHop(label: "", trust: .dscp, inbound: d, outbound: d, writes: []),
        ])
    }

    /// Through identity hops every value keeps its class; DSCP to EXP merges
    /// the eight DSCPs of each class, and nothing else happens.
    @Test func identityPathMergesOnlyWhereTheFieldNarrows() throws {
        let d = try identityDomain("id")
        let path = try PolicyPath([
            PolicyHop(label: "a", trust: .dscp, inbound: d, outbound: d, writes: [.exp]),
            PolicyHop(label: "b", trust: .exp, inbound: d, outbound: d, writes: [.dscp]),
        ])
        let a = path.analyze()
        #expect(a.merges.count == 8)
        #expect(a.merges.allSatisfy { $0.hop == 1 && $0.inputs.count == 8 && $0.from == 8 })
        #expect(a.colorsLost.isEmpty && a.bleached.isEmpty && a.classChanges.isEmpty)
        let t = path.trace(46)
        #expect(t.hops.map(\.treatment) == [Treatment(.ef, .green), Treatment(.ef, .green)])
        #expect(t.hops[1].written == [.dscp(DSCP(truncating: 40))])
    }

    /// Every cell has its own provenance slot.
    @Test func provenanceSlotsAreDistinct() {
        var p = DomainProvenance()
        let cells = DomainCell.allInbound + DomainCell.allOutbound
        #expect(cells.count == 88 + 96)
        for (i, c) in cells.enumerated() { p[c] = CellSource(file: "f", line: i + 1) }
        for (i, c) in cells.enumerated() { #expect(p[c]?.line == i + 1, "\(c)") }
        #expect(p.cells(writtenIn: "f").count == cells.count)
    }

    @Test func diffListsChangedCellsOnly() throws {
        let a = try identityDomain("a")
        var b = a.derive(name: "b")
        b.setInbound(.dscp, 1, Treatment(.ef, .green))
        b.setOutbound(.exp, Treatment(.af2, .red), 1)
        b.dropEligibility = .color
        let diff = DomainDiff(a, try b.build())
        #expect(diff.changes.map(\.cell) == [.inbound(.dscp, 1), .outbound(.exp, Treatment(.af2, .red))])
        #expect(diff.dropEligibility?.new == .color)
        #expect(DomainDiff(a, a).isEmpty)
    }
}
