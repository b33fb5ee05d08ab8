import QoSMapCore
import QoSMapTables

// Hand-built headers for the tests. Values are chosen so that checksums and
// lengths are consistent unless a test breaks them on purpose.

let defaultDomain = TableLoader.builtIn.domains["default"]!
let domain5p3d = TableLoader.builtIn.domains["5p3d"]!

func hex(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    var i = s.startIndex
    while i < s.endIndex {
        let j = s.index(i, offsetBy: 2)
        out.append(UInt8(s[i..<j], radix: 16)!)
        i = j
    }
    return out
}

/// The RFC 1071 checksum of `bytes`.
func internetChecksum(_ bytes: ArraySlice<UInt8>) -> UInt16 {
    var sum: UInt32 = 0
    var i = bytes.startIndex
    while i + 1 < bytes.endIndex {
        sum += UInt32(bytes[i]) << 8 | UInt32(bytes[i + 1])
        i += 2
    }
    if i < bytes.endIndex { sum += UInt32(bytes[i]) << 8 }
    while sum >> 16 != 0 { sum = (sum & 0xFFFF) + (sum >> 16) }
    return ~UInt16(sum)
}

/// An IPv4 header (with `options`, a multiple of 4 bytes) plus payload, with a valid header checksum.
func ipv4(tos: UInt8, id: UInt16 = 0x1234, options: [UInt8] = [], payload: [UInt8] = Array("payload!".utf8))
    -> [UInt8]
{
    let ihl = 20 + options.count
    let total = ihl + payload.count
    var h: [UInt8] = [
        0x40 | UInt8(ihl / 4), tos, UInt8(total >> 8), UInt8(total & 0xFF), UInt8(id >> 8), UInt8(id & 0xFF),
        0x40, 0,
        64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
    ]
    h += options
    let c = internetChecksum(h[...])
    h[10] = UInt8(c >> 8)
    h[11] = UInt8(c & 0xFF)
    return h + payload
}

/// An IPv6 header with the given traffic class and flow label, then `ext` (already
/// chained, first next-header `firstNext`) and payload.
func ipv6(
    tc: UInt8, flow: UInt32 = 0xABCDE, firstNext: UInt8 = 17, ext: [UInt8] = [],
    payload: [UInt8] = [1, 2, 3, 4]
)
    -> [UInt8]
{
    let plen = ext.count + payload.count
    var h: [UInt8] = [
        0x60 | tc >> 4, (tc & 0x0F) << 4 | UInt8(flow >> 16 & 0x0F), UInt8(flow >> 8 & 0xFF),
        UInt8(flow & 0xFF),
        UInt8(plen >> 8), UInt8(plen & 0xFF), firstNext, 64,
    ]
    h += [0xFD] + [UInt8](repeating: 0, count: 14) + [1]
    h += [0xFD] + [UInt8](repeating: 0, count: 14) + [2]
    return h + ext + payload
}

let macs: [UInt8] = [0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2]

/// An 802.1Q/802.1ad tag: TPID then TCI.
func tag(_ tpid: UInt16, pcp: UInt8, dei: Bool = false, vid: UInt16 = 100) -> [UInt8] {
    let tci = UInt16(pcp) << 13 | (dei ? 0x1000 : 0) | vid
    return [UInt8(tpid >> 8), UInt8(tpid & 0xFF), UInt8(tci >> 8), UInt8(tci & 0xFF)]
}

/// An MPLS label stack entry.
func label(_ value: UInt32, exp: UInt8, bos: Bool, ttl: UInt8 = 64) -> [UInt8] {
    let w = value << 12 | UInt32(exp) << 9 | (bos ? 0x100 : 0) | UInt32(ttl)
    return [UInt8(w >> 24), UInt8(w >> 16 & 0xFF), UInt8(w >> 8 & 0xFF), UInt8(w & 0xFF)]
}

func ether(_ type: UInt16, tags: [[UInt8]] = [], _ payload: [UInt8]) -> [UInt8] {
    macs + tags.flatMap { $0 } + [UInt8(type >> 8), UInt8(type & 0xFF)] + payload
}
