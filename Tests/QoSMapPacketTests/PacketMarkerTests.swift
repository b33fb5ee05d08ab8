import QoSMapCore
import QoSMapPacket
import QoSMapTables
import Testing

/// Runs the marker over a copy of `bytes`.
func remark(_ bytes: [UInt8], _ format: PacketFormat, _ policy: MarkingPolicy) -> ([UInt8], RemarkResult) {
    var copy = bytes
    let r = copy.withUnsafeMutableBytes { PacketMarker.remark($0, format: format, policy: policy) }
    return (copy, r)
}

/// Indices where two equal-length buffers differ.
func diff(_ a: [UInt8], _ b: [UInt8]) -> [Int] {
    a.indices.filter { a[$0] != b[$0] }
}

struct IPv4Tests {
    @Test(arguments: 0..<64, 0..<4)
    func dscpRewriteKeepsECNAndChecksum(dscp: Int, ecn: Int) {
        let tos = UInt8(dscp << 2 | ecn)
        let pkt = ipv4(tos: tos, options: [1, 1, 1, 0])  // NOP NOP NOP EOL: IHL 6
        let policy = MarkingPolicy(ingress: defaultDomain)
        let (out, r) = remark(pkt, .ip, policy)
        let t = defaultDomain.classify(dscp: DSCP(truncating: UInt8(dscp)))
        let want = defaultDomain.dscp(for: t).rawValue
        #expect(r.treatment == t)
        #expect(r.ipVersion == 4)
        #expect(r.l3Offset == 0)
        #expect(out[1] >> 2 == want)
        #expect(out[1] & 3 == UInt8(ecn))
        #expect(internetChecksum(out[0..<24]) == 0, "header checksum must verify")
        #expect(r.status == (want == UInt8(dscp) ? .unchanged : .rewritten))
        // Only TOS and checksum may change.
        #expect(diff(pkt, out).allSatisfy { [1, 10, 11].contains($0) })
    }

    @Test func ipPrecedenceTrust() {
        // Precedence 5 with ECN 1 maps through the precedence table.
        let pkt = ipv4(tos: 0xA0 | 1)
        let policy = MarkingPolicy(trust: .ipPrecedence, ingress: defaultDomain)
        let (out, r) = remark(pkt, .ip, policy)
        let t = defaultDomain.classify(precedence: IPPrecedence(truncating: 5))
        #expect(r.treatment == t)
        #expect(out[1] == defaultDomain.dscp(for: t).rawValue << 2 | 1)
    }

    @Test func trustNoneIsBestEffort() {
        let (out, r) = remark(
            ipv4(tos: DSCP.ef.rawValue << 2 | 2), .ip, MarkingPolicy(trust: .none, ingress: defaultDomain))
        #expect(r.treatment == .bestEffort)
        #expect(out[1] == defaultDomain.dscp(for: .bestEffort).rawValue << 2 | 2)
        #expect(r.originalDSCP == .ef)
        #expect(r.newDSCP == defaultDomain.dscp(for: .bestEffort))
    }

    /// RFC 1624: eqn. 2 yields 0xFFFF where a full recompute yields 0x0000; eqn. 3 must agree with the recompute.
    @Test(arguments: [UInt8(0x00), 0xB8, 0x28, 0xFF])
    func incrementalChecksumMatchesRecomputeIncludingZero(oldTOS: UInt8) {
        let policy = MarkingPolicy(trust: .none, ingress: defaultDomain)
        let newTOS = defaultDomain.dscp(for: .bestEffort).rawValue << 2 | (oldTOS & 3)
        guard newTOS != oldTOS else { return }
        // Find an ID for which the rewritten header's full checksum is 0x0000.
        var found = false
        for id in 0...0xFFFF {
            var after = ipv4(tos: newTOS, id: UInt16(id))
            after[10] = 0
            after[11] = 0
            if internetChecksum(after[0..<20]) == 0 {
                let (out, r) = remark(ipv4(tos: oldTOS, id: UInt16(id)), .ip, policy)
                #expect(r.status == .rewritten)
                #expect(out[10] == 0 && out[11] == 0, "eqn. 3 keeps +0 where recompute gives 0x0000")
                found = true
                break
            }
        }
        #expect(found)
    }

