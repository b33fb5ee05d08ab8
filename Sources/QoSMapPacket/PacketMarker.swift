import QoSMapCore

/// Parses packets and rewrites their QoS markings in place.
///
/// Encapsulations: Ethernet II; any stack of 802.1Q (TPID 0x8100) and 802.1ad
/// (0x88a8, and the pre-standard 0x9100) tags; MPLS unicast and multicast
/// (0x8847, 0x8848) label stacks, with IPv4 or IPv6 after the bottom-of-stack
/// label when its first nibble says so; IPv4 with options; IPv6 with extension
/// headers.
///
/// Fields, given class and color from the trusted field and the ingress domain:
/// - DSCP: the IPv4 TOS / IPv6 Traffic Class upper six bits; the two ECN bits are
///   never touched; the IPv4 header checksum is updated incrementally (RFC 1624, eqn. 3).
/// - 802.1p: the PCP of every tag in the stack (``MarkingPolicy/tags``: or the
///   outer or the innermost tag only). The DEI of S-tags (0x88a8, 0x9100)
///   is written from color when the egress domain's `dropEligibility` is `.color`;
///   otherwise DEI, and the DEI/CFI bit of C-tags, is left as received.
/// - EXP: the top label only; inner labels belong to other LSPs' owners.
///
/// Trust reads: `dscp` and `ip-precedence` the IP header; `8021p` the outer tag's
/// PCP (the innermost's with ``TagSelection/inner``), with its DEI when that tag is an S-tag; `exp` the top label. When the
/// trusted field is absent the packet is BE/green, as with trust `none`, and the
/// fields that are present are still written; with ``MarkingPolicy/untrusted``
/// `.keep` it is left unchanged instead. ``RemarkResult/trustedFieldAbsent`` says which.
public enum PacketMarker {
    /// Parses and remarks in place; malformed/truncated/unknown input is left
    /// byte-for-byte unchanged. Never reads outside the buffer, never allocates.
    ///
    /// Malformed (status `.malformed`, nothing written): a truncated Ethernet
    /// header, tag or label stack; an IP version that disagrees with its EtherType
    /// (or, for `.ip`, a version nibble other than 4 or 6); a fixed IPv4 header
    /// shorter than 20 bytes or with an IHL below 5; a fixed IPv6 header shorter
    /// than 40 bytes.
    ///
    /// Marked from the fixed header: when the fixed header is valid, DSCP is
    /// classified and written whatever follows it, and ``RemarkResult/tailMalformed``
    /// reports a bad tail: an IPv4 header (options) or total length beyond the
    /// buffer, a total length below the header length, an IPv6 payload length or
    /// extension header beyond the buffer. Bytes after the IP total length
    /// (Ethernet padding) are allowed.
    ///
    /// IPv4: the header checksum is not verified; it is updated incrementally
    /// (RFC 1624 eqn. 3), which needs only the TOS word and the checksum (both in
    /// the first 20 bytes), so it stays valid when it was valid, even when options
    /// are cut off, and a bad one stays bad by the same amount. An IHL below 5 is
    /// malformed: there is then no IPv4 header whose checksum covers the TOS and
    /// checksum words, and Linux drops such packets before any netfilter hook
    /// (`ip_rcv_core`), so no forwarded packet escapes marking through it.
    public static func remark(
        _ buffer: UnsafeMutableRawBufferPointer, format: PacketFormat, policy: MarkingPolicy
    ) -> RemarkResult {
        guard let p = buffer.baseAddress else { return RemarkResult(status: .malformed) }
        return mark(p, buffer.count, format, policy, write: true, treatment: nil)
    }

