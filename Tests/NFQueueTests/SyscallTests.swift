import Syscall
import SystemPackage
import Testing

@testable import NFQueue

#if canImport(Glibc)
    import Glibc
#endif

/// A stand-in system call: fails with each errno of `errors` in turn, then returns 7.
private func failing(_ errors: [Int32], calls: inout Int) -> Int {
    defer { calls += 1 }
    guard calls < errors.count else { return 7 }
    errno = errors[calls]
    return -1
}

@Test func interruptedCallsAreRetried() throws {
    var calls = 0
    let result = try retryingOnInterrupt { failing([EINTR, EINTR], calls: &calls) }
    #expect(result == 7)
    #expect(calls == 3)
}

@Test(arguments: [Errno.noBufferSpace, .resourceTemporarilyUnavailable, .messageTooLong, .badFileDescriptor])
func otherErrorsAreThrownAtOnce(_ expected: Errno) {
    var calls = 0
    #expect(throws: expected) {
        try retryingOnInterrupt { failing([EINTR, expected.rawValue], calls: &calls) }
    }
    #expect(calls == 2)
}

@Test func aNullResultThrowsItsErrno() {
    var calls = 0
    let pointer: () -> OpaquePointer? = {
        calls += 1
        errno = calls == 1 ? EINTR : EMFILE
        return nil
    }
    #expect(throws: Errno.tooManyOpenFiles) { try retryingOnInterrupt(pointer) }
    #expect(calls == 2)
}
