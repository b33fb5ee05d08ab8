// Queues per service class (issue 38), the pure part: the values of an
// interface's `queues:` config, their validation, and the qdisc trees they
// compile to (HTB, or CAKE's tins), with the skb priority that sends each
// class to its queue. Nothing here touches the kernel: the TrafficShaping
// module builds these plans through rtnetlink.

// MARK: - Rate

/// A shaping rate in bits per second, written in `tc`'s units: `20mbit`,
/// `1.5mbit`, `100kbit`, `1gbit`, `500000bit`, `2mbps` (bytes per second),
/// `10mibit` (binary prefixes).
public struct Rate: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Bits per second.
    public var bitsPerSecond: UInt64

    /// A rate of `bitsPerSecond`.
    public init(bitsPerSecond: UInt64) { self.bitsPerSecond = bitsPerSecond }

    /// A rate of whole bytes per second (saturating past `UInt64.max` bits).
    public init(bytesPerSecond: UInt64) {
        let (bits, overflow) = bytesPerSecond.multipliedReportingOverflow(by: 8)
        bitsPerSecond = overflow ? .max : bits
    }

    /// Whole bytes per second: what the kernel's rate fields hold (HTB's
    /// `tc_ratespec`, CAKE's base rate). The bits below a byte are dropped, as
    /// `tc` drops them.
    public var bytesPerSecond: UInt64 { bitsPerSecond / 8 }

    /// `tc`'s rate suffixes (iproute2's `lib/utils_math.c`), lower-cased: `tc`
    /// compares them case-insensitively. `…bps` are bytes per second.
    public static let units: [(name: String, bits: UInt64)] = [
        ("bit", 1), ("kibit", 1 << 10), ("kbit", 1_000), ("mibit", 1 << 20), ("mbit", 1_000_000),
        ("gibit", 1 << 30), ("gbit", 1_000_000_000), ("tibit", 1 << 40), ("tbit", 1_000_000_000_000),
        ("bps", 8), ("kibps", 8 << 10), ("kbps", 8_000), ("mibps", 8 << 20), ("mbps", 8_000_000),
        ("gibps", 8 << 30), ("gbps", 8_000_000_000), ("tibps", 8 << 40), ("tbps", 8_000_000_000_000),
    ]

    /// What a rate token may be, for error messages.
    public static let allowedText =
        "a number and a tc unit: " + units.map(\.name).joined(separator: ", ")
        + " (bps units are bytes per second), e.g. 20mbit"

    /// Parses a rate as `tc` does: a decimal number (with an optional fraction
    /// and exponent, as `strtod` reads them) and a case-insensitive unit; no
    /// unit means bits per second unless `requiringUnit` (a config's `rate:`,
    /// where a bare number is refused, issue 38 item 2). The result is rounded
    /// down to a whole bit per second.
    /// - Throws: ``QueueConfigError/invalidRate(_:)`` naming the token and the
    ///   units, ``QueueConfigError/rateWithoutUnit(_:)``, or
    ///   ``QueueConfigError/rateTooLarge(_:)`` past `UInt64` bits per second.
    public init(parsing token: some StringProtocol, requiringUnit: Bool = false) throws(QueueConfigError) {
        let text = String(token)
        let bytes = Array(text.utf8)
        var index = 0
        func digit(_ at: Int) -> UInt64? {
            at < bytes.count && bytes[at] >= 0x30 && bytes[at] <= 0x39 ? UInt64(bytes[at] - 0x30) : nil
        }
        var mantissa: UInt64 = 0
        var digits = 0
        var fractionDigits = 0
        var overflow = false
        func take(_ d: UInt64) {
            let (times10, o1) = mantissa.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(d)
            overflow = overflow || o1 || o2
            mantissa = sum
            digits += 1
        }
        while let d = digit(index) {
            take(d)
            index += 1
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            while let d = digit(index) {
                take(d)
                fractionDigits += 1
                index += 1
            }
        }
        guard digits > 0 else { throw .invalidRate(text) }
        // An exponent only when digits follow, as strtod: "1e" leaves "e" as the unit.
        var exponent = 0
        if index < bytes.count, bytes[index] | 0x20 == UInt8(ascii: "e") {
            var at = index + 1
            var negative = false
            if at < bytes.count, bytes[at] == UInt8(ascii: "-") || bytes[at] == UInt8(ascii: "+") {
                negative = bytes[at] == UInt8(ascii: "-")
                at += 1
            }
            if digit(at) != nil {
                while let d = digit(at) {
                    exponent = min(exponent * 10 + Int(d), 10_000)
                    at += 1
                }
                if negative { exponent = -exponent }
                index = at
            }
        }
        let unit = String(decoding: bytes[index...], as: UTF8.self).lowercased()
        let scale: UInt64
        if unit.isEmpty {
            if requiringUnit { throw .rateWithoutUnit(text) }
            scale = 1
        } else if let found = Self.units.first(where: { $0.name == unit }) {
            scale = found.bits
        } else {
            throw .invalidRate(text)
        }
        if overflow { throw .rateTooLarge(text) }
        // mantissa × scale × 10^(exponent − fractionDigits), rounded down.
        var (value, o) = mantissa.multipliedReportingOverflow(by: scale)
        if o { throw .rateTooLarge(text) }
        let power = exponent - fractionDigits
        if power > 0 {
            for _ in 0..<power where value != 0 {
                (value, o) = value.multipliedReportingOverflow(by: 10)
                if o { throw .rateTooLarge(text) }
            }
        } else {
            for _ in 0..<(-power) where value != 0 { value /= 10 }
        }
        bitsPerSecond = value
    }

    /// The rate in the largest decimal unit that holds it exactly (`20mbit`,
    /// `1500kbit`, `8bit`), so that parsing it gives the same rate back.
    public var description: String {
        for (unit, scale) in [
            ("tbit", 1_000_000_000_000), ("gbit", 1_000_000_000), ("mbit", 1_000_000), ("kbit", 1_000),
        ]
        where bitsPerSecond >= scale && bitsPerSecond % UInt64(scale) == 0 {
            return "\(bitsPerSecond / UInt64(scale))\(unit)"
        }
        return "\(bitsPerSecond)bit"
    }

    /// Orders by speed.
    public static func < (a: Rate, b: Rate) -> Bool { a.bitsPerSecond < b.bitsPerSecond }
}

