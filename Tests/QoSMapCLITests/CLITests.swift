import Foundation
import Testing

@testable import QoSMapCLI

/// The top-level subcommands, as an unknown-subcommand error lists them.
let subcommandNames = QoSMapCommand.configuration.subcommands.map { $0._commandName }.joined(separator: ", ")

/// Runs the built `qosmap` binary, which sits beside the test bundle.
/// `executable` runs another program instead (a wrapper such as unshare).
func qosmap(_ args: [String], environment: [String: String] = [:], executable: String? = nil) throws -> (
    status: Int32, out: String, err: String
) {
    let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let process = Process()
    process.executableURL =
        executable.map(URL.init(fileURLWithPath:)) ?? bundle.appendingPathComponent("qosmap")
    process.arguments = args
    // No system tables unless a test asks for them.
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
    return (process.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
}

let goldenDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
    "Golden")

@Suite("qosmap CLI")
struct CLITests {
    /// Each command's output must equal its golden file byte for byte
    /// (`QOSMAP_UPDATE_GOLDEN=1` rewrites the files).
    @Test(arguments: [
        ("lookup-dscp-46.txt", ["lookup", "dscp", "46"]),
        ("lookup-dscp-46.json", ["lookup", "dscp", "46", "--json"]),
        ("lookup-pcp-0-5p3d.txt", ["lookup", "pcp", "0", "--domain", "5p3d"]),
        ("lookup-class-af4-yellow.txt", ["lookup", "class", "AF4", "--color", "yellow"]),
        ("lookup-class-af4-yellow.json", ["lookup", "class", "af4", "--color", "yellow", "--json"]),
        ("show-default.txt", ["show", "default"]),
        ("show-5p3d-8021p.json", ["show", "5p3d", "--field", "8021p", "--json"]),
        ("domains.txt", ["domains"]),
        ("domains.json", ["domains", "--json"]),
    ])
    func golden(file: String, args: [String]) throws {
        let result = try qosmap(args)
        #expect(result.status == 0)
        #expect(result.err == "")
        try expectGolden(result.out, file)
    }

    @Test func inboundJSONHasThePublicKeys() throws {
        let result = try qosmap(["lookup", "dscp", "EF", "--json"])
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any])
        #expect(object["domain"] as? String == "default")
        #expect(object["field"] as? String == "dscp")
        #expect(object["value"] as? Int == 46)
        #expect(object["serviceClass"] as? String == "EF")
        #expect(object["color"] as? String == "green")
        let outbound = try #require(object["outbound"] as? [String: Int])
        #expect(outbound == ["dscp": 46, "ip-precedence": 5, "8021p": 5, "exp": 5])
    }

    @Test(arguments: [
        (["lookup", "dscp", "64"], "qosmap: error: dscp value 64 is out of range; allowed: 0-63\n"),
        (
            ["lookup", "dscp", "fast"],
            "qosmap: error: invalid dscp value 'fast'; allowed: 0-63 (decimal, 0x.., 0b.., six binary digits) or a PHB name (DF, CS0-CS7, AF11-AF43, EF, VA, LE; Junos be, nc1, nc2; Cisco default)\n"
        ),
        (["lookup", "exp", "8"], "qosmap: error: exp value 8 is out of range; allowed: 0-7\n"),
        (
            ["lookup", "tos", "1"],
            "qosmap: error: unknown field 'tos'; allowed: dscp, ip-precedence (prec), 8021p (pcp, dot1p), exp (mpls-exp), class, qci, 5qi, app, service\n"
        ),
        (
            ["lookup", "class", "GOLD"],
            "qosmap: error: unknown service class 'GOLD'; allowed: BE, AF1, AF2, AF3, AF4, EF, CS6, CS7\n"
        ),
        (
            ["lookup", "class", "EF", "--color", "blue"],
            "qosmap: error: The value 'blue' is invalid for '--color <color>'. Please provide one of 'green', 'yellow' or 'red'.\n"
        ),
        (
            ["lookup", "dscp", "1", "--domain", "gold"],
            "qosmap: error: unknown domain 'gold'; known domains: default, 5p3d, edge-cake\n"
        ),
        (
            ["show", "nowhere"],
            "qosmap: error: unknown domain 'nowhere'; known domains: default, 5p3d, edge-cake\n"
        ),
        (
            ["show", "default", "--field", "vlan"],
            "qosmap: error: The value 'vlan' is invalid for '--field <field>'. Please provide one of 'dscp', 'ip-precedence', '8021p' or 'exp'.\n"
        ),
        (["lookup", "dscp"], "qosmap: error: Missing expected argument '<value>'\n"),
        (["frobnicate"], "qosmap: error: unknown subcommand 'frobnicate'; allowed: \(subcommandNames)\n"),
    ])
    func usageErrorsExit64WithOneLine(args: [String], message: String) throws {
        let result = try qosmap(args)
        #expect(result.status == 64)
        #expect(result.out == "")
        #expect(result.err == message)
    }

    @Test func badTablesDirectoryExits65WithPositions() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-cli-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("bad.yaml")
        try "domain: mine\nimport: default\ninbound:\n  dscp:\n    46: [EF, teal]\n".write(
            to: file, atomically: true, encoding: .utf8)
        let result = try qosmap(["lookup", "dscp", "46", "--tables", dir.path])
        #expect(result.status == 65)
        #expect(result.err == "\(file.path):5:14: unknown color 'teal'; allowed: green, yellow, red\n")

        let validate = try qosmap(["validate", file.path])
        #expect(validate.status == 65)
        #expect(validate.err == result.err)
    }

    @Test func userDomainsLoadFromTablesAndSystemDirectory() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-cli-ok-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "domain: voice\nimport: default\ninbound:\n  dscp:\n    44: [EF, green]\n".write(
            to: dir.appendingPathComponent("voice.yaml"), atomically: true, encoding: .utf8)
        let viaFlag = try qosmap([
            "lookup", "dscp", "VA", "--domain", "voice", "--tables", dir.path, "--json",
        ])
        #expect(viaFlag.status == 0)
        #expect(viaFlag.out.contains("\"serviceClass\" : \"EF\""))
        let viaSystem = try qosmap(["domains"], environment: ["QOSMAP_DOMAINS_DIR": dir.path])
        #expect(viaSystem.out.contains("voice      \(dir.path)/voice.yaml  yes"))
        let validate = try qosmap(["validate", dir.appendingPathComponent("voice.yaml").path])
        #expect(validate.status == 0)
        #expect(validate.out == "1 file(s) valid\n")
    }

    @Test(arguments: ["--help", "--version"])
    func helpAndVersionExit0(flag: String) throws {
        let result = try qosmap([flag])
        #expect(result.status == 0)
        #expect(!result.out.isEmpty)
    }

    /// `--version` prints the version of debian/changelog's first entry, the
    /// one the Debian package gets (tools/package).
    @Test func versionIsTheChangelogs() throws {
        let changelog = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../debian/changelog")
        let first = try String(contentsOf: changelog, encoding: .utf8).prefix { $0 != "\n" }
        let version = first.drop { $0 != "(" }.dropFirst().prefix { $0 != ")" }
        #expect(!version.isEmpty)
        let result = try qosmap(["--version"])
        #expect(result.status == 0)
        #expect(result.out == "\(version)\n")
    }
}
