import ArgumentParser
import Foundation
import QoSMapCore
import QoSMapTables

/// Bad data (a table file, a capture): reported line by line, exit 65 (EX_DATAERR).
public struct DataError: Error, CustomStringConvertible {
    /// One or more lines, each naming the file and the problem.
    public var description: String

    /// Creates the error.
    public init(_ description: String) { self.description = description }
}

/// A command-line token that is wrong: one line, exit 64 (EX_USAGE).
public struct UsageError: Error, CustomStringConvertible {
    /// The line naming the token and what is allowed.
    public var description: String

    /// Creates the error.
    public init(_ description: String) { self.description = description }
}

/// A library or service the command needs is missing (libpcap for `remark`):
/// one line, exit 69 (EX_UNAVAILABLE).
public struct UnavailableError: Error, CustomStringConvertible {
    /// The line naming what is missing and how to get it.
    public var description: String

    /// Creates the error.
    public init(_ description: String) { self.description = description }
}

/// Exit statuses from sysexits.h.
enum ExitStatus {
    static let usage: Int32 = 64
    static let dataError: Int32 = 65
    static let unavailable: Int32 = 69
}

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

/// `--json`.
struct OutputOptions: ParsableArguments {
    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false
}

/// Resolves `--domain`.
func resolveDomain(_ name: String, in set: TableSet) throws -> DSDomain {
    do {
        return try set.domains.domain(named: name)
    } catch {
        throw UsageError(error.description)
    }
}

/// Encodes a value as stable, pretty JSON.
func jsonText(_ value: some Encodable) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    // Encoding these plain structs cannot fail.
    let data = (try? encoder.encode(value)) ?? Data("null".utf8)
    return String(decoding: data, as: UTF8.self)
}

/// Pads columns for text tables.
func table(_ rows: [[String]], indent: String = "") -> String {
    guard let width = rows.map(\.count).max() else { return "" }
    var widths = [Int](repeating: 0, count: width)
    for row in rows {
        for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) }
    }
    return rows.map { row in
        var line = indent
        for (i, cell) in row.enumerated() {
            line +=
                i == row.count - 1 ? cell : cell.padding(toLength: widths[i] + 2, withPad: " ", startingAt: 0)
        }
        return line
    }.joined(separator: "\n")
}

/// Writes a line to standard error.
func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// Whether a path names an existing directory.
func isDirectory(_ path: String) -> Bool {
    var isDir: ObjCBool = false
    return FileManager.default.fileExists(atPath: path, isDirectory: &isDir) && isDir.boolValue
}
