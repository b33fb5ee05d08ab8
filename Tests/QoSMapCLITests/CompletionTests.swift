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
            let names = result.out.split(separator: "\n")
            #expect(names == ["default", "5p3d", "edge-cake", "gold"], "\(path) \(option)")
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

    /// Issue 39 item 6: options and arguments that take a file or directory
    /// complete file names in bash, in both executables: the generated script
    /// is sourced and its function run as `complete -F` would, in a directory
    /// holding a file and a subdirectory.
    @Test func issue39_fileAndDirectoryValuesComplete() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-files-\(UUID())")
        try FileManager.default.createDirectory(
            at: dir.appendingPathComponent("sub"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "x\n".write(to: dir.appendingPathComponent("site.yaml"), atomically: true, encoding: .utf8)
        let bin = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for name in ["qosmap", "qosmapd"] {
            let script = try qosmap(
                ["--generate-completion-script", "bash"], executable: bin.appendingPathComponent(name).path)
            #expect(script.status == 0)
            try script.out.write(
                to: dir.appendingPathComponent("\(name).bash"), atomically: true, encoding: .utf8)
        }
        /// COMPREPLY for `words`, the last being the word completed.
        func complete(_ words: [String]) throws -> Set<String> {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.currentDirectoryURL = dir
            process.arguments =
                [
                    "-c",
                    """
                    source "./$1.bash"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"
                    COMP_POINT=${#COMP_LINE}; "_${COMP_WORDS[0]}" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
                    printf '%s\\n' "${COMPREPLY[@]}"
                    """,
                    "bash", words[0],
                ] + words
            process.environment = [
                "PATH": bin.path + ":/usr/bin:/bin", "QOSMAP_DOMAINS_DIR": "/nonexistent/qosmap-test",
            ]
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return Set(text.split(separator: "\n").map(String.init))
        }
        for words in [
            ["qosmapd", "--config", ""], ["qosmap", "validate", ""], ["qosmap", "remark", "--in", ""],
            ["qosmap", "remark", "--in", "x.pcap", "--out", ""], ["qosmap", "lint", "--config", ""],
            ["qosmap", "export", "nft", "--config", ""], ["qosmap", "import", "sonic", ""],
            ["qosmap", "diff", "default", "--sonic", ""],
        ] {
            let offered = try complete(words)
            #expect(offered.contains("site.yaml") && offered.contains("sub"), "\(words): \(offered)")
        }
        #expect(try complete(["qosmap", "show", "--tables", ""]) == ["sub"])
        let either = try complete(["qosmap", "diff", ""])
        #expect(either.isSuperset(of: ["default", "5p3d", "site.yaml", "sub/"]), "\(either)")
        #expect(try complete(["qosmap", "lint", "s"]) == ["site.yaml", "sub/"])
    }
}
