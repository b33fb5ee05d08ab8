import NFQueue
import Testing

@Test func truncationFollowsCapLen() {
    var bytes = [UInt8](repeating: 0, count: 100)
    bytes.withUnsafeMutableBytes { buf in
        #expect(!QueuedPacket(payload: buf).isTruncated)
        #expect(!QueuedPacket(capturedLength: 100, payload: buf).isTruncated)
        #expect(QueuedPacket(capturedLength: 1500, payload: buf).isTruncated)
    }
}

@Test func flagsMatchTheKernelBits() {
    #expect(NetfilterQueue.Flags.failOpen.rawValue == 1)
    #expect(NetfilterQueue.Flags.gso.rawValue == 4)
    #expect(QueuedPacket.SKBInfo.checksumNotReady.rawValue == 1)
    #expect(Verdict.accept.decision.rawValue == 1 && Verdict.drop.decision.rawValue == 0)
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
    #expect(reported?.errno == .noSuchEntry)
    #expect(try q.receive { _ in .accept } == 0)  // still bound: times out quietly
}