    /// Remarks a packet a flow rule classified: as
    /// ``remark(_:format:policy:)``, but the packet's class and color are
    /// `treatment` whatever its trusted field holds, so it leaves exactly as a
    /// packet that trust had classified so.
    public static func remark(
        _ buffer: UnsafeMutableRawBufferPointer, format: PacketFormat, policy: MarkingPolicy,
        treatment: Treatment
    ) -> RemarkResult {
        guard let p = buffer.baseAddress else { return RemarkResult(status: .malformed) }
        return mark(p, buffer.count, format, policy, write: true, treatment: treatment)
    }

    /// ``remark(_:format:policy:treatment:)`` on an array's bytes.
    @inlinable
    public static func remark(
        _ packet: inout [UInt8], format: PacketFormat, policy: MarkingPolicy, treatment: Treatment
    ) -> RemarkResult {
        packet.withUnsafeMutableBytes { remark($0, format: format, policy: policy, treatment: treatment) }
    }

    /// ``classify(_:format:policy:)`` for a packet a flow rule classified as `treatment`.
    public static func classify(
        _ buffer: UnsafeRawBufferPointer, format: PacketFormat, policy: MarkingPolicy, treatment: Treatment
    ) -> RemarkResult {
        guard let p = buffer.baseAddress else { return RemarkResult(status: .malformed) }
        return mark(
            UnsafeMutableRawPointer(mutating: p), buffer.count, format, policy, write: false,
            treatment: treatment)
    }

    /// Remarks a packet held in an array, in place: the same as
    /// ``remark(_:format:policy:)`` on the array's bytes, for callers that
    /// hold no raw buffer.
    @inlinable
    public static func remark(_ packet: inout [UInt8], format: PacketFormat, policy: MarkingPolicy)
        -> RemarkResult
    {
        packet.withUnsafeMutableBytes { remark($0, format: format, policy: policy) }
    }

    /// Classifies without writing: the same parser, checks and decisions as
    /// ``remark(_:format:policy:)``, and the same result that call would return
    /// (`.rewritten` meaning a remark would change a byte), but the buffer is
    /// only read. For callers that act on the class without rewriting the
    /// packet (qosmapd's mark-only mode, truncated nfqueue copies): a packet
    /// with a malformed tail is still classified from its fixed header. Never
    /// reads outside the buffer, never allocates.
    public static func classify(
        _ buffer: UnsafeRawBufferPointer, format: PacketFormat, policy: MarkingPolicy
    ) -> RemarkResult {
        guard let p = buffer.baseAddress else { return RemarkResult(status: .malformed) }
        // Never written through: with `write: false` every store is skipped.
        return mark(
            UnsafeMutableRawPointer(mutating: p), buffer.count, format, policy, write: false, treatment: nil)
    }

