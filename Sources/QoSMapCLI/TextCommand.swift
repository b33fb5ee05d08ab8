import ArgumentParser

/// A command whose whole standard output is one string it returns, so that
/// tests can run it in-process and compare the text with a golden file.
protocol TextCommand: ParsableCommand {
    /// Everything the command prints, ending in a newline.
    func standardOutput() throws -> String
}

extension TextCommand {
    /// Prints ``standardOutput()``.
    func run() throws {
        print(try standardOutput(), terminator: "")
    }
}
