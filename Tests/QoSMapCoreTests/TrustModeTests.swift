import QoSMapCore
import Testing

/// TrustMode is `none` plus the fields: its names and parsing come from Field.
struct TrustModeTests {
    @Test func casesAreNoneThenEveryField() {
        #expect(TrustMode.allCases.first == TrustMode.none)
        #expect(TrustMode.allCases.dropFirst().map(\.field) == Field.allCases.map { $0 })
        #expect(TrustMode.allCases.map(\.name) == ["none"] + Field.allCases.map(\.name))
        #expect(TrustMode.allowedNames == "none, dscp, ip-precedence, 8021p, exp")
    }

    /// Every field alias is a trust-mode alias for the same field.
    @Test(arguments: [
        "dscp", "ip-precedence", "prec", "precedence", "ip-prec", "8021p", "PCP", "dot1p", "802.1p", "exp",
        "mpls-exp", "tc", "mpls-tc",
    ])
    func fieldAliasesNameTheFieldMode(alias: String) throws {
        let field = try #require(Field(name: alias))
        #expect(TrustMode(name: alias) == .field(field))
        #expect(TrustMode(name: alias)?.field == field)
    }

    @Test func noneAndItsAlias() {
        #expect(TrustMode(name: "None") == TrustMode.none)
        #expect(TrustMode(name: "untrusted") == TrustMode.none)
        #expect(TrustMode(name: "tos") == nil)
        #expect(TrustMode(name: "") == nil)
    }

    /// The shorthands are the field modes, not separate cases.
    @Test func shorthandsAreFieldModes() {
        #expect(TrustMode.dscp == .field(.dscp))
        #expect(TrustMode.ipPrecedence == .field(.ipPrecedence))
        #expect(TrustMode.dot1p == .field(.dot1p))
        #expect(TrustMode.exp == .field(.exp))
        #expect(Set(TrustMode.allCases).count == Field.allCases.count + 1)
    }
}