// MARK: - Errors

/// A `queues:` value that is not valid; each names the bad token or class and
/// what is allowed, in one line (the config reader prefixes
/// `file:line:column:`).
public enum QueueConfigError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A rate token `tc` would not read.
    case invalidRate(String)
    /// A rate without a unit where one is required.
    case rateWithoutUnit(String)
    /// A rate past `UInt64` bits per second.
    case rateTooLarge(String)
    /// A rate of zero (`field` is `rate` or `ingress-rate`).
    case rateNotPositive(field: String)
    /// A rate too low to give every class the least rate HTB can keep
    /// (``HTBPlan/minimumClassRate``); `minimum` is the least that would do.
    case rateTooLow(field: String, rate: Rate, minimum: Rate)
    /// A wfq weight outside 1–100.
    case weightOutOfRange(ServiceClass, Int)
    /// A `pq-max` outside 1–100 %, or not a percentage.
    case pqMaxOutOfRange(String)
    /// A class given a scheduling twice.
    case classScheduledTwice(ServiceClass)
    /// A class without a scheduling after the defaults were filled in.
    case classUnscheduled(ServiceClass)

    /// One line naming the bad token and what is allowed.
    public var description: String {
        switch self {
        case .invalidRate(let token):
            return "invalid rate '\(token)'; allowed: \(Rate.allowedText)"
        case .rateWithoutUnit(let token):
            return "rate '\(token)' has no unit; allowed: \(Rate.allowedText)"
        case .rateTooLarge(let token):
            return "rate '\(token)' is too large; allowed: up to \(Rate(bitsPerSecond: .max))"
        case .rateNotPositive(let field):
            return "\(field) must be more than 0bit; allowed: \(Rate.allowedText)"
        case .rateTooLow(let field, let rate, let minimum):
            return
                "\(field) \(rate) is too low to give every class at least \(HTBPlan.minimumClassRate); allowed: \(minimum) or more"
        case .weightOutOfRange(let serviceClass, let weight):
            return
                "wfq weight \(weight) of \(serviceClass) is out of range; allowed: \(QueueScheduling.weights.lowerBound)-\(QueueScheduling.weights.upperBound)"
        case .pqMaxOutOfRange(let token):
            return "pq-max '\(token)' is out of range; allowed: 1%-100%"
        case .classScheduledTwice(let serviceClass):
            return "\(serviceClass) is scheduled twice; allowed: one of pq or {wfq: WEIGHT} per class"
        case .classUnscheduled(let serviceClass):
            return
                "\(serviceClass) has no scheduling; allowed: pq or {wfq: WEIGHT} for each of \(ServiceClass.allowedNames)"
        }
    }
}

// MARK: - Config

/// How a class's queue is served.
public enum QueueScheduling: Hashable, Sendable, CustomStringConvertible {
    /// Strict priority, in class order (CS7 before CS6 before EF …), within
    /// the `pq-max` cap.
    case pq
    /// A share of what the pq classes leave, in proportion to `weight`
    /// (``weights``) among the wfq classes.
    case wfq(weight: Int)

    /// The weights a wfq class may have.
    public static let weights: ClosedRange<Int> = 1...100

    /// `pq`, or `wfq WEIGHT`.
    public var description: String {
        switch self {
        case .pq: "pq"
        case .wfq(let weight): "wfq \(weight)"
        }
    }
}

/// CAKE's Diffserv modes that qosmap offers (`tc qdisc … cake diffserv8`).
public enum CAKEDiffserv: String, CaseIterable, Hashable, Sendable {
    /// Eight tins, one per service class.
    case diffserv8
    /// Four tins (bulk, best effort, video, voice); classes grouped as CAKE
    /// groups their code points.
    case diffserv4
    /// One tin: CAKE ignores the skb priority (classes are not told apart).
    case besteffort
}

/// The qdisc that holds the class queues.
public enum QueueDiscipline: Hashable, Sendable {
    /// HTB with one class per service class (``HTBPlan``), the default.
    case htb
    /// CAKE with one tin per class or group of classes (``CAKEPlan``).
    case cake(CAKEDiffserv)
}

/// Where a tree is built: on the interface, or on the IFB device that its
/// arriving traffic is redirected to.
public enum QueueDirection: String, Hashable, Sendable, CaseIterable {
    /// What leaves the interface (`rate`).
    case egress
    /// What arrives on it (`ingress-rate`).
    case ingress
}

/// An interface's `queues:`: rates, scheduling per class, the pq cap, the
/// discipline; validated and complete (every class scheduled).
public struct QueueConfig: Hashable, Sendable {
    /// The egress shaping rate.
    public let rate: Rate
    /// The ingress shaping rate (through an IFB device), if any.
    public let ingressRate: Rate?
    /// The scheduling of every service class.
    public let scheduling: [ServiceClass: QueueScheduling]
    /// The share of the rate that the pq classes together may take, 1–100.
    public let pqMaxPercent: Int
    /// HTB or CAKE.
    public let discipline: QueueDiscipline
    /// Whether an existing root qdisc the operator made may be replaced.
    public let replace: Bool

    /// The default: CS7, CS6 and EF pq; AF4 30, AF3 25, AF2 20, AF1 15
    /// and BE 10 wfq.
    public static let defaultScheduling: [ServiceClass: QueueScheduling] = [
        .cs7: .pq, .cs6: .pq, .ef: .pq,
        .af4: .wfq(weight: 30), .af3: .wfq(weight: 25), .af2: .wfq(weight: 20), .af1: .wfq(weight: 15),
        .be: .wfq(weight: 10),
    ]

