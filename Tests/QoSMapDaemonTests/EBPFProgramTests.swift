import BPFClassifier
import QoSMapCore
import QoSMapPacket
import QoSMapTables
import Testing

@testable import QoSMapDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// The classifier itself, run in the kernel (`BPF_PROG_TEST_RUN`) against the
/// nfqueue engine (`PacketMarker`) as the oracle: every DSCP × ECN, IPv4 and
/// IPv6, untagged and with one or two VLAN tags in the data, for policies
/// found in the ifindex array, in the hash above it, and for host-originated
/// packets. The frames must come out byte for byte as `PacketMarker` leaves
/// them, with a valid IPv4 header checksum.
@Suite(.enabled(if: getuid() == 0, "loading BPF needs CAP_BPF"))
struct EBPFProgramTests {
    static let config = """
        datapath: ebpf
        trust: dscp
        interfaces:
          untrusted: {trust: none}
          edge: {trust: ip-precedence}
          core: {outbound-domain: 5p3d}
        actions: {mark: {mask: 0xff00}, priority: true}
        """

    /// Ingress interfaces and the ifindex each is given in the run: an array
    /// slot, a hash key (≥ 4096), and 0 (host-originated, policy `local`).
    static let ingress: [(name: String?, ifindex: UInt32)] = [("untrusted", 7), ("edge", 5000), (nil, 0)]

    @Test(arguments: [nil, "core"] as [String?])
    func programMatchesTheEngine(egress: String?) throws {
        let snapshot = try PolicySnapshot(
            config: DaemonConfig.parse(Self.config, file: "x.yaml"), generation: 0,
            systemDirectory: "/nonexistent")
        let tables = try EBPFTables(snapshot)
        let maps = try EBPFDatapath.loadObject()
        let keys = tables.entries.keys.sorted()
        try maps.table.update(keys: keys.map { UInt32($0) }, values: keys.map { tables.entries[$0]! })
        try maps.gen.update(UInt32(0), UInt32(0))
        // The egress interface of a test run is loopback (ifindex 1).
        var out = EBPFPolicySlots()
        out.slots = (egress.flatMap { tables.egress[$0] } ?? 0, 0)
        try maps.egress.update(UInt32(1), out)
        for (name, ifindex) in Self.ingress where ifindex != 0 {
            var slots = EBPFPolicySlots()
            slots.slots = (name.flatMap { tables.ingress[$0] } ?? 0, 0)
            try (ifindex < EBPFLayout.ifindexArray ? maps.ingress : maps.ingressHash).update(ifindex, slots)
        }
        var checked = 0
        var rewritten = 0
        for (name, ifindex) in Self.ingress {
            let policy = snapshot.policy(input: name, output: egress)
            for v6 in [false, true] {
                for tags in 0...2 {
                    for tos in 0...255 {
                        let (frame, ipOffset) = Self.frame(v6: v6, tos: UInt8(tos), tags: tags)
                        var expected = frame
                        var ip = Array(frame[ipOffset...])
                        _ = PacketMarker.remark(&ip, format: .ip, policy: policy)
                        expected.replaceSubrange(ipOffset..., with: ip)
                        let run = try maps.program.testRun(packet: frame, ifindex: 1, ingressIfindex: ifindex)
                        #expect(run.returnValue == 0)
                        if run.packet != expected {
                            Issue.record(
                                "ingress \(name ?? "local") egress \(egress ?? "-") v6 \(v6) tags \(tags) tos \(tos): got \(Array(run.packet[ipOffset..<ipOffset + 12])) want \(Array(expected[ipOffset..<ipOffset + 12]))"
                            )
                            return
                        }
                        if !v6 {
                            #expect(Self.ipv4ChecksumValid(Array(run.packet[ipOffset..<ipOffset + 20])))
                        }
                        if run.packet != frame { rewritten += 1 }
                        checked += 1
                    }
                }
            }
        }
        #expect(checked == 3 * 2 * 3 * 256)
        // The tables change values: a test where nothing is rewritten proves nothing.
        #expect(rewritten > 1000)
    }

