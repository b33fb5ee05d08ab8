/// Which received marking an interface trusts: nothing, or one ``Field``.
///
/// The modes are the fields plus `none`, so names, aliases and the allowed
/// list come from ``Field`` and cannot drift from it.
public enum TrustMode: Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// Trust nothing: every packet is BE green (the device default).
    case none
    /// Trust this field: for ``Field/dot1p`` the outer IEEE 802.1p PCP (and
    /// DEI where the domain honours it), for ``Field/exp`` the EXP of the top
    /// MPLS label.
    case field(Field)

    /// Trust the DSCP.
    public static let dscp = TrustMode.field(.dscp)
    /// Trust the IP precedence.
    public static let ipPrecedence = TrustMode.field(.ipPrecedence)
    /// Trust the outer IEEE 802.1p PCP (and DEI where the domain honours it).
    public static let dot1p = TrustMode.field(.dot1p)
    /// Trust the EXP of the top MPLS label.
    public static let exp = TrustMode.field(.exp)

    /// `none`, then one mode per field in ``Field`` order.
    public static let allCases: [TrustMode] = [.none] + Field.allCases.map(TrustMode.field)

    /// The field this mode reads, or nil for `none`.
    @inlinable
    public var field: Field? {
        switch self {
        case .none: nil
        case .field(let f): f
        }
    }

    /// The canonical name: `none`, or the field's name.
    public var name: String { field?.name ?? "none" }

    /// The name.
    public var description: String { name }

    /// Looks a mode up by `none` (or `untrusted`), or any field name or alias,
    /// case-insensitively; nil when unknown.
    public init?(name: some StringProtocol) {
        let lower = name.lowercased()
        if lower == "none" || lower == "untrusted" {
            self = .none
        } else if let field = Field(name: lower) {
            self = .field(field)
        } else {
            return nil
        }
    }

    /// The allowed names, for error messages: `none, dscp, ip-precedence, 8021p, exp`.
    public static let allowedNames = allCases.map(\.name).joined(separator: ", ")
}
