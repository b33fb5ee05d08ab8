import Foundation
import Testing

/// Issue 13 item 1: `remark --out` never replaces what is not a regular file.
@Suite("qosmap remark --out")
struct RemarkOutputTests {
    func tempDir(_ tag: String) throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "qosmap-out-\(tag)-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// A symlink (as /dev/stdout is) is written through, not renamed over.
    @Test func item1_aSymlinkIsWrittenThroughNotReplaced() throws {
        let dir = try tempDir("link")
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("in.pcap")
        try RemarkFixture.pcap(RemarkFixture.frames.map(\.bytes)).write(to: input)
        let target = dir.appendingPathComponent("target.pcap")
        try Data().write(to: target)
        let link = dir.appendingPathComponent("out.link")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)

        let result = qosmapInProcess(["remark", "--in", input.path, "--out", link.path, "--no-system-tables"])
        #expect(result.status == 0, "\(result.err)")
        let attributes = try FileManager.default.attributesOfItem(atPath: link.path)
        #expect(attributes[.type] as? FileAttributeType == .typeSymbolicLink)
        let written = try RemarkFixture.records(Data(contentsOf: target))
        #expect(written.count == RemarkFixture.frames.count)
        // No temporary file is left behind.
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == [
                "in.pcap", "out.link", "target.pcap",
            ])
    }

    /// `--out -` writes the capture to standard output and the summary to standard error.
    @Test func item1_outDashIsStandardOutput() throws {
        let dir = try tempDir("dash")
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("in.pcap")
        try RemarkFixture.pcap(RemarkFixture.frames.map(\.bytes)).write(to: input)
        let result = try qosmapBytes(["remark", "--in", input.path, "--out", "-"])
        #expect(result.status == 0, "\(result.err)")
        #expect(result.err.hasPrefix("6 packets (EN10MB)"))
        let written = try RemarkFixture.records(result.out)
        #expect(written.count == RemarkFixture.frames.count)
    }

    /// `--out /dev/stdout` with standard output redirected to a file: the file
    /// holds the capture alone (the summary goes to stderr) and /dev/stdout
    /// is still the symlink it was.
    @Test func item1_devStdoutIsWrittenNotReplaced() throws {
        let dir = try tempDir("devstdout")
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("in.pcap")
        let redirected = dir.appendingPathComponent("redirected.pcap")
        try RemarkFixture.pcap(RemarkFixture.frames.map(\.bytes)).write(to: input)
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let result = try qosmap(
            [
                "-c", "exec \"$0\" remark --in \"$1\" --out /dev/stdout > \"$2\"",
                bundle.appendingPathComponent("qosmap").path, input.path, redirected.path,
            ], executable: "/bin/sh")
        #expect(result.status == 0, "\(result.err)")
        #expect(result.err.hasPrefix("6 packets (EN10MB)"))
        #expect(try RemarkFixture.records(Data(contentsOf: redirected)).count == RemarkFixture.frames.count)
        let attributes = try FileManager.default.attributesOfItem(atPath: "/dev/stdout")
        #expect(attributes[.type] as? FileAttributeType == .typeSymbolicLink)
    }

    /// `--out` naming the `--in` file (by another spelling too) is refused, exit 64.
    @Test func item1_outEqualToInIsRefused() throws {
        let dir = try tempDir("same")
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("in.pcap")
        let bytes = RemarkFixture.pcap(RemarkFixture.frames.map(\.bytes))
        try bytes.write(to: input)
        for out in [input.path, dir.path + "/./in.pcap"] {
            let result = qosmapInProcess(["remark", "--in", input.path, "--out", out, "--no-system-tables"])
            #expect(result.status == 64)
            #expect(
                result.err
                    == "qosmap: error: --out '\(out)' is the --in file; allowed: another path (the input is read while the output is written)\n"
            )
        }
        #expect(try Data(contentsOf: input) == bytes)
    }
}

/// Runs the built `qosmap` binary like ``qosmap(_:environment:)`` but keeps
/// standard output as bytes (a capture written to `-`).
func qosmapBytes(_ args: [String], environment: [String: String] = [:]) throws -> (
    status: Int32, out: Data, err: String
) {
    let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let process = Process()
    process.executableURL = bundle.appendingPathComponent("qosmap")
    process.arguments = args
    process.environment = ProcessInfo.processInfo.environment.merging(
        ["QOSMAP_DOMAINS_DIR": "/nonexistent/qosmap-test"].merging(environment) { $1 }
    ) { $1 }
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, o, String(decoding: e, as: UTF8.self))
}

/// Issue 13 item 4: when libpcap cannot be loaded, `remark` exits 69 and
/// names the library, not the capture. libpcap is hidden by binding /dev/null
/// over it in a private mount namespace (root only; skipped otherwise).
@Test(.enabled(if: getuid() == 0 && FileManager.default.fileExists(atPath: "/usr/bin/unshare")))
func item4_remarkWithoutLibpcapExits69() throws {
    let libdir = "/usr/lib/x86_64-linux-gnu"
    let libs = try FileManager.default.contentsOfDirectory(atPath: libdir).filter {
        $0.hasPrefix("libpcap.so")
    }
    try #require(!libs.isEmpty)
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-nopcap-\(UUID())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let input = dir.appendingPathComponent("in.pcap")
    try RemarkFixture.pcap(RemarkFixture.frames.map(\.bytes)).write(to: input)
    let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let binds = libs.map { "mount --bind /dev/null \(libdir)/\($0)" }.joined(separator: " && ")
    let result = try qosmap(
        [
            "-m", "sh", "-c", "\(binds) && exec \"$0\" \"$@\"", bundle.appendingPathComponent("qosmap").path,
            "remark", "--in", input.path, "--out", dir.appendingPathComponent("out.pcap").path,
        ], executable: "/usr/bin/unshare")
    #expect(result.status == 69, "\(result.err)")
    #expect(result.err.hasPrefix("qosmap: error: cannot load libpcap ("), "\(result.err)")
    #expect(!result.err.contains(input.path))
}
