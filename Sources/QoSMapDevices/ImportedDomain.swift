import QoSMapCore

/// What a device file says about one domain: only the cells it holds.
///
/// Device formats hold less than a qosmap domain: SONiC maps have no color,
/// and a file may leave whole fields out. ``completed(base:name:)`` fills
/// every cell the file does not hold from a base domain (the intent, when
/// `diff` compares), and says which.
public struct ImportedDomain: Sendable, Equatable {
    /// One received value's class, with its color when the format holds one.
    public struct InboundCell: Sendable, Equatable {
        /// The service class.
        public var serviceClass: ServiceClass
        /// The color; nil when the format cannot say (SONiC).
        public var color: Color?

        /// Creates a cell.
        public init(_ serviceClass: ServiceClass, _ color: Color?) {
            self.serviceClass = serviceClass
            self.color = color
        }
    }

    /// The name in the device file (SONiC map name, Junos classifier name).
    public var name: String
    /// Inbound cells the file gives, by field and received value.
    public var inbound: [Field: [UInt8: InboundCell]] = [:]
    /// Outbound cells the file gives, by field and class/color.
    public var outbound: [Field: [Treatment: UInt8]] = [:]
    /// The DEI policy, when the file says.
    public var dropEligibility: DropEligibility?
    /// Things in the file that qosmap cannot represent (e.g. a traffic class
    /// beyond 7, a forwarding class with no qosmap class): one line each, with `file:line`.
    public var unmapped: [String] = []

    /// An empty import named `name`.
    public init(name: String) { self.name = name }

    /// Sets an inbound cell.
    public mutating func setInbound(_ field: Field, _ value: UInt8, _ cell: InboundCell) {
        inbound[field, default: [:]][value] = cell
    }

    /// Sets an outbound cell.
    public mutating func setOutbound(_ field: Field, _ treatment: Treatment, _ value: UInt8) {
        outbound[field, default: [:]][treatment] = value
    }

    /// Every cell of `base` this import does not hold is taken from `base`.
    ///
    /// - Returns: the complete domain, named `name`, and one summary line per
    ///   field and direction saying how many cells (or colors) came from `base`.
    public func completed(base: DSDomain, name: String? = nil) -> (domain: DSDomain, notes: [String]) {
        var b = base.derive(name: name ?? self.name)
        b.origin = .builtIn
        var notes: [String] = []
        for field in Field.allCases {
            let given = inbound[field] ?? [:]
            var absent = 0
            var colorless = 0
            for v in 0..<field.valueCount {
                let value = UInt8(v)
                guard let cell = given[value] else {
                    absent += 1
                    continue
                }
                let color = cell.color ?? base.classify(field, value).color
                if cell.color == nil { colorless += 1 }
                b.setInbound(field, value, Treatment(cell.serviceClass, color))
            }
            if absent > 0 {
                notes.append(
                    "inbound \(field.name): \(absent) of \(field.valueCount) values not in the file; taken from \(base.name)"
                )
            }
            if colorless > 0 {
                notes.append(
                    "inbound \(field.name): the file holds no color; \(colorless) colors taken from \(base.name)"
                )
            }
            let outs = outbound[field] ?? [:]
            var missing: [Treatment] = []
            for t in Treatment.allCells {
                if let v = outs[t] { b.setOutbound(field, t, v) } else { missing.append(t) }
            }
            if !missing.isEmpty {
                let colors = Set(missing.map(\.color)).sorted().map(\.name).joined(separator: "/")
                notes.append(
                    "outbound \(field.name): \(missing.count) of \(Treatment.allCells.count) class/color cells (\(colors)) not in the file; taken from \(base.name)"
                )
            }
        }
        if let dropEligibility { b.dropEligibility = dropEligibility }
        // Every cell is set: base was total and the rest came from the file.
        let domain = (try? b.build()) ?? base
        return (domain, notes)
    }
}
