import Foundation

/// A little-endian pcap file of Ethernet/IPv4/UDP frames, one per TOS byte,
/// with `linkTypeField` as the header's whole link-type field (1: Ethernet;
/// upper bits: the reserved field and FCS length).
func craftedPcap(tos: [UInt8], linkTypeField: UInt32 = 1) -> [UInt8] {
    func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
    func le16(_ v: UInt16) -> [UInt8] { [UInt8(truncatingIfNeeded: v), UInt8(v >> 8)] }
    var file = le32(0xA1B2_C3D4) + le16(2) + le16(4) + le32(0) + le32(0) + le32(65535) + le32(linkTypeField)
    for t in tos {
        let payload = Array("qosmap".utf8)
        let udp: [UInt8] = [0x04, 0xD2, 0x16, 0x2E, 0, UInt8(8 + payload.count), 0, 0] + payload
        var ip: [UInt8] = [
            0x45, t, 0, UInt8(20 + udp.count), 0, 1, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
        ]
        var sum: UInt32 = 0
        for i in stride(from: 0, to: 20, by: 2) { sum += UInt32(ip[i]) << 8 | UInt32(ip[i + 1]) }
        while sum > 0xFFFF { sum = (sum & 0xFFFF) + (sum >> 16) }
        ip[10] = UInt8(~sum >> 8 & 0xFF)
        ip[11] = UInt8(~sum & 0xFF)
        let frame: [UInt8] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00] + ip + udp
        file += le32(1) + le32(0) + le32(UInt32(frame.count)) + le32(UInt32(frame.count)) + frame
    }
    return file
}

/// The TOS byte of every frame of a pcap that `craftedPcap` wrote (remarked
/// in place: the records keep their lengths), and the header's link-type field.
func craftedPcapTOS(_ file: [UInt8]) -> (linkTypeField: UInt32, tos: [UInt8]) {
    func le32(_ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(file[at + $1]) << (8 * $1) } }
    var tos: [UInt8] = []
    var at = 24
    while at + 16 <= file.count {
        let length = Int(le32(at + 8))
        tos.append(file[at + 16 + 14 + 1])
        at += 16 + length
    }
    return (le32(20), tos)
}
