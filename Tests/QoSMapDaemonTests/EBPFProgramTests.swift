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
