// The marking value types. Every type is a validated RawRepresentable: a value
// that exists is always in range, so table reads indexed by it never trap.

/// Why a marking value could not be constructed.
public enum CodepointError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The integer is outside the field's range.
    case outOfRange(field: String, value: Int, allowed: ClosedRange<Int>)
    /// The text is neither a number nor a known name.
    case unparsable(field: String, token: String, allowed: String)

    /// One line naming the bad token and what is allowed.
    public var description: String {
        switch self {
        case .outOfRange(let field, let value, let allowed):
            return
                "\(field) value \(value) is out of range; allowed: \(allowed.lowerBound)-\(allowed.upperBound)"
        case .unparsable(let field, let token, let allowed):
            return "invalid \(field) value '\(token)'; allowed: \(allowed)"
        }
    }
}

/// Parses decimal, `0x..` hexadecimal or `0b..` binary text into an integer.
///
/// Returns nil for anything else, including an empty string or a sign.
package func parseInteger(_ text: Substring) -> Int? {
    var digits = text
    var radix = 10
    if digits.count > 2, digits.hasPrefix("0x") || digits.hasPrefix("0X") {
        radix = 16
        digits = digits.dropFirst(2)
    } else if digits.count > 2, digits.hasPrefix("0b") || digits.hasPrefix("0B") {
        radix = 2
        digits = digits.dropFirst(2)
    }
    guard !digits.isEmpty, digits.count <= 18, digits.first != "+", digits.first != "-" else { return nil }
    return Int(digits, radix: radix)
}

