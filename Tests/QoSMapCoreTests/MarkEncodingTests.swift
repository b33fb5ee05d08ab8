import QoSMapCore
import Testing

struct MarkEncodingTests {
    @Test(arguments: Treatment.allCells)
    func roundTripsAndKeepsOtherBits(t: Treatment) throws {
        let e = try MarkEncoding(mask: 0xFF00)
        let m = e.apply(t, to: 0xDEAD_00BE)
        #expect(m & ~0xFF00 == 0xDEAD_00BE & ~0xFF00)
        #expect(e.decode(m) == t)
        #expect(MarkEncoding.default.decode(0) == nil)
    }

    /// The documented examples: EF green is 0x34 and AF1 red is 0x26 under 0x3f.
    @Test func defaultLayoutMatchesItsDocumentation() {
        #expect(MarkEncoding.default.value(for: Treatment(.ef, .green)) == 0x34)
        #expect(MarkEncoding.default.value(for: Treatment(.af1, .red)) == 0x26)
    }

    @Test(arguments: [UInt32(0), 0x1F, 0x5F, 0xF0F0])
    func badMasksAreRejected(mask: UInt32) {
        #expect(throws: MarkEncodingError.badMask(mask)) { try MarkEncoding(mask: mask) }
    }
}
