/// A device-internal service class (also called the scheduling PHB): the
/// queue a packet is placed in.
///
/// The raw value orders the classes by priority, lowest first, so `<` means
/// "lower priority": BE < AF1 < AF2 < AF3 < AF4 < EF < CS6 < CS7.
public enum ServiceClass: UInt8, CaseIterable, Comparable, Sendable, CustomStringConvertible {
    /// Best effort.
    case be = 0
    /// Assured forwarding class 1.
    case af1
    /// Assured forwarding class 2.
    case af2
    /// Assured forwarding class 3.
    case af3
    /// Assured forwarding class 4.
    case af4
    /// Expedited forwarding.
    case ef
    /// Class selector 6, internetwork control.
    case cs6
    /// Class selector 7, network control.
    case cs7

    /// The canonical upper-case name, as in the reference: `BE`, `AF1`, … `CS7`.
    public var name: String {
        switch self {
        case .be: "BE"
        case .af1: "AF1"
        case .af2: "AF2"
        case .af3: "AF3"
        case .af4: "AF4"
        case .ef: "EF"
        case .cs6: "CS6"
        case .cs7: "CS7"
        }
    }

    /// The canonical name.
    public var description: String { name }

    /// Looks a class up by name, case-insensitively; nil when unknown.
    public init?(name: some StringProtocol) {
        let upper = name.uppercased()
        guard let found = ServiceClass.allCases.first(where: { $0.name == upper }) else { return nil }
        self = found
    }

    /// The allowed names, for error messages.
    public static let allowedNames = "BE, AF1, AF2, AF3, AF4, EF, CS6, CS7"

    /// Orders by priority, lowest first.
    public static func < (a: ServiceClass, b: ServiceClass) -> Bool { a.rawValue < b.rawValue }
}

/// A drop precedence inside a queue: green is dropped last, red first.
public enum Color: UInt8, CaseIterable, Comparable, Sendable, CustomStringConvertible {
    /// Lowest drop precedence.
    case green = 0
    /// Medium drop precedence.
    case yellow
    /// Highest drop precedence.
    case red

    /// The lower-case name: `green`, `yellow`, `red`.
    public var name: String {
        switch self {
        case .green: "green"
        case .yellow: "yellow"
        case .red: "red"
        }
    }

    /// The name.
    public var description: String { name }

    /// Looks a color up by name, case-insensitively; nil when unknown.
    public init?(name: some StringProtocol) {
        let lower = name.lowercased()
        guard let found = Color.allCases.first(where: { $0.name == lower }) else { return nil }
        self = found
    }

    /// The allowed names, for error messages.
    public static let allowedNames = "green, yellow, red"

    /// Orders by drop precedence, green first.
    public static func < (a: Color, b: Color) -> Bool { a.rawValue < b.rawValue }
}

/// A service class with a color: what an inbound map yields and an outbound
/// map consumes.
public struct Treatment: Hashable, Sendable, CustomStringConvertible {
    /// The service class.
    public var serviceClass: ServiceClass
    /// The color.
    public var color: Color

    /// Creates a treatment.
    @inlinable
    public init(_ serviceClass: ServiceClass, _ color: Color) {
        self.serviceClass = serviceClass
        self.color = color
    }

    /// The index of this cell in an outbound map: class × 3 + color.
    @inlinable
    public var cellIndex: Int { Int(serviceClass.rawValue) &* 3 &+ Int(color.rawValue) }

    /// Every class × color cell, in outbound-map order.
    public static let allCells: [Treatment] = ServiceClass.allCases.flatMap { sc in
        Color.allCases.map { Treatment(sc, $0) }
    }

    /// BE green: what an untrusted packet gets.
    public static let bestEffort = Treatment(.be, .green)

    /// `EF/green`.
    public var description: String { "\(serviceClass.name)/\(color.name)" }
}

/// A marking field that a domain maps.
public enum Field: UInt8, CaseIterable, Sendable, CustomStringConvertible {
    /// DSCP, 0–63.
    case dscp = 0
    /// IP precedence, 0–7.
    case ipPrecedence
    /// IEEE 802.1p PCP, 0–7.
    case dot1p
    /// MPLS EXP (TC), 0–7.
    case exp

    /// The canonical name: `dscp`, `ip-precedence`, `8021p`, `exp`.
    public var name: String {
        switch self {
        case .dscp: "dscp"
        case .ipPrecedence: "ip-precedence"
        case .dot1p: "8021p"
        case .exp: "exp"
        }
    }

    /// The name.
    public var description: String { name }

    /// How many values the field has: 64 for DSCP, 8 for the others.
    @inlinable
    public var valueCount: Int { self == .dscp ? 64 : 8 }

    /// The largest value.
    public var maxValue: Int { valueCount - 1 }

    /// Looks a field up by its name or an alias (`prec`, `precedence`, `pcp`,
    /// `dot1p`, `802.1p`, `mpls-exp`, `tc`), case-insensitively.
    public init?(name: some StringProtocol) {
        switch name.lowercased() {
        case "dscp": self = .dscp
        case "ip-precedence", "prec", "precedence", "ip-prec": self = .ipPrecedence
        case "8021p", "pcp", "dot1p", "802.1p": self = .dot1p
        case "exp", "mpls-exp", "tc", "mpls-tc": self = .exp
        default: return nil
        }
    }

    /// The allowed names, for error messages.
    public static let allowedNames = "dscp, ip-precedence (prec), 8021p (pcp, dot1p), exp (mpls-exp)"

    /// Parses a value for this field: DSCP accepts PHB names too.
    public func parseValue(_ token: some StringProtocol) throws(CodepointError) -> UInt8 {
        switch self {
        case .dscp: return try DSCP(parsing: token).rawValue
        case .ipPrecedence: return try IPPrecedence(parsing: token).rawValue
        case .dot1p: return try PCP(parsing: token).rawValue
        case .exp: return try MPLSEXP(parsing: token).rawValue
        }
    }
}

/// Which received marking an interface trusts.
public enum TrustMode: UInt8, CaseIterable, Sendable, CustomStringConvertible {
    /// Trust nothing: every packet is BE green (the device default).
    case none = 0
    /// Trust the DSCP.
    case dscp
    /// Trust the IP precedence.
    case ipPrecedence
    /// Trust the outer IEEE 802.1p PCP (and DEI where the domain honours it).
    case dot1p
    /// Trust the EXP of the top MPLS label.
    case exp

    /// The field this mode reads, or nil for `none`.
    public var field: Field? {
        switch self {
        case .none: nil
        case .dscp: .dscp
        case .ipPrecedence: .ipPrecedence
        case .dot1p: .dot1p
        case .exp: .exp
        }
    }

    /// The canonical name: `none`, or the field's name.
    public var name: String { field?.name ?? "none" }

    /// The name.
    public var description: String { name }

    /// Looks a mode up by name or any field alias.
    public init?(name: some StringProtocol) {
        if name.lowercased() == "none" || name.lowercased() == "untrusted" {
            self = .none
            return
        }
        guard let field = Field(name: name) else { return nil }
        switch field {
        case .dscp: self = .dscp
        case .ipPrecedence: self = .ipPrecedence
        case .dot1p: self = .dot1p
        case .exp: self = .exp
        }
    }

    /// The allowed names, for error messages.
    public static let allowedNames = "none, dscp, ip-precedence, 8021p, exp"
}
