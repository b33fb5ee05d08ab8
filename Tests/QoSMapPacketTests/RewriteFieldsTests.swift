import QoSMapCore
import QoSMapPacket
import Testing

/// RewriteFields is a set of Fields: one bit per field, IP precedence excluded.
struct RewriteFieldsTests {
    @Test func oneBitPerWritableField() {
        #expect(RewriteFields.writable == [.dscp, .dot1p, .exp])
        #expect(RewriteFields(.ipPrecedence) == nil)
        for field in RewriteFields.writable {
            let one = RewriteFields(field)
            #expect(one?.fields == [field])
            #expect(one?.rawValue == 1 << field.rawValue)
        }
        #expect(RewriteFields(.dscp) == .dscp)
        #expect(RewriteFields(.dot1p) == .dot1p)
        #expect(RewriteFields(.exp) == .exp)
        #expect(RewriteFields.all.fields == RewriteFields.writable)
        #expect(RewriteFields.all.description == "dscp,8021p,exp")
    }

    static let parsed: [(String, RewriteFields)] = [
        ("dscp", .dscp), ("pcp", .dot1p), (" 8021p , mpls-exp ", [.dot1p, .exp]), ("ALL", .all),
        ("dscp,exp,dscp", [.dscp, .exp]),
    ]

    @Test(arguments: parsed)
    func parsesNamesAndAliases(text: String, expected: RewriteFields) throws {
        #expect(try RewriteFields(parsing: text) == expected)
    }

    @Test(arguments: [("vlan", "vlan"), ("dscp,,exp", ""), ("prec", "prec"), ("dscp, tos", "tos"), ("", "")])
    func rejectsTheBadToken(text: String, token: String) {
        #expect(throws: RewriteFieldsError(token: token)) { try RewriteFields(parsing: text) }
        #expect(
            RewriteFieldsError(token: token).description
                == "invalid rewrite field '\(token)'; allowed: dscp, 8021p, exp, all")
    }
}
