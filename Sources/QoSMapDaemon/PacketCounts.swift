import QoSMapCore

/// Counts kept by one queue thread between flushes to swift-metrics, so the
/// per-packet path touches no shared state.
public struct PacketCounts: Sendable {
    /// Packets by class (8) × color (3) × outcome.
    public var byTreatment = [Int](repeating: 0, count: 24 * PacketOutcome.allCases.count)
    /// Partial checksums completed.
    public var checksumCompletions = 0
    /// GSO packets returned with their partial checksum kept for segmentation.
    public var gsoPartialChecksums = 0
    /// Packets whose fixed IP header was valid (and so remarked) but whose
    /// length or extension headers were not.
    public var malformedTails = 0

    /// Creates zero counts.
    public init() {}

    /// Adds one packet.
    @inlinable
    public mutating func count(_ t: Treatment, _ outcome: PacketOutcome) {
        byTreatment[t.cellIndex &* PacketOutcome.caseCount &+ outcome.rawValue] &+= 1
    }

    /// The count for a cell and outcome.
    public func count(of t: Treatment, _ outcome: PacketOutcome) -> Int {
        byTreatment[t.cellIndex * PacketOutcome.allCases.count + outcome.rawValue]
    }

    /// The total for an outcome.
    public func total(_ outcome: PacketOutcome) -> Int {
        Treatment.allCells.reduce(0) { $0 + count(of: $1, outcome) }
    }
}
