import CBPF
import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A loaded BPF object (`struct bpf_object`): its programs are verified and
/// its maps created. Closing it (`bpf_object__close`, on deinit) drops this
/// process's references only: a program attached to tc stays attached and
/// keeps its maps alive.
public final class BPFObject: @unchecked Sendable {
    // @unchecked: the pointer is only read after init; libbpf's map and
    // program lookups do not mutate the object.
    private let object: OpaquePointer

    /// Opens an ELF object from memory (`bpf_object__open_mem`) and loads it
    /// into the kernel (`bpf_object__load`).
    /// - Parameters:
    ///   - bytes: the ELF object, e.g. compiled with `clang -target bpf -g`.
    ///   - name: the object's name in libbpf's messages.
    /// - Throws: ``BPFError`` (`.load` with `.notPermitted` without CAP_BPF;
    ///   with the verifier's reason when the kernel refused a program).
    public init(bytes: [UInt8], name: String) throws(BPFError) {
        // libbpf reads the bytes only while opening (it copies the name).
        let object = try libbpf(.open, name) {
            name.withCString { cname in
                var opts = bpf_object_open_opts()
                opts.sz = MemoryLayout<bpf_object_open_opts>.size
                opts.object_name = cname
                return bytes.withUnsafeBytes { bpf_object__open_mem($0.baseAddress, $0.count, &opts) }
            }
        }
        let (result, log) = LibbpfLog.capture { bpf_object__load(object) }
        if result < 0 {
            bpf_object__close(object)
            let reason = LibbpfLog.verifierReason(log)
            // Not the verifier (a map libbpf could not create, say): libbpf's words are the only detail.
            if reason == nil { _ = log.withCString { write(2, $0, strlen($0)) } }
            throw BPFError(operation: .load, errno: Errno(rawValue: -result), subject: name, verifier: reason)
        }
        self.object = object
    }

    deinit { bpf_object__close(object) }

    /// The program named `name` (`bpf_object__find_program_by_name`, `bpf_program__fd`).
    public func program(named name: String) throws(BPFError) -> BPFProgram {
        let p = try libbpf(.findProgram, name) { bpf_object__find_program_by_name(object, name) }
        return BPFProgram(name: name, fd: bpf_program__fd(p))
    }

    /// The map named `name` (`bpf_object__find_map_by_name`, `bpf_map__fd`).
    public func map(named name: String) throws(BPFError) -> BPFMap {
        let m = try libbpf(.findMap, name) { bpf_object__find_map_by_name(object, name) }
        let type = bpf_map__type(m)
        let perCPU =
            type == BPF_MAP_TYPE_PERCPU_ARRAY || type == BPF_MAP_TYPE_PERCPU_HASH
            || type == BPF_MAP_TYPE_LRU_PERCPU_HASH
        return BPFMap(
            name: name, fd: bpf_map__fd(m), keySize: Int(bpf_map__key_size(m)),
            valueSize: Int(bpf_map__value_size(m)), maxEntries: Int(bpf_map__max_entries(m)), isPerCPU: perCPU
        )
    }
}

/// A loaded program: its file descriptor, owned by the ``BPFObject``.
public struct BPFProgram: Sendable, Hashable {
    /// The name in the object (its C function's name).
    public let name: String
    /// The program's fd (`bpf_program__fd`); valid while its object lives.
    public let fd: Int32

    /// The kernel's id of the program (`bpf_obj_get_info_by_fd`): what
    /// ``TrafficControl/attachedProgram(_:)`` reports for a filter that runs it.
    public func id() throws(BPFError) -> UInt32 {
        var info = bpf_prog_info()
        var size = UInt32(MemoryLayout<bpf_prog_info>.size)
        try libbpf(.info, name) { bpf_obj_get_info_by_fd(fd, &info, &size) }
        return info.id
    }
}
