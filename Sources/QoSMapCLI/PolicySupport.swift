import ArgumentParser
import QoSMapCore
import QoSMapTables

/// A command whose output and exit status are computed together, so that
/// tests run it in-process: `diff` exits 1 when the domains differ and `lint`
/// exits 1 with findings, as diff(1) and linters do.
protocol StatusTextCommand: ParsableCommand {
    /// Everything the command prints and the status it exits with.
    func result() throws -> (text: String, status: Int32)
}

extension StatusTextCommand {
    /// Prints the text, then exits with the status.
    func run() throws {
        let (text, status) = try result()
        print(text, terminator: "")
        if status != 0 { throw ExitCode(status) }
    }
}

extension TableSet {
    /// The `file:line` that wrote a cell of a domain, or `-` when unknown.
    func source(_ domain: DSDomain, _ cell: DomainCell) -> String {
        provenance[domain.name]?[cell]?.description ?? "-"
    }
}

/// Resolves a domain argument: a domain name, or the path of a table file
/// (`*.yaml`, `*.yml` or containing `/`), loaded on its own on top of `set`,
/// whose single domain is taken. Returns the set the domain lives in, for
/// its cells' sources.
func resolveDomainArgument(_ argument: String, in set: TableSet) throws -> (DSDomain, TableSet) {
    let looksLikeFile =
        argument.hasSuffix(".yaml") || argument.hasSuffix(".yml") || argument.contains("/")
    guard looksLikeFile else { return (try resolveDomain(argument, in: set), set) }
    let source = try TableFiles.source(atPath: argument)
    // The file may also be in a --tables directory: load it afresh, not as
    // a redefinition of itself.
    var base = set
    base.domains = DomainSet(set.domains.domains.filter { $0.origin != .file(source.path) })
    let loaded: TableSet
    do {
        loaded = try TableLoader.load([source], onto: base)
    } catch {
        throw DataError(error.description)
    }
    let defined = loaded.domains.domains.filter { $0.origin == .file(source.path) }
    guard defined.count == 1, let domain = defined.first else {
        throw UsageError(
            "'\(argument)' defines \(defined.count) domains; allowed: a file defining one domain")
    }
    return (domain, loaded)
}

/// A treatment in JSON: `{"serviceClass": "EF", "color": "green"}`.
struct TreatmentJSON: Encodable, Equatable {
    var serviceClass: String
    var color: String

    init(_ t: Treatment) {
        serviceClass = t.serviceClass.name
        color = t.color.name
    }
}

/// A table's lines without trailing blanks (an empty last column pads them).
func trimmed(_ text: String) -> String {
    text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
        var l = Substring(line)
        while l.last == " " { l = l.dropLast() }
        return String(l)
    }.joined(separator: "\n")
}
