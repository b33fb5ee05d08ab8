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
    static var systemDirectory: String { TableLoader.systemDirectory }

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
        do {
            return try TableLoader.load(
                directories: tables, systemDirectory: noSystemTables ? nil : Self.systemDirectory,
                profiles: profiles)
        } catch {
            throw DataError(error.description)
        }
    }
}

/// Reads table files from disk through ``TableLoader``, so that the CLI and the
/// daemon report an unreadable file with the same text.
enum TableFiles {
    static func sources(inDirectory dir: String) throws -> [TableSource] {
        do {
            return try TableLoader.sources(inDirectory: dir)
        } catch {
            throw DataError(error.description)
        }
    }

    static func source(atPath path: String) throws -> TableSource {
        do {
            return try TableLoader.source(atPath: path)
        } catch {
            throw DataError(error.description)
        }
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
