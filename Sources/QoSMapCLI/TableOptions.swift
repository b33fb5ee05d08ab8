import ArgumentParser
import QoSMapCore
import QoSMapPacket
import QoSMapTables

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// Where user domains come from: `--tables DIR` and `/etc/qosmap/domains.d/`.
struct TableOptions: ParsableArguments {
    @Option(
        name: .long, help: ArgumentHelp("Load user domains from the YAML files in DIR.", valueName: "DIR"),
        completion: .directory)
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
    ///
    /// A broken file in the system directory is left out with a warning on
    /// stderr (its diagnostics, `file:line:column`); `qosmap validate` still
    /// fails on it. A broken file under `--tables` fails the command (exit 65).
    func load(profiles: Bool = false) throws -> TableSet {
        do {
            let (set, skipped) = try TableLoader.loadSkippingBrokenSystemFiles(
                directories: tables, systemDirectory: noSystemTables ? nil : Self.systemDirectory,
                onto: profiles ? TableLoader.builtIn : TableLoader.builtInDomains)
            for line in Self.skippedWarnings(skipped) { printError(line) }
            return set
        } catch {
            throw DataError(error.description)
        }
    }

    /// One warning line per diagnostic of a file left out, and one line per file saying so.
    static func skippedWarnings(_ skipped: [TableDiagnostic]) -> [String] {
        var lines: [String] = []
        var files: [String] = []
        for d in skipped {
            var w = d
            w.severity = .warning
            lines.append(w.description)
            if !files.contains(d.file) { files.append(d.file) }
        }
        for file in files {
            lines.append("\(file): warning: file skipped; run 'qosmap validate \(file)' for its errors")
        }
        return lines
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
    var st = stat()
    return stat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR
}

/// Shell-completion values for options whose values are names.
enum Completions {
    /// The domain names: built-ins plus the readable system files.
    static let domain = CompletionKind.custom { _, _, _ in names(profiles: false) }
    /// The standards profile names.
    static let profile = CompletionKind.custom { _, _, _ in names(profiles: true) }
    /// A domain given as a name or a table file (`diff`, `lint`): the names,
    /// then the files and directories that complete the word typed so far,
    /// since a custom completion replaces the shell's file completion.
    static let domainOrFile = CompletionKind.custom { _, _, prefix in
        names(profiles: false) + paths(completing: prefix)
    }
    /// `--rewrite` fields.
    static let rewrite = CompletionKind.list(RewriteFields.writable.map(\.name) + ["all"])
    /// The first `lookup` argument.
    static let lookupKind = CompletionKind.list(
        Field.allCases.map(\.name) + ["class", "qci", "5qi", "app", "service"])

    /// The entries of `prefix`'s directory whose path starts with `prefix`,
    /// directories with a trailing `/` so that the next TAB descends.
    static func paths(completing prefix: String) -> [String] {
        let slash = prefix.lastIndex(of: "/")
        let directory = slash.map { String(prefix[...$0]) } ?? ""
        guard
            let entries = try? FileManager.default.contentsOfDirectory(
                atPath: directory.isEmpty ? "." : directory)
        else { return [] }
        let typed = prefix.dropFirst(directory.count)
        return entries.sorted().compactMap { entry in
            // Hidden entries only when a dot is typed, as the shells do.
            guard entry.hasPrefix(typed), !entry.hasPrefix(".") || typed.hasPrefix(".") else { return nil }
            let path = directory + entry
            var info = stat()
            let isDirectory = stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
            return isDirectory ? path + "/" : path
        }
    }

    /// Loads quietly: a completion must not print warnings into the shell.
    static func names(profiles: Bool) -> [String] {
        let set = try? TableLoader.loadSkippingBrokenSystemFiles(
            directories: [], systemDirectory: TableOptions.systemDirectory,
            onto: profiles ? TableLoader.builtIn : TableLoader.builtInDomains
        ).set
        guard let set else { return [] }
        return profiles ? set.profiles.names : set.domains.names
    }
}
