import Foundation
import Testing

/// Issue 13 item 10: `qosmap validate`.
@Suite("qosmap validate")
struct ValidateCLITests {
    func scratch(_ files: [String: [UInt8]]) throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-validate-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for (name, bytes) in files {
            let url = dir.appendingPathComponent(name)
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(bytes).write(to: url)
        }
        return dir
    }

    /// A file importing a domain from --tables or the system directory validates.
    @Test func item10_importsFromTablesAndTheSystemDirectory() throws {
        let dir = try scratch([
            "sys/base1.yaml": Array("domain: base1\nimport: default\n".utf8),
            "child.yaml": Array("domain: child\nimport: base1\n".utf8),
        ])
        defer { try? FileManager.default.removeItem(at: dir) }
        let child = dir.path + "/child.yaml"
        let alone = try qosmap(["validate", child])
        #expect(alone.status == 65)
        let tables = try qosmap(["validate", child, "--tables", dir.path + "/sys"])
        #expect(tables.status == 0, "\(tables.err)")
        #expect(tables.out == "1 file(s) valid\n")
        let system = try qosmap(["validate", child], environment: ["QOSMAP_DOMAINS_DIR": dir.path + "/sys"])
        #expect(system.status == 0, "\(system.err)")
        // A system file checked by name is not loaded twice.
        let both = try qosmap(
            ["validate", child, dir.path + "/sys/base1.yaml"],
            environment: ["QOSMAP_DOMAINS_DIR": dir.path + "/sys"])
        #expect(both.status == 0, "\(both.err)")
    }

    /// A non-UTF-8 file does not hide the errors of the other files.
    @Test func item10_oneUnreadableFileHidesNothing() throws {
        let dir = try scratch([
            "a.yaml": Array("domain: m\ncolour: red\n".utf8), "b.yaml": [0xFF, 0x0A],
        ])
        defer { try? FileManager.default.removeItem(at: dir) }
        let result = try qosmap(["validate", dir.path])
        #expect(result.status == 65)
        let lines = result.err.split(separator: "\n").map(String.init)
        #expect(lines.count == 2, "\(result.err)")
        #expect(lines.first?.hasPrefix("\(dir.path)/a.yaml:2:1: ") == true)
        #expect(lines.last == "\(dir.path)/b.yaml:1:1: table file is not UTF-8 text")
    }

    /// An empty directory is an error with a reason.
    @Test func item10_anEmptyDirectoryFails() throws {
        let dir = try scratch([:])
        defer { try? FileManager.default.removeItem(at: dir) }
        let result = try qosmap(["validate", dir.path])
        #expect(result.status == 65)
        #expect(result.err == "\(dir.path):1:1: no table files (*.yaml, *.yml) in this directory\n")
    }

    /// --json: the file count, whether they are valid, and each diagnostic.
    @Test func item10_json() throws {
        let dir = try scratch(["s.yaml": Array("domain: s\nimport: s\n".utf8)])
        defer { try? FileManager.default.removeItem(at: dir) }
        let result = try qosmap(["validate", dir.path, "--json"])
        #expect(result.status == 65)
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any])
        #expect(object["files"] as? Int == 1)
        #expect(object["valid"] as? Bool == false)
        let diagnostics = try #require(object["diagnostics"] as? [[String: Any]])
        #expect(diagnostics.count == 1)
        #expect(diagnostics.first?["line"] as? Int == 2)
        #expect(diagnostics.first?["severity"] as? String == "error")
        #expect(
            diagnostics.first?["message"] as? String == "domain 's' imports itself; import another domain")
    }
}
