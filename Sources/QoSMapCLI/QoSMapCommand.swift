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

            Exit status: 0 success; 64 a bad command-line token; 65 bad data (table files, \
            captures); 69 libpcap could not be loaded (remark).
            """,
        version: "0.1.0",
        subcommands: [
            Lookup.self, Show.self, Domains.self, Validate.self, ProfileCommand.self, Remark.self, Export.self,
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
        } catch let error as UsageError {
            printError("qosmap: error: \(error.description)")
            Foundation.exit(ExitStatus.usage)
        } catch let error as DataError {
            printError(error.description)
            Foundation.exit(ExitStatus.dataError)
        } catch let error as UnavailableError {
            printError("qosmap: error: \(error.description)")
            Foundation.exit(ExitStatus.unavailable)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                // --help, --version and the like go to stdout.
                print(fullMessage(for: error))
                Foundation.exit(0)
            }
            if error is ExitCode {
                Foundation.exit(code.rawValue)
            }
            // ArgumentParser's own parse and validation errors: the message
            // line only, which names the token.
            printError("qosmap: error: \(message(for: error))")
            Foundation.exit(code == .validationFailure ? ExitStatus.usage : code.rawValue)
        }
    }
}
