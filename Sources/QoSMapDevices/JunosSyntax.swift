import QoSMapCore

/// A Junos code-point type: what a classifier reads or a rewrite rule writes
/// (`[edit class-of-service classifiers TYPE]`, `[… rewrite-rules TYPE]`).
public enum JunosCodeType: String, CaseIterable, Sendable {
    /// IPv4 DSCP, 6 bits.
    case dscp
    /// IPv6 DSCP, 6 bits.
    case dscpIPv6 = "dscp-ipv6"
    /// IEEE 802.1p PCP, 3 bits.
    case ieee8021 = "ieee-802.1"
    /// IEEE 802.1ad PCP and DEI, 4 bits (PCP then DEI).
    case ieee8021ad = "ieee-802.1ad"
    /// MPLS EXP, 3 bits.
    case exp
    /// IPv4 precedence, 3 bits.
    case inetPrecedence = "inet-precedence"

    /// The qosmap field this type carries.
    public var field: Field {
        switch self {
        case .dscp, .dscpIPv6: .dscp
        case .ieee8021, .ieee8021ad: .dot1p
        case .exp: .exp
        case .inetPrecedence: .ipPrecedence
        }
    }

    /// How many bits a code point of this type has.
    public var bitCount: Int {
        switch self {
        case .dscp, .dscpIPv6: 6
        case .ieee8021ad: 4
        case .ieee8021, .exp, .inetPrecedence: 3
        }
    }

    /// The names, for error messages.
    public static let allowedNames = allCases.map(\.rawValue).joined(separator: ", ")

    /// A value as the binary string Junos writes (`001010`, `101`, `0110`).
    public func bits(_ value: UInt8) -> String {
        let s = String(value, radix: 2)
        return String(repeating: "0", count: max(0, bitCount - s.count)) + s
    }

    /// The default code-point aliases of this type (Junos "Default CoS Values"
    /// table; 802.1ad from "Default IEEE 802.1ad Classifier").
    public var defaultAliases: [String: UInt8] {
        switch self {
        case .dscp, .dscpIPv6: JunosCodeType.dscpAliases
        case .ieee8021, .exp, .inetPrecedence: JunosCodeType.threeBitAliases
        case .ieee8021ad: JunosCodeType.adAliases
        }
    }

    static let dscpAliases: [String: UInt8] = [
        "ef": 46, "af11": 10, "af12": 12, "af13": 14, "af21": 18, "af22": 20, "af23": 22,
        "af31": 26, "af32": 28, "af33": 30, "af41": 34, "af42": 36, "af43": 38, "be": 0,
        "cs1": 8, "cs2": 16, "cs3": 24, "cs4": 32, "cs5": 40, "nc1": 48, "cs6": 48, "nc2": 56, "cs7": 56,
    ]

    static let threeBitAliases: [String: UInt8] = [
        "be": 0, "be1": 1, "ef": 2, "ef1": 3, "af11": 4, "af12": 5, "nc1": 6, "cs6": 6, "nc2": 7, "cs7": 7,
    ]

    static let adAliases: [String: UInt8] = {
        var d: [String: UInt8] = [:]
        for (name, pcp) in threeBitAliases where !name.hasPrefix("cs") {
            d[name] = pcp << 1
            d[name + "-dei"] = pcp << 1 | 1
        }
        return d
    }()

    /// Parses a code point: exactly ``bitCount`` binary digits, or an alias
    /// (the defaults, overridden by `custom`); nil when it is neither.
    public func parse(_ token: String, custom: [String: UInt8] = [:]) -> UInt8? {
        let lower = token.lowercased()
        if let v = custom[lower] ?? defaultAliases[lower] { return v }
        guard token.count == bitCount, token.allSatisfy({ $0 == "0" || $0 == "1" }) else { return nil }
        return UInt8(token, radix: 2)
    }

    /// What ``parse(_:custom:)`` accepts, for error messages.
    public var allowedValues: String {
        let aliases = defaultAliases.keys.sorted().joined(separator: ", ")
        return "\(bitCount) binary digits or an alias (\(aliases))"
    }
}

/// A Junos packet loss priority; qosmap colors map green → low,
/// yellow → medium-high, red → high.
public enum JunosLossPriority: String, CaseIterable, Sendable {
    /// Green.
    case low
    /// No qosmap color; read as yellow (and reported).
    case mediumLow = "medium-low"
    /// Yellow.
    case mediumHigh = "medium-high"
    /// Red.
    case high

    /// The loss priority a color is exported as.
    public init(_ color: Color) {
        switch color {
        case .green: self = .low
        case .yellow: self = .mediumHigh
        case .red: self = .high
        }
    }

