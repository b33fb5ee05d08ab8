import ArgumentParser
import Foundation
import QoSMapCore
import QoSMapTables
import Testing

@testable import QoSMapCLI

/// `qosmap diff`, `import junos` and `export junos --config` run in-process
/// against the QoSMapDevicesTests data (site.yaml, pe1.conf, qosmapd.yaml).
@Suite("qosmap diff/import/export with Junos files")
struct JunosDeviceDiffTests {
    static let data = packageRoot + "/Tests/QoSMapDevicesTests/Data"
    static let pe1 = data + "/junos/pe1.conf"
    static let tables = ["--no-system-tables", "--tables", data + "/tables"]

    /// The cell-change lines of a diff's text.
    func changes(_ text: String) -> [String] {
        text.split(separator: "\n").map(String.init).filter {
            $0.hasPrefix("inbound ") || $0.hasPrefix("outbound ")
        }
    }

    /// A fresh temporary directory.
    func temporaryDirectory() throws -> String {
        let dir = NSTemporaryDirectory() + "qosmap-junos-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// pe1.conf differs from `site` in exactly DSCP 46, whichever way the
    /// device file is named; exit status 1.
    @Test(arguments: [
        ["diff", "site", "junos:" + pe1],
        ["diff", "site", "--junos", pe1],
        ["diff", "site", "--junos", pe1, "--map", "PE1"],
    ])
    func diffFindsTheOneMismatch(args: [String]) {
        let r = policyRun(args + Self.tables)
        #expect(r.status == 1, "\(r.err)")
        #expect(changes(r.out) == ["inbound dscp 46: EF/green -> AF4/green  [-]"], "\(r.out)")
        #expect(r.out.hasSuffix("1 cell(s) differ\n"))
        #expect(!r.out.contains("dei:"))
    }

    /// With the mismatch fixed, diff says equal and exits 0.
    @Test func diffOfFixedFileIsEqual() throws {
        let text = try String(contentsOfFile: Self.pe1, encoding: .utf8)
        let wrong = "forwarding-class af4 loss-priority low code-points ef\n"
        try #require(text.components(separatedBy: wrong).count == 2)
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fixed = dir + "/pe1-fixed.conf"
        try text.replacingOccurrences(
            of: wrong, with: "forwarding-class ef loss-priority low code-points ef\n"
        )
        .write(toFile: fixed, atomically: true, encoding: .utf8)
        let r = policyRun(["diff", "site", "junos:" + fixed] + Self.tables)
        #expect(r.status == 0, "\(r.out)\(r.err)")
        #expect(changes(r.out).isEmpty)
        #expect(r.out.hasSuffix("domains are equal\n"))
        // The device file may be A as well.
        let swapped = policyRun(["diff", "junos:" + fixed, "site"] + Self.tables)
        #expect(swapped.status == 0, "\(swapped.out)\(swapped.err)")
    }

    /// `import junos … -o FILE` writes a domain file that loads back with
    /// pe1's maps: site's except DSCP 46.
    @Test func importWritesLoadableDomain() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let out = dir + "/pe1.yaml"
        var command = try QoSMapCommand.parseAsRoot(
            ["import", "junos", Self.pe1, "--name", "pe1", "--base", "site", "-o", out] + Self.tables)
        try command.run()
        let text = try String(contentsOfFile: out, encoding: .utf8)
        #expect(text.hasPrefix("# Imported by: qosmap import junos "))
        let sitePath = Self.data + "/tables/site.yaml"
        let set = try TableLoader.load(
            [
                TableSource(path: sitePath, text: try String(contentsOfFile: sitePath, encoding: .utf8)),
                TableSource(path: out, text: text),
            ], onto: TableLoader.builtIn)
        let pe1 = try #require(set.domains["pe1"])
        let site = try #require(set.domains["site"])
        #expect(pe1.classify(.dscp, 46) == Treatment(.af4, .green))
        var b = pe1.derive(name: "check")
        b.setInbound(.dscp, 46, site.classify(.dscp, 46))
        #expect(try b.build().hasSameMaps(as: site))
        #expect(pe1.dropEligibility == .color)
    }

    /// A bad Junos file: the CLI error names file:line:column and the token.
    @Test func importErrorNamesThePlace() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bad = dir + "/bad.conf"
        try
            "# bad\nset class-of-service classifiers dscp X forwarding-class be loss-priority low code-points [ 10111 ]\n"
            .write(toFile: bad, atomically: true, encoding: .utf8)
        let r = policyRun(["diff", "site", "junos:" + bad] + Self.tables)
        #expect(r.status != 0 && r.status != 1)
        #expect(r.err.contains("\(bad):2:93: invalid dscp code point '10111'"), "\(r.err)")
    }

    /// `export junos --config` gives the bindings the device-test golden was
    /// built from (the header's command line aside).
    @Test func exportConfigMatchesGolden() throws {
        let r = policyRun(["export", "junos", "--config", Self.data + "/config/qosmapd.yaml"] + Self.tables)
        #expect(r.status == 0, "\(r.err)")
        let golden = try String(contentsOfFile: Self.data + "/golden/junos-config.txt", encoding: .utf8)
        let body = { (s: String) in s.split(separator: "\n", omittingEmptySubsequences: false).dropFirst() }
        #expect(Array(body(r.out)) == Array(body(golden)))
    }
}
