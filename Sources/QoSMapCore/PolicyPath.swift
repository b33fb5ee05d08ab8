/// One device on a path: the field it trusts, the domain it classifies in,
/// the domain it writes in and the fields it writes.
public struct PolicyHop: Sendable {
    /// A label for output, e.g. `PE` or `hop 1`.
    public var label: String
    /// The received field that is classified.
    public var trust: Field
    /// The domain that classifies the trusted field.
    public var inbound: DSDomain
    /// The domain whose outbound maps write the fields.
    public var outbound: DSDomain
    /// The fields rewritten on egress, in order; may be empty.
    public var writes: [Field]

    /// Creates a hop.
    public init(label: String, trust: Field, inbound: DSDomain, outbound: DSDomain, writes: [Field]) {
        self.label = label
        self.trust = trust
        self.inbound = inbound
        self.outbound = outbound
        self.writes = writes
    }

    /// Whether a received 802.1p DEI bit is read: the hop trusts 802.1p in a
    /// domain that carries color in DEI.
    public var readsDEI: Bool { trust == .dot1p && inbound.dropEligibility == .color }
}

/// Why a path cannot be traced.
public enum PolicyPathError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The path has no hop.
    case empty
    /// A hop trusts a field that neither the input nor an earlier hop carries.
    case fieldNotCarried(hop: Int, field: Field, carried: [Field])

    /// One line naming the hop and the field.
    public var description: String {
        switch self {
        case .empty:
            return "a path needs at least one hop"
        case .fieldNotCarried(let hop, let field, let carried):
            return "hop \(hop) trusts \(field.name), which no earlier hop writes; carried: "
                + carried.map(\.name).joined(separator: ", ")
        }
    }
}

/// The markings a packet carries between hops: a value per field known so far,
/// and the S-tag DEI bit when a hop wrote one.
public struct Marking: Hashable, Sendable, CustomStringConvertible {
    /// The known values, one per field at most, in ``Field`` order.
    public private(set) var values: [FieldValue] = []
    /// The S-tag DEI bit, when known.
    public var dei: Bool?

    /// An empty marking.
    public init() {}

    /// The value of a field, or nil when unknown.
    public subscript(field: Field) -> FieldValue? {
        values.first { $0.field == field }
    }

    /// Sets a field. DSCP and IP precedence share the ToS bits, so writing one
    /// also sets the other (precedence keeps the low DSCP bits it replaces).
    public mutating func write(_ value: FieldValue) {
        set(value)
        switch value {
        case .dscp(let d): set(.ipPrecedence(IPPrecedence(truncating: d.rawValue >> 3)))
        case .ipPrecedence(let p):
            let low = (self[.dscp]?.rawValue ?? 0) & 7
            set(.dscp(DSCP(truncating: p.rawValue << 3 | low)))
        default: break
        }
    }

    mutating func set(_ value: FieldValue) {
        values.removeAll { $0.field == value.field }
        values.append(value)
        values.sort { $0.field.rawValue < $1.field.rawValue }
    }

    /// `dscp 46 (EF), 8021p 5 dei 0`.
    public var description: String {
        values.map { v in
            "\(v.field.name) \(v)" + (v.field == .dot1p && dei != nil ? " dei \(dei! ? 1 : 0)" : "")
        }.joined(separator: ", ")
    }
}

/// What one hop did to one packet.
public struct HopTrace: Sendable, Equatable {
    /// The trusted field's value as received (with DEI when the hop reads it).
    public var arriving: FieldValue
    /// The DEI bit read, when the hop reads DEI.
    public var arrivingDEI: Bool?
    /// The class and color the inbound domain gave it.
    public var treatment: Treatment
    /// The values written on egress, in the hop's `writes` order.
    public var written: [FieldValue]
    /// The S-tag DEI written, when the hop writes 802.1p in a domain that
    /// carries color in DEI.
    public var writtenDEI: Bool?
    /// Every marking the packet carries after the hop.
    public var leaving: Marking
}

