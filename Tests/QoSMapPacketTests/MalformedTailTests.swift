import QoSMapCore
import QoSMapPacket
import QoSMapTables
import Testing

// Issue 10, item 4: a packet whose fixed IP header is valid but whose options,
// lengths or extension headers are not is forwarded by the kernel, so its DSCP
// must be marked from the fixed header; otherwise a sender keeps EF through a
// trust boundary.

/// An IPv4 header with `options` (IHL from their length) and total length `total`,
/// its checksum valid over the whole header as a sender would write it.
func ipv4Header(tos: UInt8, total: Int, options: [UInt8] = []) -> [UInt8] {
    var h = ipv4(tos: tos, options: options, payload: [])
    h[2] = UInt8(total >> 8 & 0xFF)
    h[3] = UInt8(total & 0xFF)
    h[10] = 0
    h[11] = 0
    let c = internetChecksum(h[...])
    h[10] = UInt8(c >> 8)
    h[11] = UInt8(c & 0xFF)
    return h
}

/// A buffer with a valid fixed IP header and a malformed tail.
struct TailFixture {
    var bytes: [UInt8]
    var format: PacketFormat
    var l3: Int
    var version: UInt8
    /// The bytes the sender wrote after the buffer's end (needed to verify an
    /// IPv4 checksum whose header the buffer cuts off).
    var cut: [UInt8] = []
}

/// Each way a tail can be malformed, bare and behind a link layer.
enum Tail: String, CaseIterable, Sendable {
    case v6DestOptsLengthPastEnd, v6PayloadLengthPastBuffer, v6AHBogusLength, v6NH60NothingAfter,
        v6NH60NothingAfterPayloadLength8, v6HopByHopTruncated, v6HopByHopLengthPastEnd
    case v4TotalLengthPastBuffer, v4TotalLengthBelowIHL, v4TotalLengthZero, v4OptionsTruncated,
        v4IHLBeyondBuffer
    case vlanV4TotalLengthPastBuffer, ethV4OptionsTruncated, qinqV6AHBogusLength, mplsV6DestOptsLengthPastEnd

