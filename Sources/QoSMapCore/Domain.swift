/// How a domain treats the IEEE 802.1ad drop-eligible indicator (DEI) of an
/// S-tag, following table 5 of the reference.
public enum DropEligibility: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// DEI is neither read nor written; drop precedence comes from the maps alone.
    case ignore = 0
    /// DEI carries color: on ingress DEI=1 makes a green packet yellow; on egress
    /// DEI is set for yellow and red (table 5: green ↔ false, yellow/red → true).
    case color

    /// The name used in table files: `ignore` or `color`.
    public var name: String {
        switch self {
        case .ignore: "ignore"
        case .color: "color"
        }
    }

    /// The name.
    public var description: String { name }

    /// Looks a policy up by name; nil when unknown.
    public init?(name: some StringProtocol) {
        switch name.lowercased() {
        case "ignore": self = .ignore
        case "color": self = .color
        default: return nil
        }
    }
}

/// Where a domain was defined.
public enum DomainOrigin: Sendable, Equatable, CustomStringConvertible {
    /// Compiled into the binary from `Tables/`.
    case builtIn
    /// Loaded from a user file.
    case file(String)

    /// `built-in` or the file's path.
    public var description: String {
        switch self {
        case .builtIn: "built-in"
        case .file(let path): path
        }
    }
}

/// A DiffServ domain: for each field, a total inbound map (value → class and
/// color) and a total outbound map (class × color → value).
///
/// Every lookup is one read from a flat byte array, indexed by values that are
/// in range by construction.
public struct DSDomain: Sendable, Equatable {
    /// The domain's name.
    public let name: String
    /// A human description.
    public var summary: String
    /// Where the domain was defined.
    public var origin: DomainOrigin
    /// Whether user files may override its cells.
    public var isEditable: Bool
    /// How S-tag DEI is treated.
    public var dropEligibility: DropEligibility

    // Inbound cells packed as class << 2 | color, DSCP at 0..<64, then 8 each for
    // precedence, 802.1p and EXP. Outbound: 24 cells per field after that.
    @usableFromInline var inbound: [UInt8]
    @usableFromInline var outbound: [UInt8]

    /// Where a field's inbound cells start: DSCP at 0, then 8 per field.
    @inlinable
    static func inboundBase(_ field: Field) -> Int {
        field == .dscp ? 0 : 56 &+ 8 &* Int(field.rawValue)
    }

    /// Creates a domain from complete maps.
    ///
    /// - Parameters:
    ///   - inbound: for each field, its values in order (64 for DSCP, 8 otherwise).
    ///   - outbound: for each field, 24 values in ``Treatment/allCells`` order.
    /// - Throws: ``DomainError/incomplete(_:)`` listing every missing or bad cell.
    public init(
        name: String, summary: String = "", origin: DomainOrigin = .builtIn, isEditable: Bool = true,
        dropEligibility: DropEligibility = .ignore, inbound: [Field: [Treatment]], outbound: [Field: [UInt8]]
    ) throws(DomainError) {
        var builder = DomainBuilder(name: name)
        for field in Field.allCases {
            for (value, treatment) in (inbound[field] ?? []).enumerated() where value < field.valueCount {
                builder.setInbound(field, UInt8(value), treatment)
            }
            for (cell, value) in (outbound[field] ?? []).enumerated() where cell < Treatment.allCells.count {
                builder.setOutbound(field, Treatment.allCells[cell], value)
            }
        }
        builder.summary = summary
        builder.origin = origin
        builder.isEditable = isEditable
        builder.dropEligibility = dropEligibility
        self = try builder.build()
    }

    @usableFromInline
    init(builder: DomainBuilder, inbound: [UInt8], outbound: [UInt8]) {
        self.name = builder.name
        self.summary = builder.summary
        self.origin = builder.origin
        self.isEditable = builder.isEditable
        self.dropEligibility = builder.dropEligibility
        self.inbound = inbound
        self.outbound = outbound
    }

    // MARK: Inbound

    /// The class and color for a raw value of a field. Values are masked to the
    /// field's width, so no input can trap.
    @inlinable
    public func classify(_ field: Field, _ value: UInt8) -> Treatment {
        let mask: UInt8 = field == .dscp ? 63 : 7
        let packed = inbound[DSDomain.inboundBase(field) &+ Int(value & mask)]
        // Cells are written only by DomainBuilder from valid enums, so the
        // packed bits are always a valid case: no failable init on the hot path.
        return Treatment(
            unsafeBitCast(packed >> 2, to: ServiceClass.self), unsafeBitCast(packed & 3, to: Color.self))
    }

    /// The class and color of a DSCP (table 1 in the default domain).
    @inlinable
    public func classify(dscp: DSCP) -> Treatment { classify(.dscp, dscp.rawValue) }

    /// The class and color of an IP precedence (table 3).
    @inlinable
    public func classify(precedence: IPPrecedence) -> Treatment {
        classify(.ipPrecedence, precedence.rawValue)
    }

    /// The class and color of an MPLS EXP (table 3).
    @inlinable
    public func classify(exp: MPLSEXP) -> Treatment { classify(.exp, exp.rawValue) }

    /// The class and color of an 802.1p PCP with its DEI bit (tables 3, 5 and 6).
    ///
    /// With ``DropEligibility/color``, DEI=1 raises green to yellow.
    @inlinable
    public func classify(pcp: PCP, dei: Bool = false) -> Treatment {
        var t = classify(.dot1p, pcp.rawValue)
        if dei, dropEligibility == .color, t.color == .green { t.color = .yellow }
        return t
    }

