import Foundation
import Testing

/// Issue 39 item 8: a pcap whose link-type field has bits set above the low
/// 16 (the reserved field and FCS length; libpcap's
/// `linktype-reserved-field-not-zero.pcap`) is read as its low 16 bits say,
/// and written: it was refused with "link-layer type 3145729 isn't
/// supported in savefiles".
@Suite("pcap link-type field")
struct LinkTypeFieldTests {
    @Test(arguments: [UInt32(0x0030_0001), 0x1400_0001, 1])
    func reservedBitsAreMasked(field: UInt32) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-lt-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("in.pcap").path
        let output = dir.appendingPathComponent("out.pcap").path
        // DSCP 8 (CS1) is AF11 (10) in the default domain; EF stays.
        try Data(craftedPcap(tos: [8 << 2, 46 << 2], linkTypeField: field)).write(
            to: URL(fileURLWithPath: input))
        let r = try qosmap(["remark", "--in", input, "--out", output])
        #expect(r.status == 0, "\(r.err)")
        #expect(!r.err.contains("isn't supported"), "\(r.err)")
        let written = craftedPcapTOS(Array(try Data(contentsOf: URL(fileURLWithPath: output))))
        #expect(written.linkTypeField == 1, "Ethernet, without the reserved bits")
        #expect(written.tos.map { $0 >> 2 } == [10, 46])
    }
}