    @Test func incrementalChecksumOverManyHeaders() {
        // Every TOS in, each remarked with every trust mode, against a full recompute.
        for tos in 0...255 {
            for id in stride(from: 0, to: 0x10000, by: 4099) {
                for trust in [TrustMode.dscp, .ipPrecedence, .none] {
                    let (out, _) = remark(
                        ipv4(tos: UInt8(tos), id: UInt16(id)), .ip,
                        MarkingPolicy(trust: trust, ingress: defaultDomain))
                    var zeroed = Array(out[0..<20])
                    zeroed[10] = 0
                    zeroed[11] = 0
                    let full = internetChecksum(zeroed[...])
                    #expect(UInt16(out[10]) << 8 | UInt16(out[11]) == full)
                }
            }
        }
    }
}

struct IPv6Tests {
    @Test(arguments: 0..<4)
    func trafficClassRewriteKeepsECNAndFlowLabel(ecn: Int) {
        // Hop-by-hop (PadN), routing (type 2, 0 segments left), fragment (atomic), destination options, then UDP.
        let ext: [UInt8] =
            [43, 0, 1, 4, 0, 0, 0, 0]
            + [44, 2, 2, 0, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 16)
            + [60, 0, 0, 0, 0, 0, 0, 1]
            + [17, 0, 1, 4, 0, 0, 0, 0]
        let tc = DSCP.af41.rawValue << 2 | UInt8(ecn)
        let pkt = ipv6(tc: tc, firstNext: 0, ext: ext)
        let policy = MarkingPolicy(ingress: defaultDomain, egress: domain5p3d)
        let (out, r) = remark(pkt, .ip, policy)
        let t = defaultDomain.classify(dscp: .af41)
        let newTC = domain5p3d.dscp(for: t).rawValue << 2 | UInt8(ecn)
        #expect(r.ipVersion == 6)
        #expect(r.treatment == t)
        #expect(out[0] == 0x60 | newTC >> 4)
        #expect(out[1] == (newTC & 0x0F) << 4 | 0x0A, "flow label nibble kept")
        #expect(Array(out[2...]) == Array(pkt[2...]))
    }

    @Test func extensionHeaderOverrunIsAMalformedTailAndStillRemarked() {
        // Hop-by-hop claims 16 bytes but the payload holds 8.
        let pkt = ipv6(tc: 0xB8, firstNext: 0, ext: [59, 1, 0, 0, 0, 0, 0, 0], payload: [])
        let (out, r) = remark(pkt, .ip, MarkingPolicy(trust: .none, ingress: defaultDomain))
        #expect(r.status == .rewritten && r.tailMalformed)
        #expect(diff(pkt, out).allSatisfy { $0 < 2 })
    }
}

struct EncapsulationTests {
    @Test(arguments: [UInt16(0x8100), 0x88A8, 0x9100])
    func singleTagTrust8021p(tpid: UInt16) {
        for pcp in UInt8(0)..<8 {
            for dei in [false, true] {
                let frame = ether(0x0800, tags: [tag(tpid, pcp: pcp, dei: dei)], ipv4(tos: 3))
                let policy = MarkingPolicy(trust: .dot1p, ingress: domain5p3d, rewrite: .all)
                let (out, r) = remark(frame, .ethernet, policy)
                let sTag = tpid != 0x8100
                let t = domain5p3d.classify(pcp: PCP(truncating: pcp), dei: sTag && dei)
                #expect(r.treatment == t)
                #expect(r.tagCount == 1)
                #expect(r.l3Offset == 18)
                #expect(out[14] >> 5 == domain5p3d.pcp(for: t).rawValue)
                // 5p3d carries color in DEI: written on S-tags, kept on C-tags.
                #expect((out[14] & 0x10 != 0) == (sTag ? domain5p3d.dei(for: t) : dei))
                #expect(out[14] & 0x0F == frame[14] & 0x0F && out[15] == frame[15], "VID kept")
                #expect(out[19] == domain5p3d.dscp(for: t).rawValue << 2 | 3)
                #expect(internetChecksum(out[18..<38]) == 0)
            }
        }
    }

