#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// One queue's row in `/proc/net/netfilter/nfnetlink_queue`.
public struct KernelQueueRow: Sendable, Equatable {
    /// The queue number.
    public var queue: UInt16
    /// The netlink port id of the socket that bound it.
    public var portID: UInt32
    /// `queue_total`: packets waiting for a verdict.
    public var backlog: UInt64
    /// `queue_dropped`: packets dropped because the queue was full.
    public var queueDropped: UInt64
    /// `user_dropped`: packets dropped because netlink could not deliver them.
    public var userDropped: UInt64

    /// Creates a row.
    public init(queue: UInt16, portID: UInt32, backlog: UInt64, queueDropped: UInt64, userDropped: UInt64) {
        self.queue = queue
        self.portID = portID
        self.backlog = backlog
        self.queueDropped = queueDropped
        self.userDropped = userDropped
    }
}

/// What one queue's kernel figures moved by between two samples.
public struct KernelQueueDelta: Sendable, Equatable {
    /// The queue number.
    public var queue: UInt16
    /// Packets newly dropped because the queue was full.
    public var queueDropped: UInt64
    /// Packets newly dropped because netlink could not deliver them.
    public var userDropped: UInt64
    /// Packets waiting now (0 when the queue is not bound).
    public var backlog: UInt64

    /// Creates a delta.
    public init(queue: UInt16, queueDropped: UInt64, userDropped: UInt64, backlog: UInt64) {
        self.queue = queue
        self.queueDropped = queueDropped
        self.userDropped = userDropped
        self.backlog = backlog
    }
}

/// Reads the kernel's per-queue figures and turns successive samples into
/// counter increments.
public struct KernelQueueStats: Sendable {
    /// Where the kernel publishes them.
    public static let path = "/proc/net/netfilter/nfnetlink_queue"

    private var last: [UInt16: KernelQueueRow] = [:]

    /// Creates a tracker that has seen no sample.
    public init() {}

    /// Parses the file's text. Columns: queue_number, peer portid,
    /// queue_total, copy_mode, copy_range, queue_dropped, user_dropped,
    /// id_sequence, 1. A line that does not have them is skipped.
    public static func parse(_ text: String) -> [UInt16: KernelQueueRow] {
        var rows: [UInt16: KernelQueueRow] = [:]
        for line in text.split(separator: "\n") {
            let f = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard f.count >= 8, let q = UInt16(f[0]), let port = UInt32(f[1]), let total = UInt64(f[2]),
                UInt64(f[3]) != nil, UInt64(f[4]) != nil, let qd = UInt64(f[5]), let ud = UInt64(f[6]),
                UInt64(f[7]) != nil
            else { continue }
            rows[q] = KernelQueueRow(
                queue: q, portID: port, backlog: total, queueDropped: qd, userDropped: ud)
        }
        return rows
    }

    /// The rows now, or nil when the file cannot be read (module not loaded).
    public static func read(path: String = KernelQueueStats.path) -> [UInt16: KernelQueueRow]? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return parse(String(decoding: data, as: UTF8.self))
    }

    /// The increments since the previous sample for `queues`. A queue seen
    /// for the first time, bound by another socket (port id changed), or
    /// whose figures went down was re-bound: the kernel made a new instance
    /// that counts from 0, so all of its figures are new.
    public mutating func advance(_ rows: [UInt16: KernelQueueRow], queues: [UInt16]) -> [KernelQueueDelta] {
        var deltas: [KernelQueueDelta] = []
        var next: [UInt16: KernelQueueRow] = [:]
        for q in queues {
            guard let row = rows[q] else {
                deltas.append(KernelQueueDelta(queue: q, queueDropped: 0, userDropped: 0, backlog: 0))
                continue
            }
            next[q] = row
            var d = KernelQueueDelta(
                queue: q, queueDropped: row.queueDropped, userDropped: row.userDropped, backlog: row.backlog)
            if let old = last[q], old.portID == row.portID, row.queueDropped >= old.queueDropped,
                row.userDropped >= old.userDropped
            {
                d.queueDropped -= old.queueDropped
                d.userDropped -= old.userDropped
            }
            deltas.append(d)
        }
        // A queue that left the config keeps its counters; its backlog is no longer ours.
        for q in last.keys where !queues.contains(q) {
            deltas.append(KernelQueueDelta(queue: q, queueDropped: 0, userDropped: 0, backlog: 0))
        }
        last = next
        return deltas
    }
}