    /// The default `pq-max`.
    public static let defaultPQMaxPercent = 50

    /// Validates and completes a config: classes not in `scheduling` take
    /// their ``defaultScheduling``.
    /// - Throws: ``QueueConfigError``: a zero rate, `pq-max` outside 1–100, a
    ///   weight outside 1–100, a class given twice, or (HTB) a rate too low for
    ///   every class to get ``HTBPlan/minimumClassRate``.
    public init(
        rate: Rate, ingressRate: Rate? = nil, scheduling: [(ServiceClass, QueueScheduling)] = [],
        pqMaxPercent: Int = QueueConfig.defaultPQMaxPercent, discipline: QueueDiscipline = .htb,
        replace: Bool = false
    ) throws(QueueConfigError) {
        guard rate.bitsPerSecond > 0 else { throw .rateNotPositive(field: "rate") }
        if let ingressRate, ingressRate.bitsPerSecond == 0 { throw .rateNotPositive(field: "ingress-rate") }
        guard (1...100).contains(pqMaxPercent) else { throw .pqMaxOutOfRange("\(pqMaxPercent)%") }
        var given: [ServiceClass: QueueScheduling] = [:]
        for (serviceClass, schedule) in scheduling {
            guard given[serviceClass] == nil else { throw .classScheduledTwice(serviceClass) }
            if case .wfq(let weight) = schedule, !QueueScheduling.weights.contains(weight) {
                throw .weightOutOfRange(serviceClass, weight)
            }
            given[serviceClass] = schedule
        }
        let complete = Self.defaultScheduling.merging(given) { _, new in new }
        if let missing = ServiceClass.allCases.first(where: { complete[$0] == nil }) {
            throw .classUnscheduled(missing)
        }
        self.rate = rate
        self.ingressRate = ingressRate
        self.scheduling = complete
        self.pqMaxPercent = pqMaxPercent
        self.discipline = discipline
        self.replace = replace
        if discipline == .htb {
            // Compiling is the check that every class gets a rate HTB keeps.
            for direction in QueueDirection.allCases { _ = try htbPlan(direction) }
        }
    }

    /// Reads a `pq-max` token: an integer percentage 1–100, with or without
    /// `%` (`40%`).
    /// - Throws: ``QueueConfigError/pqMaxOutOfRange(_:)``.
    public static func parsePercent(_ token: some StringProtocol) throws(QueueConfigError) -> Int {
        let text = String(token)
        let digits = text.hasSuffix("%") ? text.dropLast() : Substring(text)
        guard !digits.isEmpty, digits.count <= 3, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
            let value = Int(digits), (1...100).contains(value)
        else { throw .pqMaxOutOfRange(String(token)) }
        return value
    }

    /// The rate of `direction`: `rate` or `ingressRate`.
    public func rate(_ direction: QueueDirection) -> Rate? {
        direction == .egress ? rate : ingressRate
    }

    /// The HTB tree of `direction` (nil for ingress without `ingressRate`).
    /// - Throws: ``QueueConfigError/rateTooLow(field:rate:minimum:)``.
    public func htbPlan(_ direction: QueueDirection, major: UInt16 = HTBPlan.defaultMajor)
        throws(QueueConfigError) -> HTBPlan?
    {
        guard let rate = rate(direction) else { return nil }
        return try HTBPlan(
            rate: rate, scheduling: scheduling, pqMaxPercent: pqMaxPercent, major: major,
            field: direction == .egress ? "rate" : "ingress-rate")
    }

    /// The CAKE qdisc of `direction` for `discipline` `.cake` (nil otherwise,
    /// or for ingress without `ingressRate`).
    public func cakePlan(_ direction: QueueDirection, major: UInt16 = HTBPlan.defaultMajor) -> CAKEPlan? {
        guard case .cake(let diffserv) = discipline, let rate = rate(direction) else { return nil }
        return CAKEPlan(rate: rate, diffserv: diffserv, major: major)
    }

    /// The major of qosmapd's root qdisc, 0x7173 ("qs"): the handle qosmapd
    /// builds and `qosmap export tc` writes, so that the skb priorities of
    /// the daemon's datapaths and of `export nft` name the same classes.
    public static let qosmapdMajor: UInt16 = 0x7173

    /// The `skb->priority` that puts `serviceClass` into its queue of
    /// `direction` under this config on a root of major `major`: the HTB
    /// leaf's class id, or the CAKE tin's (0 in CAKE's besteffort mode, which
    /// reads none, and for ingress without `ingressRate`).
    public func skbPriority(
        _ serviceClass: ServiceClass, major: UInt16 = QueueConfig.qosmapdMajor,
        direction: QueueDirection = .egress
    ) -> UInt32 {
        if let cake = cakePlan(direction, major: major) { return cake.skbPriority(serviceClass) ?? 0 }
        // A config is validated when made: its plans compile.
        return (try? htbPlan(direction, major: major))??.skbPriority(serviceClass) ?? 0
    }

    /// The settings CAKE does not apply, when they differ from the defaults
    /// (`scheduling`, `pq-max`): CAKE's tins have fixed priorities and
    /// thresholds. For a one-time warning; empty for HTB.
    public var settingsCAKEIgnores: [String] {
        guard case .cake = discipline else { return [] }
        return (scheduling != Self.defaultScheduling ? ["scheduling"] : [])
            + (pqMaxPercent != Self.defaultPQMaxPercent ? ["pq-max"] : [])
    }
}

// MARK: - Handles

