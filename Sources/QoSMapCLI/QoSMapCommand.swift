import ArgumentParser
import QoSMapCore
import QoSMapTables

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// The `qosmap` command: query, show and validate QoS priority-mapping tables.
public struct QoSMapCommand: ParsableCommand {
    /// What `--version` prints. The `qosmap` executable sets it from
    /// `QoSMapVersion` before anything reads `configuration`, so that a new
    /// version recompiles the executable's main file, not this module.
    nonisolated(unsafe) public static var version = "unknown"

    /// The command's name, abstract and subcommands; read first after `main`
    /// has set `version`.
    public static let configuration = CommandConfiguration(
        commandName: "qosmap",
        abstract:
            "Query, show and validate QoS priority-mapping tables (DSCP, IP precedence, 802.1p, MPLS EXP).",
        discussion: """
            A DS domain maps each received marking to a service class (BE, AF1-AF4,
            EF, CS6, CS7) and a color (green, yellow, red), and maps class and color
            back to markings on egress. Built-in domains: default (editable) and
            5p3d (fixed). User domains load from /etc/qosmap/domains.d/ and
            --tables DIR; a broken file there is skipped with a warning.

            Examples:
              qosmap lookup dscp EF
              qosmap show 5p3d --field 8021p
              qosmap remark --in trace.pcap --out remarked.pcap
              qosmap validate /etc/qosmap/domains.d
              qosmap explain 46 --hop PE=dscp@edge:exp@core --hop P=exp@core:dscp

            Exit status: 0 success; 1 diff found differences or lint found problems;
            64 a bad command-line token; 65 bad data (table files, captures);
            69 libpcap could not be loaded (remark), or no qosmapd answers on the
            status socket (status, --live); 74 an output could not be written
            (OUT, -o, standard output; the line names the file and the cause,
            such as "No space left on device"; an old OUT is kept); 77 the status
            socket refused the caller.
            """,
        version: version,
        subcommands: [
            Lookup.self, Show.self, Domains.self, Validate.self, ProfileCommand.self, Remark.self,
            Export.self, Import.self, Diff.self, Explain.self, Lint.self, Classify.self, Names.self,
            Status.self,
        ])

    /// Creates the command (ArgumentParser needs it).
    public init() {}

    /// Parses the arguments, runs the command and exits: 0 on success, 64 for
    /// a usage error, 65 for bad data, 69 when a needed library is missing,
    /// 74 when an output (standard output included) could not be written.
    /// Errors are one line each on stderr.
    public static func run(arguments: [String]? = nil) -> Never {
        let args = arguments ?? Array(CommandLine.arguments.dropFirst())
        let json = args.contains("--json")
        do {
            var command = try parse(args)
            try command.run()
            exit(0, json: json)
        } catch {
            let report = report(for: error, json: json)
            if report.text.isEmpty {
            } else if report.status == 0 {
                print(report.text)
            } else {
                printError(report.text)
            }
            exit(report.status, json: json)
        }
    }

    /// Exits with `status`, or with 74 when standard output could not be
    /// written: `print` buffers and drops write errors, so they are only
    /// seen here. `fflush(NULL)` flushes every stream (Swift 6 cannot name C's
    /// `stdout`); glibc keeps the bytes a failed write could not place, so a
    /// failure mid-run fails again here with its errno. A failed command
    /// keeps its own status.
    static func exit(_ status: Int32, json: Bool) -> Never {
        errno = 0
        let flushed = fflush(nil) == 0
        let code = errno
        if !flushed && status == 0 {
            let error = OutputError(
                path: "-", reason: code == 0 ? "write error" : String(cString: strerror(code)))
            let report = report(for: error, json: json)
            printError(report.text)
            Glibc.exit(report.status)
        }
        Glibc.exit(status)
    }

    /// Parses like `parseAsRoot`, with two repairs: an unknown subcommand is
    /// named with the valid ones, and a negative number is taken as a value
    /// (`--priority -200`, `lookup dscp -1`) rather than as an unknown option.
    static func parse(_ arguments: [String]) throws -> any ParsableCommand {
        if let message = unknownSubcommand(arguments) { throw UsageError(message) }
        do {
            return try parseAsRoot(arguments)
        } catch {
            guard let repaired = negativeNumbersAsValues(arguments) else { throw error }
            return try parseAsRoot(repaired)
        }
    }

    /// "unknown subcommand 'X'; allowed: …" when a word where a subcommand
    /// belongs names none; nil otherwise.
    static func unknownSubcommand(_ arguments: [String]) -> String? {
        var subs: [any ParsableCommand.Type] = configuration.subcommands
        var path = ""
        for token in arguments {
            if subs.isEmpty || token.hasPrefix("-") || token == "help" { return nil }
            // Stops at the match, as ArgumentParser does: each subcommand's
            // `configuration` is built on first use (Lint's and Explain's
            // interpolate tables), and a lookup needs only its own.
            guard
                let found = subs.first(where: {
                    $0._commandName == token || $0.configuration.aliases.contains(token)
                })
            else {
                let names = subs.map { $0._commandName }
                let of = path.isEmpty ? "" : " of '\(path)'"
                return "unknown subcommand '\(token)'\(of); allowed: \(names.joined(separator: ", "))"
            }
            path += (path.isEmpty ? "" : " ") + found._commandName
            subs = found.configuration.subcommands
        }
        return nil
    }

