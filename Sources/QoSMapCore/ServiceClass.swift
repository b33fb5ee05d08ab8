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
