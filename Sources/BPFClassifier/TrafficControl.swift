import CBPF
import SystemPackage

/// Attaching BPF programs to tc's clsact hooks through libbpf's netlink code
/// (`bpf_tc_*`), never by running `tc`.
public enum TrafficControl {
    /// A clsact hook direction (`enum bpf_tc_attach_point`).
    public struct Direction: RawRepresentable, Sendable, Hashable {
        /// The libbpf value.
        public let rawValue: UInt32
        /// Creates a direction from its libbpf value.
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// `BPF_TC_INGRESS`.
        public static let ingress = Direction(rawValue: BPF_TC_INGRESS.rawValue)
        /// `BPF_TC_EGRESS`.
        public static let egress = Direction(rawValue: BPF_TC_EGRESS.rawValue)
    }

    /// Where a filter sits: an interface's clsact hook, with tc's handle and
    /// priority (a fixed pair, so a restarted daemon finds its own filter).
    public struct Filter: Sendable, Hashable {
        /// The interface index.
        public var ifindex: Int32
        /// Ingress or egress.
        public var direction: Direction
        /// The tc filter handle (non-zero).
        public var handle: UInt32
        /// The tc filter priority (1...65535).
        public var priority: UInt32

        /// Creates a filter position.
        public init(ifindex: Int32, direction: Direction, handle: UInt32, priority: UInt32) {
            self.ifindex = ifindex
            self.direction = direction
            self.handle = handle
            self.priority = priority
        }

        fileprivate var hook: bpf_tc_hook {
            var h = bpf_tc_hook()
            h.sz = TrafficControl.hookSize
            h.ifindex = ifindex
            h.attach_point = bpf_tc_attach_point(rawValue: direction.rawValue)
            return h
        }

        fileprivate var options: bpf_tc_opts {
            var o = bpf_tc_opts()
            o.sz = TrafficControl.optionsSize
            o.handle = handle
            o.priority = priority
            return o
        }
    }

    // libbpf checks that every byte past the fields it knows, up to `sz`, is
    // zero; Swift does not keep tail padding (the C `size_t :0`) zeroed
    // across copies, so `sz` ends at the last field (as `offsetofend`).
    private static let hookSize = MemoryLayout<bpf_tc_hook>.offset(of: \bpf_tc_hook.parent)! + 4
    private static let optionsSize = MemoryLayout<bpf_tc_opts>.offset(of: \bpf_tc_opts.priority)! + 4

    /// Runs one `bpf_tc_*` call (again on `EINTR`) with libbpf's messages
    /// kept: a failure carries the kernel's extended ack in
    /// ``BPFError/kernelMessage`` instead of a line on stderr, so that an
    /// expected refusal (clsact already there, no filter to query) prints
    /// nothing.
    private static func netlink(
        _ operation: BPFError.Operation, _ ifindex: Int32, _ call: () -> Int32
    ) throws(BPFError) {
        while true {
            let (result, log) = LibbpfLog.capture(call)
            if result >= 0 { return }
            let error = Errno(rawValue: -result)
            if error == .interrupted { continue }
            throw BPFError(
                operation: operation, errno: error, subject: "ifindex \(ifindex)",
                kernelMessage: LibbpfLog.kernelMessage(log))
        }
    }

    /// Adds the clsact qdisc to an interface (`bpf_tc_hook_create` with both
    /// hooks); one already there is kept, silently.
    /// - Returns: true if it was created, false if it existed.
    @discardableResult
    public static func createClsact(ifindex: Int32) throws(BPFError) -> Bool {
        var h = bpf_tc_hook()
        h.sz = hookSize
        h.ifindex = ifindex
        h.attach_point = bpf_tc_attach_point(rawValue: BPF_TC_INGRESS.rawValue | BPF_TC_EGRESS.rawValue)
        do {
            try netlink(.createHook, ifindex) { bpf_tc_hook_create(&h) }
            return true
        } catch  where error.errno == .fileExists {
            return false
        }
    }

    /// Attaches `program` as a direct-action classifier at `filter`
    /// (`bpf_tc_attach` with `BPF_TC_F_REPLACE`): a filter already at that
    /// handle and priority (a previous run's) is replaced in one step.
    /// - Returns: the attached program's id.
    @discardableResult
    public static func attach(_ program: BPFProgram, at filter: Filter) throws(BPFError) -> UInt32 {
        var h = filter.hook
        var o = filter.options
        o.prog_fd = program.fd
        o.flags = UInt32(BPF_TC_F_REPLACE.rawValue)
        try netlink(.attach, filter.ifindex) { bpf_tc_attach(&h, &o) }
        return o.prog_id
    }

    /// Removes the filter (`bpf_tc_detach`); the clsact qdisc stays, since
    /// other filters may use it.
    public static func detach(_ filter: Filter) throws(BPFError) {
        var h = filter.hook
        var o = filter.options
        try netlink(.detach, filter.ifindex) { bpf_tc_detach(&h, &o) }
    }

    /// The id of the program attached at `filter` (`bpf_tc_query`), or nil if there is none.
    public static func attachedProgram(_ filter: Filter) throws(BPFError) -> UInt32? {
        var h = filter.hook
        var o = filter.options
        do {
            try netlink(.query, filter.ifindex) { bpf_tc_query(&h, &o) }
        } catch  where error.errno == .noSuchFileOrDirectory || error.errno == .invalidArgument {
            return nil
        }
        return o.prog_id
    }
}
