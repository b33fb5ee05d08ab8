import Foundation
import PacketSocket
import Synchronization
import SystemPackage
import Testing

@testable import QoSMapDaemon

// Which failures to open a snooping socket stop qosmapd at start (a unit
// without CAP_NET_RAW or AF_PACKET: retrying every second never helped) and
// which are retried (an interface that does not exist yet).

struct DNSSnoopStartupTests {
    /// (operation, errno, the words a permanent error must hold, or nil for transient).
    static let cases: [(PacketSocketError.Operation, Errno, String?)] = [
        (.open, .notPermitted, "CAP_NET_RAW"),
        (.open, .permissionDenied, "CAP_NET_RAW"),
        (.open, .addressFamilyNotSupported, "RestrictAddressFamilies="),
        (.open, .noMemory, nil),
        (.open, .noBufferSpace, nil),
        (.open, .tooManyOpenFiles, nil),
        (.bind, .operationNotSupportedByDevice, nil),  // ENODEV
        (.bind, .noSuchAddressOrDevice, nil),
        (.bind, .networkDown, nil),
        // Only socket() is refused to a process; EPERM elsewhere is not the unit's.
        (.bind, .notPermitted, nil),
        (.attachFilter, .noMemory, nil),
        (.receive, .networkDown, nil),
    ]

    @Test(arguments: cases)
    func classifies(_ operation: PacketSocketError.Operation, _ errno: Errno, _ words: String?) {
        let got = DNSSnoopService.classify(PacketSocketError(operation: operation, errno: errno))
        guard let words else {
            #expect(got == .transient)
            return
        }
        guard case .permanent(let text) = got else {
            Issue.record("\(operation.rawValue) \(errno) classified transient")
            return
        }
        #expect(text.contains(words) && text.contains("\(errno)"), "\(text)")
        #expect(text.hasPrefix("DNS snooping (classify.dns.snoop) cannot open AF_PACKET sockets: "))
        #expect(!text.contains("\n"))
    }

    /// The start-up check itself against the kernel: a thread whose
    /// effective set lacks CAP_NET_RAW is refused (capabilities are per
    /// thread, so the test process keeps its own), one that has it is not.
    @Test func startupCheckFollowsCapNetRaw() throws {
        let root = getuid() == 0
        if root { #expect(DNSSnoopService.startupProblem() == nil) }
        let problem = Mutex<String?>(nil)
        let dropped = Mutex(false)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            dropped.withLock { $0 = dropEffectiveCapability(13) }  // CAP_NET_RAW
            problem.withLock { $0 = DNSSnoopService.startupProblem() }
            done.signal()
        }
        thread.start()
        #expect(done.wait(timeout: .now() + 10) == .success)
        let capsetWorked = dropped.withLock { $0 }
        let refusal = problem.withLock { $0 }
        try #require(capsetWorked, "capget/capset failed")
        let text = try #require(refusal, "socket(AF_PACKET) opened without CAP_NET_RAW")
        #expect(text.contains("CAP_NET_RAW") && text.contains("Operation not permitted"), "\(text)")
    }
}

/// Clears capability `bit` from the calling thread's effective set
/// (capget/capset with pid 0, `_LINUX_CAPABILITY_VERSION_3`), found with
/// dlsym: glibc has the calls but no header declaring them.
func dropEffectiveCapability(_ bit: Int) -> Bool {
    typealias CapCall = @convention(c) (UnsafeMutableRawPointer, UnsafeMutableRawPointer) -> Int32
    guard let get = dlsym(nil, "capget"), let set = dlsym(nil, "capset") else { return false }
    let capget = unsafeBitCast(get, to: CapCall.self)
    let capset = unsafeBitCast(set, to: CapCall.self)
    var header: [UInt32] = [0x2008_0522, 0]  // version 3, pid 0: this thread
    var data = [UInt32](repeating: 0, count: 6)  // {effective, permitted, inheritable} x 2
    guard capget(&header, &data) == 0 else { return false }
    data[(bit / 32) * 3] &= ~(UInt32(1) << UInt32(bit % 32))
    return capset(&header, &data) == 0
}
