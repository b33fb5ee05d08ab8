import CPcap

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// libpcap's entry points, resolved with `dlopen`/`dlsym` on first use.
///
/// Only `qosmap remark` reads captures. Linking libpcap would make every
/// command load it and its dependencies (libdbus, libsystemd, libgcrypt) at
/// start-up, so the library is loaded when a capture is first opened instead.
/// The header still comes from libpcap-dev, so the signatures below are checked
/// against it where the types allow.
struct LibPcap: @unchecked Sendable {
    typealias OpenOffline =
        @convention(c) (UnsafePointer<CChar>?, UInt32, UnsafeMutablePointer<CChar>?) -> OpaquePointer?
    typealias OpenDead = @convention(c) (Int32, Int32, UInt32) -> OpaquePointer?
    typealias Close = @convention(c) (OpaquePointer?) -> Void
    typealias IntOf = @convention(c) (OpaquePointer?) -> Int32
    typealias NameOf = @convention(c) (Int32) -> UnsafePointer<CChar>?
    typealias GetErr = @convention(c) (OpaquePointer?) -> UnsafeMutablePointer<CChar>?
    typealias NextEx =
        @convention(c) (
            OpaquePointer?, UnsafeMutablePointer<UnsafeMutablePointer<pcap_pkthdr>?>?,
            UnsafeMutablePointer<UnsafePointer<UInt8>?>?
        ) -> Int32
    typealias DumpOpen = @convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> OpaquePointer?
    typealias Dump =
        @convention(c) (
            UnsafeMutablePointer<UInt8>?, UnsafePointer<pcap_pkthdr>?, UnsafePointer<UInt8>?
        ) -> Void
    typealias DumpFile = @convention(c) (OpaquePointer?) -> UnsafeMutablePointer<FILE>?
    typealias FileOp = @convention(c) (UnsafeMutablePointer<FILE>?) -> Int32
    typealias ErrnoLocation = @convention(c) () -> UnsafeMutablePointer<Int32>?

    /// `pcap_open_offline_with_tstamp_precision` (libpcap 1.5)
    let openOffline: OpenOffline
    /// `pcap_open_dead_with_tstamp_precision` (libpcap 1.5)
    let openDead: OpenDead
    /// `pcap_close`
    let close: Close
    /// `pcap_datalink`
    let datalink: IntOf
    /// `pcap_snapshot`
    let snapshot: IntOf
    /// `pcap_datalink_val_to_name`
    let datalinkName: NameOf
    /// `pcap_geterr`
    let geterr: GetErr
    /// `pcap_next_ex`
    let nextEx: NextEx
    /// `pcap_dump_open`
    let dumpOpen: DumpOpen
    /// `pcap_dump`
    let dump: Dump
    /// `pcap_dump_flush`
    let dumpFlush: IntOf
    /// `pcap_dump_close`
    let dumpClose: Close
    /// `pcap_dump_file`
    let dumpFile: DumpFile
    /// `ferror`, `fclose` and `__errno_location` of the C library libpcap
    /// uses. In the static `qosmap` that is a second C library, loaded with
    /// libpcap: its streams and its errno are not the ones the executable's
    /// own `ferror`, `fclose` and `errno` see (closing its `FILE` with the
    /// executable's `fclose` corrupts the heap).
    let ferror: FileOp
    /// `fclose`, as ``ferror``.
    let fclose: FileOp
    /// `__errno_location`, as ``ferror``.
    let errnoLocation: ErrnoLocation

    /// libpcap's C library's `errno` (see ``ferror``).
    var errno: Int32 {
        get { errnoLocation()?.pointee ?? 0 }
        nonmutating set { errnoLocation()?.pointee = newValue }
    }

    /// The sonames tried, Debian's runtime package (libpcap0.8) first.
    static let sonames = ["libpcap.so.0.8", "libpcap.so.1", "libpcap.so"]

    /// The library, or why it could not be loaded. Loaded once; never unloaded.
    static let shared: Result<LibPcap, CaptureError> = load()

    /// The library, or a ``CaptureError`` for `path` saying that libpcap is missing.
    static func get(for path: String) throws(CaptureError) -> LibPcap {
        switch shared {
        case .success(let lib): return lib
        case .failure(var error):
            error.path = path
            throw error
        }
    }

    private static func load() -> Result<LibPcap, CaptureError> {
        var handle: UnsafeMutableRawPointer?
        for name in sonames where handle == nil {
            handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)
        }
        guard let handle else {
            let reason = dlerror().map { String(cString: $0) } ?? "not found"
            return .failure(
                CaptureError(
                    .library, path: "",
                    message: "cannot load libpcap (\(sonames.joined(separator: ", "))): \(reason); "
                        + "install Debian's libpcap0.8"))
        }
        var missing: [String] = []
        func symbol<F>(_ name: String, as: F.Type) -> F? {
            guard let p = dlsym(handle, name) else {
                missing.append(name)
                return nil
            }
            return unsafeBitCast(p, to: F.self)
        }
        let lib = (
            symbol("pcap_open_offline_with_tstamp_precision", as: OpenOffline.self),
            symbol("pcap_open_dead_with_tstamp_precision", as: OpenDead.self),
            symbol("pcap_close", as: Close.self), symbol("pcap_datalink", as: IntOf.self),
            symbol("pcap_snapshot", as: IntOf.self), symbol("pcap_datalink_val_to_name", as: NameOf.self),
            symbol("pcap_geterr", as: GetErr.self), symbol("pcap_next_ex", as: NextEx.self),
            symbol("pcap_dump_open", as: DumpOpen.self), symbol("pcap_dump", as: Dump.self),
            symbol("pcap_dump_flush", as: IntOf.self), symbol("pcap_dump_close", as: Close.self),
            symbol("pcap_dump_file", as: DumpFile.self), symbol("ferror", as: FileOp.self),
            symbol("fclose", as: FileOp.self), symbol("__errno_location", as: ErrnoLocation.self)
        )
        guard let a = lib.0, let b = lib.1, let c = lib.2, let d = lib.3, let e = lib.4, let f = lib.5,
            let g = lib.6, let h = lib.7, let i = lib.8, let j = lib.9, let k = lib.10, let l = lib.11,
            let m = lib.12, let n = lib.13, let o = lib.14, let q = lib.15
        else {
            return .failure(
                CaptureError(
                    .library, path: "",
                    message:
                        "libpcap lacks \(missing.joined(separator: ", ")); libpcap 1.5 or later is needed"))
        }
        return .success(
            LibPcap(
                openOffline: a, openDead: b, close: c, datalink: d, snapshot: e, datalinkName: f, geterr: g,
                nextEx: h, dumpOpen: i, dump: j, dumpFlush: k, dumpClose: l, dumpFile: m, ferror: n,
                fclose: o, errnoLocation: q))
    }
}