/// A tc handle or class id, `major:minor` (both 16 bits), as the kernel's
/// `TC_H_MAKE`; printed as `tc` prints it, in hexadecimal (`1:10`).
public struct TCHandle: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    /// `major << 16 | minor`.
    public let rawValue: UInt32

    /// A handle from its 32-bit value.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `major:minor`.
    public init(major: UInt16, minor: UInt16) { rawValue = UInt32(major) << 16 | UInt32(minor) }

    /// The upper 16 bits: the qdisc's number.
    public var major: UInt16 { UInt16(truncatingIfNeeded: rawValue >> 16) }
    /// The lower 16 bits: the class within the qdisc (0 for the qdisc itself).
    public var minor: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    /// `TC_H_ROOT`: the parent of a root qdisc.
    public static let root = TCHandle(rawValue: 0xFFFF_FFFF)

    /// `root`, `1:` for a qdisc, `1:10` for a class.
    public var description: String {
        if self == .root { return "root" }
        let major = String(self.major, radix: 16)
        return minor == 0 ? "\(major):" : "\(major):\(String(minor, radix: 16))"
    }

    /// Orders by value.
    public static func < (a: TCHandle, b: TCHandle) -> Bool { a.rawValue < b.rawValue }
}

// MARK: - HTB

/// The HTB tree that gives a rate the semantics, and the skb priority
/// that puts each service class into its leaf without a filter.
///
/// ```
/// 1:    htb qdisc, default 1:10 (BE's leaf: what carries no class goes there)
/// └ 1:1   rate = ceil = R
///   ├ 1:2   pq parent: rate = ceil = P = pq-max × R
///   │ ├ 1:17 CS7  prio 0   rate = P/100   ceil = P
///   │ ├ 1:16 CS6  prio 1   rate = P/100   ceil = P
///   │ └ 1:15 EF   prio 2   rate = P/100   ceil = P
///   └ 1:3   wfq parent: rate = W = R − P, ceil = R
///     ├ 1:14 AF4  prio 3   rate = W × 30/100   ceil = R
///     ├ …
///     └ 1:10 BE   prio 3   rate = W × 10/100   ceil = R
/// ```
///
/// Why this gives the semantics. HTB serves, at each dequeue, level 0 first:
/// leaves still within their own `rate` (their tokens), lowest `prio` first,
/// round-robin by `quantum` within a prio. Only then level 1: leaves past
/// their rate that borrow from a parent still within *its* rate, again by
/// prio; then level 2 (borrowing from 1:1), and so on. A send uses up the
/// `ceil` of the leaf and of every ancestor, and the `rate` of the class it
/// was served from and of every class above that; a class sends past its
/// own `ceil` never.
/// - *pq first, in order.* The pq leaves' own rates are a trickle (1 % of P
///   each, so that a lower pq class is never starved outright); nearly all pq
///   traffic borrows from 1:2, where the lowest prio (CS7, then CS6, then EF)
///   wins every time. Their prios are also below every wfq prio, so at each
///   level a waiting pq packet goes before a wfq one. A wfq leaf's own tokens
///   (level 0) still go before pq borrowing (level 1), but they come at the
///   leaf's guaranteed rate and are capped by its burst (about one frame), so
///   a pq packet waits for at most a frame or so per wfq class.
/// - *pq capped.* 1:2 has `ceil = rate = P` and so never borrows; everything
///   the pq leaves send is charged to it, and their own rates sum to less than
///   P, so together they never exceed P even with wfq idle. (With no wfq class
///   the cap has nothing to protect and P is the whole rate. With a pq-max
///   near 100 % it is lowered just enough for every wfq class to keep
///   ``minimumClassRate``.)
/// - *wfq by weights.* The wfq leaves' own rates are W split in proportion to
///   the weights (summing to exactly W), served at level 0 before any
///   borrowing: when all are backlogged each gets its share. What they borrow
///   beyond (when pq or other wfq classes are idle) is shared round-robin
///   among equal prios by quantum, and quanta are proportional to the weights
///   too, so the excess also follows the weights.
/// - *Idle bandwidth borrowable up to rate.* wfq leaves and 1:3 have
///   `ceil = R` and borrow through 1:3 and 1:1; 1:1 has `rate = ceil = R`,
///   the shaper. The pq rate that pq leaves do not use stays in 1:1 for the
///   wfq classes to borrow.
///
/// Rates are whole bytes per second (the kernel's unit), so the parents'
/// rates sum to exactly R and the wfq leaves' to exactly W.
///
/// How packets get there: HTB's classify (`htb_classify`) looks up
/// `skb->priority` as a class id first, so a priority of `1:MINOR`
/// (``skbPriority(_:)``) puts the packet into that leaf with no filter. A
/// priority equal to the qdisc's handle (`1:0`) would bypass shaping (HTB's
/// direct queue), so no class has minor 0; any other priority without a
/// class (0–7, as an 802.1p `priority: true` leaves it) goes to the default
/// class, BE. The two uses of the field therefore cannot both hold: with
/// queues, the class id is the priority, and a VLAN's `egress-qos-map` can
/// map each `1:MINOR` to its PCP.
public struct HTBPlan: Hashable, Sendable {
    /// One HTB class of the tree.
    public struct Class: Hashable, Sendable {
        /// What the class is for.
        public enum Role: Hashable, Sendable {
            /// 1:1, the shaper: rate = ceil = the interface's rate.
            case root
            /// 1:2, the parent of the pq leaves: their cap.
            case pqParent
            /// 1:3, the parent of the wfq leaves.
            case wfqParent
            /// A service class's queue.
            case leaf(ServiceClass)
        }

        /// What the class is for.
        public let role: Role
        /// Its class id.
        public let id: TCHandle
        /// Its parent: a class, or the qdisc (`1:`) for 1:1.
        public let parent: TCHandle
        /// The guaranteed rate (HTB `rate`), whole bytes per second.
        public let rate: Rate
        /// The most it may take by borrowing (HTB `ceil`).
        public let ceil: Rate
        /// HTB `prio` (leaves; 0 for inner classes, where HTB ignores it).
        public let prio: UInt32
        /// HTB `quantum`, bytes: the round-robin share among leaves of the
        /// same prio; given for every class so that HTB never computes one
        /// from `r2q` and warns.
        public let quantum: UInt32