    /// The body of ``remark(_:format:policy:)`` and ``classify(_:format:policy:)``;
    /// inlined into both so that `write` is a constant in each.
    @inline(__always)
    static func mark(
        _ p: UnsafeMutableRawPointer, _ end: Int, _ format: PacketFormat, _ policy: MarkingPolicy,
        write: Bool, treatment ruled: Treatment?
    ) -> RemarkResult {
        var frame = ParsedFrame()
        guard parse(p, end, format, &frame) else {
            return RemarkResult(status: .malformed, tagCount: frame.tagCount, labelCount: frame.labelCount)
        }

        // Ingress: the trusted field, or BE/green when it is absent.
        var treatment = Treatment.bestEffort
        var absent = false
        // A flow rule's class and color stand in for the trusted field's.
        switch ruled == nil ? policy.trust : .none {
        case .none:
            break
        case .field(.dscp):
            if frame.l3 >= 0 {
                treatment = policy.ingress.classify(.dscp, frame.tos >> 2)
            } else {
                absent = true
            }
        case .field(.ipPrecedence):
            if frame.l3 >= 0 {
                treatment = policy.ingress.classify(.ipPrecedence, frame.tos >> 5)
            } else {
                absent = true
            }
        case .field(.dot1p):
            if frame.tagCount > 0 {
                let tpidAt = policy.tags == .inner ? 12 &+ (frame.tagCount &- 1) &* 4 : 12
                let tci = u8(p, tpidAt &+ 2)
                let dei = isSTag(u16(p, tpidAt)) && tci & 0x10 != 0
                treatment = policy.ingress.classify(pcp: PCP(truncating: tci >> 5), dei: dei)
            } else {
                absent = true
            }
        case .field(.exp):
            if frame.labelCount > 0 {
                treatment = policy.ingress.classify(.exp, (u8(p, frame.mplsTop &+ 2) >> 1) & 7)
            } else {
                absent = true
            }
        }

        if let ruled { treatment = ruled }
        var result = RemarkResult(
            status: .unsupported, treatment: treatment, tagCount: frame.tagCount,
            labelCount: frame.labelCount,
            tailMalformed: frame.tailMalformed
        )
        result.trustedFieldAbsent = absent
        if frame.l3 >= 0 {
            result.ipVersion = frame.ipVersion
            result.l3Offset = frame.l3
            result.originalDSCP = DSCP(tos: frame.tos)
            result.newDSCP = result.originalDSCP
        }
        if absent, policy.untrusted == .keep {
            result.status = .unchanged
            return result
        }

        var acted = false
        var changed = false
        let egress = policy.egress
        if policy.rewrite.contains(.dscp), frame.l3 >= 0 {
            acted = true
            let newDSCP = egress.dscp(for: treatment)
            let newTOS = newDSCP.rawValue << 2 | (frame.tos & 3)
            if newTOS != frame.tos {
                changed = true
                result.changedFields.insert(.dscp)
                if write { writeTOS(p, frame.l3, frame.ipVersion, old: frame.tos, new: newTOS) }
            }
            result.newDSCP = newDSCP
        }
        if policy.rewrite.contains(.dot1p), frame.tagCount > 0 {
            acted = true
            let pcpBits = egress.pcp(for: treatment).rawValue << 5
            let writeDEI = egress.dropEligibility == .color
            let deiBit: UInt8 = egress.dei(for: treatment) ? 0x10 : 0
            var i = policy.tags == .inner ? frame.tagCount &- 1 : 0
            let last = policy.tags == .outer ? 1 : frame.tagCount
            while i < last {
                let tpidAt = 12 &+ i &* 4
                let old = u8(p, tpidAt &+ 2)
                var new = (old & 0x1F) | pcpBits
                if writeDEI, isSTag(u16(p, tpidAt)) { new = (new & ~0x10) | deiBit }
                if new != old {
                    if write { store8(p, tpidAt &+ 2, new) }
                    changed = true
                    result.changedFields.insert(.dot1p)
                }
                i &+= 1
            }
        }
        if policy.rewrite.contains(.exp), frame.labelCount > 0 {
            acted = true
            let old = u8(p, frame.mplsTop &+ 2)
            let new = (old & 0xF1) | egress.exp(for: treatment).rawValue << 1
            if new != old {
                if write { store8(p, frame.mplsTop &+ 2, new) }
                changed = true
                result.changedFields.insert(.exp)
            }
        }
        result.status = changed ? .rewritten : (acted ? .unchanged : .unsupported)
        return result
    }

    @inline(__always)
    static func isSTag(_ tpid: UInt16) -> Bool { tpid == 0x88A8 || tpid == 0x9100 }

    /// Writes a new TOS / Traffic Class; for IPv4 patches the header checksum.
    @inline(__always)
    static func writeTOS(_ p: UnsafeMutableRawPointer, _ l3: Int, _ version: UInt8, old: UInt8, new: UInt8) {
        if version == 4 {
            // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), m the 16-bit word holding the TOS.
            let word0 = UInt16(u8(p, l3)) << 8
            let m = word0 | UInt16(old)
            let m2 = word0 | UInt16(new)
            let hc = u16(p, l3 &+ 10)
            let sum = UInt64(~hc) &+ UInt64(~m) &+ UInt64(m2)
            store8(p, l3 &+ 1, new)
            store16(p, l3 &+ 10, ~fold(sum))
        } else {
            // Traffic Class straddles bytes 0 and 1: version(4) TC(8) flow label(20).
            store8(p, l3, (u8(p, l3) & 0xF0) | new >> 4)
            store8(p, l3 &+ 1, (u8(p, l3 &+ 1) & 0x0F) | (new & 0x0F) << 4)
        }
    }
}