    func fixture(tos: UInt8) -> TailFixture {
        let payload: [UInt8] = [9, 8, 7, 6, 5, 4, 3, 2]
        switch self {
        case .v6DestOptsLengthPastEnd:
            // Destination options claims (4 + 1) * 8 = 40 bytes; 12 follow the fixed header.
            return TailFixture(
                bytes: ipv6(tc: tos, firstNext: 60, ext: [17, 4, 1, 4, 0, 0, 0, 0]), format: .ip, l3: 0,
                version: 6)
        case .v6PayloadLengthPastBuffer:
            let full = ipv6(tc: tos, firstNext: 60, ext: [17, 0, 1, 4, 0, 0, 0, 0], payload: payload)
            return TailFixture(bytes: Array(full[0..<46]), format: .ip, l3: 0, version: 6)
        case .v6AHBogusLength:
            // AH payload length 200: (200 + 2) * 4 = 808 bytes.
            let ah: [UInt8] = [17, 200, 0, 0, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 0]
            return TailFixture(bytes: ipv6(tc: tos, firstNext: 51, ext: ah), format: .ip, l3: 0, version: 6)
        case .v6NH60NothingAfter:
            // Payload length 0 and nothing after the fixed header.
            return TailFixture(
                bytes: ipv6(tc: tos, firstNext: 60, payload: []), format: .ip, l3: 0, version: 6)
        case .v6NH60NothingAfterPayloadLength8:
            let full = ipv6(tc: tos, firstNext: 60, ext: [59, 0, 1, 4, 0, 0, 0, 0], payload: [])
            return TailFixture(bytes: Array(full[0..<40]), format: .ip, l3: 0, version: 6)
        case .v6HopByHopTruncated:
            // Four bytes of a hop-by-hop header, consistent with the payload length.
            return TailFixture(
                bytes: ipv6(tc: tos, firstNext: 0, payload: [17, 0, 1, 2]), format: .ip, l3: 0, version: 6)
        case .v6HopByHopLengthPastEnd:
            return TailFixture(
                bytes: ipv6(tc: tos, firstNext: 0, ext: [59, 1, 0, 0, 0, 0, 0, 0], payload: []), format: .ip,
                l3: 0, version: 6)
        case .v4TotalLengthPastBuffer:
            return TailFixture(
                bytes: ipv4Header(tos: tos, total: 20 + payload.count + 100) + payload, format: .ip, l3: 0,
                version: 4)
        case .v4TotalLengthBelowIHL:
            return TailFixture(
                bytes: ipv4Header(tos: tos, total: 19) + payload, format: .ip, l3: 0, version: 4)
        case .v4TotalLengthZero:
            return TailFixture(
                bytes: ipv4Header(tos: tos, total: 0) + payload, format: .ip, l3: 0, version: 4)
        case .v4OptionsTruncated:
            // IHL 6; the buffer ends in the middle of the options.
            let full = ipv4Header(tos: tos, total: 24 + payload.count, options: [1, 1, 1, 0]) + payload
            return TailFixture(
                bytes: Array(full[0..<22]), format: .ip, l3: 0, version: 4, cut: Array(full[22...]))
        case .v4IHLBeyondBuffer:
            // IHL 15: 40 bytes of NOP options, none of them in the buffer.
            let full =
                ipv4Header(tos: tos, total: 60 + payload.count, options: [UInt8](repeating: 1, count: 40))
                + payload
            return TailFixture(
                bytes: Array(full[0..<20]), format: .ip, l3: 0, version: 4, cut: Array(full[20...]))
        case .vlanV4TotalLengthPastBuffer:
            var f = Tail.v4TotalLengthPastBuffer.fixture(tos: tos)
            f.bytes = ether(0x0800, tags: [tag(0x8100, pcp: 3)], f.bytes)
            f.format = .ethernet
            f.l3 = 18
            return f
        case .ethV4OptionsTruncated:
            var f = Tail.v4OptionsTruncated.fixture(tos: tos)
            f.bytes = ether(0x0800, f.bytes)
            f.format = .ethernet
            f.l3 = 14
            return f
        case .qinqV6AHBogusLength:
            var f = Tail.v6AHBogusLength.fixture(tos: tos)
            f.bytes = ether(0x86DD, tags: [tag(0x88A8, pcp: 5), tag(0x8100, pcp: 1)], f.bytes)
            f.format = .ethernet
            f.l3 = 22
            return f
        case .mplsV6DestOptsLengthPastEnd:
            var f = Tail.v6DestOptsLengthPastEnd.fixture(tos: tos)
            f.bytes = ether(0x8847, label(16, exp: 2, bos: true) + f.bytes)
            f.format = .ethernet
            f.l3 = 18
            return f
        }
    }
}

/// The TOS / Traffic Class octet of the IP header at `l3`.
func tosOf(_ b: [UInt8], _ l3: Int, _ version: UInt8) -> UInt8 {
    version == 4 ? b[l3 + 1] : (b[l3] & 0x0F) << 4 | b[l3 + 1] >> 4
}

/// Runs classify over a private copy of `bytes` and expects the copy untouched.
func classify(_ bytes: [UInt8], _ format: PacketFormat, _ policy: MarkingPolicy) -> RemarkResult {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
    defer { buffer.deallocate() }
    buffer.copyBytes(from: bytes)
    let r = PacketMarker.classify(UnsafeRawBufferPointer(buffer), format: format, policy: policy)
    #expect(Array(buffer) == bytes, "classify wrote to the buffer")
    return r
}

