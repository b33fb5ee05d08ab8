import NFQueue
import SystemPackage
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Test func truncationFollowsCapLen() {
    var bytes = [UInt8](repeating: 0, count: 100)
    bytes.withUnsafeMutableBytes { buf in
        #expect(!QueuedPacket(payload: buf).isTruncated)
        #expect(!QueuedPacket(capturedLength: 100, payload: buf).isTruncated)
        #expect(QueuedPacket(capturedLength: 1500, payload: buf).isTruncated)
    }
}

/// One constant and the value the kernel ABI gives it.
struct KernelBit: Sendable, CustomTestStringConvertible {
    var name: String
    var value: UInt32
    var kernel: UInt32
    var testDescription: String { name }
}

/// The kernel ABI values, as linux/netfilter.h and
/// linux/netfilter/nfnetlink_queue.h define them; UAPI never changes them,
/// so a shim constant bound to the wrong macro (or a Swift literal slipped
/// back in wrong) differs from its row here.
private let kernelBits = [
    KernelBit(name: "Flags.failOpen", value: NetfilterQueue.Flags.failOpen.rawValue, kernel: 1 << 0),
    KernelBit(name: "Flags.conntrack", value: NetfilterQueue.Flags.conntrack.rawValue, kernel: 1 << 1),
    KernelBit(name: "Flags.gso", value: NetfilterQueue.Flags.gso.rawValue, kernel: 1 << 2),
    KernelBit(name: "Flags.uidGid", value: NetfilterQueue.Flags.uidGid.rawValue, kernel: 1 << 3),
    KernelBit(
        name: "Flags.securityContext", value: NetfilterQueue.Flags.securityContext.rawValue, kernel: 1 << 4),
    KernelBit(
        name: "SKBInfo.checksumNotReady", value: QueuedPacket.SKBInfo.checksumNotReady.rawValue,
        kernel: 1 << 0),
    KernelBit(name: "SKBInfo.gso", value: QueuedPacket.SKBInfo.gso.rawValue, kernel: 1 << 1),
    KernelBit(
        name: "SKBInfo.checksumNotVerified", value: QueuedPacket.SKBInfo.checksumNotVerified.rawValue,
        kernel: 1 << 2),
    KernelBit(name: "Decision.drop", value: Verdict.Decision.drop.rawValue, kernel: 0),
    KernelBit(name: "Decision.accept", value: Verdict.Decision.accept.rawValue, kernel: 1),
    KernelBit(name: "Decision.repeat", value: Verdict.Decision.repeat.rawValue, kernel: 4),
]

@Test(arguments: kernelBits)
func constantsAreTheKernelABI(_ bit: KernelBit) {
    #expect(bit.value == bit.kernel)
}

@Test func flagsAllIsEveryFlag() {
    let flags: [NetfilterQueue.Flags] = [.failOpen, .conntrack, .gso, .uidGid, .securityContext]
    #expect(flags.reduce(0) { $0 | $1.rawValue } == NetfilterQueue.Flags.all.rawValue)
    #expect(Set(flags.map(\.rawValue)).count == flags.count)  // no two the same bit
}

@Test func openingWithoutPrivilegeOrWithPrivilegeBehaves() {
    // As root (CI) the queue binds; without CAP_NET_ADMIN it fails with a typed EPERM.
    do {
        let q = try NetfilterQueue(configuration: .init(queueNumber: 4711, receiveTimeoutMilliseconds: 10))
        #expect(try q.receive { _ in .accept } == 0)
        q.close()
    } catch {
        #expect(error.errno == .notPermitted)
    }
}

@Test func verdictForAnUnknownPacketIsReportedAsATypedError() throws {
    // The kernel answers a verdict for an id it does not hold with an ENOENT
    // error message; the next receive surfaces it as a verdict error (qosmapd
    // counts it in qosmapd_verdict_errors_total) and the queue stays usable.
    let q: NetfilterQueue
    do {
        q = try NetfilterQueue(configuration: .init(queueNumber: 4712, receiveTimeoutMilliseconds: 200))
    } catch {
        #expect(error.errno == .notPermitted)  // not root: nothing more to check
        return
    }
    defer { q.close() }
    try q.verdict(Verdict(.accept), for: 0x7FFF_FFF0)
    var reported: NetfilterQueueError?
    do {
        _ = try q.receive { _ in .accept }
    } catch {
        reported = error
    }
    #expect(reported?.operation == .verdict)
    #expect(reported?.errno == .noSuchFileOrDirectory)
    #expect(try q.receive { _ in .accept } == 0)  // still bound: times out quietly
}

/// The queue's row in /proc/net/netfilter/nfnetlink_queue: queue, portid,
/// waiting, copy mode, copy range, … (nil when unbound).
private func procRow(_ queue: UInt16) -> [String]? {
    guard let f = fopen("/proc/net/netfilter/nfnetlink_queue", "r") else { return nil }
    defer { fclose(f) }
    var line = [CChar](repeating: 0, count: 512)
    while fgets(&line, Int32(line.count), f) != nil {
        let fields = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            .split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        if fields.first == String(queue) { return fields }
    }
    return nil
}

@Test func reconfigureChangesTheBoundQueueInPlace() throws {
    let q: NetfilterQueue
    do {
        q = try NetfilterQueue(
            configuration: .init(
                queueNumber: 4713, copyMode: .packet(range: 0xFFFF), receiveTimeoutMilliseconds: 10))
    } catch {
        #expect(error.errno == .notPermitted)  // not root: nothing more to check
        return
    }
    defer { q.close() }
    let before = try #require(procRow(4713))
    // The kernel caps the range at NFQNL_MAX_COPY_RANGE (0xFFFF minus an attribute header).
    #expect(Int(before[4]) ?? 0 > 60000)
    var next = q.configuration
    next.copyMode = .packet(range: 128)
    next.flags = []
    next.maximumLength = 64
    next.noENOBUFS = false
    try q.reconfigure(next)
    let after = try #require(procRow(4713))
    #expect(after[1] == before[1])  // the same socket: never unbound
    #expect(after[4] == "128")
    #expect(q.configuration == next)

    var other = next
    other.queueNumber = 4714
    #expect(throws: NetfilterQueueError(operation: .configureQueue, errno: .invalidArgument)) {
        try q.reconfigure(other)
    }
    #expect(q.configuration == next)
}