    /// The color it is imported as (medium-low reads as yellow).
    public var color: Color {
        switch self {
        case .low: .green
        case .mediumLow, .mediumHigh: .yellow
        case .high: .red
        }
    }

    /// The names, for error messages.
    public static let allowedNames = allCases.map(\.rawValue).joined(separator: ", ")
}

/// Junos naming of qosmap classes and domains.
public enum JunosNames {
    /// The forwarding class a service class is exported as: its lower-case
    /// name (`be`, `af1` … `cs7`), on the queue numbered like the class.
    public static func forwardingClass(_ serviceClass: ServiceClass) -> String {
        serviceClass.name.lowercased()
    }

    /// The service class of a forwarding-class name: the qosmap names, any
    /// case, and the Junos defaults `best-effort` (BE), `expedited-forwarding`
    /// (EF) and `network-control` (CS6, RFC 4594's network control); nil otherwise.
    public static func serviceClass(_ forwardingClass: String) -> ServiceClass? {
        switch forwardingClass.lowercased() {
        case "best-effort": .be
        case "expedited-forwarding": .ef
        case "network-control": .cs6
        default: ServiceClass(name: forwardingClass)
        }
    }

    /// The forwarding-class names ``serviceClass(_:)`` accepts, for messages.
    public static let allowedForwardingClasses =
        ServiceClass.allCases.map(forwardingClass).joined(separator: ", ")
        + ", best-effort, expedited-forwarding, network-control"

    /// The prefix of every classifier and rewrite rule the exporter writes.
    public static let prefix = "qosmap-"

    /// The classifier and rewrite-rule name of a domain: `qosmap-DOMAIN`, the
    /// same for every type (Junos names each type separately).
    public static func mapName(domain: String) -> String { prefix + domain }

    /// Role and type words a hand-written name may end with; stripped (once
    /// each, role first) to find the domain a classifier or rewrite rule belongs to.
    static let roleSuffixes = ["-classifiers", "-classifier", "-rewrites", "-rewrite", "-rw", "-cl"]
    static let typeSuffixes = [
        "-dscp-ipv6", "-ipv6", "-dscp", "-ieee-802.1ad", "-ieee-802.1", "-8021ad", "-8021p", "-dot1p",
        "-802.1p", "-pcp", "-exp", "-mpls", "-inet-precedence", "-precedence", "-prec",
    ]

    /// The domain (map family) a classifier or rewrite-rule name belongs to:
    /// `qosmap-NAME` gives `NAME`; any other name loses one role suffix
    /// (`-classifier`, `-rewrite`, `-rw`, …) and then one type suffix
    /// (`-dscp`, `-ipv6`, `-8021p`, `-exp`, `-prec`, …), case-insensitively,
    /// so `PE1-DSCP` gives `PE1` and `pe1-exp-rw` gives `pe1`.
    public static func family(_ name: String) -> String {
        if name.lowercased().hasPrefix(prefix), name.count > prefix.count {
            return String(name.dropFirst(prefix.count))
        }
        var n = name
        for list in [roleSuffixes, typeSuffixes] {
            if let s = list.first(where: { n.lowercased().hasSuffix($0) && n.count > $0.count }) {
                n = String(n.dropLast(s.count))
            }
        }
        return n
    }
}

/// One word of a `set` line, with its 1-based column.
struct JunosToken: Equatable {
    var text: String
    var column: Int
    /// Whether the word was quoted (a quoted `[` is a name, not a list).
    var quoted = false
}

/// Splits a `set` line into words: blanks separate, `"…"` is one word, and
/// `[` and `]` are words of their own even when written against a value.
func junosTokens(_ line: Substring, file: String, line number: Int) throws(DeviceFormatError) -> [JunosToken]
{
    var tokens: [JunosToken] = []
    var current = ""
    var start = 0
    var column = 0
    var quoteStart: Int?
    func flush() {
        if !current.isEmpty { tokens.append(JunosToken(text: current, column: start)) }
        current = ""
    }
    for c in line {
        column += 1
        if let q = quoteStart {
            if c == "\"" {
                tokens.append(JunosToken(text: current, column: q, quoted: true))
                current = ""
                quoteStart = nil
            } else {
                current.append(c)
            }
            continue
        }
        switch c {
        case " ", "\t", "\r":
            flush()
        case "\"":
            flush()
            quoteStart = column
        case "[", "]":
            flush()
            tokens.append(JunosToken(text: String(c), column: column))
        default:
            if current.isEmpty { start = column }
            current.append(c)
        }
    }
    if let q = quoteStart {
        throw DeviceFormatError(
            file: file, line: number, column: q, "unterminated quoted name; allowed: \"…\" on one line")
    }
    flush()
    return tokens
}