struct MalformedTailTests {
    @Test(arguments: Tail.allCases, [TrustMode.dscp, .none])
    func dscpIsRemarkedFromTheFixedHeader(tail: Tail, trust: TrustMode) {
        let policy = MarkingPolicy(trust: trust, ingress: defaultDomain)
        for dscp in [UInt8(11), 46] {
            for ecn in UInt8(0)..<4 {
                let f = tail.fixture(tos: dscp << 2 | ecn)
                let (out, r) = remark(f.bytes, f.format, policy)
                let t = trust == .dscp ? defaultDomain.classify(dscp: DSCP(truncating: dscp)) : .bestEffort
                let want = defaultDomain.dscp(for: t).rawValue
                #expect(r.tailMalformed, "\(tail) DSCP \(dscp)")
                #expect(r.status == (want == dscp ? .unchanged : .rewritten))
                #expect(r.treatment == t)
                #expect(r.ipVersion == f.version && r.l3Offset == f.l3)
                #expect(r.originalDSCP?.rawValue == dscp && r.newDSCP?.rawValue == want)
                #expect(tosOf(out, f.l3, f.version) == want << 2 | ecn, "DSCP mapped, ECN kept")
                if trust == .none {
                    #expect(want != DSCP.ef.rawValue, "EF must not pass a trust-none boundary")
                }
                // Only the marking bytes may move: TOS and checksum, or TC (and the version byte).
                let allowed = f.version == 4 ? [f.l3 + 1, f.l3 + 10, f.l3 + 11] : [f.l3, f.l3 + 1]
                #expect(diff(f.bytes, out).allSatisfy { allowed.contains($0) })
                if f.version == 4 {
                    // Recompute the checksum over the whole header the sender wrote, cut-off options
                    // included: the incremental update must agree with it.
                    let whole = out + f.cut
                    let ihl = Int(whole[f.l3] & 0x0F) * 4
                    var zeroed = Array(whole[f.l3..<(f.l3 + ihl)])
                    zeroed[10] = 0
                    zeroed[11] = 0
                    let full = internetChecksum(zeroed[...])
                    #expect(UInt16(out[f.l3 + 10]) << 8 | UInt16(out[f.l3 + 11]) == full)
                }
                #expect(classify(f.bytes, f.format, policy) == r)
            }
        }
    }

    /// L4 work needs a valid chain: TransportChecksum refuses every malformed tail, remarked or not.
    @Test(arguments: Tail.allCases)
    func transportChecksumRefusesMalformedTails(tail: Tail) {
        let f = tail.fixture(tos: 11 << 2)
        let (out, r) = remark(f.bytes, f.format, MarkingPolicy(trust: .none, ingress: defaultDomain))
        #expect(r.status == .rewritten && r.tailMalformed)
        for packet in [Array(f.bytes[f.l3...]), Array(out[f.l3...])] {
            var copy = packet
            let done = copy.withUnsafeMutableBytes { TransportChecksum.complete($0) }
            #expect(!done)
            #expect(copy == packet)
        }
    }

    static let badFixedHeaders: [(String, [UInt8], PacketFormat)] = {
        let v4 = ipv4(tos: DSCP.ef.rawValue << 2 | 1)
        let v6 = ipv6(tc: DSCP.ef.rawValue << 2 | 2)
        var cases: [(String, [UInt8], PacketFormat)] = [
            ("v4 19 bytes", Array(v4[0..<19]), .ip),
            ("v6 39 bytes", Array(v6[0..<39]), .ip),
            ("eth v4 19 bytes", ether(0x0800, Array(v4[0..<19])), .ethernet),
            ("vlan v6 39 bytes", ether(0x86DD, tags: [tag(0x8100, pcp: 5)], Array(v6[0..<39])), .ethernet),
            ("mpls v4 19 bytes", ether(0x8847, label(3, exp: 5, bos: true) + Array(v4[0..<19])), .ethernet),
            ("version 5", [0x55] + v4[1...], .ip),
            ("version 0", [0x05] + v4[1...], .ip),
            ("version 7 after v6 bytes", [0x70 | v6[0] & 0x0F] + v6[1...], .ip),
            ("0x0800 carrying v6", ether(0x0800, v6), .ethernet),
            ("0x86dd carrying v4", ether(0x86DD, v4 + [UInt8](repeating: 0, count: 20)), .ethernet),
            ("vlan tag cut in its TCI", macs + [0x81, 0x00, 0xA0], .ethernet),
            ("vlan inner type cut", macs + [0x81, 0x00, 0xA0, 0x64, 0x08], .ethernet),
            ("mpls stack without bottom", ether(0x8847, label(1, exp: 5, bos: false)), .ethernet),
            ("mpls label cut", ether(0x8847, Array(label(1, exp: 5, bos: true)[0..<3])), .ethernet),
        ]
        // IHL below 5: no IPv4 header whose checksum covers TOS and checksum (the kernel drops it).
        for ihl in UInt8(0)..<5 {
            var b = v4
            b[0] = 0x40 | ihl
            cases.append(("v4 IHL \(ihl)", b, .ip))
        }
        return cases
    }()

