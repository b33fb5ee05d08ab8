import ArgumentParser
import Foundation
import QoSMapCore
import Testing

@testable import QoSMapCLI

/// Parses and runs a ``TextCommand`` in this process, as `qosmap ARGS` would,
/// but returning its output: a parse or run error gives the exit status and
/// the line `qosmap` would print.
func qosmapInProcess(_ args: [String]) -> (status: Int32, out: String, err: String) {
    do {
        let command = try QoSMapCommand.parse(args)
        guard let text = command as? any TextCommand else {
            return (-1, "", "not a TextCommand: \(type(of: command))")
        }
        return (0, try text.standardOutput(), "")
    } catch {
        let report = QoSMapCommand.report(for: error, json: args.contains("--json"))
        return report.status == 0 ? (0, report.text + "\n", "") : (report.status, "", report.text + "\n")
    }
}

/// Compares `actual` with the golden file `name`; with `QOSMAP_UPDATE_GOLDEN=1`
/// in the environment it writes the file instead (then review `git diff`).
func expectGolden(_ actual: String, _ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws
{
    let url = goldenDirectory.appendingPathComponent(name)
    if ProcessInfo.processInfo.environment["QOSMAP_UPDATE_GOLDEN"] == "1" {
        try actual.write(to: url, atomically: true, encoding: .utf8)
        return
    }
    let expected = try String(contentsOf: url, encoding: .utf8)
    #expect(actual == expected, "golden \(name) differs", sourceLocation: sourceLocation)
}

/// `qosmap export nft` and `qosmap remark`, run in-process against golden files.
@Suite("qosmap export and remark in-process")
struct InProcessTests {
    @Test(arguments: [
        ("export-nft-default.nft", ["export", "nft", "--no-system-tables"]),
        (
            "export-nft-5p3d-mask.nft",
            [
                "export", "nft", "--domain", "5p3d", "--mask", "0x3f00", "--table", "qosmap_5p3d",
                "--priority=-100",
                "--no-system-tables",
            ]
        ),
    ])
    func exportGolden(file: String, args: [String]) throws {
        let result = qosmapInProcess(args)
        #expect(result.status == 0)
        #expect(result.err == "")
        try expectGolden(result.out, file)
    }

    @Test(arguments: [
        (
            ["export", "json"],
            "qosmap: error: invalid format 'json'; allowed: nft, tc, sonic, junos, iosxr, linux\n"
        ),
        (
            ["export", "nft", "--mask", "0x3"],
            "qosmap: error: invalid mark mask 0x3; allowed: one run of 6 to 32 contiguous bits, e.g. 0x3f or 0xfc00\n"
        ),
        (
            ["export", "nft", "--table", "q-s"],
            "qosmap: error: invalid --table 'q-s'; allowed: qosmap, or qosmap followed by letters, digits and _ (the tool replaces only tables of its own)\n"
        ),
        (
            ["export", "nft", "--domain", "gold", "--no-system-tables"],
            "qosmap: error: unknown domain 'gold'; known domains: default, 5p3d, edge-cake\n"
        ),
    ])
    func exportUsageErrors(args: [String], message: String) {
        let result = qosmapInProcess(args)
        #expect(result.status == 64)
        #expect(result.out == "")
        #expect(result.err == message)
    }

    /// Bad `--trust` and `--rewrite` tokens fail at parse time, one line naming
    /// the token and the allowed values.
    @Test(arguments: [
        (
            ["--trust", "tos"],
            "qosmap: error: The value 'tos' is invalid for '--trust <trust>'. Please provide one of 'none', 'dscp', 'ip-precedence', '8021p' or 'exp'.\n"
        ),
        (
            ["--rewrite", "dscp,vlan"],
            "qosmap: error: The value 'dscp,vlan' is invalid for '--rewrite <rewrite>': invalid rewrite field 'vlan'; allowed: dscp, 8021p, exp, all\n"
        ),
        (
            ["--rewrite", "ip-precedence"],
            "qosmap: error: The value 'ip-precedence' is invalid for '--rewrite <rewrite>': invalid rewrite field 'ip-precedence'; allowed: dscp, 8021p, exp, all\n"
        ),
    ])
    func remarkUsageErrors(extra: [String], message: String) {
        let result = qosmapInProcess(
            ["remark", "--in", "/nonexistent/in.pcap", "--out", "/tmp/x.pcap"] + extra)
        #expect(result.status == 64)
        #expect(result.err == message)
    }

    /// Six frames (rewritten, unchanged, remarked with a malformed tail,
    /// malformed, unsupported) through `qosmap remark`: the summary and every
    /// output byte are pinned by golden files, and the rewrites checked by hand.
    @Test(arguments: [false, true])
    func remarkGolden(json: Bool) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "qosmap-remark-\(getpid())-\(json)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("in.pcap")
        let output = dir.appendingPathComponent("out.pcap")
        let frames = RemarkFixture.frames
        try RemarkFixture.pcap(frames.map(\.bytes)).write(to: input)

        let result = qosmapInProcess(
            ["remark", "--in", input.path, "--out", output.path, "--no-system-tables"]
                + (json ? ["--json"] : []))
        #expect(result.status == 0)
        #expect(result.err == "")
        try expectGolden(result.out, json ? "remark-default.json" : "remark-default.txt")

        let written = try RemarkFixture.records(Data(contentsOf: output))
        #expect(written.count == frames.count)
        try expectGolden(written.map(RemarkFixture.hexLine).joined(), "remark-default.pcap.txt")
        for (frame, out) in zip(frames, written) {
            #expect(out.count == frame.bytes.count, "\(frame.name)")
            guard let newTOS = frame.newTOS else {
                #expect(out == frame.bytes, "\(frame.name) must be copied untouched")
                continue
            }
            let isIPv4 = out[14] >> 4 == 4
            let tos = isIPv4 ? out[15] : (out[14] & 0x0F) << 4 | out[15] >> 4
            #expect(tos == newTOS, "\(frame.name)")
            // Only the TOS or Traffic Class and, for IPv4, the header checksum may change.
            let changed = out.indices.filter { out[$0] != frame.bytes[$0] }
            let allowed: Set = isIPv4 ? [15, 24, 25] : [14, 15]
            #expect(changed.allSatisfy(allowed.contains), "\(frame.name): \(changed)")
            if isIPv4 {
                #expect(internetChecksum(out[14..<34]) == 0, "\(frame.name): IPv4 header checksum")
            }
        }
    }
}