/// One input value's trip through a path.
public struct PathTrace: Sendable, Equatable {
    /// The input value of the first hop's trusted field.
    public var input: FieldValue
    /// One entry per hop.
    public var hops: [HopTrace]
}

/// A sequence of hops through which a marking is traced: `qosmap explain`.
public struct PolicyPath: Sendable {
    /// The hops, in order.
    public let hops: [PolicyHop]

    /// Creates a path, checking that every hop after the first trusts a field
    /// that the input or an earlier hop carries.
    public init(_ hops: [PolicyHop]) throws(PolicyPathError) {
        guard let first = hops.first else { throw .empty }
        var carried: Set<Field> = [first.trust]
        if first.trust == .dscp || first.trust == .ipPrecedence { carried.formUnion([.dscp, .ipPrecedence]) }
        for (i, hop) in hops.enumerated() {
            guard carried.contains(hop.trust) else {
                throw .fieldNotCarried(
                    hop: i + 1, field: hop.trust, carried: Field.allCases.filter(carried.contains))
            }
            for f in hop.writes {
                carried.insert(f)
                if f == .dscp || f == .ipPrecedence { carried.formUnion([.dscp, .ipPrecedence]) }
            }
        }
        self.hops = hops
    }

    /// Traces one value of the first hop's trusted field (and, for 802.1p, its
    /// DEI bit) through every hop.
    /// `first`, when given, is the first hop's class and color in place of
    /// what its trusted field gives: a flow rule classified the packet.
    public func trace(_ value: UInt8, dei: Bool = false, first: Treatment? = nil) -> PathTrace {
        let input = FieldValue(hops[0].trust, truncating: value)
        var marking = Marking()
        marking.write(input)
        if input.field == .dot1p { marking.dei = dei }
        var result: [HopTrace] = []
        for (index, hop) in hops.enumerated() {
            // The initializer proved the field is carried.
            let arriving = marking[hop.trust] ?? FieldValue(hop.trust, truncating: 0)
            let readDEI: Bool? = hop.readsDEI ? (marking.dei ?? false) : nil
            let t =
                index == 0 && first != nil
                ? first!
                : hop.trust == .dot1p
                    ? hop.inbound.classify(pcp: PCP(truncating: arriving.rawValue), dei: readDEI ?? false)
                    : hop.inbound.classify(hop.trust, arriving.rawValue)
            var written: [FieldValue] = []
            var writtenDEI: Bool?
            for f in hop.writes {
                let v = hop.outbound.mark(f, for: t)
                written.append(v)
                marking.write(v)
                if f == .dot1p {
                    // A domain that ignores DEI writes it 0 (see default.yaml).
                    writtenDEI = hop.outbound.dei(for: t)
                    marking.dei = writtenDEI
                }
            }
            result.append(
                HopTrace(
                    arriving: arriving, arrivingDEI: readDEI, treatment: t, written: written,
                    writtenDEI: writtenDEI, leaving: marking))
        }
        return PathTrace(input: input, hops: result)
    }

    /// Every value of the first hop's trusted field, in order (DEI clear).
    public func traceAll() -> [PathTrace] {
        (0..<hops[0].trust.valueCount).map { trace(UInt8($0)) }
    }

    /// What a hop's successor reads: the next hop's trusted field (and DEI if
    /// it reads it), or after the last hop the fields it wrote.
    func carried(after hop: Int, in trace: PathTrace) -> String {
        if hop < 0 { return "\(trace.input.field.name) \(trace.input.rawValue)" }
        let leaving = trace.hops[hop].leaving
        if hop + 1 < hops.count {
            let next = hops[hop + 1]
            let v = leaving[next.trust].map { "\(next.trust.name) \($0.rawValue)" } ?? "-"
            return next.readsDEI ? v + " dei \((leaving.dei ?? false) ? 1 : 0)" : v
        }
        let h = trace.hops[hop]
        if h.written.isEmpty { return "\(h.treatment)" }
        return h.written.map { "\($0.field.name) \($0.rawValue)" }.joined(separator: ", ")
    }

