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
    /// Packets each flow rule classified, by rule index of ``ruleNames``.
    public var rulePackets: [UInt64] = []
    /// Their bytes, from the IP header on.
    public var ruleBytes: [UInt64] = []
    /// The rule names the counts above are for (the snapshot they were taken with).
    public var ruleNames: [String] = []
    /// Whether any rule count is not zero (flushing skips the scan otherwise).
    public var ruleTouched = false
    /// Flow-behaviour table events (`classify.flows`).
    public var flows = FlowBehaviourCounts()

    /// Creates zero counts.
    public init() {}

    /// Adds one packet.
    @inlinable
    public mutating func count(_ t: Treatment, _ outcome: PacketOutcome) {
        byTreatment[t.cellIndex &* PacketOutcome.caseCount &+ outcome.rawValue] &+= 1
    }

    /// Adds a packet of `bytes` to rule `index`.
    @inlinable
    public mutating func countRule(_ index: Int, bytes: Int) {
        rulePackets[index] &+= 1
        ruleBytes[index] &+= UInt64(truncatingIfNeeded: bytes)
        ruleTouched = true
    }

    /// Starts counting for these rules; the caller has flushed the counts first.
    public mutating func resetRules(_ names: [String]) {
        ruleNames = names
        rulePackets = Array(repeating: 0, count: names.count)
        ruleBytes = Array(repeating: 0, count: names.count)
        ruleTouched = false
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