    /// Trust 802.1p: the ingress classifier carries PCP and DEI (S-tags only)
    /// in the mark; egress picks the entry by them, writes the DSCP the engine
    /// writes for the tagged frame, and clears the carry bits. Untagged
    /// frames get the engine's untrusted fallback.
    @Test(arguments: [false, true])
    func trust8021pCarriesThePCP(v6: Bool) throws {
        let config = """
            datapath: ebpf
            interfaces:
              tagged: {trust: 8021p, inbound-domain: 5p3d}
              out: {}
            actions: {mark: {mask: 0xff}}
            ebpf: {pcp-carry-mask: 0x1f00}
            """
        let snapshot = try PolicySnapshot(
            config: DaemonConfig.parse(config, file: "x.yaml"), generation: 0, systemDirectory: "/nonexistent"
        )
        let tables = try EBPFTables(snapshot)
        let maps = try EBPFDatapath.loadObject()
        let keys = tables.entries.keys.sorted()
        try maps.table.update(keys: keys.map { UInt32($0) }, values: keys.map { tables.entries[$0]! })
        try maps.gen.update(UInt32(0), UInt32(0))
        try maps.config.update(UInt32(0), EBPFCarry(mask: 0x1f00, shift: 8))
        var slots = EBPFPolicySlots()
        slots.slots = (try #require(tables.ingress["tagged"]), 0)
        try maps.ingress.update(UInt32(9), slots)
        let policy = snapshot.policy(input: "tagged", output: nil)
        var rewritten = 0
        for tpid in [UInt16(0x8100), 0x88a8, 0] {
            for pcp in 0..<8 {
                for dei in 0..<2 {
                    for tos in [0, 0x2d, 0xb8, 0xff] as [UInt8] {
                        let (untagged, ipOffset) = Self.frame(v6: v6, tos: tos, tags: 0)
                        var tagged = untagged
                        if tpid != 0 {
                            let tci = UInt16(pcp) << 13 | UInt16(dei) << 12 | 10
                            tagged.insert(
                                contentsOf: [
                                    UInt8(tpid >> 8), UInt8(tpid & 0xff), UInt8(tci >> 8), UInt8(tci & 0xff),
                                ],
                                at: 12)
                        }
                        var expected = tagged
                        _ = PacketMarker.remark(&expected, format: .ethernet, policy: policy)
                        let inRun = try maps.ingressProgram.testRun(
                            packet: tagged, ifindex: 1, mark: 0xa5a5_00aa)
                        #expect(inRun.packet == tagged)
                        // Leaves the other mark bits as they were.
                        #expect(inRun.mark & ~0x1f00 == 0xa5a5_00aa)
                        // The receive path takes the tag out before the packet is forwarded.
                        let outRun = try maps.program.testRun(
                            packet: untagged, ifindex: 1, ingressIfindex: 9, mark: inRun.mark)
                        let got = Array(outRun.packet[ipOffset...])
                        let want = Array(expected[(ipOffset + (tpid == 0 ? 0 : 4))...])
                        #expect(got == want, "tpid \(tpid) pcp \(pcp) dei \(dei) tos \(tos)")
                        #expect(outRun.mark & 0x1f00 == 0, "carry bits cleared")
                        if got != Array(untagged[ipOffset...]) { rewritten += 1 }
                    }
                }
            }
        }
        #expect(rewritten > 50)
    }

    /// A header that is not what its EtherType says (IHL 4; version 6 under
    /// 0x0800; version 4 under 0x86dd) passes unchanged and counts as
    /// malformed. (The kernel's test run refuses frames shorter than an IP
    /// header, so a cut header cannot be tried here; tools/e2e sends those.)
    @Test(arguments: [(false, UInt8(0x44)), (false, 0x65), (true, 0x4b)])
    func badVersionOrLengthPassesUnchanged(v6: Bool, firstByte: UInt8) throws {
        let maps = try EBPFDatapath.loadObject()
        try maps.gen.update(UInt32(0), UInt32(0))
        var (frame, ipOffset) = Self.frame(v6: v6, tos: 0x2c, tags: 0)
        frame[ipOffset] = firstByte
        let slot = UInt32(EBPFLayout.counterEntries - 1)
        let before = try maps.counters.perCPUCounters(slot).reduce(0, +)
        let run = try maps.program.testRun(packet: frame, ifindex: 1)
        #expect(run.returnValue == 0)
        #expect(run.packet == frame)
        #expect(try maps.counters.perCPUCounters(slot).reduce(0, +) == before + 1)
    }

    /// An Ethernet frame with `tags` 802.1Q tags in the data and a UDP datagram; the IP header's offset.
    static func frame(v6: Bool, tos: UInt8, tags: Int) -> ([UInt8], Int) {
        var f: [UInt8] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]
        for i in 0..<tags {
            f += [0x81, 0x00, UInt8(0x20 | i), 0x0a]  // TPID, PCP 1, VID 10/266
        }
        f += v6 ? [0x86, 0xdd] : [0x08, 0x00]
        let offset = f.count
        let udp: [UInt8] = [0x30, 0x39, 0x23, 0x28, 0, 16, 0, 0] + Array("qosmap!!".utf8)
        if v6 {
            f += [0x60 | tos >> 4, tos << 4, 0x12, 0x34, 0, UInt8(udp.count), 17, 64]
            f += [0xfd] + [UInt8](repeating: 0, count: 14) + [1]
            f += [0xfd] + [UInt8](repeating: 0, count: 14) + [2]
        } else {
            var h: [UInt8] = [0x45, tos, 0, UInt8(20 + udp.count), 0x12, 0x34, 0x40, 0, 64, 17, 0, 0]
            h += [198, 18, 0, 1, 198, 19, 0, 1]
            let sum = ~onesComplementSum(h)
            h[10] = UInt8(sum >> 8)
            h[11] = UInt8(sum & 0xff)
            f += h
        }
        return (f + udp, offset)
    }

    static func onesComplementSum(_ bytes: [UInt8]) -> UInt16 {
        var sum: UInt32 = 0
        for i in stride(from: 0, to: bytes.count, by: 2) {
            sum += UInt32(bytes[i]) << 8 | UInt32(bytes[i + 1])
        }
        while sum >> 16 != 0 { sum = (sum & 0xffff) + (sum >> 16) }
        return UInt16(sum)
    }

    static func ipv4ChecksumValid(_ header: [UInt8]) -> Bool { onesComplementSum(header) == 0xffff }
}
