#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Threads, sleeps and child processes on POSIX directly: Foundation's
// `Thread` and `Process` are not in FoundationEssentials, and full Foundation
// (with ICU's data) would more than triple the daemon's size.

/// Runs `body` on a new detached thread (`pthread_create`) named `name`
/// (Linux keeps the first 15 bytes).
func startThread(name: String, _ body: @escaping @Sendable () -> Void) {
    final class Box: @unchecked Sendable {
        let body: @Sendable () -> Void
        let name: String
        init(_ body: @escaping @Sendable () -> Void, _ name: String) {
            self.body = body
            self.name = name
        }
    }
    let box = Unmanaged.passRetained(Box(body, name)).toOpaque()
    #if canImport(Glibc)
        var thread = pthread_t()
    #else
        var thread: pthread_t?
    #endif
    let rc = pthread_create(
        &thread, nil,
        { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            setThreadName(box.name)
            box.body()
            return nil
        }, box)
    guard rc == 0 else {
        // No thread: nothing else can run the work, and the daemon cannot serve without it.
        fatalError("pthread_create: \(String(cString: strerror(rc)))")
    }
    #if canImport(Glibc)
        pthread_detach(thread)
    #else
        pthread_detach(thread!)
    #endif
}

/// Names the calling thread, as `ps -L` and `top -H` show it: Linux's
/// `/proc/thread-self/comm` (Glibc's `pthread_setname_np` needs `_GNU_SOURCE`,
/// which Swift's Glibc module lacks).
private func setThreadName(_ name: String) {
    #if canImport(Glibc)
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    #else
        _ = pthread_setname_np(String(decoding: name.utf8.prefix(63), as: UTF8.self))
    #endif
}

/// Sleeps the calling thread (`nanosleep`, resumed after a signal).
func sleep(seconds: Double) {
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0, errno == EINTR { request = remaining }
}

/// What a child process did.
struct ChildResult {
    /// Whether it exited (rather than being killed by a signal).
    var exited: Bool
    /// Its exit status, or the signal that killed it.
    var status: Int32
    /// Everything it wrote to standard output.
    var stdout: [UInt8]
    /// Everything it wrote to standard error.
    var stderr: [UInt8]
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which the
/// Glibc module does not export; looked up once (nil on an older C library:
/// children then inherit what is not close-on-exec, as before).
private typealias SpawnCloseFrom =
    @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
private let spawnCloseFrom: SpawnCloseFrom? = {
    let name = "posix_spawn_file_actions_addclosefrom_np"
    guard let sym = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }
    return unsafeBitCast(sym, to: SpawnCloseFrom.self)
}()

/// Runs `path` with `arguments` (`posix_spawn`), standard input from `input`
/// (or /dev/null), in this process's environment with default signal
/// handling and no blocked signals, and waits for it; both output streams are
/// read as they come (`poll`), so neither can fill and stall the child; the
/// child inherits no descriptor above 2 (`posix_spawn_file_actions_addclosefrom_np`).
///
/// `input` must fit in a pipe's buffer (it is written before the child
/// starts, so no write blocks and none can raise SIGPIPE).
/// - Returns: the result, or the `errno` of the step that failed.
func runChild(_ path: String, _ arguments: [String], input: [UInt8]?) -> Result<ChildResult, SpawnError> {
    var outPipe: [Int32] = [-1, -1]
    var errPipe: [Int32] = [-1, -1]
    var inPipe: [Int32] = [-1, -1]
    defer { for fd in outPipe + errPipe + inPipe where fd >= 0 { close(fd) } }
    guard makePipe(&outPipe), makePipe(&errPipe) else {
        return .failure(SpawnError(step: "pipe", code: errno))
    }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if let input {
        guard makePipe(&inPipe) else { return .failure(SpawnError(step: "pipe", code: errno)) }
        let written = input.withUnsafeBytes { write(inPipe[1], $0.baseAddress, $0.count) }
        guard written == input.count else { return .failure(SpawnError(step: "write", code: errno)) }
        close(inPipe[1])
        inPipe[1] = -1
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
    } else {
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    }
    posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
    posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
    // Nothing else is inherited: a child that outlives us (a daemonizing
    // program) must not keep our sockets open, e.g. the metrics listener,
    // which would keep accepting connections after qosmapd closed it.
    if let closeFrom = spawnCloseFrom { _ = closeFrom(&actions, 3) }

    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t()
    var all = sigset_t()
    sigemptyset(&none)
    sigfillset(&all)
    posix_spawnattr_setsigmask(&attributes, &none)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for p in argv { free(p) } }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
    guard rc == 0 else { return .failure(SpawnError(step: "posix_spawn", code: rc)) }
    // The child holds its own copies of the write ends; ours must close for EOF to come.
    close(outPipe[1])
    close(errPipe[1])
    outPipe[1] = -1
    errPipe[1] = -1

    var result = ChildResult(exited: false, status: 0, stdout: [], stderr: [])
    var reading = [outPipe[0], errPipe[0]]
    var buffer = [UInt8](repeating: 0, count: 16 * 1024)
    while reading.contains(where: { $0 >= 0 }) {
        var fds = reading.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        if poll(&fds, nfds_t(fds.count), -1) < 0 {
            if errno == EINTR { continue }
            break
        }
        for (i, p) in fds.enumerated() where p.fd >= 0 && p.revents != 0 {
            let n = buffer.withUnsafeMutableBytes { read(p.fd, $0.baseAddress, $0.count) }
            if n > 0 {
                if i == 0 { result.stdout += buffer[..<n] } else { result.stderr += buffer[..<n] }
            } else if n == 0 || errno != EINTR {
                reading[i] = -1
            }
        }
    }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
        guard errno == EINTR else { return .failure(SpawnError(step: "waitpid", code: errno)) }
    }
    // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift cannot import (macros).
    result.exited = status & 0x7f == 0
    result.status = result.exited ? (status >> 8) & 0xff : status & 0x7f
    return .success(result)
}

/// A pipe whose ends close on exec, so that only the child they are handed to
/// (by `posix_spawn_file_actions_adddup2`) keeps one (`pipe2` needs
/// `_GNU_SOURCE`, which Swift's Glibc module lacks).
private func makePipe(_ fds: inout [Int32]) -> Bool {
    guard pipe(&fds) == 0 else { return false }
    for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    return true
}

/// A system call that failed while starting or waiting for a child.
struct SpawnError: Error, CustomStringConvertible {
    /// The call.
    var step: String
    /// Its errno.
    var code: Int32
    /// `step: strerror`.
    var description: String { "\(step): \(String(cString: strerror(code)))" }
}
