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