/// A Differentiated Services Code Point (RFC 2474): the upper six bits of the
/// IPv4 TOS octet or the IPv6 Traffic Class octet.
public struct DSCP: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The code point, 0–63.
    public let rawValue: UInt8

    /// Creates a code point; nil when `rawValue` is above 63.
    @inlinable
    public init?(rawValue: UInt8) {
        guard rawValue < 64 else { return nil }
        self.rawValue = rawValue
    }

    /// Creates a code point from any integer, throwing when it is outside 0–63.
    public init(_ value: Int) throws(CodepointError) {
        guard (0...63).contains(value) else {
            throw .outOfRange(field: "dscp", value: value, allowed: 0...63)
        }
        self.rawValue = UInt8(value)
    }

    /// Takes the upper six bits of a TOS or Traffic Class octet; cannot fail.
    @inlinable
    public init(tos: UInt8) { self.rawValue = tos >> 2 }

    /// Takes the low six bits of `value`; cannot fail.
    @inlinable
    public init(truncating value: UInt8) { self.rawValue = value & 63 }

    @usableFromInline
    init(unchecked value: UInt8) { self.rawValue = value }

    /// Class Selector 0, the default PHB (RFC 2474).
    public static let cs0 = DSCP(unchecked: 0)
    /// Class Selector 1 (RFC 2474).
    public static let cs1 = DSCP(unchecked: 8)
    /// Class Selector 2 (RFC 2474).
    public static let cs2 = DSCP(unchecked: 16)
    /// Class Selector 3 (RFC 2474).
    public static let cs3 = DSCP(unchecked: 24)
    /// Class Selector 4 (RFC 2474).
    public static let cs4 = DSCP(unchecked: 32)
    /// Class Selector 5 (RFC 2474).
    public static let cs5 = DSCP(unchecked: 40)
    /// Class Selector 6 (RFC 2474).
    public static let cs6 = DSCP(unchecked: 48)
    /// Class Selector 7 (RFC 2474).
    public static let cs7 = DSCP(unchecked: 56)
    /// Assured Forwarding class 1, low drop precedence (RFC 2597).
    public static let af11 = DSCP(unchecked: 10)
    /// Assured Forwarding class 1, medium drop precedence (RFC 2597).
    public static let af12 = DSCP(unchecked: 12)
    /// Assured Forwarding class 1, high drop precedence (RFC 2597).
    public static let af13 = DSCP(unchecked: 14)
    /// Assured Forwarding class 2, low drop precedence (RFC 2597).
    public static let af21 = DSCP(unchecked: 18)
    /// Assured Forwarding class 2, medium drop precedence (RFC 2597).
    public static let af22 = DSCP(unchecked: 20)
    /// Assured Forwarding class 2, high drop precedence (RFC 2597).
    public static let af23 = DSCP(unchecked: 22)
    /// Assured Forwarding class 3, low drop precedence (RFC 2597).
    public static let af31 = DSCP(unchecked: 26)
    /// Assured Forwarding class 3, medium drop precedence (RFC 2597).
    public static let af32 = DSCP(unchecked: 28)
    /// Assured Forwarding class 3, high drop precedence (RFC 2597).
    public static let af33 = DSCP(unchecked: 30)
    /// Assured Forwarding class 4, low drop precedence (RFC 2597).
    public static let af41 = DSCP(unchecked: 34)
    /// Assured Forwarding class 4, medium drop precedence (RFC 2597).
    public static let af42 = DSCP(unchecked: 36)
    /// Assured Forwarding class 4, high drop precedence (RFC 2597).
    public static let af43 = DSCP(unchecked: 38)
    /// Expedited Forwarding (RFC 3246).
    public static let ef = DSCP(unchecked: 46)
    /// VOICE-ADMIT, capacity-admitted EF traffic (RFC 5865).
    public static let va = DSCP(unchecked: 44)
    /// Lower Effort (RFC 8622).
    public static let le = DSCP(unchecked: 1)
    /// Default Forwarding, the same code point as CS0 (RFC 2474).
    public static let df = DSCP(unchecked: 0)

    /// The PHB names and their code points, in the order names are preferred
    /// when a code point has two (DF before CS0).
    public static let phbNames: [(name: String, dscp: DSCP)] = [
        ("DF", .df), ("CS0", .cs0), ("LE", .le), ("CS1", .cs1), ("AF11", .af11), ("AF12", .af12),
        ("AF13", .af13), ("CS2", .cs2), ("AF21", .af21), ("AF22", .af22), ("AF23", .af23), ("CS3", .cs3),
        ("AF31", .af31), ("AF32", .af32), ("AF33", .af33), ("CS4", .cs4), ("AF41", .af41), ("AF42", .af42),
        ("AF43", .af43), ("CS5", .cs5), ("VA", .va), ("EF", .ef), ("CS6", .cs6), ("CS7", .cs7),
    ]

    /// Vendor spellings accepted beside the PHB names: Junos `be`, `nc1`,
    /// `nc2` and Cisco `default` (Junos `ef`, `af41`… are the PHB names).
    public static let vendorNames: [(name: String, dscp: DSCP, standard: String)] = [
        ("BE", .df, "DF"), ("DEFAULT", .df, "DF"), ("NC1", .cs6, "CS6"), ("NC2", .cs7, "CS7"),
    ]

    /// The code point for a PHB name such as `EF`, `AF41`, `CS6`, `LE`, `VA`
    /// or `DF`, or a vendor spelling (``vendorNames``), case-insensitive; or nil.
    public init?(name: some StringProtocol) {
        guard let standard = DSCP.standardName(name) else { return nil }
        self = DSCP.phbNames.first(where: { $0.name == standard })!.dscp
    }

    /// The standard PHB name a name token stands for (`df` gives `DF`, Junos
    /// `be` gives `DF`, `nc1` gives `CS6`), or nil when it is no name.
    public static func standardName(_ token: some StringProtocol) -> String? {
        let upper = token.uppercased()
        if phbNames.contains(where: { $0.name == upper }) { return upper }
        return vendorNames.first(where: { $0.name == upper })?.standard
    }

    /// Parses a decimal, `0x`, `0b` or PHB-name token.
    public init(parsing token: some StringProtocol) throws(CodepointError) {
        if let named = DSCP(name: token) {
            self = named
            return
        }
        // Six binary digits, as switch configurations write DSCP (101110 is EF).
        if token.count == 6, token.allSatisfy({ $0 == "0" || $0 == "1" }),
            let bits = UInt8(String(token), radix: 2)
        {
            self.init(unchecked: bits)
            return
        }
        guard let value = parseInteger(Substring(token)) else {
            throw .unparsable(
                field: "dscp", token: String(token),
                allowed:
                    "0-63 (decimal, 0x.., 0b.., six binary digits) or a PHB name (DF, CS0-CS7, AF11-AF43, EF, VA, LE; Junos be, nc1, nc2; Cisco default)"
            )
        }
        try self.init(value)
    }

    /// The preferred PHB name (`EF`, `AF41`, `CS6`, `LE`, `VA`; `CS0` for 0), or nil.
    public var name: String? {
        if rawValue == 0 { return "CS0" }
        return DSCP.phbNames.first(where: { $0.dscp == self })?.name
    }

    /// The class-selector precedence this code point implies: its upper three bits.
    @inlinable
    public var precedence: IPPrecedence { IPPrecedence(truncating: rawValue >> 3) }

    /// The code point in decimal, with its PHB name when it has one: `46 (EF)`.
    public var description: String {
        if let name { return "\(rawValue) (\(name))" }
        return "\(rawValue)"
    }

    /// Orders by numeric value.
    public static func < (a: DSCP, b: DSCP) -> Bool { a.rawValue < b.rawValue }

    /// Every code point, 0–63.
    public static var all: [DSCP] { (0..<64).map { DSCP(unchecked: UInt8($0)) } }
}

