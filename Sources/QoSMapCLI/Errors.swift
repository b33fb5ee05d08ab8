#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

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

/// An output that could not be written (a full disk, a missing directory, a
/// closed pipe): one line naming the path and the system's reason, exit 74
/// (EX_IOERR). The old output is kept.
public struct OutputError: Error, CustomStringConvertible {
    /// `PATH: cannot write: REASON`.
    public var description: String

    /// Creates the error.
    public init(_ description: String) { self.description = description }

    /// `PATH: cannot write[ what]: strerror(code)`; `-` is named "standard output".
    init(path: String, what: String = "", errno code: Int32) {
        self.init(path: path, what: what, reason: String(cString: strerror(code)))
    }

    /// `PATH: cannot write[ what]: reason`; `-` is named "standard output".
    init(path: String, what: String = "", reason: String) {
        let name = path == "-" ? "standard output" : path
        self.init("\(name): cannot write\(what.isEmpty ? "" : " " + what): \(reason)")
    }
}

/// Exit statuses from sysexits.h.
enum ExitStatus {
    static let usage: Int32 = 64
    static let dataError: Int32 = 65
    static let unavailable: Int32 = 69
    static let ioError: Int32 = 74
    static let permission: Int32 = 77
}