/// Ethernet frames for the remark test, with the TOS the default domain
/// writes (nil when the frame must come out unchanged).
enum RemarkFixture {
    struct Frame {
        var name: String
        var bytes: [UInt8]
        var newTOS: UInt8?
    }

    static let ethernetIPv4: [UInt8] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00]
    static let ethernetIPv6: [UInt8] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xDD]

    static var frames: [Frame] {
        [
            // LE (1) is BE green, written DF; ECN 01 is kept.
            Frame(name: "ipv4 LE", bytes: ethernetIPv4 + ipv4(tos: 1 << 2 | 1), newTOS: 0 << 2 | 1),
            // EF stays EF.
            Frame(name: "ipv4 EF", bytes: ethernetIPv4 + ipv4(tos: 46 << 2), newTOS: 46 << 2),
            // CS1 is AF1 green, written AF11 (10); ECN 10 is kept.
            Frame(name: "ipv6 CS1", bytes: ethernetIPv6 + ipv6(tc: 8 << 2 | 2), newTOS: 10 << 2 | 2),
            // Total length 200 beyond the buffer: a malformed tail, still remarked.
            Frame(name: "ipv4 long", bytes: ethernetIPv4 + ipv4(tos: 1 << 2, totalLength: 200), newTOS: 0),
            // The fixed header is cut short: malformed, untouched.
            Frame(name: "ipv4 cut", bytes: ethernetIPv4 + Array(ipv4(tos: 1 << 2).prefix(12)), newTOS: nil),
            // ARP carries no field to write: unsupported, untouched.
            Frame(
                name: "arp",
                bytes: [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x06]
                    + [
                        0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 198, 18, 0, 1, 0, 0, 0, 0, 0, 0, 198, 18, 0,
                        2,
                    ],
                newTOS: nil),
        ]
    }

    /// An IPv4 header plus 8 payload bytes with a valid header checksum;
    /// `totalLength` overrides the length field (before the checksum).
    static func ipv4(tos: UInt8, totalLength: Int? = nil) -> [UInt8] {
        let total = totalLength ?? 28
        var h: [UInt8] = [
            0x45, tos, UInt8(total >> 8), UInt8(total & 0xFF), 0x12, 0x34, 0x40, 0,
            64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
        ]
        let c = internetChecksum(h[...])
        h[10] = UInt8(c >> 8)
        h[11] = UInt8(c & 0xFF)
        return h + Array("payload!".utf8)
    }

    /// An IPv6 header with traffic class `tc` and a 4-byte UDP-numbered payload.
    static func ipv6(tc: UInt8) -> [UInt8] {
        var h: [UInt8] = [0x60 | tc >> 4, (tc & 0x0F) << 4 | 0x0A, 0xBC, 0xDE, 0, 4, 17, 64]
        h += [0xFD] + [UInt8](repeating: 0, count: 14) + [1]
        h += [0xFD] + [UInt8](repeating: 0, count: 14) + [2]
        return h + [1, 2, 3, 4]
    }

    /// A little-endian microsecond pcap file, LINKTYPE_ETHERNET.
    static func pcap(_ packets: [[UInt8]]) -> Data {
        var d = Data()
        func le32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { d.append(contentsOf: $0) } }
        func le16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { d.append(contentsOf: $0) } }
        le32(0xA1B2_C3D4)
        le16(2)
        le16(4)
        le32(0)
        le32(0)
        le32(65535)
        le32(1)
        for (i, p) in packets.enumerated() {
            le32(1_700_000_000 + UInt32(i))
            le32(0)
            le32(UInt32(p.count))
            le32(UInt32(p.count))
            d.append(contentsOf: p)
        }
        return d
    }

    /// The packets of a pcap file in host (little-endian) byte order.
    static func records(_ d: Data) throws -> [[UInt8]] {
        let bytes = [UInt8](d)
        func le32(_ at: Int) -> Int {
            Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24
        }
        try #require(bytes.count >= 24 && le32(0) == 0xA1B2_C3D4)
        var out: [[UInt8]] = []
        var at = 24
        while at + 16 <= bytes.count {
            let length = le32(at + 8)
            try #require(at + 16 + length <= bytes.count)
            out.append(Array(bytes[(at + 16)..<(at + 16 + length)]))
            at += 16 + length
        }
        return out
    }

    static func hexLine(_ p: [UInt8]) -> String {
        p.map { String(format: "%02x", $0) }.joined() + "\n"
    }
}

