import QoSMapCore
import Testing

@Suite("Codepoints")
struct CodepointTests {
    @Test(arguments: [
        ("EF", 46), ("ef", 46), ("AF11", 10), ("AF12", 12), ("AF13", 14), ("AF21", 18), ("AF22", 20),
        ("AF23", 22),
        ("AF31", 26), ("AF32", 28), ("AF33", 30), ("AF41", 34), ("AF42", 36), ("AF43", 38), ("CS0", 0),
        ("CS1", 8),
        ("CS2", 16), ("CS3", 24), ("CS4", 32), ("CS5", 40), ("CS6", 48), ("CS7", 56), ("VA", 44), ("LE", 1),
        ("DF", 0), ("46", 46), ("0x2E", 46), ("0b101110", 46), ("63", 63), ("0", 0),
    ])
    func dscpParsing(token: String, expected: Int) throws {
        #expect(Int(try DSCP(parsing: token).rawValue) == expected)
    }

    @Test(arguments: ["64", "-1", "x", "", "0x", "0b2", "EF1", "AF14", "1.5", "+3", "99999999999999999999"])
    func dscpRejects(token: String) {
        #expect(throws: CodepointError.self) { try DSCP(parsing: token) }
    }

    @Test func outOfRangeErrorNamesTokenAndRange() {
        #expect(throws: CodepointError.outOfRange(field: "dscp", value: 64, allowed: 0...63)) {
            try DSCP(64)
        }
        let message = CodepointError.outOfRange(field: "exp", value: 9, allowed: 0...7).description
        #expect(message == "exp value 9 is out of range; allowed: 0-7")
    }

    @Test(arguments: 0..<64)
    func dscpRawValueRange(value: Int) throws {
        #expect(DSCP(rawValue: UInt8(value)) != nil)
        #expect(try DSCP(value).precedence.rawValue == UInt8(value >> 3))
    }

    @Test func rawValueInitRejectsHighValues() {
        #expect(DSCP(rawValue: 64) == nil)
        #expect(PCP(rawValue: 8) == nil)
        #expect(MPLSEXP(rawValue: 8) == nil)
        #expect(IPPrecedence(rawValue: 255) == nil)
        #expect(throws: CodepointError.self) { try PCP(8) }
        #expect(throws: CodepointError.self) { try MPLSEXP(-1) }
        #expect(throws: CodepointError.self) { try IPPrecedence(parsing: "EF") }
    }

    @Test func tosKeepsUpperSixBits() {
        #expect(DSCP(tos: 0xB8).rawValue == 46)
        #expect(DSCP(tos: 0xBB).rawValue == 46)
        #expect(DSCP(truncating: 0xFF).rawValue == 63)
        #expect(PCP(truncating: 0x0F).rawValue == 7)
    }

    @Test func names() {
        #expect(DSCP.ef.name == "EF")
        #expect(DSCP.cs0.name == "CS0")
        #expect(DSCP.va.name == "VA")
        #expect(DSCP(truncating: 3).name == nil)
        #expect(DSCP.af41.description == "34 (AF41)")
    }

    @Test func serviceClassesAreOrderedByPriority() {
        #expect(ServiceClass.allCases.sorted() == [.be, .af1, .af2, .af3, .af4, .ef, .cs6, .cs7])
        #expect(ServiceClass.cs7 > .ef)
        #expect(ServiceClass(name: "af4") == .af4)
        #expect(ServiceClass(name: "AF5") == nil)
        #expect(Color(name: "Yellow") == .yellow)
        #expect(Color.green < .red)
    }

    @Test(arguments: [
        ("dscp", Field.dscp), ("ip-precedence", .ipPrecedence), ("prec", .ipPrecedence), ("8021p", .dot1p),
        ("pcp", .dot1p), ("dot1p", .dot1p), ("exp", .exp), ("mpls-exp", .exp), ("DSCP", .dscp),
    ])
    func fieldAliases(name: String, field: Field) {
        #expect(Field(name: name) == field)
    }

    @Test func trustModes() {
        #expect(TrustMode(name: "none") == TrustMode.none)
        #expect(TrustMode(name: "pcp") == .dot1p)
        #expect(TrustMode.none.field == nil)
        #expect(TrustMode(name: "bogus") == nil)
    }
}

@Suite("Domain builder")
struct DomainBuilderTests {
    @Test func incompleteDomainIsRejectedWithEveryMissingCell() {
        var b = DomainBuilder(name: "partial")
        for v in 0..<63 { b.setInbound(.dscp, UInt8(v), .bestEffort) }
        #expect(throws: DomainError.self) { try b.build() }
        do {
            _ = try b.build()
        } catch {
            guard case .incomplete(let cells) = error else { return }
            #expect(cells.contains("inbound dscp 63"))
            #expect(cells.contains("outbound exp CS7/red"))
            #expect(!cells.contains("inbound dscp 5"))
            // 1 DSCP + 3x8 three-bit inbound + 4x24 outbound cells.
            #expect(cells.count == 1 + 24 + 96)
        }
    }

    @Test func completeDomainLooksUpEveryCell() throws {
        var b = DomainBuilder(name: "flat")
        for f in Field.allCases {
            for v in 0..<f.valueCount { b.setInbound(f, UInt8(v), Treatment(.af3, .yellow)) }
            for t in Treatment.allCells { b.setOutbound(f, t, UInt8(t.serviceClass.rawValue)) }
        }
        let d = try b.build()
        #expect(d.classify(dscp: .ef) == Treatment(.af3, .yellow))
        #expect(d.classify(.dscp, 0xFF) == Treatment(.af3, .yellow))  // masked, no trap
        #expect(d.pcp(for: Treatment(.cs7, .red)).rawValue == 7)
        #expect(d.dei(for: Treatment(.cs7, .red)) == false)
    }

    @Test func deiColorPolicy() throws {
        var b = DomainBuilder(name: "dei")
        b.dropEligibility = .color
        for f in Field.allCases {
            for v in 0..<f.valueCount { b.setInbound(f, UInt8(v), .bestEffort) }
            for t in Treatment.allCells { b.setOutbound(f, t, 0) }
        }
        let d = try b.build()
        #expect(d.classify(pcp: PCP(truncating: 1), dei: true).color == .yellow)
        #expect(d.classify(pcp: PCP(truncating: 1), dei: false).color == .green)
        #expect(d.dei(for: Treatment(.af2, .red)))
        #expect(!d.dei(for: Treatment(.af2, .green)))
    }

    @Test func domainSetResolvesNames() throws {
        func domain(_ name: String, _ dscp: UInt8) throws -> DSDomain {
            var b = DomainBuilder(name: name)
            for f in Field.allCases {
                for v in 0..<f.valueCount { b.setInbound(f, UInt8(v), .bestEffort) }
                for t in Treatment.allCells { b.setOutbound(f, t, dscp) }
            }
            return try b.build()
        }
        var set = DomainSet([try domain("a", 1), try domain("b", 2)])
        #expect(try set.domain(named: "b").dscp(for: .bestEffort).rawValue == 2)
        #expect(throws: DomainSetError.unknown(name: "c", known: ["a", "b"])) { try set.domain(named: "c") }
        // A later domain of the same name replaces the earlier one in place.
        set.insert(try domain("a", 3))
        #expect(set.names == ["a", "b"])
        #expect(try set.domain(named: "a").dscp(for: .bestEffort).rawValue == 3)
    }
}
