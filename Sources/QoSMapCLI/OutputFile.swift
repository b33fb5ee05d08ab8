#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// How every command writes a file (`remark --out`, `import -o`): only a
/// regular file or a new path is replaced, through a temporary file in the
/// same directory renamed over it on success (``commit(what:)``); `-` and
/// anything else (a device, a FIFO, a symlink such as /dev/stdout) are
/// written in place. Errors are ``OutputError`` (exit 74), naming the path
/// and the cause; the old file is kept and the temporary one removed.
struct OutputTarget {
    /// The path libpcap opens (`-` is standard output).
    var writePath: String
    /// Whether `writePath` is a temporary file renamed over the output on success.
    var renames: Bool

    init(_ path: String) {
        self.path = path
        var st = stat()
        let exists = lstat(path, &st) == 0
        if path == "-" || (exists && st.st_mode & S_IFMT != S_IFREG) {
            writePath = path
            renames = false
        } else {
            let url = URL(fileURLWithPath: path)
            writePath =
                url.deletingLastPathComponent()
                .appendingPathComponent(".\(url.lastPathComponent).\(getpid()).tmp").path
            renames = true
        }
    }

    /// The path the command was given.
    let path: String

    /// Renames the temporary file over the path (nothing when written in
    /// place); on failure removes it and throws ``OutputError``.
    func commit(what: String = "") throws(OutputError) {
        guard renames else { return }
        guard rename(writePath, path) == 0 else {
            let code = errno
            discard()
            throw OutputError(path: path, what: what, errno: code)
        }
    }

    /// Removes the temporary file, if any (after a failure).
    func discard() {
        if renames { unlink(writePath) }
    }

    /// Writes `bytes` to ``writePath`` (created or truncated, mode 0666 less
    /// the umask), retrying short writes and `EINTR`; throws ``OutputError``
    /// naming ``path`` and the cause.
    func write(_ bytes: [UInt8]) throws(OutputError) {
        let fd = open(writePath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
        guard fd >= 0 else { throw OutputError(path: path, errno: errno) }
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { systemWrite(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let code = n < 0 ? errno : EIO
                close(fd)
                throw OutputError(path: path, errno: code)
            }
            done += n
        }
        guard close(fd) == 0 else { throw OutputError(path: path, errno: errno) }
    }

    /// Whether `path` is the file standard output is open on (`/dev/stdout`,
    /// `/proc/self/fd/1`, or the file the shell redirected to).
    static func isStandardOutput(_ path: String) -> Bool {
        var sp = stat()
        var so = stat()
        guard stat(path, &sp) == 0, fstat(1, &so) == 0 else { return false }
        return sp.st_dev == so.st_dev && sp.st_ino == so.st_ino
    }

    /// Whether two paths name the same file (same device and inode), or the same text.
    static func sameFile(_ a: String, _ b: String) -> Bool {
        if a == b { return true }
        var sa = stat()
        var sb = stat()
        guard stat(a, &sa) == 0, stat(b, &sb) == 0 else { return false }
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino
    }
}

/// write(2), under a name that `OutputTarget.write` does not shadow.
private func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, buffer, count)
}
