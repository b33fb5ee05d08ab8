import Foundation
import Testing

/// Issue 13 item 20: DSCP names, vendor spellings and `qosmap names`.
@Suite("qosmap names")
struct NamesTests {
    @Test(arguments: [
        ("be", "0 (DF)"), ("default", "0 (DF)"), ("DF", "0 (DF)"), ("cs0", "0 (CS0)"), ("ef", "46 (EF)"),
        ("af41", "34 (AF41)"), ("nc1", "48 (CS6)"), ("nc2", "56 (CS7)"), ("101110", "46 (EF)"),
        ("000000", "0 (CS0)"),
    ])
    func item20_vendorSpellingsAndBinary(token: String, shown: String) throws {
        let result = try qosmap(["lookup", "dscp", token])
        #expect(result.status == 0, "\(result.err)")
        #expect(result.out.hasPrefix("domain default: dscp \(shown) -> "), "\(result.out)")
    }

    @Test func item20_namesListsEveryNameWithItsValue() {
        let result = qosmapInProcess(["names"])
        #expect(result.status == 0)
        let lines = result.out.split(separator: "\n").map(String.init)
        #expect(lines.first == "NAME     DSCP  BINARY  TOS   SAME AS")
        #expect(lines.contains("EF       46    101110  0xb8  -"))
        #expect(lines.contains("nc1      48    110000  0xc0  CS6"))
        #expect(lines.count == 1 + 24 + 4)
    }
}