    /// Finds merges, lost colors, bleaching and class changes over every value
    /// of the trusted field.
    public func analyze() -> PathAnalysis {
        let traces = traceAll()
        var analysis = PathAnalysis(traces: traces)
        for k in hops.indices {
            var groups: [String: [Int]] = [:]
            var order: [String] = []
            for (i, t) in traces.enumerated() {
                let key = carried(after: k, in: t)
                if groups[key] == nil { order.append(key) }
                groups[key, default: []].append(i)
            }
            for key in order {
                let members = groups[key]!
                let before = Set(members.map { carried(after: k - 1, in: traces[$0]) })
                guard before.count > 1 else { continue }
                analysis.merges.append(
                    PathAnalysis.Merge(
                        hop: k + 1, inputs: members.map { UInt8($0) }, from: before.count, to: key))
            }
        }
        let protected: Set<ServiceClass> = [.ef, .cs6, .cs7]
        for t in traces {
            for k in t.hops.indices {
                let now = t.hops[k].treatment
                let prior: Treatment? =
                    k > 0 ? t.hops[k - 1].treatment : nil
                if k == 0 {
                    // A standard EF, CS6 or CS7 code point classified BE at the first hop.
                    if t.input.field == .dscp, [46, 48, 56].contains(t.input.rawValue),
                        now.serviceClass == .be
                    {
                        analysis.bleached.append(
                            .init(input: t.input.rawValue, hop: 1, from: t.input.description, to: now))
                    }
                    continue
                }
                guard let prior else { continue }
                if now.color < prior.color {
                    analysis.colorsLost.append(
                        .init(input: t.input.rawValue, hop: k + 1, from: prior, to: now))
                }
                if now.serviceClass != prior.serviceClass {
                    analysis.classChanges.append(
                        .init(input: t.input.rawValue, hop: k + 1, from: prior, to: now))
                    if protected.contains(prior.serviceClass), now.serviceClass == .be {
                        analysis.bleached.append(
                            .init(input: t.input.rawValue, hop: k + 1, from: prior.description, to: now))
                    }
                }
            }
        }
        return analysis
    }
}

/// What `explain --all` finds along a path.
public struct PathAnalysis: Sendable, Equatable {
    /// Inputs that arrive distinct at a hop and leave it with one marking.
    public struct Merge: Sendable, Equatable {
        /// The 1-based hop where they merge.
        public var hop: Int
        /// The input values (of the first hop's trusted field) that merge.
        public var inputs: [UInt8]
        /// How many distinct markings they carried before the hop.
        public var from: Int
        /// The one marking they carry after it, as the next hop reads it
        /// (after the last hop, the fields it wrote).
        public var to: String
    }

    /// One input whose treatment changes at a hop.
    public struct Change: Sendable, Equatable {
        /// The input value.
        public var input: UInt8
        /// The 1-based hop where it changes.
        public var hop: Int
        /// The treatment at the previous hop.
        public var from: Treatment
        /// The treatment at this hop.
        public var to: Treatment
        /// Whether the class rose (higher priority) rather than fell.
        public var rises: Bool { to.serviceClass > from.serviceClass }
    }

    /// One input bleached from EF, CS6 or CS7 to BE.
    public struct Bleach: Sendable, Equatable {
        /// The input value.
        public var input: UInt8
        /// The 1-based hop where it becomes BE.
        public var hop: Int
        /// What it was: the previous hop's treatment, or the input code point.
        public var from: String
        /// The treatment at this hop.
        public var to: Treatment
    }

    /// Every input's trace, in value order.
    public var traces: [PathTrace]
    /// Many-to-one steps, by hop, then by first input.
    public var merges: [Merge] = []
    /// Inputs whose color turns greener from one hop to the next.
    public var colorsLost: [Change] = []
    /// Inputs bleached to BE.
    public var bleached: [Bleach] = []
    /// Inputs whose class rises or falls from one hop to the next.
    public var classChanges: [Change] = []
}
