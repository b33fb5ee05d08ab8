import QoSMapCore
import Testing

/// `DSDomain.mark(_:for:)` returns the typed value of whichever field is asked.
struct FieldValueTests {
    @Test(arguments: Field.allCases)
    func keepsFieldAndMasksToItsWidth(field: Field) {
        for raw in UInt8.min...UInt8.max {
            let v = FieldValue(field, truncating: raw)
            #expect(v.field == field)
            #expect(v.rawValue == raw & (field == .dscp ? 63 : 7))
        }
    }

    @Test func printsAsItsType() {
        #expect(FieldValue(.dscp, truncating: 46).description == "46 (EF)")
        #expect(FieldValue(.dscp, truncating: 5).description == "5")
        #expect(FieldValue(.dot1p, truncating: 5).description == "5")
        #expect(FieldValue(.exp, truncating: 13) == .exp(MPLSEXP(truncating: 5)))
    }

    @Test func threeBitValuesShareOneBody() {
        for raw in UInt8(0)..<16 {
            #expect(PCP(rawValue: raw)?.rawValue == (raw < 8 ? raw : nil))
            #expect(IPPrecedence(rawValue: raw) == (raw < 8 ? IPPrecedence(truncating: raw) : nil))
            #expect(MPLSEXP(rawValue: raw).map(\.description) == (raw < 8 ? "\(raw)" : nil))
        }
    }
}