/// A three-bit marking field: IP precedence, IEEE 802.1p PCP or MPLS EXP (TC).
///
/// A conforming type stores its value and masks it in ``init(truncating:)``;
/// everything else (the checked initialisers, parsing, ordering, text) is
/// shared here.
public protocol ThreeBitCodepoint: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible
where RawValue == UInt8 {
    /// The field's name in messages.
    static var fieldName: String { get }
    /// Creates a value from the low three bits of `value`; cannot fail.
    init(truncating value: UInt8)
}

extension ThreeBitCodepoint {
    /// Creates a value; nil when `rawValue` is above 7.
    @inlinable
    public init?(rawValue: UInt8) {
        guard rawValue < 8 else { return nil }
        self.init(truncating: rawValue)
    }

    /// Creates a value from any integer, throwing when it is outside 0–7.
    public init(_ value: Int) throws(CodepointError) {
        guard (0...7).contains(value) else {
            throw .outOfRange(field: Self.fieldName, value: value, allowed: 0...7)
        }
        self.init(truncating: UInt8(value))
    }

    /// Parses a decimal, `0x` or `0b` token.
    public init(parsing token: some StringProtocol) throws(CodepointError) {
        guard let value = parseInteger(Substring(token)) else {
            throw .unparsable(
                field: Self.fieldName, token: String(token), allowed: "0-7 (decimal, 0x.., 0b..)")
        }
        try self.init(value)
    }

    /// The value in decimal.
    public var description: String { "\(rawValue)" }

    /// Orders by numeric value.
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }

    /// Every value, 0–7.
    public static var all: [Self] { (0..<8).map { Self(truncating: UInt8($0)) } }
}

/// The IPv4 precedence: the upper three bits of the TOS octet (RFC 791).
public struct IPPrecedence: ThreeBitCodepoint {
    /// The precedence, 0–7.
    public let rawValue: UInt8
    /// Creates a precedence from the low three bits of `value`.
    @inlinable
    public init(truncating value: UInt8) { self.rawValue = value & 7 }
    /// The field's name in messages.
    public static let fieldName = "ip-precedence"
}

/// An IEEE 802.1Q Priority Code Point (PCP), also called 802.1p priority.
public struct PCP: ThreeBitCodepoint {
    /// The priority code point, 0–7.
    public let rawValue: UInt8
    /// Creates a PCP from the low three bits of `value`.
    @inlinable
    public init(truncating value: UInt8) { self.rawValue = value & 7 }
    /// The field's name in messages.
    public static let fieldName = "8021p"
}

/// The MPLS Traffic Class field, formerly EXP (RFC 5462).
public struct MPLSEXP: ThreeBitCodepoint {
    /// The traffic class, 0–7.
    public let rawValue: UInt8
    /// Creates an EXP value from the low three bits of `value`.
    @inlinable
    public init(truncating value: UInt8) { self.rawValue = value & 7 }
    /// The field's name in messages.
    public static let fieldName = "exp"
}
