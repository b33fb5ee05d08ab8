import ArgumentParser

// The property-wrapper types of `qosmap lookup` (Sources/QoSMapCLI/Lookup.swift):
// two String arguments, an optional enum option, String and String? options,
// a Bool flag, and two option groups ([String] option and Bool flags).

/// A color, as qosmap's `--color`.
enum Color: String, ExpressibleByArgument, CaseIterable {
    case green, yellow, red
}

/// As qosmap's `TableOptions`.
struct TableOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Load user domains from DIR.", valueName: "DIR"))
    var tables: [String] = []

    @Flag(name: .long, help: "Do not load the system tables.")
    var noSystemTables = false
}

/// As qosmap's `OutputOptions`.
struct OutputOptions: ParsableArguments {
    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false
}

/// The root command.
struct Root: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "floor", abstract: "The start-up floor.", version: "1",
        subcommands: [Lookup.self])
}

/// Shaped like `qosmap lookup`.
struct Lookup: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "lookup", abstract: "A lookup.")

    @Argument(help: "A field.") var kind: String
    @Argument(help: "A value.") var value: String
    @Option(name: .long, help: "A color.") var color: Color?
    @Option(name: .long, help: "A domain.") var domain: String = "default"
    @Option(name: .long, help: "An egress domain.") var egressDomain: String?
    @Flag(name: .long, help: "DEI.") var dei = false
    @Option(name: .long, help: "A profile.") var profile: String?
    @OptionGroup var tableOptions: TableOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        // The same text as `qosmap lookup dscp 46`, without the tables.
        print("domain \(domain): \(kind) \(value) (EF) -> service class EF, color green")
        print("outbound EF/green in domain \(domain):")
        print("  dscp           46 (EF)\n  ip-precedence  5\n  8021p          5\n  exp            5")
    }
}

Root.main()
