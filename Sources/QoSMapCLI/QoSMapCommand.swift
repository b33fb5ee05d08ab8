import ArgumentParser
import Foundation
import QoSMapCore
import QoSMapTables

/// The `qosmap` command: query, show and validate QoS priority-mapping tables.
public struct QoSMapCommand: ParsableCommand {
    /// The command's name, abstract and subcommands.
    public static let configuration = CommandConfiguration(
        commandName: "qosmap",
        abstract:
            "Query, show and validate QoS priority-mapping tables (DSCP, IP precedence, 802.1p, MPLS EXP).",
        discussion: """
            A DS domain maps each received marking to a service class (BE, AF1-AF4, EF, CS6, CS7) and a \
            color (green, yellow, red), and maps class and color back to markings on egress. Built-in \
            domains: default (editable) and 5p3d (fixed). User domains load from /etc/qosmap/domains.d/ \
            and --tables DIR.

            Exit status: 0 success; 1 diff found differences or lint found problems; 64 a bad command-line token; 65 bad data (table files, \
            captures); 69 libpcap could not be loaded (remark).
            """,
        version: "0.1.0",
        subcommands: [
            Lookup.self, Show.self, Domains.self, Validate.self, ProfileCommand.self, Remark.self,
            Export.self, Diff.self, Explain.self, Lint.self,
        ])

    /// Creates the command (ArgumentParser needs it).
    public init() {}

    /// Parses the arguments, runs the command and exits: 0 on success, 64 for
    /// a usage error, 65 for bad data, 69 when a needed library is missing. Errors are one line each on stderr.
    public static func run(arguments: [String]? = nil) -> Never {
        do {
            var command = try parseAsRoot(arguments)
            try command.run()
            Foundation.exit(0)
        } catch {
            let report = report(for: error)
            if report.text.isEmpty {
            } else if report.status == 0 {
                print(report.text)
            } else {
                printError(report.text)
            }
            Foundation.exit(report.status)
        }
    }

    /// What the process prints and returns for an error thrown while parsing
    /// or running a command: `text` goes to stdout when `status` is 0 (`--help`,
    /// `--version`), else to stderr.
    static func report(for error: any Error) -> (status: Int32, text: String) {
        switch error {
        case let error as UsageError:
            return (ExitStatus.usage, "qosmap: error: \(error.description)")
        case let error as DataError:
            return (ExitStatus.dataError, error.description)
        case let error as UnavailableError:
            return (ExitStatus.unavailable, "qosmap: error: \(error.description)")
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
        message.replacingOccurrences(of: ":\n  - ", with: ": ").replacingOccurrences(of: "\n  - ", with: ", ")
    }
}
