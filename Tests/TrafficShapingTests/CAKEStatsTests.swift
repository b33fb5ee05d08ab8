import CMnl
import QoSMapCore
import Testing

@testable import TrafficShaping

// An RTM_NEWQDISC message as sch_cake's cake_dump_stats and the qdisc dump
// lay it out (include/uapi/linux/pkt_sched.h, gen_stats.h), built here byte
// by byte: attribute numbers written out, not taken from the module's table.

/// A netlink attribute: `nla_len` (header included), `nla_type`, the
/// payload, padded to 4 bytes.
func attribute(_ type: UInt16, _ payload: [UInt8]) -> [UInt8] {
    var bytes = le(UInt16(4 + payload.count)) + le(type) + payload
    while bytes.count % 4 != 0 { bytes.append(0) }
    return bytes
}

/// A nested attribute holding `children`.
func nest(_ type: UInt16, _ children: [[UInt8]]) -> [UInt8] {
    attribute(type, children.flatMap { $0 })
}

/// `value`'s bytes in the host's (little-endian) order.
func le<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
    withUnsafeBytes(of: value.littleEndian) { Array($0) }
}

/// One tin's TCA_CAKE_TIN_STATS_* in the order the kernel puts them, with a
/// TCA_CAKE_TIN_STATS_PAD (1) before each 64-bit one, as architectures
/// without efficient unaligned access get them.
func tin(bytes: UInt64, packets: UInt32, dropped: UInt32, ecn: UInt32, backlog: UInt32, rate: UInt64)
    -> [[UInt8]]
{
    [
        attribute(1, []), attribute(12, le(rate)),  // PAD, THRESHOLD_RATE64
        attribute(1, []), attribute(3, le(bytes)),  // PAD, SENT_BYTES64
        attribute(11, le(backlog)),  // BACKLOG_BYTES
        attribute(13, le(UInt32(5_000))), attribute(14, le(UInt32(100_000))),  // TARGET_US, INTERVAL_US
        attribute(2, le(packets)), attribute(4, le(dropped)),  // SENT_PACKETS, DROPPED_PACKETS
        attribute(8, le(ecn)), attribute(6, le(UInt32(0))),  // ECN_MARKED_PACKETS, ACKS_DROPPED_PACKETS
        attribute(18, le(UInt32(900))), attribute(19, le(UInt32(300))), attribute(20, le(UInt32(20))),  // delays
        attribute(15, le(UInt32(0))), attribute(16, le(UInt32(3))), attribute(17, le(UInt32(7))),  // ways
        attribute(21, le(UInt32(1))), attribute(22, le(UInt32(1))), attribute(23, le(UInt32(0))),  // flows
        attribute(24, le(UInt32(1514))), attribute(25, le(UInt32(1514))),  // MAX_SKBLEN, FLOW_QUANTUM
    ]
}

/// What one tin's counters are set to.
struct TinFigures {
    var bytes: UInt64
    var packets, dropped, ecn, backlog: UInt32
}

