#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif

// Reading table files from disk, for the CLI and the daemon alike: one reader,
// so the same fault gives the same text in both.
extension TableLoader {
    /// The system table directory: `/etc/qosmap/domains.d`, or
    /// `QOSMAP_DOMAINS_DIR` when set (for tests and packagers).
    public static var systemDirectory: String {
        getenv("QOSMAP_DOMAINS_DIR").map { String(cString: $0) } ?? "/etc/qosmap/domains.d"
    }

    /// Loads table directories on top of a base set.
    ///
    /// The system directory (when given) is read first and skipped when it is
    /// not a directory; then each of `directories`, which must exist. In each,
    /// the `*.yaml` and `*.yml` files are read in name order. Every unreadable
    /// file and every problem in the readable ones is reported at once, each
    /// as `file:line:column: message`; nothing from a failing batch is applied.
    /// - Returns: the base plus what the files define; warnings in
    ///   ``TableSet/warnings``.
    /// - Throws: ``TableLoadError`` with every diagnostic, in file order.
    public static func load(
        directories: [String], systemDirectory: String? = nil, onto base: TableSet
    ) throws(TableLoadError) -> TableSet {
        var dirs = directories
        if let systemDirectory, isDirectory(systemDirectory) { dirs.insert(systemDirectory, at: 0) }
        var sources: [TableSource] = []
        var unreadable: [TableDiagnostic] = []
        for dir in dirs {
            let read = readDirectory(dir)
            sources += read.sources
            unreadable += read.unreadable
        }
        if sources.isEmpty && unreadable.isEmpty { return base }
        func sorted(_ d: [TableDiagnostic]) -> TableLoadError {
            TableLoadError(d.sorted { ($0.file, $0.line, $0.column) < ($1.file, $1.line, $1.column) })
        }
        let set: TableSet
        do {
            set = try load(sources, onto: base)
        } catch {
            throw sorted(unreadable + error.diagnostics)
        }
        guard unreadable.isEmpty else { throw sorted(unreadable + set.warnings) }
        return set
    }

    /// Loads table directories like ``load(directories:systemDirectory:onto:)``,
    /// except that a file of the system directory that cannot be read or
    /// loaded is left out rather than failing the batch, so that one broken
    /// file in `/etc/qosmap/domains.d` does not stop commands that do not need
    /// it. Files of `directories` (given explicitly) still fail the batch.
    /// - Returns: the set, and the diagnostics of every file left out.
    /// - Throws: ``TableLoadError`` when a file of `directories` is at fault;
    ///   it also carries the diagnostics of the files left out.
    /// - Parameter excluding: paths of files to leave out silently (the
    ///   files `validate` checks on top of the others).
    public static func loadSkippingBrokenSystemFiles(
        directories: [String], systemDirectory: String?, onto base: TableSet,
        excluding: Set<String> = []
    ) throws(TableLoadError) -> (set: TableSet, skipped: [TableDiagnostic]) {
        var system: [TableSource] = []
        var skipped: [TableDiagnostic] = []
        if let systemDirectory, isDirectory(systemDirectory) {
            let read = readDirectory(systemDirectory)
            system = read.sources
            skipped = read.unreadable
        }
        var user: [TableSource] = []
        var unreadable: [TableDiagnostic] = []
        for dir in directories {
            let read = readDirectory(dir)
            user += read.sources
            unreadable += read.unreadable
        }
        func sorted(_ d: [TableDiagnostic]) -> TableLoadError {
            TableLoadError(d.sorted { ($0.file, $0.line, $0.column) < ($1.file, $1.line, $1.column) })
        }
        if !unreadable.isEmpty { throw sorted(skipped + unreadable) }
        if !excluding.isEmpty {
            let excluded = Set(excluding.map(realPath))
            system.removeAll { excluded.contains(realPath($0.path)) }
            user.removeAll { excluded.contains(realPath($0.path)) }
        }
        // Each round leaves out at least one file, so this ends.
        while true {
            do {
                let set = try load(system + user, onto: base)
                return (set, skipped)
            } catch {
                let systemPaths = Set(system.map(\.path))
                let bad = Set(error.diagnostics.filter { $0.severity == .error }.map(\.file))
                    .intersection(systemPaths)
                if bad.isEmpty { throw sorted(skipped + error.diagnostics) }
                skipped += error.diagnostics.filter { bad.contains($0.file) }
                system.removeAll { bad.contains($0.path) }
            }
        }
    }

