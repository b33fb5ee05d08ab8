import Foundation
import Testing

/// Issue 13 item 19: the man page (tools/man) has EXIT STATUS, FILES, EXAMPLES
/// and the table-file format, and mandoc finds no warning in it.
@Suite("qosmap man page")
struct ManPageTests {
    let page: String

    init() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../docs/man/qosmap.1").standardized
        page = try String(contentsOf: url, encoding: .utf8)
    }

    @Test func item19_sections() {
        for section in [
            ".Sh \"TABLE FILES\"", ".Sh FILES", ".Sh \"EXIT STATUS\"", ".Sh EXAMPLES", ".Sh ENVIRONMENT",
        ] {
            #expect(page.contains("\n\(section)\n"), "\(section)")
        }
        for code in ["0", "64", "65", "69"] { #expect(page.contains("\n.It \(code)\n"), "exit \(code)") }
        #expect(page.contains(".It Pa /etc/qosmap/domains.d/*.yaml"))
        #expect(page.contains("\nqosmap remark --in trace.pcap"))
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/mandoc")))
    func item19_mandocLintFindsNoWarning() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../docs/man/qosmap.1").standardized
        let (text, status) = try mandocLint(url.path)
        #expect(text == "")
        #expect(status == 0)
    }

    /// Issue 39 item 6: on a macro line mdoc reads a word that is also a
    /// callable macro's name ("No", "At", "In", "An", "Ad") as that macro, so
    /// `.Dq No space` rendered "space". Such a word must be escaped (`\&No`).
    @Test func issue39_noEnglishWordIsReadAsAMacro() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../docs/man").standardized
        let pages = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter {
            $0.range(of: #"\.[1-8]$"#, options: .regularExpression) != nil
        }
        #expect(pages.contains("qosmap.1"))
        let enclosures: Set<Substring> = ["Dq", "Sq", "Qq", "Pq", "Ql", "Do", "Po"]
        let words: Set<Substring> = ["No", "At", "In", "An", "Ad", "Ms"]
        for page in pages {
            let text = try String(contentsOf: dir.appendingPathComponent(page), encoding: .utf8)
            for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.hasPrefix(".") {
                let tokens = line.dropFirst().split(separator: " ")
                guard tokens.count > 2, enclosures.contains(tokens[0]) else { continue }
                #expect(!words.contains(tokens[1]), "\(page):\(n + 1): \(line)")
            }
        }
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/mandoc")))
    func issue39_exitStatusRendersTheSystemReason() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../docs/man/qosmap.1").standardized
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/mandoc")
        process.arguments = ["-T", "ascii", url.path]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        // mandoc breaks lines: compare with whitespace collapsed.
        let flat = text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(flat.contains("reason, such as \"No space left on device\"."))
    }

    /// Issue 39 item 6: qosmapd(8) is a real page: its options, every
    /// top-level config key of the embedded default, the signals, files,
    /// metrics and exit codes, and mandoc finds no warning in it.
    @Test func issue39_qosmapdPage() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../docs/man/qosmapd.1").standardized
        let page = try String(contentsOf: url, encoding: .utf8)
        for section in [
            "SYNOPSIS", "OPTIONS", "CONFIGURATION", "SIGNALS", "METRICS", "FILES", "EXIT STATUS",
        ] {
            #expect(page.contains("\n.Sh \(section)\n"), "\(section)")
        }
        for code in ["0", "1", "64", "65", "75", "77"] {
            #expect(page.contains("\n.It \(code)\n"), "exit \(code)")
        }
        for option in ["config", "log-level", "check", "print-default-config", "cleanup", "version"] {
            #expect(page.contains(".It Fl -\(option)"), "--\(option)")
        }
        for signal in ["SIGHUP", "SIGTERM , SIGINT"] {
            #expect(page.contains(".It Dv \(signal)\n"), "\(signal)")
        }
        #expect(page.contains("qosmapd_packets_total"))
        #expect(!page.contains(".Ar subcommand"), "qosmapd has no subcommands")
        let bin = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let config = try qosmap(
            ["--print-default-config"], executable: bin.appendingPathComponent("qosmapd").path)
        let keys = config.out.split(separator: "\n").compactMap { line -> Substring? in
            guard let first = line.first, first.isLetter, let colon = line.firstIndex(of: ":") else {
                return nil
            }
            return line[..<colon]
        }
        #expect(keys.count >= 12, "\(keys)")
        for key in keys { #expect(page.contains("\n.It Ic \(key)\n"), "config key \(key)") }
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/mandoc") {
            #expect(try mandocLint(url.path).text == "")
        }
    }
}

/// `mandoc -T lint -W warning PATH`: what it printed (stdout and stderr) and its status.
func mandocLint(_ path: String) throws -> (text: String, status: Int32) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/mandoc")
    process.arguments = ["-T", "lint", "-W", "warning", path]
    let out = Pipe()
    process.standardOutput = out
    process.standardError = out
    try process.run()
    let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (text, process.terminationStatus)
}