/// Offsets found by the parser; -1 when absent.
struct ParsedFrame {
    var tagCount = 0
    var labelCount = 0
    var mplsTop = -1
    var l3 = -1
    var ipVersion: UInt8 = 0
    var tos: UInt8 = 0
    /// The fixed IP header is valid but its options, lengths or extension headers are not.
    var tailMalformed = false
}

/// Parses the headers; false when the link layer or the fixed IP header is
/// malformed, true with `f.tailMalformed` set when only what follows the fixed
/// IP header is. Reads only `p[0..<end]`.
@inline(__always)
func parse(_ p: UnsafeMutableRawPointer, _ end: Int, _ format: PacketFormat, _ f: inout ParsedFrame) -> Bool {
    var off = 0
    var expect: UInt8 = 0  // IP version the link layer announced; 0 = read the nibble
    switch format {
    case .ip:
        guard end >= 1 else { return false }
        let v = u8(p, 0) >> 4
        guard v == 4 || v == 6 else { return false }
        expect = v
    case .ethernet:
        guard end >= 14 else { return false }
        var type = u16(p, 12)
        off = 14
        while type == 0x8100 || type == 0x88A8 || type == 0x9100 {
            guard off &+ 4 <= end else { return false }
            f.tagCount &+= 1
            type = u16(p, off &+ 2)
            off &+= 4
        }
        switch type {
        case 0x0800:
            expect = 4
        case 0x86DD:
            expect = 6
        case 0x8847, 0x8848:
            f.mplsTop = off
            while true {
                guard off &+ 4 <= end else { return false }
                f.labelCount &+= 1
                let bos = u8(p, off &+ 2) & 1 == 1
                off &+= 4
                if bos { break }
            }
            // A label stack with nothing after it is truncated. Without a control
            // word the payload's first nibble names IPv4 or IPv6; anything else
            // (a pseudowire with a control word, say) is not IP.
            guard off < end else { return false }
            let v = u8(p, off) >> 4
            guard v == 4 || v == 6 else { return true }
            expect = v
        default:
            return true  // ARP, LLDP, 802.3 length field...: no IP to act on
        }
    }
    let l3 = off
    guard l3 < end, u8(p, l3) >> 4 == expect else { return false }
    if expect == 4 {
        guard l3 &+ 20 <= end else { return false }
        let ihl = Int(u8(p, l3) & 0x0F) &* 4
        // IHL < 5 is no IPv4 header at all (the kernel drops it); see remark's doc.
        guard ihl >= 20 else { return false }
        let total = Int(u16(p, l3 &+ 2))
        // Options past the buffer mean total < ihl or total past the buffer: one test covers both.
        if total < ihl || l3 &+ total > end { f.tailMalformed = true }
        f.tos = u8(p, l3 &+ 1)
    } else {
        guard l3 &+ 40 <= end else { return false }
        let payload = Int(u16(p, l3 &+ 4))
        // Payload length 0 is a jumbogram (RFC 2675): the packet runs to the buffer's end.
        let ipEnd = payload == 0 ? end : l3 &+ 40 &+ payload
        if ipEnd > end || walkIPv6(p, l3, ipEnd) == nil { f.tailMalformed = true }
        f.tos = (u8(p, l3) & 0x0F) << 4 | u8(p, l3 &+ 1) >> 4
    }
    f.l3 = l3
    f.ipVersion = expect
    return true
}