        /// The service class of a leaf, nil for an inner class.
        public var serviceClass: ServiceClass? {
            if case .leaf(let serviceClass) = role { return serviceClass }
            return nil
        }
    }

    /// The qdisc's major number unless told otherwise.
    public static let defaultMajor: UInt16 = 1
    /// The least rate a class gets, 8 bytes per second: the least at which
    /// `tc`'s burst (an MTU-sized 1600 bytes) fits the kernel's 32-bit count of
    /// 64 ns ticks (1600 B at 8 B/s is 200 s, below 2^32 × 64 ns ≈ 275 s).
    public static let minimumClassRate = Rate(bytesPerSecond: 8)
    /// The bytes HTB charges for a full-sized Ethernet frame (MTU 1500 plus
    /// its 14-byte header, `qdisc_pkt_len`): the smallest wfq quantum, so
    /// that one round-robin turn always sends at least one frame.
    public static let frameBytes: UInt32 = 1514
    /// The quanta HTB accepts without a warning (`sch_htb.c`).
    public static let quantumRange: ClosedRange<UInt32> = 1_000...200_000
    /// The minor of 1:1.
    public static let rootMinor: UInt16 = 1
    /// The minor of the pq parent.
    public static let pqParentMinor: UInt16 = 2
    /// The minor of the wfq parent.
    public static let wfqParentMinor: UInt16 = 3

    /// The qdisc's handle, `major:0`.
    public let handle: TCHandle
    /// The shaping rate R.
    public let rate: Rate
    /// The pq cap P (zero without pq classes).
    public let pqCap: Rate
    /// The class that takes every packet whose priority names no class: BE's leaf.
    public let defaultClass: TCHandle
    /// Every class, each parent before its children: the order to create them.
    public let classes: [Class]
    /// The `r2q` given to the qdisc, HTB's usual 10; it only matters for a
    /// class given no quantum, and every class here has one.
    public let r2q: UInt32 = 10

    /// The leaf minor of a service class: `0x10` + its rank, BE `1:10` to CS7
    /// `1:17`, so that `tc class show` lists them in class order.
    public static func leafMinor(_ serviceClass: ServiceClass) -> UInt16 {
        0x10 + UInt16(serviceClass.rawValue)
    }

    /// Compiles the tree.
    /// - Parameters:
    ///   - scheduling: every class's scheduling (a ``QueueConfig``'s).
    ///   - pqMaxPercent: the pq cap in percent of `rate`, 1–100.
    ///   - major: the qdisc's major number.
    ///   - field: the config key named in an error.
    /// - Throws: ``QueueConfigError/classUnscheduled(_:)``, or
    ///   ``QueueConfigError/rateTooLow(field:rate:minimum:)`` with the least
    ///   rate that would do.
    public init(
        rate: Rate, scheduling: [ServiceClass: QueueScheduling], pqMaxPercent: Int,
        major: UInt16 = HTBPlan.defaultMajor, field: String = "rate"
    ) throws(QueueConfigError) {
        if let missing = ServiceClass.allCases.first(where: { scheduling[$0] == nil }) {
            throw .classUnscheduled(missing)
        }
        let percent = UInt64(min(max(pqMaxPercent, 1), 100))
        guard let layout = Self.layout(bytes: rate.bytesPerSecond, scheduling: scheduling, percent: percent)
        else {
            throw .rateTooLow(
                field: field, rate: rate,
                minimum: Self.minimumRate(
                    scheduling: scheduling, percent: percent, above: rate.bytesPerSecond))
        }
        self.rate = Rate(bytesPerSecond: rate.bytesPerSecond)
        handle = TCHandle(major: major, minor: 0)
        pqCap = Rate(bytesPerSecond: layout.pqCap)
        defaultClass = TCHandle(major: major, minor: Self.leafMinor(.be))
        classes = layout.classes.map { spec in
            Class(
                role: spec.role, id: TCHandle(major: major, minor: spec.minor),
                parent: TCHandle(major: major, minor: spec.parentMinor),
                rate: Rate(bytesPerSecond: spec.rate),
                ceil: Rate(bytesPerSecond: spec.ceil), prio: spec.prio, quantum: spec.quantum)
        }
    }

    /// The leaf of `serviceClass`.
    public func leaf(_ serviceClass: ServiceClass) -> Class {
        // Every plan has all eight leaves (init checks the scheduling).
        classes.first { $0.serviceClass == serviceClass }!
    }

    /// The class with id `id`, if any.
    public func `class`(_ id: TCHandle) -> Class? { classes.first { $0.id == id } }

    /// The `skb->priority` that puts a packet of `serviceClass` into its leaf:
    /// `major << 16 | minor` (`0x0001_0010` for BE on `1:`).
    public func skbPriority(_ serviceClass: ServiceClass) -> UInt32 {
        TCHandle(major: handle.major, minor: Self.leafMinor(serviceClass)).rawValue
    }

    /// A class before its ids, in bytes per second.
    struct Spec {
        var role: Class.Role
        var minor: UInt16
        var parentMinor: UInt16
        var rate: UInt64
        var ceil: UInt64
        var prio: UInt32
        var quantum: UInt32
    }

