import Foundation
import Testing

/// Issue 25 item 3: a write error names the path and the cause (strerror)
/// and exits 74 (EX_IOERR); the old output is kept and no temporary file is
/// left. Every command that writes a file: `remark --out`, `import -o`, and
/// standard output redirected to a file (every command that prints, the
/// completion scripts included).
@Suite("qosmap write errors")
final class WriteErrorTests {
    let dir: URL

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-full-\(UUID())")
        try FileManager.default.createDirectory(
            at: dir.appendingPathComponent("mnt"), withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: dir) }

    static var binary: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("qosmap").path
    }

    /// Runs qosmap in a private mount namespace with a 64 kB tmpfs at `mnt`
    /// holding `out` ("old output") and `fill` bytes of filler; `stdoutFile`
    /// redirects qosmap's standard output into the tmpfs. Returns the status,
    /// standard error, the files left in the tmpfs and `out`'s text.
    func onFullTmpfs(_ args: [String], fill: Int, stdoutFile: Bool = false) throws -> (
        status: Int32, err: String, files: [String], out: String
    ) {
        let mnt = dir.appendingPathComponent("mnt").path
        let script = """
            set -u
            M="$1"; E="$2"; shift 2
            mount -t tmpfs -o size=64k qosmap-full "$M" || exit 99
            printf 'old output\\n' > "$M/out"
            if [ \(fill) -gt 0 ]; then head -c \(fill) /dev/zero > "$M/filler"; fi
            if [ \(stdoutFile ? 1 : 0) = 1 ]; then "$@" > "$M/stdout" 2> "$E/err"; else "$@" > /dev/null 2> "$E/err"; fi
            echo $? > "$E/status"
            ls -A "$M" > "$E/files"
            cat "$M/out" > "$E/out"
            """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        p.arguments = ["-m", "sh", "-c", script, "sh", mnt, dir.path, Self.binary] + args
        p.environment = ProcessInfo.processInfo.environment.merging([
            "QOSMAP_DOMAINS_DIR": "/nonexistent/qosmap-test"
        ]) { $1 }
        try p.run()
        p.waitUntilExit()
        try #require(p.terminationStatus == 0, "the tmpfs could not be mounted")
        func read(_ name: String) throws -> String {
            try String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8)
        }
        return (
            Int32(try read("status").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1, try read("err"),
            try read("files").split(separator: "\n").map(String.init).sorted(), try read("out")
        )
    }

    /// Root only (mount needs CAP_SYS_ADMIN); without root the tmpfs cannot be mounted.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare")))
    func remarkOnAFullDisk() throws {
        // 2,000 frames, about 180 kB: more than the tmpfs holds.
        let frames = Array(repeating: RemarkFixture.frames.map(\.bytes), count: 400).flatMap { $0 }
        let input = dir.appendingPathComponent("big.pcap")
        try RemarkFixture.pcap(frames).write(to: input)
        let mnt = dir.appendingPathComponent("mnt").path
        let r = try onFullTmpfs(
            ["remark", "--in", input.path, "--out", mnt + "/out", "--no-system-tables"], fill: 0)
        #expect(r.status == 74, "\(r.err)")
        #expect(r.err == "qosmap: error: \(mnt)/out: cannot write capture: No space left on device\n")
        #expect(r.files == ["out"], "no temporary file left")
        #expect(r.out == "old output\n", "the old OUT is kept")
    }

    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare")))
    func importOnAFullDisk() throws {
        let leaf = dir.appendingPathComponent("leaf.json")
        let exported = try qosmap(["export", "sonic", "--domain", "5p3d", "--no-system-tables"])
        try #require(exported.status == 0)
        try Data(exported.out.utf8).write(to: leaf)
        let mnt = dir.appendingPathComponent("mnt").path
        let r = try onFullTmpfs(
            ["import", "sonic", leaf.path, "-o", mnt + "/out", "--no-system-tables"], fill: 60 * 1024)
        #expect(r.status == 74, "\(r.err)")
        #expect(
            r.err.hasSuffix("qosmap: error: \(mnt)/out: cannot write: No space left on device\n"), "\(r.err)")
        #expect(r.files == ["filler", "out"], "no temporary file left")
        #expect(r.out == "old output\n", "the old OUT is kept")
    }

    /// `qosmap export nft > FILE` on a full disk.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare")))
    func standardOutputOnAFullDisk() throws {
        let r = try onFullTmpfs(["export", "nft", "--no-system-tables"], fill: 60 * 1024, stdoutFile: true)
        #expect(r.status == 74, "\(r.err)")
        #expect(r.err == "qosmap: error: standard output: cannot write: No space left on device\n")
    }

    /// /dev/full needs no root: every write to it fails with ENOSPC.
    @Test(arguments: [
        ["show", "default", "--no-system-tables"],
        ["export", "nft", "--no-system-tables"],
        ["lookup", "dscp", "46", "--json"],
        ["--generate-completion-script", "bash"],
        ["remark", "--in", "IN", "--out", "/dev/full", "--no-system-tables"],
        ["remark", "--in", "IN", "--out", "-", "--no-system-tables"],
    ])
    func devFull(args: [String]) throws {
        let input = dir.appendingPathComponent("in.pcap")
        try RemarkFixture.pcap(RemarkFixture.frames.map(\.bytes)).write(to: input)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.binary)
        p.arguments = args.map { $0 == "IN" ? input.path : $0 }
        p.environment = ["QOSMAP_DOMAINS_DIR": "/nonexistent/qosmap-test"]
        p.standardOutput = FileHandle(forWritingAtPath: "/dev/full")
        let err = Pipe()
        p.standardError = err
        try p.run()
        let e = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 74, "\(e)")
        let target = args.contains("/dev/full") ? "/dev/full" : "standard output"
        let what = args.contains("remark") ? "cannot write capture" : "cannot write"
        let line = "\(target): \(what): No space left on device"
        // With --json the error is one JSON object with the same text.
        #expect(
            e
                == (args.contains("--json")
                    ? "{\"allowed\":[],\"error\":\"\(line)\",\"token\":null}\n" : "qosmap: error: \(line)\n"))
    }
}