    @Test(arguments: MalformedTailTests.badFixedHeaders.indices, [TrustMode.dscp, .none])
    func badFixedHeaderIsMalformedAndUntouched(index: Int, trust: TrustMode) {
        let (name, bytes, format) = Self.badFixedHeaders[index]
        let policy = MarkingPolicy(trust: trust, ingress: defaultDomain, rewrite: .all)
        let (out, r) = remark(bytes, format, policy)
        #expect(r.status == .malformed, "\(name)")
        #expect(!r.tailMalformed)
        #expect(r.ipVersion == nil && r.newDSCP == nil)
        #expect(out == bytes, "\(name): buffer unchanged byte for byte")
        #expect(classify(bytes, format, policy) == r)
    }

    /// Well-formed packets, extension chains, options and padding included, have no malformed tail.
    @Test func wellFormedPacketsHaveNoMalformedTail() {
        let chain: [UInt8] =
            [43, 0, 1, 4, 0, 0, 0, 0] + [51, 2, 0, 0, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 16)
            + [17, 4, 0, 0, 0, 0, 0, 7, 0, 0, 0, 1] + [UInt8](repeating: 0, count: 12)
        let packets: [([UInt8], PacketFormat)] = [
            (ipv4(tos: 46 << 2, options: [1, 1, 1, 0]), .ip),
            (ipv6(tc: 46 << 2, firstNext: 0, ext: chain), .ip),
            (ether(0x0800, ipv4(tos: 46 << 2, payload: []) + [UInt8](repeating: 0, count: 26)), .ethernet),
            (ether(0x86DD, tags: [tag(0x8100, pcp: 2)], ipv6(tc: 46 << 2)), .ethernet),
        ]
        for (bytes, format) in packets {
            let (_, r) = remark(bytes, format, MarkingPolicy(trust: .none, ingress: defaultDomain))
            #expect(r.status == .rewritten)
            #expect(!r.tailMalformed)
        }
    }

    /// classify agrees with remark on the other encapsulation tests' frames too, every trust and field set.
    @Test(arguments: [TrustMode.dscp, .ipPrecedence, .dot1p, .exp, .none])
    func classifyAgreesWithRemark(trust: TrustMode) {
        var frames: [([UInt8], PacketFormat)] = MalformedTests.frames.map { ($0.1, $0.2) }
        frames += Tail.allCases.map {
            let f = $0.fixture(tos: 0xB9); return (f.bytes, f.format)
        }
        frames += Self.badFixedHeaders.map { ($0.1, $0.2) }
        frames.append((ether(0x0806, [UInt8](repeating: 0xAA, count: 28)), .ethernet))
        for (bytes, format) in frames {
            for rewrite in [RewriteFields.dscp, .dot1p, .exp, .all, []] {
                let policy = MarkingPolicy(
                    trust: trust, ingress: defaultDomain, egress: domain5p3d, rewrite: rewrite)
                let (_, r) = remark(bytes, format, policy)
                #expect(classify(bytes, format, policy) == r)
            }
        }
    }
}