/// The whole message of a root `cake` qdisc 7173: on ifindex 4 whose eight
/// tins carry `tins`' figures, with TCA_STATS2's basic and queue counters
/// before the application's and TCA_XSTATS (8) after, as the kernel sends.
func cakeQdiscMessage(tins: [TinFigures]) -> [UInt8] {
    let application = [
        attribute(1, []), attribute(2, le(UInt64(500_000))),  // PAD, CAPACITY_ESTIMATE64
        attribute(3, le(UInt32(4 << 20))), attribute(4, le(UInt32(12_000))),  // MEMORY_LIMIT, _USED
        attribute(5, le(UInt32(14))), attribute(6, le(UInt32(60))), attribute(7, le(UInt32(1514))),  // NETOFF, NETLEN
        attribute(8, le(UInt32(60))), attribute(9, le(UInt32(1514))),  // ADJLEN
        nest(
            10,  // TIN_STATS
            tins.enumerated().map { i, t in
                nest(
                    UInt16(i + 1),
                    tin(
                        bytes: t.bytes, packets: t.packets, dropped: t.dropped, ecn: t.ecn,
                        backlog: t.backlog,
                        rate: 500_000 >> UInt64(i)))
            }),
    ]
    let basic: [UInt8] = le(UInt64(123_456)) + le(UInt32(99)) + le(UInt32(0))  // gnet_stats_basic, padded
    // struct gnet_stats_queue: qlen, backlog, drops, requeues, overlimits.
    let queue: [UInt8] = [UInt32(3), 4_500, 17, 0, 42].flatMap { le($0) }
    let stats2 = nest(
        7, [attribute(1, basic), attribute(3, queue), nest(4, application), attribute(8, le(UInt64(99)))])
    let body: [UInt8] = [
        attribute(1, Array("cake".utf8) + [0]),  // TCA_KIND
        nest(2, [attribute(2, le(UInt64(500_000))), attribute(3, le(UInt32(2)))]),  // TCA_OPTIONS
        stats2,
        attribute(8, application.flatMap { $0 }),  // TCA_XSTATS
    ].flatMap { $0 }
    // struct tcmsg: family, pads, ifindex 4, handle 7173:, parent root, info.
    let tcmsg: [UInt8] = [0, 0, 0, 0] + [UInt32(4), 0x7173_0000, 0xFFFF_FFFF, 1].flatMap { le($0) }
    let length = UInt32(16 + tcmsg.count + body.count)
    // struct nlmsghdr: length, RTM_NEWQDISC (36), NLM_F_MULTI (2), sequence, port.
    let header: [UInt8] = le(length) + le(UInt16(36)) + le(UInt16(2)) + le(UInt32(7)) + le(UInt32(0))
    return header + tcmsg + body
}

@Suite("TrafficShaping: CAKE's tin statistics")
struct CAKEStatsTests {
    static let figures: [TinFigures] = (0..<8).map { (i: Int) -> TinFigures in
        // Tin 5 past 32 bits, so that a 32-bit read would be wrong.
        let bytes: UInt64 = i == 5 ? 0x1_2345_6789 : UInt64(1_000 * (i + 1) + i)
        let backlog: UInt32 = i == 0 ? 3_028 : 0
        return TinFigures(
            bytes: bytes, packets: UInt32(10 * i + 1), dropped: UInt32(i * 3), ecn: UInt32(i * 2 + 1),
            backlog: backlog)
    }

    @Test func eachTinsCountersAreReadFromTheQdiscDump() throws {
        let bytes = cakeQdiscMessage(tins: Self.figures)
        let qdisc = try bytes.withUnsafeBytes { raw in
            try #require(TrafficShaper.qdisc(raw.baseAddress!.assumingMemoryBound(to: nlmsghdr.self)))
        }
        #expect(qdisc.kind == "cake")
        #expect(qdisc.ifindex == 4 && qdisc.handle.rawValue == 0x7173_0000 && qdisc.isRoot)
        #expect(qdisc.statistics?.bytes == 123_456 && qdisc.statistics?.overlimits == 42)
        let tins = try #require(qdisc.cakeTins)
        try #require(tins.count == 8)
        for (i, (tin, want)) in zip(tins, Self.figures).enumerated() {
            #expect(tin.sentBytes == want.bytes, "tin \(i)")
            #expect(tin.sentPackets == want.packets, "tin \(i)")
            #expect(tin.droppedPackets == want.dropped, "tin \(i)")
            #expect(tin.ecnMarkedPackets == want.ecn, "tin \(i)")
            #expect(tin.backlogBytes == want.backlog, "tin \(i)")
            #expect(tin.thresholdRateBytesPerSecond == 500_000 >> UInt64(i), "tin \(i)")
            #expect(tin.wayCollisions == 7 && tin.ackDroppedPackets == 0, "tin \(i)")
        }
        #expect(tins[5].sentBytes == 4_886_718_345)
    }

    @Test func anotherKindHasNoTins() throws {
        var bytes = cakeQdiscMessage(tins: Self.figures)
        // The kind "cake" becomes "fake": the same statistics, not CAKE's.
        bytes[16 + 20 + 4] = UInt8(ascii: "f")
        let qdisc = try bytes.withUnsafeBytes { raw in
            try #require(TrafficShaper.qdisc(raw.baseAddress!.assumingMemoryBound(to: nlmsghdr.self)))
        }
        #expect(qdisc.kind == "fake")
        #expect(qdisc.cakeTins == nil)
        #expect(qdisc.statistics?.bytes == 123_456)
    }
}