    /// The classes for a rate of `bytes`, or nil when some class would get
    /// less than ``minimumClassRate``.
    static func layout(bytes r: UInt64, scheduling: [ServiceClass: QueueScheduling], percent: UInt64)
        -> (pqCap: UInt64, classes: [Spec])?
    {
        let least = minimumClassRate.bytesPerSecond
        // Highest class first: CS7 gets prio 0.
        let pq = ServiceClass.allCases.reversed().filter { scheduling[$0] == .pq }
        let wfq: [(ServiceClass, UInt64)] = ServiceClass.allCases.reversed().compactMap {
            if case .wfq(let weight) = scheduling[$0] { return ($0, UInt64(weight)) }
            return nil
        }
        guard r >= least else { return nil }
        // floor(r × percent / 100) without overflowing r × percent.
        var p = r / 100 * percent + r % 100 * percent / 100
        if pq.isEmpty {
            p = 0
        } else if wfq.isEmpty {
            p = r
        } else {
            // The pq cap leaves the wfq classes at least enough that the
            // smallest weight's share is the least rate.
            let wfqLeast = wfqMinimum(weights: wfq.map(\.1))
            guard r > wfqLeast else { return nil }
            p = min(p, r - wfqLeast)
        }
        let w = r - p
        let frame = frameBytes
        var specs = [
            Spec(role: .root, minor: rootMinor, parentMinor: 0, rate: r, ceil: r, prio: 0, quantum: frame)
        ]
        if !pq.isEmpty {
            let trickle = max(p / 100, least)
            guard UInt64(pq.count) * trickle <= p else { return nil }
            specs.append(
                Spec(
                    role: .pqParent, minor: pqParentMinor, parentMinor: rootMinor, rate: p, ceil: p, prio: 0,
                    quantum: frame))
            for (rank, serviceClass) in pq.enumerated() {
                specs.append(
                    Spec(
                        role: .leaf(serviceClass), minor: leafMinor(serviceClass), parentMinor: pqParentMinor,
                        rate: trickle, ceil: p, prio: UInt32(rank), quantum: frame))
            }
        }
        if !wfq.isEmpty {
            let shares = apportion(w, weights: wfq.map(\.1))
            guard shares.allSatisfy({ $0 >= least }) else { return nil }
            // Quanta in proportion to the weights (as r2q makes them
            // proportional to rates), the smallest one frame; weights of
            // 1–100 keep the largest within 151,400 bytes, under HTB's bound.
            let smallest = wfq.map(\.1).min()!
            let unit = (UInt64(frame) + smallest - 1) / smallest
            specs.append(
                Spec(
                    role: .wfqParent, minor: wfqParentMinor, parentMinor: rootMinor, rate: w, ceil: r,
                    prio: 0, quantum: frame))
            for ((serviceClass, weight), share) in zip(wfq, shares) {
                let quantum = UInt32(
                    min(max(weight * unit, UInt64(quantumRange.lowerBound)), UInt64(quantumRange.upperBound)))
                specs.append(
                    Spec(
                        role: .leaf(serviceClass), minor: leafMinor(serviceClass),
                        parentMinor: wfqParentMinor,
                        rate: share, ceil: r, prio: UInt32(pq.count), quantum: quantum))
            }
        }
        return (p, specs)
    }

    /// The least the wfq parent may have: enough for the smallest weight's
    /// share, rounded down, to be ``minimumClassRate``
    /// (`ceil(least × Σweights / smallest weight)` bytes per second).
    static func wfqMinimum(weights: [UInt64]) -> UInt64 {
        let least = minimumClassRate.bytesPerSecond
        let smallest = weights.min() ?? 1
        return (least * weights.reduce(0, +) + smallest - 1) / smallest
    }

    /// Splits `total` in proportion to `weights`, rounding down and giving the
    /// bytes left over to the largest remainders (ties to the earlier), so the
    /// parts sum to exactly `total`.
    static func apportion(_ total: UInt64, weights: [UInt64]) -> [UInt64] {
        let sum = weights.reduce(0, +)
        var parts: [UInt64] = []
        var remainders: [(index: Int, remainder: UInt64)] = []
        for (index, weight) in weights.enumerated() {
            // total × weight / sum in two halves, so that it cannot overflow.
            let whole = total / sum * weight
            let (high, low) = (total % sum).multipliedFullWidth(by: weight)
            let (extra, remainder) = sum.dividingFullWidth((high, low))
            parts.append(whole + extra)
            remainders.append((index, remainder))
        }
        var left = total - parts.reduce(0, +)
        for entry in remainders.sorted(by: {
            $0.remainder > $1.remainder || ($0.remainder == $1.remainder && $0.index < $1.index)
        })
        where left > 0 {
            parts[entry.index] += 1
            left -= 1
        }
        return parts
    }

    /// The least rate, in whole bytes, that compiles: searched upward from
    /// `above` (the rate refused) by doubling, then bisected.
    static func minimumRate(scheduling: [ServiceClass: QueueScheduling], percent: UInt64, above: UInt64)
        -> Rate
    {
        var low = above
        var high = max(above, 1)
        while layout(bytes: high, scheduling: scheduling, percent: percent) == nil {
            low = high
            let (doubled, overflow) = high.multipliedReportingOverflow(by: 2)
            if overflow { return Rate(bitsPerSecond: .max) }
            high = doubled
        }
        while high - low > 1 {
            let middle = low + (high - low) / 2
            if layout(bytes: middle, scheduling: scheduling, percent: percent) == nil {
                low = middle
            } else {
                high = middle
            }
        }
        return Rate(bytesPerSecond: high)
    }
}

// MARK: - CAKE

