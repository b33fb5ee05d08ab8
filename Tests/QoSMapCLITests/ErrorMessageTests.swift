import Foundation
import Testing

@testable import QoSMapCLI

/// Issue 13 item 9: errors say what is wrong.
@Suite("qosmap error messages")
struct ErrorMessageTests {
    /// An unknown subcommand is named, with the valid ones, even when options follow it.
    @Test func item9_unknownSubcommandIsNamed() {
        let top = qosmapInProcess(["nosuch", "dscp", "46", "--domain", "default"])
        #expect(top.status == 64)
        #expect(top.err == "qosmap: error: unknown subcommand 'nosuch'; allowed: \(subcommandNames)\n")
        let profile = qosmapInProcess(["profile", "nosuch"])
        let names = QoSMapCommand.ProfileCommand.configuration.subcommands.map { $0._commandName }
        #expect(profile.status == 64)
        #expect(
            profile.err
                == "qosmap: error: unknown subcommand 'nosuch' of 'profile'; allowed: \(names.joined(separator: ", "))\n"
        )
    }

    /// An option that does not apply is refused, not ignored.
    @Test func item9_colorOnAnInboundLookupIsRefused() {
        let result = qosmapInProcess(["lookup", "dscp", "46", "--color", "red"])
        #expect(result.status == 64)
        #expect(result.err == "qosmap: error: --color applies only to 'lookup class', not 'dscp'\n")
    }

    /// With --json an error is one JSON object on stderr; the status is kept.
    @Test(arguments: [
        (
            ["lookup", "tos", "1", "--json"], 64,
            #"{"allowed":["dscp","ip-precedence (prec)","8021p (pcp, dot1p)","exp (mpls-exp)","class","qci","5qi","app","service"],"error":"unknown field 'tos'; allowed: dscp, ip-precedence (prec), 8021p (pcp, dot1p), exp (mpls-exp), class, qci, 5qi, app, service","token":"tos"}"#
        ),
        (
            ["lookup", "dscp", "99", "--json"], 64,
            #"{"allowed":["0-63"],"error":"dscp value 99 is out of range; allowed: 0-63","token":"99"}"#
        ),
        (
            ["lookup", "class", "EF", "--color", "blue", "--json"], 64,
            #"{"allowed":["green","yellow","red"],"error":"The value 'blue' is invalid for '--color <color>'. Please provide one of 'green', 'yellow' or 'red'.","token":"blue"}"#
        ),
    ])
    func item9_jsonErrors(args: [String], status: Int32, json: String) {
        let result = qosmapInProcess(args)
        #expect(result.status == status)
        #expect(result.out == "")
        #expect(result.err == json + "\n")
    }

    /// The JSON error of a subprocess parses, and names the token.
    @Test func item9_jsonErrorFromTheBinaryParses() throws {
        let result = try qosmap(["show", "nowhere", "--json"])
        #expect(result.status == 64)
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(result.err.utf8)) as? [String: Any])
        #expect(object["token"] as? String == "nowhere")
        #expect((object["error"] as? String)?.hasPrefix("unknown domain 'nowhere'") == true)
    }
}

/// Issue 13 item 9: a missing file and an unreadable directory are exit 65 with
/// the errno text, not a Foundation error dump (run as nobody, so root only).
@Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
func item9_unreadableAndMissingPathsNameTheErrno() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-unreadable-\(UUID())")
    try FileManager.default.createDirectory(
        at: dir.appendingPathComponent("locked"), withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    try "domain: x\n".write(
        to: dir.appendingPathComponent("locked/a.yaml"), atomically: true, encoding: .utf8)
    let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let binary = dir.appendingPathComponent("qosmap")
    try FileManager.default.copyItem(at: bundle.appendingPathComponent("qosmap"), to: binary)
    try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.path)
    try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: dir.path + "/locked")
    let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", binary.path]
    let locked = try qosmap(asNobody + ["validate", dir.path + "/locked"], executable: "/usr/bin/setpriv")
    #expect(locked.status == 65)
    #expect(
        locked.err == "\(dir.path)/locked:1:1: cannot read table directory: Permission denied (errno 13)\n")
    let missing = try qosmap(["validate", dir.path + "/missing.yaml"])
    #expect(missing.status == 65)
    #expect(
        missing.err
            == "\(dir.path)/missing.yaml:1:1: cannot read table file: No such file or directory (errno 2)\n")
}
