// Bounds-checked big-endian access to a raw buffer. Callers check `end` once
// per header; these helpers never allocate.

@inline(__always)
func u8(_ p: UnsafeMutableRawPointer, _ i: Int) -> UInt8 {
    p.load(fromByteOffset: i, as: UInt8.self)
}

@inline(__always)
func u16(_ p: UnsafeMutableRawPointer, _ i: Int) -> UInt16 {
    UInt16(u8(p, i)) << 8 | UInt16(u8(p, i &+ 1))
}

@inline(__always)
func store8(_ p: UnsafeMutableRawPointer, _ i: Int, _ v: UInt8) {
    p.storeBytes(of: v, toByteOffset: i, as: UInt8.self)
}

@inline(__always)
func store16(_ p: UnsafeMutableRawPointer, _ i: Int, _ v: UInt16) {
    store8(p, i, UInt8(truncatingIfNeeded: v >> 8))
    store8(p, i &+ 1, UInt8(truncatingIfNeeded: v))
}

/// Adds 16-bit big-endian words of `p[from..<to]` to a ones'-complement
/// accumulator; an odd last byte is padded with zero (RFC 1071).
@inline(__always)
func sumWords(_ p: UnsafeMutableRawPointer, _ from: Int, _ to: Int, _ initial: UInt64 = 0) -> UInt64 {
    var sum = initial
    var i = from
    while i &+ 1 < to {
        sum &+= UInt64(u16(p, i))
        i &+= 2
    }
    if i < to { sum &+= UInt64(u8(p, i)) << 8 }
    return sum
}

/// Folds a ones'-complement accumulator to 16 bits with end-around carry.
@inline(__always)
func fold(_ s: UInt64) -> UInt16 {
    var sum = s
    while sum >> 16 != 0 { sum = (sum & 0xFFFF) &+ (sum >> 16) }
    return UInt16(truncatingIfNeeded: sum)
}

/// Where an IPv6 header chain leads.
struct IPv6Chain {
    /// The upper-layer protocol (next header value after the last extension header walked).
    var proto: UInt8
    /// The offset of the upper-layer header.
    var offset: Int
    /// Whether a fragment header that is not an atomic fragment was crossed;
    /// when its offset is not zero `proto` and `offset` name the fragment header's payload.
    var fragmented: Bool
    /// Whether the fragment offset is non-zero (the upper-layer header is elsewhere).
    var laterFragment: Bool
    /// The offset of a routing header with segments left, or -1.
    var routing: Int
}

/// Walks the IPv6 extension headers from `l3` (hop-by-hop, routing, fragment,
/// destination options, AH) up to `end`. Returns nil when a header overruns `end`.
@inline(__always)
func walkIPv6(_ p: UnsafeMutableRawPointer, _ l3: Int, _ end: Int) -> IPv6Chain? {
    var next = u8(p, l3 &+ 6)
    var off = l3 &+ 40
    var chain = IPv6Chain(proto: next, offset: off, fragmented: false, laterFragment: false, routing: -1)
    // Each header is at least 8 bytes, so the walk ends within (end - off) / 8 steps.
    while true {
        switch next {
        case 0, 43, 60, 51:
            guard off &+ 8 <= end else { return nil }
            let len = next == 51 ? (Int(u8(p, off &+ 1)) &+ 2) &* 4 : (Int(u8(p, off &+ 1)) &+ 1) &* 8
            guard off &+ len <= end else { return nil }
            if next == 43, u8(p, off &+ 3) != 0 { chain.routing = off }
            next = u8(p, off)
            off &+= len
        case 44:
            guard off &+ 8 <= end else { return nil }
            let fragWord = u16(p, off &+ 2)
            let fragOffset = fragWord >> 3
            let more = fragWord & 1 == 1
            next = u8(p, off)
            off &+= 8
            if fragOffset != 0 || more { chain.fragmented = true }
            if fragOffset != 0 {
                chain.laterFragment = true
                chain.proto = next
                chain.offset = off
                return chain
            }
        default:
            chain.proto = next
            chain.offset = off
            return chain
        }
    }
}
