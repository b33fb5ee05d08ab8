import QoSMapCore

/// Which marking fields a remark writes: a set of ``Field``s, one bit per
/// field at bit `Field.rawValue`, so the vocabulary is ``Field``'s.
///
/// IP precedence is never written on its own: it is the top of the DSCP, which
/// ``dscp`` writes whole.
public struct RewriteFields: OptionSet, Sendable, Hashable, CustomStringConvertible {
    /// The bit set.
    public let rawValue: UInt8

    /// Creates a set from its bits.
    @inlinable
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The set holding one field; nil for ``Field/ipPrecedence``, which is not
    /// written apart from the DSCP.
    public init?(_ field: Field) {
        guard Self.writable.contains(field) else { return nil }
        self.init(rawValue: 1 << field.rawValue)
    }

    /// The fields a remark can write, in ``Field`` order.
    public static let writable: [Field] = Field.allCases.filter { $0 != .ipPrecedence }

    /// The DSCP of the IPv4 TOS or IPv6 Traffic Class octet (ECN bits are never written).
    public static let dscp = RewriteFields(rawValue: 1 << Field.dscp.rawValue)
    /// The PCP of every 802.1Q/802.1ad tag, and the DEI of S-tags when the egress domain carries color in DEI.
    public static let dot1p = RewriteFields(rawValue: 1 << Field.dot1p.rawValue)
    /// The EXP (Traffic Class) of the top MPLS label.
    public static let exp = RewriteFields(rawValue: 1 << Field.exp.rawValue)
    /// Every field.
    public static let all = RewriteFields(rawValue: writable.reduce(0) { $0 | 1 << $1.rawValue })

    /// The fields in the set, in ``Field`` order.
    public var fields: [Field] { Self.writable.filter { rawValue & 1 << $0.rawValue != 0 } }

    /// The field names joined by commas, as `--rewrite` takes them: `dscp,8021p`.
    public var description: String { fields.map(\.name).joined(separator: ",") }

    /// The allowed names, for error messages.
    public static let allowedNames = (writable.map(\.name) + ["all"]).joined(separator: ", ")

    /// Parses a comma-separated list of field names or aliases, or `all`,
    /// case-insensitively: `dscp,8021p`, `pcp`, `all`.
    public init(parsing text: some StringProtocol) throws(RewriteFieldsError) {
        var fields: RewriteFields = []
        for token in text.split(separator: ",", omittingEmptySubsequences: false) {
            let name = String(
                token.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
            if name.lowercased() == "all" {
                fields.formUnion(.all)
            } else if let field = Field(name: name), let one = RewriteFields(field) {
                fields.formUnion(one)
            } else {
                throw RewriteFieldsError(token: name)
            }
        }
        self = fields
    }
}

/// A name in a rewrite list that is not a writable field.
public struct RewriteFieldsError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The bad name.
    public var token: String

    /// Creates the error.
    public init(token: String) { self.token = token }

    /// `invalid rewrite field 'vlan'; allowed: dscp, 8021p, exp, all`.
    public var description: String {
        "invalid rewrite field '\(token)'; allowed: \(RewriteFields.allowedNames)"
    }
}