    @Test func qinqWritesEveryTagPCPAndOnlySTagDEI() {
        let frame = ether(
            0x86DD,
            tags: [tag(0x88A8, pcp: 5, dei: false, vid: 10), tag(0x8100, pcp: 1, dei: true, vid: 20)],
            ipv6(tc: 0))
        // The default domain ignores DEI: both DEIs stay as received.
        let (out, r) = remark(
            frame, .ethernet, MarkingPolicy(trust: .dot1p, ingress: defaultDomain, rewrite: .dot1p))
        let t = defaultDomain.classify(pcp: PCP(truncating: 5))
        let pcp = defaultDomain.pcp(for: t).rawValue
        #expect(r.tagCount == 2)
        #expect(r.ipVersion == 6 && r.l3Offset == 22)
        #expect(out[14] == pcp << 5 | 0x00)
        #expect(out[18] == pcp << 5 | 0x10)
        #expect(diff(frame, out).allSatisfy { [14, 18].contains($0) })
    }

    @Test(arguments: 1...3)
    func mplsTopLabelEXPOnly(labels: Int) {
        var stack: [UInt8] = []
        for i in 0..<labels {
            stack += label(UInt32(100 + i), exp: UInt8(i + 4), bos: i == labels - 1)
        }
        let frame = ether(0x8847, stack + ipv4(tos: DSCP.cs1.rawValue << 2 | 1))
        let policy = MarkingPolicy(trust: .exp, ingress: defaultDomain, rewrite: [.exp, .dscp])
        let (out, r) = remark(frame, .ethernet, policy)
        let t = defaultDomain.classify(exp: MPLSEXP(truncating: 4))
        #expect(r.labelCount == labels)
        #expect(r.treatment == t)
        #expect(r.l3Offset == 14 + 4 * labels)
        #expect((out[16] >> 1) & 7 == defaultDomain.exp(for: t).rawValue)
        #expect(out[16] & 0xF1 == frame[16] & 0xF1, "label, BoS bit kept")
        let l3 = 14 + 4 * labels
        #expect(out[l3 + 1] == defaultDomain.dscp(for: t).rawValue << 2 | 1)
        #expect(internetChecksum(out[l3..<(l3 + 20)]) == 0)
        #expect(diff(frame, out).allSatisfy { $0 == 16 || ($0 >= l3 && $0 < l3 + 20) })
    }

    @Test func mplsWithNonIPPayloadStillGetsEXP() {
        let frame = ether(0x8847, label(16, exp: 0, bos: true) + [0x00, 0x00, 0x00, 0x00])  // PW control word
        let (out, r) = remark(
            frame, .ethernet, MarkingPolicy(trust: .none, ingress: defaultDomain, rewrite: .all))
        #expect(r.ipVersion == nil)
        #expect((out[16] >> 1) & 7 == defaultDomain.exp(for: .bestEffort).rawValue)
    }

    @Test func arpIsUnsupportedAndUntouched() {
        let frame = ether(0x0806, [UInt8](repeating: 0xAA, count: 28))
        let (out, r) = remark(frame, .ethernet, MarkingPolicy(ingress: defaultDomain, rewrite: .all))
        #expect(r.status == .unsupported)
        #expect(out == frame)
    }
}

