import Foundation
import Testing

@testable import QoSMapCLI

/// Issue 13 items 7 and 13: the remark summary, the untrusted fallback and
/// captures cut off mid-record.
@Suite("qosmap remark summary")
final class RemarkSummaryTests {
    let dir: URL

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-summary-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: dir) }

    func run(_ input: Data, _ extra: [String]) throws -> (
        status: Int32, out: String, err: String, written: [[UInt8]]
    ) {
        let inURL = dir.appendingPathComponent("in-\(UUID()).pcap")
        let outURL = dir.appendingPathComponent("out-\(UUID()).pcap")
        try input.write(to: inURL)
        defer {
            try? FileManager.default.removeItem(at: inURL)
            try? FileManager.default.removeItem(at: outURL)
        }
        let r = qosmapInProcess(
            ["remark", "--in", inURL.path, "--out", outURL.path, "--no-system-tables"] + extra)
        let written = (try? Data(contentsOf: outURL)).map { (try? RemarkFixture.records($0)) ?? [] } ?? []
        return (r.status, r.out, r.err, written)
    }

    /// Untagged EF voice with trust 8021p: counted apart; `--untrusted keep` leaves it.
    @Test func item7_untrustedPacketsAreCountedAndSelectable() throws {
        let ef = RemarkFixture.ethernetIPv4 + RemarkFixture.ipv4(tos: 46 << 2)
        let pcap = RemarkFixture.pcap([ef])
        let fallback = try run(pcap, ["--trust", "8021p"])
        #expect(fallback.status == 0)
        #expect(
            fallback.out.contains(
                "without the trusted 8021p field: 1, classified BE/green (--untrusted keep leaves them unchanged)\n"
            ))
        #expect(fallback.written.first?[15] == 0, "EF becomes DSCP 0 under the BE fallback")
        let kept = try run(pcap, ["--trust", "8021p", "--untrusted", "keep"])
        #expect(kept.status == 0)
        #expect(kept.out.contains("without the trusted 8021p field: 1, left unchanged (--untrusted keep)\n"))
        #expect(kept.out.contains("rewritten 0, unchanged 1,"))
        #expect(kept.written.first == ef)
    }

    /// Non-IP frames and frames of an unknown link type are told apart; fields
    /// are counted; --verbose lists malformed packets.
    @Test func item7_countsPerCauseAndField() throws {
        let frames = RemarkFixture.frames.map(\.bytes)
        let result = try run(RemarkFixture.pcap(frames), ["--verbose"])
        #expect(result.status == 0)
        #expect(result.out.contains("no field to write 1, unsupported link type 0,"))
        #expect(result.out.contains("rewritten fields: dscp 3, 8021p 0, exp 0\n"))
        #expect(result.out.contains("malformed packets (1-based): 5\n"))
        var other = RemarkFixture.pcap(frames)
        other[20] = 147  // LINKTYPE_USER0
        let unknown = try run(other, [])
        #expect(unknown.out.contains("no field to write 0, unsupported link type 6,"), "\(unknown.out)")
    }

    /// A stray byte after the last record, or a record cut short: exit 65 and
    /// nothing written (issue 25); --keep-partial writes every complete record.
    @Test(arguments: [1, -3])
    func item13_aCutOffCaptureKeepsTheCompleteRecords(cut: Int) throws {
        let frames = RemarkFixture.frames.map(\.bytes)
        var pcap = RemarkFixture.pcap(frames)
        if cut > 0 {
            pcap.append(contentsOf: [UInt8](repeating: 0xAB, count: cut))
        } else {
            pcap.removeLast(-cut)
        }
        let complete = cut > 0 ? frames.count : frames.count - 1
        let result = try run(pcap, [])
        #expect(result.status == 65)
        #expect(result.written.isEmpty)
        #expect(
            result.err.contains(
                "capture is cut off after \(complete) complete packets: truncated dump file"),
            "\(result.err)")
        let kept = try run(pcap, ["--keep-partial"])
        #expect(kept.status == 0, "\(kept.err)")
        #expect(kept.written.count == complete)
        #expect(kept.written.first?[15] == 1, "the first frame is remarked (LE to DF, ECN kept)")
    }

    /// A `tcpdump -s 96` capture: a TCP/IPv4 and an IPv6 packet cut after their
    /// headers are remarked, and counted as snapped, not as malformed tails.
    @Test func item12_snappedFramesAreRemarked() throws {
        var v4 = RemarkFixture.ethernetIPv4 + RemarkFixture.ipv4(tos: 1 << 2, totalLength: 1500)
        v4 += [UInt8](repeating: 0, count: 96 - v4.count)
        let v6 = RemarkFixture.ethernetIPv6 + RemarkFixture.ipv6(tc: 8 << 2)
        var v6Snapped = v6
        v6Snapped[14 + 5] = 200  // payload length beyond the record
        var pcap = RemarkFixture.pcap([v4, v6Snapped])
        // The records' original lengths: 1514 and 254 bytes on the wire.
        let first = 24
        let second = first + 16 + v4.count
        for (at, wire) in [(first, 1514), (second, 254)] {
            withUnsafeBytes(of: UInt32(wire).littleEndian) {
                pcap.replaceSubrange((at + 12)..<(at + 16), with: $0)
            }
        }
        let result = try run(pcap, [])
        #expect(result.status == 0, "\(result.err)")
        #expect(result.out.contains("rewritten 2,"), "\(result.out)")
        #expect(result.out.contains("malformed tail 0, snapped 2\n"), "\(result.out)")
        #expect(result.written.first?[15] == 0, "LE to DF")
        #expect(internetChecksum(result.written.first![14..<34]) == 0)
        #expect(result.written.last.map { ($0[14] & 0x0F) << 4 | $0[15] >> 4 } == 10 << 2, "CS1 to AF11")
    }

    /// A nanosecond pcap comes out as a nanosecond pcap with the same timestamps.
    @Test func item14_nanosecondPcapStaysNanosecond() throws {
        let frames = RemarkFixture.frames.map(\.bytes)
        var pcap = RemarkFixture.pcap(frames)
        withUnsafeBytes(of: UInt32(0xA1B2_3C4D).littleEndian) { pcap.replaceSubrange(0..<4, with: $0) }
        // Nanosecond fractions that microseconds cannot hold.
        var at = 24
        for (i, frame) in frames.enumerated() {
            withUnsafeBytes(of: UInt32(123_456_789 + i).littleEndian) {
                pcap.replaceSubrange((at + 4)..<(at + 8), with: $0)
            }
            at += 16 + frame.count
        }
        let inURL = dir.appendingPathComponent("nano.pcap")
        let outURL = dir.appendingPathComponent("nano-out.pcap")
        try pcap.write(to: inURL)
        let result = qosmapInProcess([
            "remark", "--in", inURL.path, "--out", outURL.path, "--no-system-tables",
        ])
        #expect(result.status == 0, "\(result.err)")
        let out = [UInt8](try Data(contentsOf: outURL))
        #expect(Array(out[0..<4]) == [0x4D, 0x3C, 0xB2, 0xA1], "nanosecond magic, little-endian")
        at = 24
        for (i, frame) in frames.enumerated() {
            let fraction = out[(at + 4)..<(at + 8)].reversed().reduce(0) { $0 << 8 | Int($1) }
            #expect(fraction == 123_456_789 + i)
            at += 16 + frame.count
        }
    }

    /// QinQ: `--tag` picks the tag 802.1p trust reads and rewrite writes. In
    /// the default domain PCP 4 is AF4 and PCP 2 AF2; 5p3d writes them 5 and 3.
    @Test(
        arguments: [("all", 5, 5), ("outer", 5, 2), ("inner", 4, 3), (nil, 5, 5)] as [(String?, UInt8, UInt8)]
    )
    func item6_tagChoosesTheQinQTag(tag: String?, sPCP: UInt8, cPCP: UInt8) throws {
        let frame: [UInt8] =
            [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xA8, 4 << 5, 10, 0x81, 0x00, 2 << 5, 20, 0x08, 0x00]
            + RemarkFixture.ipv4(tos: 0)
        let result = try run(
            RemarkFixture.pcap([frame]),
            ["--trust", "8021p", "--rewrite", "8021p", "--egress-domain", "5p3d"]
                + (tag.map { ["--tag", $0] } ?? []))
        #expect(result.status == 0, "\(result.err)")
        let out = try #require(result.written.first)
        #expect(out[14] >> 5 == sPCP, "S-tag PCP")
        #expect(out[18] >> 5 == cPCP, "C-tag PCP")
        #expect(out[15] == 10 && out[19] == 20, "VIDs kept")
    }

    /// Linux cooked captures (SLL, SLL2) and loopback (NULL, LOOP) are remarked:
    /// LE becomes DF over IPv4, CS1 becomes AF11 over IPv6, ECN kept.
    @Test(
        arguments: [
            (113, [0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00] as [UInt8], 4),
            (276, [0x86, 0xDD, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0], 6),
            (0, [2, 0, 0, 0], 4),
            (108, [0, 0, 0, 24], 6),
        ] as [(Int, [UInt8], Int)])
    func item16_cookedAndLoopbackCapturesAreRemarked(linkType: Int, header: [UInt8], version: Int) throws {
        let ip = version == 4 ? RemarkFixture.ipv4(tos: 1 << 2 | 1) : RemarkFixture.ipv6(tc: 8 << 2 | 2)
        var pcap = RemarkFixture.pcap([header + ip])
        withUnsafeBytes(of: UInt32(linkType).littleEndian) { pcap.replaceSubrange(20..<24, with: $0) }
        let result = try run(pcap, [])
        #expect(result.status == 0, "\(result.err)")
        #expect(result.out.contains("rewritten 1,"), "\(result.out)")
        let out = try #require(result.written.first)
        #expect(Array(out.prefix(header.count)) == header)
        let l3 = header.count
        if version == 4 {
            #expect(out[l3 + 1] == 0 << 2 | 1)
            #expect(internetChecksum(out[l3..<(l3 + 20)]) == 0)
        } else {
            #expect((out[l3] & 0x0F) << 4 | out[l3 + 1] >> 4 == 10 << 2 | 2)
        }
    }
}
