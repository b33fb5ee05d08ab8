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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/mandoc")
        process.arguments = ["-T", "lint", "-W", "warning", url.path]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(text == "")
        #expect(process.terminationStatus == 0)
    }
}
