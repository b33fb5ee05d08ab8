import CBPF
import SystemPackage

/// A map of a loaded ``BPFObject``; its fd is owned by the object. Keys and
/// values are trivial Swift types whose size must equal the map's.
public struct BPFMap: Sendable, Hashable {
    /// The map's name in the object.
    public let name: String
    /// The map's fd (`bpf_map__fd`).
    public let fd: Int32
    /// `bpf_map__key_size`.
    public let keySize: Int
    /// `bpf_map__value_size` (per CPU, for a per-CPU map).
    public let valueSize: Int
    /// `bpf_map__max_entries`.
    public let maxEntries: Int
    /// A `BPF_MAP_TYPE_PERCPU_*` map: one value per possible CPU.
    public let isPerCPU: Bool

    private func check(_ key: Int, _ value: Int) throws(BPFError) {
        guard key == keySize, value == valueSize else {
            throw BPFError(operation: .size, errno: .invalidArgument, subject: name)
        }
    }

    /// Sets one element (`bpf_map_update_elem` with `BPF_ANY`). For a hash
    /// map the kernel replaces the element whole, so a reader sees the old or
    /// the new value, never a mix.
    public func update<Key: BitwiseCopyable, Value: BitwiseCopyable>(
        _ key: Key, _ value: Value
    ) throws(BPFError) {
        try check(MemoryLayout<Key>.size, MemoryLayout<Value>.size)
        var k = key
        var v = value
        try libbpf(.updateMap, name) { bpf_map_update_elem(fd, &k, &v, UInt64(BPF_ANY)) }
    }

    /// Sets one element from raw bytes (`bpf_map_update_elem` with
    /// `BPF_ANY`): for values too large for a Swift type (tables of
    /// thousands of entries); `bytes` must hold exactly the value's size.
    public func update(_ key: UInt32, bytes: [UInt8]) throws(BPFError) {
        try check(MemoryLayout<UInt32>.size, bytes.count)
        var k = key
        try libbpf(.updateMap, name) {
            bytes.withUnsafeBytes { bpf_map_update_elem(fd, &k, $0.baseAddress, UInt64(BPF_ANY)) }
        }
    }

    /// Sets many elements in one system call (`bpf_map_update_batch`).
    public func update<Key: BitwiseCopyable, Value: BitwiseCopyable>(
        keys: [Key], values: [Value]
    ) throws(BPFError) {
        try check(MemoryLayout<Key>.stride, MemoryLayout<Value>.stride)
        guard keys.count == values.count, !keys.isEmpty else {
            if keys.isEmpty, values.isEmpty { return }
            throw BPFError(operation: .updateMap, errno: .invalidArgument, subject: name)
        }
        var count = UInt32(keys.count)
        var opts = bpf_map_batch_opts()
        opts.sz = MemoryLayout<bpf_map_batch_opts>.size
        try libbpf(.updateMap, name) {
            keys.withUnsafeBytes { k in
                values.withUnsafeBytes { v in
                    bpf_map_update_batch(fd, k.baseAddress, v.baseAddress, &count, &opts)
                }
            }
        }
    }

    /// One element (`bpf_map_lookup_elem`), or nil when the key is absent.
    public func lookup<Key: BitwiseCopyable, Value: BitwiseCopyable>(
        _ key: Key, as type: Value.Type = Value.self
    ) throws(BPFError) -> Value? {
        try check(MemoryLayout<Key>.size, MemoryLayout<Value>.size)
        var k = key
        var values = [Value]()
        values.reserveCapacity(1)
        do {
            try libbpf(.lookupMap, name) {
                // The kernel writes the value into the reserved storage.
                withUnsafeTemporaryAllocation(of: Value.self, capacity: 1) { v in
                    let r = bpf_map_lookup_elem(fd, &k, v.baseAddress)
                    if r == 0 { values.append(v[0]) }
                    return r
                }
            }
        } catch  where error.errno == .noSuchFileOrDirectory {
            return nil
        }
        return values.first
    }

    /// Deletes one element (`bpf_map_delete_elem`); an absent key is not an error.
    public func delete<Key: BitwiseCopyable>(_ key: Key) throws(BPFError) {
        guard MemoryLayout<Key>.size == keySize else {
            throw BPFError(operation: .size, errno: .invalidArgument, subject: name)
        }
        var k = key
        do {
            try libbpf(.deleteMap, name) { bpf_map_delete_elem(fd, &k) }
        } catch  where error.errno == .noSuchFileOrDirectory {}
    }

    /// Every key in the map (`bpf_map_get_next_key` from no key on), in the
    /// kernel's order; a key deleted meanwhile may end the walk early.
    public func keys<Key: BitwiseCopyable>(as type: Key.Type = Key.self) throws(BPFError) -> [Key] {
        guard MemoryLayout<Key>.size == keySize else {
            throw BPFError(operation: .size, errno: .invalidArgument, subject: name)
        }
        var result: [Key] = []
        var current: [UInt8]? = nil
        var next = [UInt8](repeating: 0, count: keySize)
        // Bounded: a map holds at most maxEntries keys.
        for _ in 0...maxEntries {
            let status =
                if var k = current {
                    bpf_map_get_next_key(fd, &k, &next)
                } else {
                    bpf_map_get_next_key(fd, nil, &next)
                }
            if status == -Errno.noSuchFileOrDirectory.rawValue { break }
            if status < 0 {
                throw BPFError(operation: .nextKey, errno: Errno(rawValue: -status), subject: name)
            }
            result.append(next.withUnsafeBytes { $0.loadUnaligned(as: Key.self) })
            current = next
        }
        return result
    }

    /// The number of possible CPUs (`libbpf_num_possible_cpus`): how many
    /// values a per-CPU map holds per key.
    public static var possibleCPUs: Int { max(1, Int(libbpf_num_possible_cpus())) }

    /// Every CPU's value for `key` of a per-CPU map (`bpf_map_lookup_elem`,
    /// which copies all of them at once; each is padded to 8 bytes).
    public func perCPUValues<Value: BitwiseCopyable>(_ key: UInt32, as type: Value.Type = Value.self)
        throws(BPFError) -> [Value]
    {
        guard isPerCPU, keySize == 4, valueSize == MemoryLayout<Value>.size,
            MemoryLayout<Value>.stride % 8 == 0
        else {
            throw BPFError(operation: .size, errno: .invalidArgument, subject: name)
        }
        var k = key
        let n = BPFMap.possibleCPUs
        var values = [Value]()
        try libbpf(.lookupMap, name) {
            withUnsafeTemporaryAllocation(of: Value.self, capacity: n) { v in
                let r = bpf_map_lookup_elem(fd, &k, v.baseAddress)
                if r == 0 { values = Array(v) }
                return r
            }
        }
        return values
    }

    /// Every CPU's 64-bit value for `key` of a per-CPU map of `UInt64`s
    /// (`bpf_map_lookup_elem`, which copies all of them at once).
    public func perCPUCounters(_ key: UInt32) throws(BPFError) -> [UInt64] {
        guard isPerCPU, keySize == 4, valueSize == 8 else {
            throw BPFError(operation: .size, errno: .invalidArgument, subject: name)
        }
        var k = key
        var values = [UInt64](repeating: 0, count: BPFMap.possibleCPUs)
        try libbpf(.lookupMap, name) {
            values.withUnsafeMutableBytes { bpf_map_lookup_elem(fd, &k, $0.baseAddress) }
        }
        return values
    }
}
