/// One cell of a domain: an inbound value of a field, or an outbound class
/// and color of a field.
public enum DomainCell: Hashable, Sendable, CustomStringConvertible {
    /// The class and color a received value of a field maps to.
    case inbound(Field, UInt8)
    /// The value a field is written with for a class and color.
    case outbound(Field, Treatment)

    /// The field of the cell.
    public var field: Field {
        switch self {
        case .inbound(let f, _), .outbound(let f, _): f
        }
    }

    /// `inbound dscp 46` or `outbound 8021p AF4/yellow`.
    public var description: String {
        switch self {
        case .inbound(let f, let v): "inbound \(f.name) \(v)"
        case .outbound(let f, let t): "outbound \(f.name) \(t)"
        }
    }

    /// Every inbound cell, field by field in value order.
    public static let allInbound: [DomainCell] = Field.allCases.flatMap { f in
        (0..<f.valueCount).map { DomainCell.inbound(f, UInt8($0)) }
    }

    /// Every outbound cell, field by field in ``Treatment/allCells`` order.
    public static let allOutbound: [DomainCell] = Field.allCases.flatMap { f in
        Treatment.allCells.map { DomainCell.outbound(f, $0) }
    }
}

/// Where a cell was written: a table file and a 1-based line.
public struct CellSource: Hashable, Sendable, CustomStringConvertible {
    /// The file's path as loaded (`Tables/domains/default.yaml` for a built-in).
    public var file: String
    /// The 1-based line of the cell's key.
    public var line: Int

    /// Creates a source position.
    public init(file: String, line: Int) {
        self.file = file
        self.line = line
    }

    /// `file:line`.
    public var description: String { "\(file):\(line)" }
}

/// Where each cell of a domain was written, and what the domain was derived
/// from: what `explain`, `show --overrides` and `lint` cite.
public struct DomainProvenance: Sendable, Equatable {
    /// The domain imported with `import:`, or the domain's own name when a file
    /// overrides an editable domain; nil for a domain defined from scratch.
    public var imports: String?
    /// The cells before the domain's own file applied: the imported (or
    /// overridden) domain as it was then; nil for a domain defined from scratch.
    public var base: DSDomain?
    // Indexed like DSDomain's packed arrays: 88 inbound, 96 outbound.
    var inbound: [CellSource?] = .init(repeating: nil, count: 88)
    var outbound: [CellSource?] = .init(repeating: nil, count: 96)
    // Where the base's cells were written, in the same layout.
    var baseInbound: [CellSource?] = []
    var baseOutbound: [CellSource?] = []

    /// An empty provenance: no cell has a source yet.
    public init(imports: String? = nil, base: DSDomain? = nil) {
        self.imports = imports
        self.base = base
    }

    static func index(_ cell: DomainCell) -> (inbound: Bool, index: Int) {
        switch cell {
        case .inbound(let f, let v):
            (true, DSDomain.inboundBase(f) + Int(v & (f == .dscp ? 63 : 7)))
        case .outbound(let f, let t):
            (false, Int(f.rawValue) * 24 + t.cellIndex)
        }
    }

    /// The file and line that wrote a cell, or nil when unknown.
    public subscript(cell: DomainCell) -> CellSource? {
        get {
            let (isIn, i) = Self.index(cell)
            return isIn ? inbound[i] : outbound[i]
        }
        set {
            let (isIn, i) = Self.index(cell)
            if isIn { inbound[i] = newValue } else { outbound[i] = newValue }
        }
    }

    /// Records the base a domain was derived from, with where its cells were
    /// written (the base's own provenance), before the domain's file applies.
    public mutating func derive(from base: DSDomain, named imports: String, sources: DomainProvenance?) {
        self.imports = imports
        self.base = base
        baseInbound = sources?.inbound ?? []
        baseOutbound = sources?.outbound ?? []
    }

    /// The file and line that wrote a cell of ``base``, or nil when unknown.
    public func baseSource(_ cell: DomainCell) -> CellSource? {
        let (isIn, i) = Self.index(cell)
        let sources = isIn ? baseInbound : baseOutbound
        return i < sources.count ? sources[i] : nil
    }

    /// The cells whose source is in `file`: those the file itself wrote.
    public func cells(writtenIn file: String) -> [DomainCell] {
        (DomainCell.allInbound + DomainCell.allOutbound).filter { self[$0]?.file == file }
    }
}

extension DSDomain {
    /// What a cell holds: the class and color of an inbound cell, or the
    /// value of an outbound cell.
    public func value(of cell: DomainCell) -> DomainCellValue {
        switch cell {
        case .inbound(let f, let v): .treatment(classify(f, v))
        case .outbound(let f, let t): .value(mark(f, for: t))
        }
    }
}

/// What a cell holds: a class and color (inbound) or a field value (outbound).
public enum DomainCellValue: Hashable, Sendable, CustomStringConvertible {
    /// An inbound cell's class and color.
    case treatment(Treatment)
    /// An outbound cell's value.
    case value(FieldValue)

    /// `AF4/yellow` or the value as its field prints it.
    public var description: String {
        switch self {
        case .treatment(let t): t.description
        case .value(let v): v.description
        }
    }
}

/// The cell-by-cell differences between two domains.
public struct DomainDiff: Sendable, Equatable {
    /// One cell that differs.
    public struct Change: Sendable, Equatable {
        /// The cell.
        public var cell: DomainCell
        /// What the first domain holds.
        public var old: DomainCellValue
        /// What the second domain holds.
        public var new: DomainCellValue
    }

    /// The cells that differ, inbound first, then outbound, each in field order.
    public var changes: [Change]
    /// The DEI policies, when they differ.
    public var dropEligibility: (old: DropEligibility, new: DropEligibility)?

    /// Compares every cell of `old` with the same cell of `new`.
    public init(_ old: DSDomain, _ new: DSDomain) {
        changes = (DomainCell.allInbound + DomainCell.allOutbound).compactMap { cell in
            let a = old.value(of: cell)
            let b = new.value(of: cell)
            return a == b ? nil : Change(cell: cell, old: a, new: b)
        }
        dropEligibility =
            old.dropEligibility == new.dropEligibility ? nil : (old.dropEligibility, new.dropEligibility)
    }

    /// Whether the domains map every cell alike and treat DEI alike.
    public var isEmpty: Bool { changes.isEmpty && dropEligibility == nil }

    /// Whether two diffs list the same changes.
    public static func == (a: DomainDiff, b: DomainDiff) -> Bool {
        a.changes == b.changes && a.dropEligibility?.old == b.dropEligibility?.old
            && a.dropEligibility?.new == b.dropEligibility?.new
    }
}