    /// The arguments with each negative number (`-1`, `-200`) joined to the
    /// long option before it (`--priority=-200`), or, when no option precedes
    /// it, moved after `--` so that it is read as a positional; nil when there
    /// is none. ArgumentParser otherwise reads `-200` as unknown short options.
    static func negativeNumbersAsValues(_ arguments: [String]) -> [String]? {
        func isNegative(_ t: String) -> Bool {
            t.count > 1 && t.hasPrefix("-") && t.dropFirst().first.map(\.isNumber) == true
        }
        guard !arguments.contains("--"), arguments.contains(where: isNegative) else { return nil }
        var out: [String] = []
        var positionals: [String] = []
        for token in arguments {
            if isNegative(token) {
                if let last = out.last, last.hasPrefix("--"), !last.contains("=") {
                    out[out.count - 1] = last + "=" + token
                } else {
                    positionals.append(token)
                }
            } else {
                out.append(token)
            }
        }
        return positionals.isEmpty ? out : out + ["--"] + positionals
    }

    /// What the process prints and returns for an error thrown while parsing
    /// or running a command: `text` goes to stdout when `status` is 0 (`--help`,
    /// `--version`), else to stderr.
    ///
    /// With `json` (the command line has `--json`), a failure's text is one
    /// JSON object, `{"error": …, "token": …, "allowed": […]}`, and the status
    /// is the same.
    static func report(for error: any Error, json: Bool) -> (status: Int32, text: String) {
        let plain = report(for: error)
        guard json, plain.status != 0, !plain.text.isEmpty else { return plain }
        return (plain.status, jsonText(ErrorJSON(plain.text), compact: true))
    }

    /// The plain-text report; see ``report(for:json:)``.
    static func report(for error: any Error) -> (status: Int32, text: String) {
        switch error {
        case let error as UsageError:
            return (ExitStatus.usage, "qosmap: error: \(error.description)")
        case let error as DataError:
            return (ExitStatus.dataError, error.description)
        case let error as UnavailableError:
            return (ExitStatus.unavailable, "qosmap: error: \(error.description)")
        case let error as OutputError:
            return (ExitStatus.ioError, "qosmap: error: \(error.description)")
        case let error as PermissionError:
            return (ExitStatus.permission, "qosmap: error: \(error.description)")
        default:
            let code = exitCode(for: error)
            if code == .success {
                // --help, --version and the like go to stdout.
                return (0, fullMessage(for: error))
            }
            if error is ExitCode { return (code.rawValue, "") }
            // ArgumentParser's own parse and validation errors: the message
            // line only, which names the token.
            return (
                code == .validationFailure ? ExitStatus.usage : code.rawValue,
                "qosmap: error: \(oneLine(message(for: error)))"
            )
        }
    }

    /// ArgumentParser lists six or more allowed values as bullets on lines of
    /// their own; every qosmap error is one line, so they are joined with commas.
    static func oneLine(_ message: String) -> String {
        message.replacing(":\n  - ", with: ": ").replacing("\n  - ", with: ", ")
    }
}

/// A failure as JSON: the message, the token it names (the first quoted
/// word) and the allowed values it lists, both empty when it names none.
struct ErrorJSON: Encodable {
    var error: String
    var token: String?
    var allowed: [String]

    init(_ text: String) {
        let prefix = "qosmap: error: "
        error = text.hasPrefix(prefix) ? String(text.dropFirst(prefix.count)) : text
        token = Self.quoted(error).first ?? Self.valueAfter("value ", in: error)
        allowed = Self.allowed(in: error)
    }

    enum CodingKeys: String, CodingKey { case error, token, allowed }

    /// Always writes `token`, as null when the message names none.
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(error, forKey: .error)
        try c.encode(token, forKey: .token)
        try c.encode(allowed, forKey: .allowed)
    }

    /// The word after `marker` ("dscp value 99 is out of range" gives 99).
    static func valueAfter(_ marker: String, in s: String) -> String? {
        guard let r = s.firstRange(of: marker) else { return nil }
        let word = s[r.upperBound...].prefix { !$0.isWhitespace && $0 != ";" }
        return word.isEmpty ? nil : String(word)
    }

    /// The words between single quotes, in order.
    static func quoted(_ s: String) -> [String] {
        let parts = s.split(separator: "'", omittingEmptySubsequences: false)
        return stride(from: 1, to: parts.count - 1, by: 2).map { String(parts[$0]) }
    }

    /// The list after "allowed: " (qosmap's wording) or "provide one of"
    /// (ArgumentParser's).
    static func allowed(in s: String) -> [String] {
        if let r = s.firstRange(of: "allowed: ") {
            // Commas inside parentheses ("8021p (pcp, dot1p)") do not separate.
            var items: [String] = []
            var item = ""
            var depth = 0
            for ch in s[r.upperBound...].prefix(while: { $0 != ";" && $0 != "\n" }) {
                if ch == "(" { depth += 1 }
                if ch == ")" { depth -= 1 }
                if ch == ",", depth == 0 {
                    items.append(item)
                    item = ""
                } else {
                    item.append(ch)
                }
            }
            items.append(item)
            return items.map { trimmingBlanks($0) }.filter { !$0.isEmpty }
        }
        if let r = s.firstRange(of: "one of the following: ") {
            return s[r.upperBound...].split(separator: ",").map { trimmingBlanks($0) }
        }
        if let r = s.firstRange(of: "provide one of ") {
            return quoted(String(s[r.upperBound...]))
        }
        return []
    }
}
