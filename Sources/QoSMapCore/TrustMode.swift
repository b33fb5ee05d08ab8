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