struct MalformedTests {
    /// Frames, their format and where their fixed IP header ends.
    static let frames: [(String, [UInt8], PacketFormat, Int)] = [
        ("ipv4", ether(0x0800, ipv4(tos: 0xB8, options: [7, 4, 0, 0])), .ethernet, 14 + 20),
        (
            "qinq-ipv6", ether(0x86DD, tags: [tag(0x88A8, pcp: 3), tag(0x8100, pcp: 2)], ipv6(tc: 0xB9)),
            .ethernet, 22 + 40
        ),
        (
            "mpls2-ipv4",
            ether(0x8847, label(1, exp: 3, bos: false) + label(2, exp: 1, bos: true) + ipv4(tos: 4)),
            .ethernet, 22 + 20
        ),
        ("bare-ipv6", ipv6(tc: 0x28, firstNext: 60, ext: [17, 0, 1, 4, 0, 0, 0, 0]), .ip, 40),
    ]

    /// A truncation that cuts into the link layer or the fixed IP header leaves the
    /// bytes alone; one that cuts after it is a malformed tail, remarked as the whole
    /// frame is (an IPv4 checksum stays valid over the header the sender wrote).
    @Test(arguments: 0..<4)
    func truncatedPrefixes(index: Int) {
        let (_, frame, format, fixedEnd) = Self.frames[index]
        let policy = MarkingPolicy(trust: .dot1p, ingress: defaultDomain, rewrite: .all)
        let (whole, wholeResult) = remark(frame, format, policy)
        #expect(wholeResult.status != .malformed && !wholeResult.tailMalformed)
        for n in 0..<frame.count {
            let prefix = Array(frame[0..<n])
            let (out, r) = remark(prefix, format, policy)
            if n < fixedEnd {
                #expect(r.status == .malformed, "length \(n)")
                #expect(out == prefix)
            } else {
                #expect(r.status == wholeResult.status && r.tailMalformed, "length \(n)")
                #expect(out == Array(whole[0..<n]), "length \(n): same bytes as the whole frame's")
                if let l3 = r.l3Offset, r.ipVersion == 4 {
                    let ihl = Int(frame[l3] & 0x0F) * 4
                    #expect(internetChecksum((out + frame[n...])[l3..<(l3 + ihl)]) == 0)
                }
            }
        }
    }

    @Test func badIPv4Headers() {
        var ihl4 = ipv4(tos: 0)
        ihl4[0] = 0x44
        let wrongVersion = ether(0x0800, ipv6(tc: 0))
        let policy = MarkingPolicy(trust: .none, ingress: defaultDomain, rewrite: .all)
        for (bytes, format) in [(ihl4, PacketFormat.ip), (wrongVersion, .ethernet)] {
            let (out, r) = remark(bytes, format, policy)
            #expect(r.status == .malformed)
            #expect(out == bytes)
        }
    }

    @Test func inconsistentIPv4TotalLengthIsAMalformedTail() {
        var longTotal = ipv4(tos: 0xB8)
        longTotal[3] &+= 1
        var shortTotal = ipv4(tos: 0xB8)
        shortTotal[2] = 0
        shortTotal[3] = 19
        let policy = MarkingPolicy(trust: .none, ingress: defaultDomain, rewrite: .all)
        for bytes in [longTotal, shortTotal] {
            let (out, r) = remark(bytes, .ip, policy)
            #expect(r.status == .rewritten && r.tailMalformed)
            #expect(diff(bytes, out).allSatisfy { [1, 10, 11].contains($0) })
        }
    }

    @Test func ethernetPaddingAfterTotalLengthIsAllowed() {
        let frame = ether(0x0800, ipv4(tos: 0, payload: [])) + [UInt8](repeating: 0, count: 26)
        let (_, r) = remark(frame, .ethernet, MarkingPolicy(ingress: defaultDomain))
        #expect(r.status == .unchanged)
    }

    @Test func emptyBuffer() {
        let r = PacketMarker.remark(
            UnsafeMutableRawBufferPointer(start: nil, count: 0), format: .ip,
            policy: MarkingPolicy(ingress: defaultDomain))
        #expect(r.status == .malformed)
    }
}
