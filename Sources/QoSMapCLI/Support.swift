import ArgumentParser
import Foundation
import QoSMapCore
import QoSMapTables

/// Where user domains come from: `--tables DIR` and `/etc/qosmap/domains.d/`.
struct TableOptions: ParsableArguments {
    @Option(
        name: .long, help: ArgumentHelp("Load user domains from the YAML files in DIR.", valueName: "DIR"))
    var tables: [String] = []

    @Flag(name: .long, help: "Do not load /etc/qosmap/domains.d/.")
    var noSystemTables = false

    /// The system directory; QOSMAP_DOMAINS_DIR overrides it for tests and packagers.
    static var systemDirectory: String {
        ProcessInfo.processInfo.environment["QOSMAP_DOMAINS_DIR"] ?? "/etc/qosmap/domains.d"
    }

    func validate() throws {
        for dir in tables {
            guard isDirectory(dir) else {
                throw ValidationError(
                    "--tables '\(dir)' is not a directory; allowed: a directory of *.yaml files")
            }
        }
    }

    /// Loads the built-ins plus every user directory. Without `profiles` only
    /// the built-in domains are parsed, which keeps start-up short.
    func load(profiles: Bool = false) throws -> TableSet {
        var dirs: [String] = []
        if !noSystemTables, isDirectory(Self.systemDirectory) {
            dirs.append(Self.systemDirectory)
        }
        dirs += tables
        let sources = try dirs.flatMap { try TableFiles.sources(inDirectory: $0) }
        let base = profiles ? TableLoader.builtIn : TableLoader.builtInDomains
        if sources.isEmpty { return base }
        switch TableLoader.load(sources, onto: base) {
        case .success(let set): return set
        case .failure(let error): throw DataError(error.description)
        }
    }
}

/// Reads table files from disk.
enum TableFiles {
    static func sources(inDirectory dir: String) throws -> [TableSource] {
        let names = try FileManager.default.contentsOfDirectory(atPath: dir)
            .filter { $0.hasSuffix(".yaml") || $0.hasSuffix(".yml") }
            .sorted()
        return try names.map { try source(atPath: (dir as NSString).appendingPathComponent($0)) }
    }

    static func source(atPath path: String) throws -> TableSource {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw DataError("\(path): cannot read file")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw DataError("\(path):1:1: file is not UTF-8 text")
        }
        return TableSource(path: path, text: text)
    }
}

/// Resolves `--domain`.
func resolveDomain(_ name: String, in set: TableSet) throws -> DSDomain {
    do {
        return try set.domains.domain(named: name)
    } catch {
        throw UsageError(error.description)
    }
}

/// Whether a path names an existing directory.
func isDirectory(_ path: String) -> Bool {
    var isDir: ObjCBool = false
    return FileManager.default.fileExists(atPath: path, isDirectory: &isDir) && isDir.boolValue
}