    // MARK: Outbound

    /// The value a field is written with for a class and color; for a field
    /// known at compile time use ``dscp(for:)``, ``precedence(for:)``,
    /// ``pcp(for:)`` or ``exp(for:)``.
    @inlinable
    public func mark(_ field: Field, for treatment: Treatment) -> FieldValue {
        FieldValue(field, truncating: raw(field, for: treatment))
    }

    /// An outbound cell's byte; in range for its field by construction.
    @inlinable
    func raw(_ field: Field, for treatment: Treatment) -> UInt8 {
        outbound[Int(field.rawValue) &* 24 &+ treatment.cellIndex]
    }

    /// The DSCP written for a class and color (table 2 in the default domain).
    @inlinable
    public func dscp(for treatment: Treatment) -> DSCP { DSCP(unchecked: raw(.dscp, for: treatment)) }

    /// The IP precedence written for a class and color (table 4).
    @inlinable
    public func precedence(for treatment: Treatment) -> IPPrecedence {
        IPPrecedence(truncating: raw(.ipPrecedence, for: treatment))
    }

    /// The PCP written for a class and color (tables 4 and 7).
    @inlinable
    public func pcp(for treatment: Treatment) -> PCP { PCP(truncating: raw(.dot1p, for: treatment)) }

    /// The DEI written on an S-tag for a class and color: set for yellow and red
    /// when the domain carries color in DEI, clear otherwise (table 5).
    @inlinable
    public func dei(for treatment: Treatment) -> Bool {
        dropEligibility == .color && treatment.color != .green
    }

    /// The MPLS EXP written for a class and color (table 4).
    @inlinable
    public func exp(for treatment: Treatment) -> MPLSEXP { MPLSEXP(truncating: raw(.exp, for: treatment)) }

    /// Whether two domains map every cell alike (names and origins aside).
    public func hasSameMaps(as other: DSDomain) -> Bool {
        inbound == other.inbound && outbound == other.outbound && dropEligibility == other.dropEligibility
    }

    /// A builder seeded with this domain's cells, for deriving a domain from it.
    public func derive(name: String) -> DomainBuilder {
        var b = DomainBuilder(name: name)
        b.dropEligibility = dropEligibility
        b.summary = summary
        for i in inbound.indices { b.inbound[i] = inbound[i] }
        for i in outbound.indices { b.outbound[i] = outbound[i] }
        return b
    }
}

/// Why a domain could not be built.
public enum DomainError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The listed cells are undefined.
    case incomplete([String])

    /// One line naming the missing cells.
    public var description: String {
        switch self {
        case .incomplete(let cells):
            return "domain is not total; undefined: " + cells.joined(separator: ", ")
        }
    }
}

/// Collects cells one by one and checks totality when built.
public struct DomainBuilder: Sendable {
    /// The domain's name.
    public var name: String
    /// A human description.
    public var summary: String = ""
    /// Where the domain comes from.
    public var origin: DomainOrigin = .builtIn
    /// Whether user files may override its cells.
    public var isEditable: Bool = true
    /// How S-tag DEI is treated.
    public var dropEligibility: DropEligibility = .ignore

    @usableFromInline static let undefined: UInt8 = 0xFF
    @usableFromInline var inbound = [UInt8](repeating: undefined, count: 88)
    @usableFromInline var outbound = [UInt8](repeating: undefined, count: 96)

    /// Starts an empty builder.
    public init(name: String) { self.name = name }

    /// Sets one inbound cell; the value is masked to the field's width.
    public mutating func setInbound(_ field: Field, _ value: UInt8, _ treatment: Treatment) {
        let mask: UInt8 = field == .dscp ? 63 : 7
        inbound[DSDomain.inboundBase(field) + Int(value & mask)] =
            treatment.serviceClass.rawValue << 2 | treatment.color.rawValue
    }

    /// Sets one outbound cell; the value is masked to the field's width.
    public mutating func setOutbound(_ field: Field, _ treatment: Treatment, _ value: UInt8) {
        let mask: UInt8 = field == .dscp ? 63 : 7
        outbound[Int(field.rawValue) * 24 + treatment.cellIndex] = value & mask
    }

    /// Whether an inbound cell has been set.
    public func hasInbound(_ field: Field, _ value: UInt8) -> Bool {
        inbound[DSDomain.inboundBase(field) + Int(value)] != DomainBuilder.undefined
    }

    /// Whether an outbound cell has been set.
    public func hasOutbound(_ field: Field, _ treatment: Treatment) -> Bool {
        outbound[Int(field.rawValue) * 24 + treatment.cellIndex] != DomainBuilder.undefined
    }

    /// The undefined cells of one field: the received values with no class
    /// and color, and the classes and colors with no value to write.
    public func missingCells(_ field: Field) -> (inbound: [FieldValue], outbound: [Treatment]) {
        let ins = (0..<field.valueCount).map(UInt8.init).filter { !hasInbound(field, $0) }
            .map { FieldValue(field, truncating: $0) }
        let outs = Treatment.allCells.filter { !hasOutbound(field, $0) }
        return (ins, outs)
    }

    /// Builds the domain, or lists every undefined cell.
    public func build() throws(DomainError) -> DSDomain {
        var missing: [String] = []
        for field in Field.allCases {
            let (ins, outs) = missingCells(field)
            missing += ins.map { "inbound \(field.name) \($0.rawValue)" }
            missing += outs.map { "outbound \(field.name) \($0)" }
        }
        guard missing.isEmpty else { throw .incomplete(missing) }
        return DSDomain(builder: self, inbound: inbound, outbound: outbound)
    }
}
