/// A value of one marking field, typed by its field: what a domain writes or
/// reads for a ``Field`` chosen at run time. Callers that know the field use
/// ``DSCP``, ``IPPrecedence``, ``PCP`` or ``MPLSEXP`` directly.
public enum FieldValue: Hashable, Sendable, CustomStringConvertible {
    /// A DSCP.
    case dscp(DSCP)
    /// An IP precedence.
    case ipPrecedence(IPPrecedence)
    /// An 802.1p PCP.
    case dot1p(PCP)
    /// An MPLS EXP (TC).
    case exp(MPLSEXP)

    /// The value of `field` held in the low bits of `value` (six for DSCP,
    /// three otherwise); cannot fail.
    @inlinable
    public init(_ field: Field, truncating value: UInt8) {
        switch field {
        case .dscp: self = .dscp(DSCP(truncating: value))
        case .ipPrecedence: self = .ipPrecedence(IPPrecedence(truncating: value))
        case .dot1p: self = .dot1p(PCP(truncating: value))
        case .exp: self = .exp(MPLSEXP(truncating: value))
        }
    }

    /// The field the value belongs to.
    public var field: Field {
        switch self {
        case .dscp: .dscp
        case .ipPrecedence: .ipPrecedence
        case .dot1p: .dot1p
        case .exp: .exp
        }
    }

    /// The value as written on the wire.
    @inlinable
    public var rawValue: UInt8 {
        switch self {
        case .dscp(let v): v.rawValue
        case .ipPrecedence(let v): v.rawValue
        case .dot1p(let v): v.rawValue
        case .exp(let v): v.rawValue
        }
    }

    /// The value as its type prints it: `46 (EF)` for a DSCP, decimal otherwise.
    public var description: String {
        switch self {
        case .dscp(let v): v.description
        case .ipPrecedence(let v): v.description
        case .dot1p(let v): v.description
        case .exp(let v): v.description
        }
    }
}