/// CAKE as the alternative to HTB: one qdisc whose tins stand for the
/// classes, chosen per packet from the skb priority.
///
/// CAKE's `cake_select_tin` (net/sched/sch_cake.c) takes, unless the mode is
/// besteffort or a firewall-mark mask is set (qosmap sets none), a priority
/// whose major is the qdisc's handle and whose minor is 1…tin count as the
/// tin `tin_order[minor − 1]`; anything else falls back to CAKE's own table of
/// DSCP to tin. In shaped mode CAKE serves the highest-numbered tin that is
/// within its threshold rate (tin *i* of diffserv8: rate × (7/8)^i), so a
/// higher tin is a higher priority, capped by its threshold, the way pq is
/// capped by `pq-max` under HTB.
///
/// The mapping chosen:
/// - diffserv8 (`tin_order` 0…7): one tin per class in the device model's
///   order, BE tin 0 … CS7 tin 7, so that all-pq order (CS7 > CS6 > EF > AF4
///   > … > BE) holds and each class has its own counters. CAKE's own DSCP
///   table follows RFC 4594 instead: it would put AF3 and AF4 in one tin, CS6
///   and CS7 in one, AF2 above AF4 and AF1 below BE.
/// - diffserv4 (tins 0 best effort, 1 bulk, 2 video, 3 voice; `tin_order`
///   `bulk_order` = 1, 0, 2, 3): each class goes where CAKE's own table puts
///   its code point (BE and AF1x best effort, AF2x–AF4x video, EF, CS6 and
///   CS7 voice), which is also the device model's order; nothing is bulk.
/// - besteffort: one tin; CAKE reads no priority.
public struct CAKEPlan: Hashable, Sendable {
    /// The shaping rate (CAKE's `bandwidth`).
    public let rate: Rate
    /// The Diffserv mode.
    public let diffserv: CAKEDiffserv
    /// The qdisc's handle, `major:0`.
    public let handle: TCHandle

    /// A plan; nothing to validate beyond the rate, which CAKE takes as it is.
    public init(rate: Rate, diffserv: CAKEDiffserv, major: UInt16 = HTBPlan.defaultMajor) {
        self.rate = rate
        self.diffserv = diffserv
        handle = TCHandle(major: major, minor: 0)
    }

    /// How many tins the mode has.
    public var tinCount: Int {
        switch diffserv {
        case .diffserv8: 8
        case .diffserv4: 4
        case .besteffort: 1
        }
    }

    /// CAKE's `tin_order` for the mode: the tin that priority minor `m` names
    /// is `tinOrder[m − 1]` (`normal_order` for diffserv8, `bulk_order` for
    /// diffserv4).
    public var tinOrder: [Int] {
        switch diffserv {
        case .diffserv8: Array(0..<8)
        case .diffserv4: [1, 0, 2, 3]
        case .besteffort: [0]
        }
    }

    /// The tin (an index into CAKE's tins) that `serviceClass` is queued in.
    public func tin(_ serviceClass: ServiceClass) -> Int {
        switch diffserv {
        case .diffserv8:
            return Int(serviceClass.rawValue)
        case .diffserv4:
            switch serviceClass {
            case .be, .af1: return 0
            case .af2, .af3, .af4: return 2
            case .ef, .cs6, .cs7: return 3
            }
        case .besteffort:
            return 0
        }
    }

    /// The `skb->priority` that selects `serviceClass`'s tin:
    /// `major << 16 | (position in tin_order + 1)`; nil in besteffort mode,
    /// where CAKE reads none.
    public func skbPriority(_ serviceClass: ServiceClass) -> UInt32? {
        guard diffserv != .besteffort, let position = tinOrder.firstIndex(of: tin(serviceClass)) else {
            return nil
        }
        return TCHandle(major: handle.major, minor: UInt16(position + 1)).rawValue
    }

    /// The service class that names each tin's counters, by the tin's place
    /// in CAKE's stats dump (which lists the tins in `tin_order`, as the skb
    /// priority's minor counts them): in diffserv8 each class's own tin. A
    /// tin that several classes share is named after the first of them in
    /// the device model's order (BE … CS7), so that a sum over classes counts
    /// each tin once; a tin no class uses (diffserv4's bulk) is nil.
    public var tinLabels: [ServiceClass?] {
        let classes = ServiceClass.allCases.sorted { $0.rawValue < $1.rawValue }
        return tinOrder.map { tin in classes.first { self.tin($0) == tin } }
    }
}

// MARK: - Leaves

/// The qdisc kinds a kernel has, as far as the queues care.
public struct QdiscKinds: OptionSet, Hashable, Sendable {
    /// The bits.
    public let rawValue: UInt8
    /// A set from its bits.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// `fq_codel` (sch_fq_codel).
    public static let fqCodel = QdiscKinds(rawValue: 1 << 0)
    /// `gred` (sch_gred).
    public static let gred = QdiscKinds(rawValue: 1 << 1)
    /// `cake` (sch_cake).
    public static let cake = QdiscKinds(rawValue: 1 << 2)
    /// `bfifo` and `pfifo` (sch_fifo, built into every kernel with tc).
    public static let fifo = QdiscKinds(rawValue: 1 << 3)
    /// `htb` (sch_htb).
    public static let htb = QdiscKinds(rawValue: 1 << 4)

    /// The set named by kernel qdisc kinds (`fq_codel`, `gred`, `cake`,
    /// `bfifo`, `pfifo`, `htb`); other names are ignored.
    public init(kinds: some Sequence<String>) {
        self = []
        for kind in kinds {
            switch kind {
            case "fq_codel": insert(.fqCodel)
            case "gred": insert(.gred)
            case "cake": insert(.cake)
            case "bfifo", "pfifo": insert(.fifo)
            case "htb": insert(.htb)
            default: break
            }
        }
    }
}

/// fq_codel's parameters for a leaf.
public struct FQCodelLeaf: Hashable, Sendable {
    /// CoDel's target delay.
    public var targetMicroseconds: UInt32
    /// CoDel's interval.
    public var intervalMicroseconds: UInt32
    /// Whether to mark ECN-capable packets instead of dropping them.
    public var ecn: Bool

    /// The parameters for a queue drained at `rate`, by CAKE's rule
    /// (`cake_set_rate`): the target is 5 ms, or one and a half frames'
    /// transmission time where that is longer (at low rates one frame takes
    /// longer than 5 ms to send, and CoDel would drop for a delay no queue can
    /// avoid); the interval is 100 ms plus what the target grew by, and at
    /// least twice the target.
    public init(drainRate rate: Rate) {
        let bytes = max(rate.bytesPerSecond, 1)
        let frameMicroseconds = UInt64(HTBPlan.frameBytes) * 1_000_000 / bytes
        let target = max(frameMicroseconds * 3 / 2, 5_000)
        let interval = max(100_000 + target - 5_000, target * 2)
        targetMicroseconds = UInt32(min(target, UInt64(UInt32.max)))
        intervalMicroseconds = UInt32(min(interval, UInt64(UInt32.max)))
        ecn = true
    }
}

