import CBPF
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// libbpf's messages. While a thread loads an object (``capture(_:)``) they
/// are kept for it, so that a refused program becomes one line (the
/// verifier's reason) instead of libbpf's dump of the verifier's log on
/// stderr (any other failure's messages are written to stderr after it).
/// Other messages go to stderr as libbpf's own printer sends them:
/// warnings and information, and debug messages with `LIBBPF_LOG_LEVEL=debug`,
/// which also passes the captured ones through.
enum LibbpfLog {
    /// Messages by capturing thread (libbpf prints on the calling thread).
    private static let captured = Mutex<[UInt: String]>([:])
    private static let debug = getenv("LIBBPF_LOG_LEVEL").map { String(cString: $0) == "debug" } ?? false
    /// Installed once, before the first load.
    private static let installed: Void = { _ = libbpf_set_print(printer) }()

    private static let printer: libbpf_print_fn_t = { level, format, args in
        guard let format, let args, let text = qosmap_vformat(format, args) else { return 0 }
        defer { free(text) }
        let thread = UInt(pthread_self())
        // Debug messages are not kept: only LIBBPF_LOG_LEVEL=debug shows them.
        let kept =
            level != LIBBPF_DEBUG
            && captured.withLock { c -> Bool in
                guard c[thread] != nil else { return false }
                c[thread]! += String(cString: text)
                return true
            }
        if LibbpfLog.debug || (!kept && level != LIBBPF_DEBUG) { _ = write(2, text, strlen(text)) }
        return 0
    }

    /// Runs `body` with libbpf's warnings and information on this thread
    /// kept; returns its result and the messages.
    static func capture<T>(_ body: () -> T) -> (T, String) {
        _ = installed
        let thread = UInt(pthread_self())
        captured.withLock { $0[thread] = "" }
        let result = body()
        let text = captured.withLock { $0.removeValue(forKey: thread) } ?? ""
        return (result, text)
    }

    /// The verifier's reason in a log libbpf printed for a refused program:
    /// the last line of the kernel's log before its statistics
    /// (`verification time`, `processed N insns`), e.g. `back-edge from insn
    /// 4273 to 4274`, with the program's name. Nil if there is no such log.
    static func verifierReason(_ text: String) -> String? {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
        guard let begin = lines.lastIndex(where: { $0.contains("-- BEGIN PROG LOAD LOG --") }) else {
            return nil
        }
        var reason: Substring?
        for line in lines[(begin + 1)...] {
            if line.contains("-- END PROG LOAD LOG --") || line.hasPrefix("verification time")
                || line.hasPrefix("processed ")
            {
                break
            }
            reason = line
        }
        // libbpf's own line names the program: "libbpf: prog 'NAME': -- BEGIN ...".
        let header = lines[begin]
        let name = header.split(separator: "'").dropFirst().first.map(String.init)
        return reason.map { r in name.map { "\($0): \(r)" } ?? String(r) }
    }

    /// The kernel's extended ack in libbpf's messages for a netlink request
    /// ("libbpf: Kernel error message: Exclusivity flag on, cannot modify"),
    /// nil if there is none.
    static func kernelMessage(_ text: String) -> String? {
        let marker = "Kernel error message: "
        for line in text.split(separator: "\n").reversed() {
            if let r = line.firstRange(of: marker) {
                var text = line[r.upperBound...]
                while text.last?.isWhitespace == true { text = text.dropLast() }
                return String(text)
            }
        }
        return nil
    }
}
