import QoSMapPacket
import Testing

/// Packets built and checksummed by scapy 2.5 (Debian python3-scapy), an independent implementation.
let knownGood: [(String, String)] = [
    (
        "ipv4TCP",
        "46b8003a000100004006eadbc6120001c6120002010101019c4001bb00003039000000005018200083fc000068656c6c6f2c20716f736d617021"
    ),
    ("ipv4UDP", "45290026000100004011ee77c6120001c613fffe14e9000900123beb6f64642d6c656e677468"),
    ("ipv4ICMP", "45000020000100004001eeb4c6120001c6120002080019250007000370696e67"),
    (
        "ipv6UDPRouting",
        "6b800000003d2b40fd000000000000000000000000000001fd0000000000000000000000000000021104000200000000fd000000000000000000000000000003fd000000000000000000000000000099000100020015ba5278787878787878787878787878"
    ),
    (
        "ipv6TCPHopByHop",
        "6000000000290040fd000000000000000000000000000001fd0000000000000000000000000000023c00010400000000060001040000000004d20050000000000000000050022000c6510000474554202f"
    ),
    (
        "ipv6ICMPv6",
        "60000000000b3a40fd00000000000000000000000000000afd00000000000000000000000000000b8000c13d00010002616263"
    ),
    (
        "ipv6UDPAtomicFragment",
        "6000000000162c40fd000000000000000000000000000001fd000000000000000000000000000002110000000000000500070008000ecb7961746f6d6963"
    ),
]

/// Where scapy put each checksum.
let checksumOffset: [String: Int] = [
    "ipv4TCP": 24 + 16, "ipv4UDP": 20 + 6, "ipv4ICMP": 20 + 2, "ipv6UDPRouting": 40 + 40 + 6,
    "ipv6TCPHopByHop": 40 + 16 + 16, "ipv6ICMPv6": 40 + 2, "ipv6UDPAtomicFragment": 40 + 8 + 6,
]

struct TransportChecksumTests {
    @Test(arguments: knownGood)
    func completesToScapysChecksum(name: String, text: String) {
        let good = hex(text)
        let at = checksumOffset[name]!
        // A partial checksum as the kernel leaves it, and an arbitrary wrong one.
        for junk: UInt16 in [0, 0xFFFF, 0x1234] {
            var pkt = good
            pkt[at] = UInt8(junk >> 8)
            pkt[at + 1] = UInt8(junk & 0xFF)
            let ok = pkt.withUnsafeMutableBytes { TransportChecksum.complete($0) }
            #expect(ok, "\(name)")
            #expect(pkt == good, "\(name)")
        }
    }

    @Test func fragmentsAreLeftAlone() {
        var v4 = hex(knownGood[1].1)
        v4[6] = 0x20  // MF
        var later = hex(knownGood[1].1)
        later[7] = 0x10  // offset 16
        var v6 = hex(knownGood[6].1)
        v6[40 + 3] = 1  // M flag in the fragment header
        for var pkt in [v4, later, v6] {
            let before = pkt
            #expect(!pkt.withUnsafeMutableBytes { TransportChecksum.complete($0) })
            #expect(pkt == before)
        }
    }

    @Test func truncatedPacketsAreRefused() {
        for (_, text) in knownGood {
            let good = hex(text)
            for n in 0..<good.count {
                var pkt = Array(good[0..<n])
                let before = pkt
                #expect(!pkt.withUnsafeMutableBytes { TransportChecksum.complete($0) })
                #expect(pkt == before)
            }
        }
    }
}