/// GRED's parameters for an AF leaf: one virtual queue per color, red dropped
/// earliest. GRED picks the virtual queue from `skb->tc_index` (its low 4
/// bits), not from the priority, so only a datapath that sets `tc_index` to
/// the color gets it: the ebpf classifier writes it; nfqueue's verdict
/// cannot, and qosmapd builds no GRED there.
public struct GREDLeaf: Hashable, Sendable {
    /// One color's RED thresholds.
    public struct Threshold: Hashable, Sendable {
        /// The color, which is also its virtual queue (green 0, yellow 1, red 2).
        public var color: Color
        /// The average backlog where dropping starts.
        public var minBytes: UInt32
        /// The average backlog where every packet is dropped.
        public var maxBytes: UInt32
        /// The drop probability at `maxBytes`, percent.
        public var probabilityPercent: UInt8
    }

    /// The hard limit of the whole queue (as a bfifo's).
    public var limitBytes: UInt32
    /// The thresholds, green, yellow, red.
    public var thresholds: [Threshold]
    /// The rate the leaf drains at, bytes per second (how fast RED's
    /// average decays while the leaf is idle).
    public var drainBytesPerSecond: UInt64

    /// Thresholds as shares of the limit, lower for worse colors:
    /// green 40–80 %, yellow 25–60 %, red 10–40 %, 10 % drop probability at
    /// the maximum, so red is dropped well before yellow, yellow before green.
    public init(drainRate rate: Rate) {
        let limit = LeafQueue.fifoLimit(drainRate: rate)
        limitBytes = limit
        drainBytesPerSecond = rate.bytesPerSecond
        let shares: [(Color, UInt64, UInt64)] = [(.green, 40, 80), (.yellow, 25, 60), (.red, 10, 40)]
        thresholds = shares.map { color, low, high in
            Threshold(
                color: color, minBytes: UInt32(UInt64(limit) * low / 100),
                maxBytes: UInt32(UInt64(limit) * high / 100),
                probabilityPercent: 10)
        }
    }
}

/// The qdisc that holds one class's packets under its HTB leaf.
public enum LeafQueue: Hashable, Sendable {
    /// Flow queueing with CoDel: the best leaf, where the kernel has it.
    case fqCodel(FQCodelLeaf)
    /// Color-aware drop for an AF class, where the kernel has GRED.
    case gred(GREDLeaf)
    /// A byte-limited fifo, which every kernel has.
    case bfifo(limitBytes: UInt32)

    /// The kernel's name of the qdisc.
    public var kind: String {
        switch self {
        case .fqCodel: "fq_codel"
        case .gred: "gred"
        case .bfifo: "bfifo"
        }
    }

    /// How long a fifo may delay at its drain rate, 100 ms, and the least it
    /// holds, ten full frames (below that a TCP flow at a low rate cannot keep
    /// its window).
    public static let fifoDelayMilliseconds: UInt64 = 100
    /// The least a fifo holds, bytes.
    public static let fifoMinimumBytes = UInt32(10) * HTBPlan.frameBytes

    /// A fifo's limit for a queue drained at `rate`: 100 ms of it, at least
    /// ``fifoMinimumBytes``.
    public static func fifoLimit(drainRate rate: Rate) -> UInt32 {
        let (product, overflow) = rate.bytesPerSecond.multipliedReportingOverflow(by: fifoDelayMilliseconds)
        let bytes = overflow ? UInt64.max : product / 1_000
        return UInt32(min(max(bytes, UInt64(fifoMinimumBytes)), UInt64(UInt32.max)))
    }

    /// The best leaf for `serviceClass` drained at `drainRate` among the
    /// kinds `available`: GRED for an AF class when `colorAware` and the
    /// kernel has it (colors as drop precedences, as the device model's
    /// congestion avoidance by color), else fq_codel, else a bfifo (sch_fifo
    /// is always built).
    public static func choose(
        for serviceClass: ServiceClass, drainRate: Rate, available: QdiscKinds, colorAware: Bool = true
    ) -> LeafQueue {
        let isAF = [.af1, .af2, .af3, .af4].contains(serviceClass)
        if isAF, colorAware, available.contains(.gred) { return .gred(GREDLeaf(drainRate: drainRate)) }
        if available.contains(.fqCodel) { return .fqCodel(FQCodelLeaf(drainRate: drainRate)) }
        return .bfifo(limitBytes: fifoLimit(drainRate: drainRate))
    }
}

extension HTBPlan {
    /// Each class's leaf qdisc, sized for the class's `ceil`: the fastest it
    /// drains, when the others leave it the link. (Sized for the guaranteed
    /// rate instead, a class alone on the link would have too short a queue
    /// to fill it.)
    public func leaves(available: QdiscKinds, colorAware: Bool = true) -> [ServiceClass: LeafQueue] {
        var leaves: [ServiceClass: LeafQueue] = [:]
        for serviceClass in ServiceClass.allCases {
            leaves[serviceClass] = LeafQueue.choose(
                for: serviceClass, drainRate: leaf(serviceClass).ceil, available: available,
                colorAware: colorAware)
        }
        return leaves
    }

    /// The handle of the leaf qdisc under `serviceClass`'s class: major
    /// `0x10` + its rank (`10:` for BE … `17:` for CS7), unique and distinct
    /// from the HTB qdisc's.
    public func leafQdiscHandle(_ serviceClass: ServiceClass) -> TCHandle {
        TCHandle(major: HTBPlan.leafMinor(serviceClass), minor: 0)
    }
}
