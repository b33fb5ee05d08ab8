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

/// Device export and import: each bad token is one line with the right status.
@Suite("qosmap export/import device errors")
struct DeviceCommandErrorTests {
    @Test(arguments: [
        (
            ["import", "sonic", "/nonexistent/leaf.json"], 65,
            "/nonexistent/leaf.json:1:1: cannot read sonic file: No such file or directory (errno 2)\n"
        ),
        (
            ["import", "iosxr", "x.conf"], 64,
            "qosmap: error: invalid format 'iosxr' for import; allowed: sonic, junos\n"
        ),
        (
            ["import", "sonic", "x.json", "--name", "9lives"], 64,
            "qosmap: error: invalid --name '9lives'; allowed: a letter, then up to 63 letters, digits, - and _\n"
        ),
        (
            ["export", "sonic", "--mask", "0x3f"], 64,
            "qosmap: error: --mask applies to nft only; allowed with sonic: --domain, --config, --strict\n"
        ),
        (
            ["export", "nft", "--strict"], 64,
            "qosmap: error: --strict applies to device formats only; allowed: sonic, junos, iosxr, linux\n"
        ),
        (
            ["diff", "default"], 64,
            "qosmap: error: missing B; allowed: a domain name, a table file, FORMAT:FILE, --sonic FILE or --junos FILE\n"
        ),
        (
            ["diff", "default", "5p3d", "--map", "x"], 64,
            "qosmap: error: --map applies to a device file; allowed with sonic:FILE, junos:FILE, --sonic, --junos\n"
        ),
    ])
    func oneLine(args: [String], status: Int32, message: String) {
        // Parse and run as `QoSMapCommand.run` does (import is no TextCommand).
        var got = (status: Int32(0), err: "")
        do {
            var command = try QoSMapCommand.parse(args)
            try command.run()
        } catch {
            let report = QoSMapCommand.report(for: error, json: false)
            got = (report.status, report.text + "\n")
        }
        #expect(got.status == status)
        #expect(got.err == message)
    }

    /// `--strict` refuses a lossy export with no output; without it the
    /// export is written and the losses go to stderr.
    @Test func strictRefusesLossyExports() {
        let strict = qosmapInProcess(["export", "sonic", "--domain", "5p3d", "--strict"])
        #expect(strict.status == 65)
        #expect(strict.out.isEmpty)
        #expect(
            strict.err.hasPrefix(
                "export sonic: --strict and the format cannot hold everything: domain 5p3d: "))
        // Without --strict the same export is written (its losses go to stderr).
        let loose = qosmapInProcess(["export", "sonic", "--domain", "5p3d"])
        #expect(loose.status == 0)
        #expect(loose.out.hasPrefix("{"))
    }
}
