import ArgumentParser
import QoSMapCore
import QoSMapPacket

// ArgumentParser parses the vocabulary types directly, so a bad token fails at
// parse time with the allowed names, and no command re-parses a string later.
// The conformances live here, not in QoSMapCore, which must not depend on
// ArgumentParser.

extension Field: ExpressibleByArgument {
    /// Parses a field name or alias, case-insensitively (``Field/init(name:)``).
    public init?(argument: String) { self.init(name: argument) }

    /// The canonical names, listed in help and in the error for a bad value.
    public static var allValueStrings: [String] { allCases.map(\.name) }

    /// The canonical name.
    public var defaultValueDescription: String { name }

    /// None: the names are their own description. ArgumentParser's default
    /// for a `UInt8`-backed `CaseIterable` keys each name by its raw number
    /// ("0": "green"), which help then printed as an empty "green - " line per
    /// value, and which formats each raw `UInt8` through a dynamic cast at
    /// every start-up (two conformance scans of the whole binary).
    public static var allValueDescriptions: [String: String] { [:] }
}

extension TrustMode: ExpressibleByArgument {
    /// Parses `none` or a field name or alias (``TrustMode/init(name:)``).
    public init?(argument: String) { self.init(name: argument) }

    /// The canonical names, listed in help and in the error for a bad value.
    public static var allValueStrings: [String] { allCases.map(\.name) }

    /// The canonical name.
    public var defaultValueDescription: String { name }
}

extension ServiceClass: ExpressibleByArgument {
    /// Parses a class name, case-insensitively (``ServiceClass/init(name:)``).
    public init?(argument: String) { self.init(name: argument) }

    /// The canonical names, listed in help and in the error for a bad value.
    public static var allValueStrings: [String] { allCases.map(\.name) }

    /// The canonical name.
    public var defaultValueDescription: String { name }

    /// None, as for ``Field`` (the names are their own description).
    public static var allValueDescriptions: [String: String] { [:] }
}

extension Color: ExpressibleByArgument {
    /// Parses a color name, case-insensitively (``Color/init(name:)``).
    public init?(argument: String) { self.init(name: argument) }

    /// The canonical names, listed in help and in the error for a bad value.
    public static var allValueStrings: [String] { allCases.map(\.name) }

    /// The canonical name.
    public var defaultValueDescription: String { name }

    /// None, as for ``Field`` (the names are their own description).
    public static var allValueDescriptions: [String: String] { [:] }
}

extension UntrustedFallback: ExpressibleByArgument {
    /// `default` or `keep`.
    public static var allValueStrings: [String] { allCases.map(\.rawValue) }

    /// The name.
    public var defaultValueDescription: String { rawValue }
}

extension TagSelection: ExpressibleByArgument {
    /// `all`, `outer` or `inner`.
    public static var allValueStrings: [String] { allCases.map(\.rawValue) }

    /// The name.
    public var defaultValueDescription: String { rawValue }
}