/// The RFC 1071 checksum of `bytes`.
func internetChecksum(_ bytes: ArraySlice<UInt8>) -> UInt16 {
    var sum: UInt32 = 0
    var i = bytes.startIndex
    while i + 1 < bytes.endIndex {
        sum += UInt32(bytes[i]) << 8 | UInt32(bytes[i + 1])
        i += 2
    }
    if i < bytes.endIndex { sum += UInt32(bytes[i]) << 8 }
    while sum >> 16 != 0 { sum = (sum & 0xFFFF) + (sum >> 16) }
    return ~UInt16(sum)
}

/// The vocabulary types parse through ArgumentParser (conformances in QoSMapCLI).
struct VocabularyArgumentTests {
    struct Probe: ParsableCommand {
        @Option var serviceClass: ServiceClass = .be
        @Option var color: Color = .green
        @Option var field: Field = .dscp
        @Option var trust: TrustMode = .dscp
    }

    @Test func namesAndAliasesParseCaseInsensitively() throws {
        let p = try Probe.parse([
            "--service-class", "af4", "--color", "Yellow", "--field", "pcp", "--trust", "prec",
        ])
        #expect(p.serviceClass == .af4)
        #expect(p.color == .yellow)
        #expect(p.field == .dot1p)
        #expect(p.trust == .ipPrecedence)
        #expect(try Probe.parse(["--trust", "none"]).trust == TrustMode.none)
    }

    /// Eight classes are more than ArgumentParser lists on one line: the
    /// report joins them, so the error stays one line.
    @Test func aLongAllowedListStaysOneLine() {
        do {
            _ = try Probe.parse(["--service-class", "gold"])
            Issue.record("'gold' parsed")
        } catch {
            let report = QoSMapCommand.report(for: error)
            #expect(report.status == 64)
            #expect(
                report.text
                    == "qosmap: error: The value 'gold' is invalid for '--service-class <service-class>'. Please provide one of the following: BE, AF1, AF2, AF3, AF4, EF, CS6, CS7"
            )
        }
    }
}
