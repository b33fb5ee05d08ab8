import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A failed libbpf operation and its errno.
public struct BPFError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The libbpf call that failed.
    public enum Operation: String, Sendable, Hashable {
        /// `bpf_object__open_mem`.
        case open = "bpf_object__open_mem"
        /// `bpf_object__load` (the verifier; `.notPermitted` without CAP_BPF).
        case load = "bpf_object__load"
        /// `bpf_object__find_program_by_name`.
        case findProgram = "bpf_object__find_program_by_name"
        /// `bpf_object__find_map_by_name`.
        case findMap = "bpf_object__find_map_by_name"
        /// `bpf_map_update_elem` or `bpf_map_update_batch`.
        case updateMap = "bpf_map_update_elem"
        /// `bpf_map_lookup_elem`.
        case lookupMap = "bpf_map_lookup_elem"
        /// `bpf_map_delete_elem`.
        case deleteMap = "bpf_map_delete_elem"
        /// `bpf_map_get_next_key`.
        case nextKey = "bpf_map_get_next_key"
        /// `bpf_obj_get_info_by_fd`.
        case info = "bpf_obj_get_info_by_fd"
        /// `bpf_tc_hook_create` (the clsact qdisc; `.notPermitted` without CAP_NET_ADMIN).
        case createHook = "bpf_tc_hook_create"
        /// `bpf_tc_attach`.
        case attach = "bpf_tc_attach"
        /// `bpf_tc_detach`.
        case detach = "bpf_tc_detach"
        /// `bpf_tc_query`.
        case query = "bpf_tc_query"
        /// `bpf_prog_test_run_opts` (`BPF_PROG_TEST_RUN`).
        case testRun = "bpf_prog_test_run_opts"
        /// A map's key or value size differs from the Swift type's.
        case size = "size check"
    }

    /// The call that failed.
    public var operation: Operation
    /// Why: swift-system's `Errno`, e.g. `.notPermitted` (EPERM) without the
    /// capabilities, `.noSuchFileOrDirectory` (ENOENT) for no such filter, map or program.
    public var errno: Errno
    /// The program, map or interface concerned, if any.
    public var subject: String?
    /// Why the kernel's verifier refused a program (`.load`): its program
    /// and the last line of its log, e.g. `qosmap_egress: back-edge from
    /// insn 4273 to 4274`; nil for any other failure.
    public var verifier: String?
    /// The kernel's own words for a refused netlink request (its extended
    /// ack, which libbpf prints as "Kernel error message: ..."), e.g.
    /// `Parent Qdisc doesn't exists`; nil when it gave none.
    public var kernelMessage: String?

    /// Creates an error.
    public init(
        operation: Operation, errno: Errno, subject: String? = nil, verifier: String? = nil,
        kernelMessage: String? = nil
    ) {
        self.operation = operation
        self.errno = errno
        self.subject = subject
        self.verifier = verifier
        self.kernelMessage = kernelMessage
    }

    /// `<libbpf function> [<subject>]: <strerror> (errno N)[: <kernel message>][; verifier: <reason>]`.
    public var description: String {
        "\(operation.rawValue)\(subject.map { " \($0)" } ?? ""): \(errno) (errno \(errno.rawValue))"
            + (kernelMessage.map { ": \($0)" } ?? "") + (verifier.map { "; verifier: \($0)" } ?? "")
    }
}

/// The one way BPFClassifier calls libbpf. libbpf 1.x returns `-errno` from
/// its `int` functions (and sets `errno`); runs `call` again while it fails
/// with `EINTR` (a signal is never an error here) and throws any other errno
/// as a ``BPFError``.
@inline(__always) @discardableResult
func libbpf(
    _ operation: BPFError.Operation, _ subject: String? = nil, _ call: () -> Int32
) throws(BPFError) -> Int32 {
    while true {
        let result = call()
        if result >= 0 { return result }
        let error = Errno(rawValue: -result)
        if error != .interrupted { throw BPFError(operation: operation, errno: error, subject: subject) }
    }
}

/// ``libbpf(_:_:_:)`` for a function that returns `NULL` and sets `errno`.
@inline(__always)
func libbpf<Value>(
    _ operation: BPFError.Operation, _ subject: String? = nil, _ call: () -> Value?
) throws(BPFError) -> Value {
    while true {
        if let result = call() { return result }
        let error = Errno(rawValue: errno == 0 ? ENOENT : errno)
        if error != .interrupted { throw BPFError(operation: operation, errno: error, subject: subject) }
    }
}
