import Foundation
import QoSMapCore
import QoSMapTables
import Testing

/// A fresh directory under /tmp, removed by the caller.
func scratchDirectory(_ files: [String: String]) throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-tables-\(UUID())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    for (name, text) in files {
        try text.write(to: dir.appendingPathComponent(name), atomically: true, encoding: .utf8)
    }
    return dir
}

/// The one reader of table directories, used by `qosmap` and `qosmapd` alike.
@Suite("Table directories")
struct TableDirectoryTests {
    @Test func readsYamlAndYmlInNameOrderAndNothingElse() throws {
        let dir = try scratchDirectory([
            "b.yml": "domain: b\nimport: a\n", "a.yaml": "domain: a\nimport: default\n",
            "notes.txt": "not a table", "c.yaml.bak": "domain: c\n",
        ])
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(
            try TableLoader.sources(inDirectory: dir.path).map(\.path)
                == ["a.yaml", "b.yml"].map { dir.path + "/" + $0 })
        let set = try TableLoader.load(directories: [dir.path], systemDirectory: nil, profiles: false)
        #expect(set.domains.names == ["default", "5p3d", "edge-cake", "a", "b"])
        #expect(set.domains["b"]?.origin == .file(dir.path + "/b.yml"))
        #expect(set.profiles.names.isEmpty)
    }

    @Test func systemDirectoryComesFirstAndIsSkippedWhenAbsent() throws {
        let system = try scratchDirectory(["s.yaml": "domain: s\nimport: default\n"])
        let user = try scratchDirectory(["u.yaml": "domain: u\nimport: s\n"])
        defer {
            try? FileManager.default.removeItem(at: system)
            try? FileManager.default.removeItem(at: user)
        }
        let set = try TableLoader.load(
            directories: [user.path], systemDirectory: system.path, profiles: false)
        #expect(set.domains.names.suffix(2) == ["s", "u"])
        // An absent system directory is not an error; an absent user one is.
        let absent = system.path + "/absent"
        #expect(
            try TableLoader.load(directories: [], systemDirectory: absent).domains.names == [
                "default", "5p3d", "edge-cake",
            ])
        let error = try #require(
            throws: TableLoadError.self,
            performing: { try TableLoader.load(directories: [absent], systemDirectory: nil) })
        #expect(
            error.description
                == "\(absent):1:1: cannot read table directory: No such file or directory (errno 2)")
    }

    /// The daemon's texts won over the CLI's ("cannot read file", no position):
    /// each names the errno, each is positioned, and every unreadable file is
    /// reported together with the problems of the readable ones.
    @Test func unreadableFilesAreAllReportedWithTheirErrno() throws {
        let dir = try scratchDirectory([
            "c.yaml": "domain: c\ncolour: red\n", "d.yaml": "domain: d\nimport: default\n",
        ])
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(
            at: dir.appendingPathComponent("a.yaml"), withIntermediateDirectories: false)
        try Data([0x64, 0xFF, 0x0A]).write(to: dir.appendingPathComponent("b.yaml"))
        let error = try #require(
            throws: TableLoadError.self,
            performing: { try TableLoader.load(directories: [dir.path], systemDirectory: nil) })
        #expect(
            error.diagnostics.map(\.description) == [
                "\(dir.path)/a.yaml:1:1: cannot read table file: Is a directory (errno 21)",
                "\(dir.path)/b.yaml:1:1: table file is not UTF-8 text",
                "\(dir.path)/c.yaml:2:1: unknown key 'colour' in a domain file; allowed: domain, description, editable, dei, import, inbound, outbound",
            ])
    }

    @Test func aFileIsNotADirectory() throws {
        let dir = try scratchDirectory(["a.yaml": "domain: a\nimport: default\n"])
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.path + "/a.yaml"
        let error = try #require(
            throws: TableLoadError.self, performing: { try TableLoader.sources(inDirectory: file) })
        #expect(error.description == "\(file):1:1: cannot read table directory: Not a directory (errno 20)")
        #expect(try TableLoader.source(atPath: file).text == "domain: a\nimport: default\n")
    }
}