    /// The canonical path (`realpath`), or the path itself when it cannot be resolved.
    public static func realPath(_ path: String) -> String {
        guard let p = realpath(path, nil) else { return path }
        defer { free(p) }
        return String(cString: p)
    }

    /// The readable `*.yaml` and `*.yml` files of a directory, in name order,
    /// and a diagnostic for each file (or the directory) that cannot be read,
    /// so that one bad file does not hide the others.
    public static func readTableDirectory(_ dir: String) -> (
        sources: [TableSource], unreadable: [TableDiagnostic]
    ) {
        readDirectory(dir)
    }

    /// Reads the `*.yaml` and `*.yml` files of a directory, in name order.
    /// - Throws: ``TableLoadError`` naming the directory when it cannot be
    ///   listed (with the errno text), or naming every file that cannot be read.
    public static func sources(inDirectory dir: String) throws(TableLoadError) -> [TableSource] {
        let read = readDirectory(dir)
        guard read.unreadable.isEmpty else { throw TableLoadError(read.unreadable) }
        return read.sources
    }

    /// The readable table files of a directory, and a diagnostic for each
    /// file (or the directory) that cannot be read.
    static func readDirectory(_ dir: String) -> (sources: [TableSource], unreadable: [TableDiagnostic]) {
        let names: [String]
        do {
            names = try tableFileNames(in: dir)
        } catch {
            return ([], [failure(dir, "cannot read table directory", errno: error.code)])
        }
        var sources: [TableSource] = []
        var unreadable: [TableDiagnostic] = []
        for name in names {
            let path = dir.hasSuffix("/") ? dir + name : dir + "/" + name
            do {
                sources.append(try source(atPath: path))
            } catch {
                unreadable += error.diagnostics
            }
        }
        return (sources, unreadable)
    }

    /// Reads one table file. A read error names the errno (EACCES, EISDIR…),
    /// and only invalid bytes are reported as not UTF-8.
    /// - Throws: ``TableLoadError`` with one diagnostic at `path:1:1`.
    public static func source(atPath path: String) throws(TableLoadError) -> TableSource {
        TableSource(path: path, text: try text(atPath: path, what: "table file"))
    }

    /// Reads a whole text file, `what` naming it in errors ("table file",
    /// "config"): `cannot read config: Is a directory (errno 21)`, or `config
    /// is not UTF-8 text`, at `path:1:1`. The daemon and the CLI read their
    /// configs with it too, so that every read failure carries its errno.
    package static func text(atPath path: String, what: String) throws(TableLoadError) -> String {
        let bytes: [UInt8]
        do {
            bytes = try readFile(path)
        } catch {
            throw TableLoadError([failure(path, "cannot read \(what)", errno: error.code)])
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw TableLoadError([
                TableDiagnostic(file: path, line: 1, column: 1, message: "\(what) is not UTF-8 text")
            ])
        }
        return text
    }

    /// An errno from a failed system call.
    struct SystemError: Error {
        var code: Int32
    }

    /// `path:1:1: WHAT: strerror (errno N)`, the one wording of a failed read.
    package static func failure(_ path: String, _ what: String, errno code: Int32) -> TableDiagnostic {
        TableDiagnostic(
            file: path, line: 1, column: 1,
            message: "\(what): \(String(cString: strerror(code))) (errno \(code))")
    }

    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR
    }

    static func tableFileNames(in dir: String) throws(SystemError) -> [String] {
        guard let handle = opendir(dir) else { throw SystemError(code: errno) }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasSuffix(".yaml") || name.hasSuffix(".yml") { names.append(name) }
        }
        return names.sorted()
    }

    static func readFile(_ path: String) throws(SystemError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError(code: errno) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemError(code: errno)
            }
            bytes += chunk[..<n]
        }
        return bytes
    }
}
