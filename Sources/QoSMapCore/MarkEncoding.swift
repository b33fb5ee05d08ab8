/// Why a mark mask is unusable.
public enum MarkEncodingError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The mask is not one run of at least six contiguous bits.
    case badMask(UInt32)

    /// One line naming the mask and what is allowed.
    public var description: String {
        switch self {
        case .badMask(let m):
            let hex = "0x" + String(m, radix: 16)
            return
                "invalid mark mask \(hex); allowed: one run of 6 to 32 contiguous bits, e.g. 0x3f or 0xfc00"
        }
    }
}

/// How a service class and color are stored in the skb mark (qosmapd's
/// `mark` action and `qosmap export nft` share it).
///
/// The field is six bits, placed at the lowest set bit of the user mask; the
/// mark's bits outside the mask are kept:
///
///     bit 5    1 = marked by qosmap (so a zero field means "not marked")
///     bits 4-2 service class: 0 BE, 1 AF1, 2 AF2, 3 AF3, 4 AF4, 5 EF, 6 CS6, 7 CS7
///     bits 1-0 color: 0 green, 1 yellow, 2 red
///
/// With the default mask 0x3f, EF green is 0x34 and AF1 red is 0x26. Mask bits
/// above the six field bits are written as zero.
public struct MarkEncoding: Sendable, Equatable {
    /// The mark bits qosmap owns.
    public let mask: UInt32
    /// Where the six-bit field starts: the mask's lowest set bit.
    public let shift: UInt32

    /// The default: the low six bits, `0x3f`.
    public static let `default` = MarkEncoding(uncheckedMask: 0x3F)

    private init(uncheckedMask: UInt32) {
        mask = uncheckedMask
        shift = UInt32(uncheckedMask.trailingZeroBitCount)
    }

    /// Creates an encoding for a mask of at least six contiguous bits.
    public init(mask: UInt32) throws(MarkEncodingError) {
        guard mask != 0 else { throw .badMask(mask) }
        let run = mask >> UInt32(mask.trailingZeroBitCount)
        // One contiguous run: run + 1 is a power of two (or the run is all ones).
        guard run & (run &+ 1) == 0, run.nonzeroBitCount >= 6 else { throw .badMask(mask) }
        self.init(uncheckedMask: mask)
    }

    /// The six-bit field for a class and color, not yet shifted.
    @inlinable
    public static func field(for treatment: Treatment) -> UInt32 {
        0x20 | UInt32(treatment.serviceClass.rawValue) << 2 | UInt32(treatment.color.rawValue)
    }

    /// The masked bits for a class and color.
    @inlinable
    public func value(for treatment: Treatment) -> UInt32 { MarkEncoding.field(for: treatment) << shift }

    /// The mark with qosmap's bits replaced and every other bit kept.
    @inlinable
    public func apply(_ treatment: Treatment, to mark: UInt32) -> UInt32 {
        (mark & ~mask) | value(for: treatment)
    }

    /// The class and color stored in a mark, or nil when qosmap did not mark it.
    public func decode(_ mark: UInt32) -> Treatment? {
        let f = (mark & mask) >> shift
        guard f & ~0x3F == 0, f & 0x20 != 0, let color = Color(rawValue: UInt8(f & 3)) else { return nil }
        return Treatment(ServiceClass(rawValue: UInt8((f >> 2) & 7))!, color)
    }
}

/// The skb mark bits that carry an 802.1p tag (1, PCP, DEI) from the ingress
/// of a `trust: 8021p` interface to the egress decision: qosmapd's
/// `ebpf.pcp-carry-mask`, which the nft export uses the same way. The C side
/// (`Bpf/qosmap.bpf.c`, `qm_config`) computes the same value.
public struct PCPCarry: Sendable, Equatable {
    /// Contiguous bits, at least 5.
    public let mask: UInt32
    /// The mask's lowest bit.
    public var shift: UInt32 { UInt32(mask.trailingZeroBitCount) }

    /// The mark's top five bits.
    public static let `default` = PCPCarry(checked: 0xf800_0000)
    /// What a mask may be, for error messages.
    public static let allowed = "one run of 5 or more contiguous bits, e.g. 0xf8000000"

    /// A carry in `mask`; nil unless it is one run of 5 or more contiguous bits.
    public init?(mask: UInt32) {
        let run = mask >> mask.trailingZeroBitCount
        guard mask != 0, run & (run &+ 1) == 0, run.nonzeroBitCount >= 5 else { return nil }
        self.mask = mask
    }

    private init(checked mask: UInt32) { self.mask = mask }

    /// The carried bits for a tag: 1, PCP, DEI in the mask's low five bits.
    public func value(pcp: UInt8, dei: Bool) -> UInt32 {
        (0x10 | UInt32(pcp & 7) << 1 | (dei ? 1 : 0)) << shift & mask
    }
}
