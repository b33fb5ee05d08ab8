import Foundation
import Testing

/// Issue 13 item 18: completions offer the values of name-valued options.
@Suite("qosmap completions")
struct CompletionTests {
    @Test func item18_domainAndProfileNamesComplete() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-compl-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "domain: gold\nimport: default\n".write(
            to: dir.appendingPathComponent("gold.yaml"), atomically: true, encoding: .utf8)
        let env = ["QOSMAP_DOMAINS_DIR": dir.path]
        for (path, option) in [
            ("lookup", "--domain"), ("remark", "--egress-domain"), ("show", "positional@0"),
        ] {
            let result = try qosmap(
                ["---completion", path, "--", option, "3", "0", "qosmap", path, option, ""], environment: env)
            #expect(result.status == 0, "\(result.err)")
            #expect(result.out.split(separator: "\n") == ["default", "5p3d", "gold"], "\(path) \(option)")
        }
        let profiles = try qosmap([
            "---completion", "lookup", "--", "--profile", "3", "0", "qosmap", "lookup", "--profile", "",
        ])
        #expect(profiles.out.split(separator: "\n").contains("rfc4594"))
    }

    @Test func item18_fixedListsAreInTheScript() throws {
        let script = try qosmap(["--generate-completion-script", "bash"]).out
        #expect(script.contains("'dscp'$'\\n''8021p'$'\\n''exp'$'\\n''all'"), "--rewrite")
        #expect(
            script.contains("'exp'$'\\n''class'$'\\n''qci'$'\\n''5qi'$'\\n''app'$'\\n''service'"),
            "lookup kind")
        #expect(script.contains("'green'$'\\n''yellow'$'\\n''red'"), "--color")
    }
}
