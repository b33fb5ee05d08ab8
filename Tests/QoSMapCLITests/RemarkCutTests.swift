import Foundation
import Testing

/// Issue 25 item 1: a capture that cannot be read to its end is a failure:
/// exit 65 and OUT left as it was; `--keep-partial` writes the complete
/// packets before the cut, warns, and exits 0.
///
/// `Captures/lo-udp.pcap` is a real capture: `tcpdump -i lo -c 16` of UDP over
/// IPv4 (TOS 0x05, LE) and IPv6 (traffic class 0x22, CS1) in a private network
/// namespace; `lo-udp.pcapng` is `editcap -F pcapng` of it. The tests cut them
/// with `head -c`.
@Suite("qosmap remark: a capture cut off mid-record")
final class RemarkCutTests {
    let dir: URL
    static let captures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Captures")

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-cut-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: dir) }

    /// `head -c BYTES FILE > OUT`.
    func head(_ file: URL, bytes: Int, to out: URL) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/head")
        p.arguments = ["-c", "\(bytes)", file.path]
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        p.standardOutput = try FileHandle(forWritingTo: out)
        try p.run()
        p.waitUntilExit()
        try #require(p.terminationStatus == 0)
    }

    /// The records `remark` writes for the whole capture.
    func remarkedWhole(_ name: String) throws -> [[UInt8]] {
        let out = dir.appendingPathComponent("whole-\(name).pcap")
        let r = try qosmap([
            "remark", "--in", Self.captures.appendingPathComponent(name).path, "--out", out.path,
            "--no-system-tables",
        ])
        try #require(r.status == 0, "\(r.err)")
        return try RemarkFixture.records(Data(contentsOf: out))
    }

    /// A real capture cut 50 bytes before its end (inside the last record):
    /// without --keep-partial, exit 65, OUT untouched, no temporary file, no
    /// summary; with it, the 15 complete records as the whole capture's
    /// remark has them, a warning naming the cut and the count, exit 0, and
    /// `truncated` in the JSON.
    @Test(arguments: ["lo-udp.pcap", "lo-udp.pcapng"])
    func cutCaptureFailsUnlessKeepPartial(name: String) throws {
        let whole = try remarkedWhole(name)
        try #require(whole.count == 16)
        let source = Self.captures.appendingPathComponent(name)
        let size = try #require(
            try FileManager.default.attributesOfItem(atPath: source.path)[.size] as? Int)
        let cut = dir.appendingPathComponent("cut-\(name)")
        try head(source, bytes: size - 50, to: cut)
        let out = dir.appendingPathComponent("out.pcap")
        let old = Data("the previous output\n".utf8)
        try old.write(to: out)

        let failed = try qosmap(["remark", "--in", cut.path, "--out", out.path, "--no-system-tables"])
        #expect(failed.status == 65, "\(failed.err)")
        #expect(failed.out == "", "no summary of an output that was not written")
        #expect(
            failed.err.contains("\(cut.path): capture is cut off after 15 complete packets: truncated"),
            "\(failed.err)")
        #expect(failed.err.contains("--keep-partial"), "\(failed.err)")
        #expect(failed.err.split(separator: "\n").count == 1, "\(failed.err)")
        #expect(try Data(contentsOf: out) == old, "OUT is left as it was")
        let left = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        #expect(left == ["cut-\(name)", "out.pcap", "whole-\(name).pcap"], "no temporary file left")

        let kept = try qosmap([
            "remark", "--in", cut.path, "--out", out.path, "--no-system-tables", "--keep-partial",
        ])
        #expect(kept.status == 0, "\(kept.err)")
        #expect(
            kept.err.hasPrefix(
                "qosmap: warning: \(cut.path): capture is cut off after 15 complete packets: truncated"),
            "\(kept.err)")
        #expect(kept.out.hasPrefix("15 packets (EN10MB)"), "\(kept.out)")
        #expect(try RemarkFixture.records(Data(contentsOf: out)) == Array(whole.prefix(15)))

        let json = try qosmap([
            "remark", "--in", cut.path, "--out", out.path, "--no-system-tables", "--keep-partial", "--json",
        ])
        #expect(json.status == 0, "\(json.err)")
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any])
        #expect(object["packets"] as? Int == 15)
        #expect((object["truncated"] as? String)?.contains("truncated") == true, "\(json.out)")
    }

    /// Any other read error after the first packet follows the same rule: the
    /// fourth record's captured length made impossible (libpcap refuses it).
    @Test func aBadRecordAfterTheFirstPacketFollowsTheSameRule() throws {
        var bytes = [UInt8](try Data(contentsOf: Self.captures.appendingPathComponent("lo-udp.pcap")))
        var at = 24
        for _ in 0..<3 {
            at += 16 + (Int(bytes[at + 8]) | Int(bytes[at + 9]) << 8 | Int(bytes[at + 10]) << 16)
        }
        bytes.replaceSubrange((at + 8)..<(at + 12), with: [0xFF, 0xFF, 0xFF, 0x7F])
        let bad = dir.appendingPathComponent("bad.pcap")
        try Data(bytes).write(to: bad)
        let out = dir.appendingPathComponent("out.pcap")
        let failed = try qosmap(["remark", "--in", bad.path, "--out", out.path, "--no-system-tables"])
        #expect(failed.status == 65, "\(failed.err)")
        #expect(failed.err.contains("after 3 complete packets"), "\(failed.err)")
        #expect(!FileManager.default.fileExists(atPath: out.path))
        let kept = try qosmap([
            "remark", "--in", bad.path, "--out", out.path, "--no-system-tables", "--keep-partial",
        ])
        #expect(kept.status == 0, "\(kept.err)")
        #expect(kept.err.hasPrefix("qosmap: warning: \(bad.path): "), "\(kept.err)")
        #expect(kept.err.contains("after 3 complete packets"), "\(kept.err)")
        #expect(try RemarkFixture.records(Data(contentsOf: out)).count == 3)
    }
}
