import CPcap

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A capture's link-layer header type, as libpcap reports it (a `DLT_` value of
/// `pcap_datalink`; libpcap maps file `LINKTYPE_` values to these).
public struct LinkType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The `DLT_` value.
    public let rawValue: Int32

    /// Wraps a `DLT_` value.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Ethernet II frames (`DLT_EN10MB`, file `LINKTYPE_ETHERNET`).
    public static let ethernet = LinkType(rawValue: DLT_EN10MB)
    /// Bare IPv4 or IPv6 packets (`DLT_RAW`, file `LINKTYPE_RAW`).
    public static let raw = LinkType(rawValue: DLT_RAW)
    /// Bare IPv4 packets (`DLT_IPV4`, file `LINKTYPE_IPV4`).
    public static let ipv4 = LinkType(rawValue: DLT_IPV4)
    /// Bare IPv6 packets (`DLT_IPV6`, file `LINKTYPE_IPV6`).
    public static let ipv6 = LinkType(rawValue: DLT_IPV6)

    /// BSD loopback: a 4-byte address family in the capturing host's byte order (`DLT_NULL`).
    public static let null = LinkType(rawValue: DLT_NULL)
    /// OpenBSD loopback: a 4-byte address family in network byte order (`DLT_LOOP`).
    public static let loop = LinkType(rawValue: DLT_LOOP)
    /// Linux cooked capture v1, `tcpdump -i any` before libpcap 1.10 (`DLT_LINUX_SLL`).
    public static let linuxSLL = LinkType(rawValue: DLT_LINUX_SLL)
    /// Linux cooked capture v2, `tcpdump -i any` since libpcap 1.10 (`DLT_LINUX_SLL2`).
    public static let linuxSLL2 = LinkType(rawValue: DLT_LINUX_SLL2)

    /// The type of a savefile whose header's link-type field has bits set
    /// above the low 16 (the reserved field and the FCS length of the pcap
    /// format): libpcap 1.10.3 (Debian 12) passes such a field through
    /// whole, so that `pcap_datalink` said 3145729 for Ethernet and writing
    /// it failed. The low 16 bits are the type; of the file `LINKTYPE_`
    /// values qosmap reads only `LINKTYPE_RAW` (101) differs from its `DLT_`.
    public init(savefileValue raw: Int32) {
        guard raw & ~0xFFFF != 0 else {
            self.init(rawValue: raw)
            return
        }
        let linkType = raw & 0xFFFF
        self.init(rawValue: linkType == 101 ? DLT_RAW : linkType)
    }

    /// libpcap's name for the type (`pcap_datalink_val_to_name`), or the number.
    public var description: String {
        if let lib = try? LibPcap.shared.get(), let name = lib.datalinkName(rawValue) {
            return String(cString: name)
        }
        return "\(rawValue)"
    }
}

/// Why a capture could not be read or written.
public struct CaptureError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was being done.
    public enum Operation: Sendable, Equatable {
        /// Opening a file for reading (`pcap_open_offline`).
        case open
        /// Reading a record (`pcap_next_ex`).
        case read
        /// Creating or writing the output (`pcap_dump_open`, `pcap_dump_flush`).
        case write
        /// A record does not fit the caller's buffer.
        case recordTooLarge
        /// Loading libpcap itself (`dlopen`): it is loaded on first use.
        case library
    }

    /// What was being done.
    public var operation: Operation
    /// The file.
    public var path: String
    /// libpcap's message, or the system's (`strerror`) for a failed write.
    public var message: String
    /// The `errno` of a failed system call, when one is known (`ENOSPC` for a full disk).
    public var systemError: Int32?

    /// Creates an error.
    public init(_ operation: Operation, path: String, message: String, systemError: Int32? = nil) {
        self.operation = operation
        self.path = path
        self.message = message
        self.systemError = systemError
    }

    /// A write error from `errno` (its `strerror` text); `fallback` when errno is 0.
    static func writing(_ path: String, errno code: Int32, fallback: String) -> CaptureError {
        guard code != 0 else { return CaptureError(.write, path: path, message: fallback) }
        return CaptureError(.write, path: path, message: String(cString: strerror(code)), systemError: code)
    }

    /// `path: message`.
    public var description: String { "\(path): \(message)" }
}

/// The resolution of a capture's timestamps (`PCAP_TSTAMP_PRECISION_*`).
public enum TimestampPrecision: Sendable, Equatable {
    /// Microseconds (`PCAP_TSTAMP_PRECISION_MICRO`, pcap magic 0xa1b2c3d4).
    case micro
    /// Nanoseconds (`PCAP_TSTAMP_PRECISION_NANO`, pcap magic 0xa1b23c4d).
    case nano

    var libpcapValue: UInt32 {
        self == .nano ? UInt32(PCAP_TSTAMP_PRECISION_NANO) : UInt32(PCAP_TSTAMP_PRECISION_MICRO)
    }
}

/// One record's metadata (`struct pcap_pkthdr`).
public struct CaptureRecord: Sendable, Equatable {
    /// Seconds since the epoch.
    public var seconds: Int
    /// Nanoseconds within the second (a multiple of 1000 from a microsecond capture).
    public var nanoseconds: Int
    /// The bytes captured (at most the snapshot length).
    public var capturedLength: Int
    /// The packet's length on the wire.
    public var originalLength: Int

    /// Microseconds within the second.
    public var microseconds: Int { nanoseconds / 1000 }

    /// Creates a record header with a microsecond timestamp.
    public init(seconds: Int, microseconds: Int, capturedLength: Int, originalLength: Int) {
        self.init(
            seconds: seconds, nanoseconds: microseconds * 1000, capturedLength: capturedLength,
            originalLength: originalLength)
    }

    /// Creates a record header with a nanosecond timestamp.
    public init(seconds: Int, nanoseconds: Int, capturedLength: Int, originalLength: Int) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
        self.capturedLength = capturedLength
        self.originalLength = originalLength
    }
}

/// Reads a pcap or pcapng file through libpcap (`pcap_open_offline`).
public final class CaptureReader {
    private let lib: LibPcap
    private let handle: OpaquePointer
    /// The file read.
    public let path: String
    /// The file's timestamp resolution: nanoseconds for a nanosecond pcap,
    /// microseconds otherwise (pcapng and standard input included).
    public let precision: TimestampPrecision

    /// Opens a capture file (`pcap_open_offline_with_tstamp_precision`), at
    /// the file's own timestamp resolution.
    public init(path: String) throws(CaptureError) {
        let lib = try LibPcap.get(for: path)
        let precision = Self.filePrecision(path)
        var errbuf = [CChar](repeating: 0, count: Int(PCAP_ERRBUF_SIZE))
        guard let h = lib.openOffline(path, precision.libpcapValue, &errbuf) else {
            let bytes = errbuf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            var message = String(decoding: bytes, as: UTF8.self)
            // libpcap starts some messages with the path, which the error already names.
            if message.hasPrefix(path + ": ") { message.removeFirst(path.count + 2) }
            throw CaptureError(.open, path: path, message: message)
        }
        self.lib = lib
        self.handle = h
        self.path = path
        self.precision = precision
    }

    deinit { lib.close(handle) }

    /// Nanoseconds when the file starts with the nanosecond pcap magic, in
    /// either byte order; libpcap reports the precision asked for, not the file's.
    static func filePrecision(_ path: String) -> TimestampPrecision {
        guard path != "-", let f = fopen(path, "rb") else { return .micro }
        defer { fclose(f) }
        var magic = [UInt8](repeating: 0, count: 4)
        guard fread(&magic, 1, 4, f) == 4 else { return .micro }
        return magic == [0xA1, 0xB2, 0x3C, 0x4D] || magic == [0x4D, 0x3C, 0xB2, 0xA1] ? .nano : .micro
    }

    /// The link-layer header type (`pcap_datalink`).
    public var linkType: LinkType { LinkType(savefileValue: lib.datalink(handle)) }

    /// The snapshot length (`pcap_snapshot`).
    public var snapshotLength: Int { Int(lib.snapshot(handle)) }

    /// Reads the next record into `buffer` (`pcap_next_ex`); nil at the end of the file.
    ///
    /// Copies rather than lending libpcap's buffer so the caller may rewrite it in place.
    public func next(into buffer: UnsafeMutableRawBufferPointer) throws(CaptureError) -> CaptureRecord? {
        var header: UnsafeMutablePointer<pcap_pkthdr>?
        var data: UnsafePointer<UInt8>?
        switch lib.nextEx(handle, &header, &data) {
        case 1:
            guard let header, let data else {
                throw CaptureError(.read, path: path, message: "no packet data")
            }
            let caplen = Int(header.pointee.caplen)
            guard caplen <= buffer.count, let base = buffer.baseAddress else {
                throw CaptureError(
                    .recordTooLarge, path: path, message: "record of \(caplen) bytes exceeds \(buffer.count)")
            }
            base.copyMemory(from: data, byteCount: caplen)
            // tv_usec holds nanoseconds when the handle was opened for them.
            let fraction = Int(header.pointee.ts.tv_usec)
            return CaptureRecord(
                seconds: Int(header.pointee.ts.tv_sec),
                nanoseconds: precision == .nano ? fraction : fraction * 1000,
                capturedLength: caplen, originalLength: Int(header.pointee.len))
        case PCAP_ERROR_BREAK:  // -2 from a savefile: the end of the file
            return nil
        default:
            throw CaptureError(
                .read, path: path, message: lib.geterr(handle).map { String(cString: $0) } ?? "read error")
        }
    }
}

/// Writes a pcap file through libpcap (`pcap_open_dead`, `pcap_dump_open`, `pcap_dump`).
public final class CaptureWriter {
    private let lib: LibPcap
    private let dead: OpaquePointer
    private let dumper: OpaquePointer
    /// The dumper's stream (`pcap_dump_file`): checked after every record so
    /// that the first failed write is reported with its errno.
    private let file: UnsafeMutablePointer<FILE>?
    private var closed = false
    /// The file written.
    public let path: String
    /// The timestamp resolution written.
    public let precision: TimestampPrecision

    /// Creates (truncates) a pcap file with the link type, snapshot length and
    /// timestamp resolution (`pcap_open_dead_with_tstamp_precision`,
    /// `pcap_dump_open`; `-` is standard output).
    public init(
        path: String, linkType: LinkType, snapshotLength: Int, precision: TimestampPrecision = .micro
    ) throws(CaptureError) {
        let lib = try LibPcap.get(for: path)
        guard let d = lib.openDead(linkType.rawValue, Int32(clamping: snapshotLength), precision.libpcapValue)
        else {
            throw CaptureError(.write, path: path, message: "cannot create a pcap handle")
        }
        lib.errno = 0
        guard let dumper = lib.dumpOpen(d, path) else {
            let code = lib.errno
            let message = lib.geterr(d).map { String(cString: $0) } ?? "cannot create the file"
            lib.close(d)
            throw CaptureError.writing(path, errno: code, fallback: message)
        }
        self.file = lib.dumpFile(dumper)
        self.lib = lib
        self.dead = d
        self.dumper = dumper
        self.path = path
        self.precision = precision
    }

    deinit {
        if !closed { lib.dumpClose(dumper) }
        lib.close(dead)
    }

    /// Appends a record (`pcap_dump`); its captured length is `bytes.count`.
    /// Throws when the stream has failed (`ferror`), with the errno of the
    /// failed write (a full disk is `ENOSPC`).
    public func write(_ record: CaptureRecord, _ bytes: UnsafeRawBufferPointer) throws(CaptureError) {
        var header = pcap_pkthdr()
        header.ts.tv_sec = .init(record.seconds)
        header.ts.tv_usec = .init(precision == .nano ? record.nanoseconds : record.microseconds)
        header.caplen = UInt32(truncatingIfNeeded: bytes.count)
        header.len = UInt32(truncatingIfNeeded: record.originalLength)
        // libpcap's design: pcap_dump takes the dumper disguised as u_char *.
        let user = UnsafeMutableRawPointer(dumper).assumingMemoryBound(to: UInt8.self)
        lib.errno = 0
        lib.dump(user, &header, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self))
        if let file, lib.ferror(file) != 0 {
            throw CaptureError.writing(path, errno: lib.errno, fallback: "write error")
        }
    }

    /// Flushes and closes the file (`pcap_dump_flush`, then `fclose`); throws
    /// when the data could not be written (a full disk, say), naming the cause.
    ///
    /// `pcap_dump_close` is `fclose` with its result dropped, so the stream is
    /// closed here directly and the result checked.
    public func close() throws(CaptureError) {
        guard !closed else { return }
        closed = true
        lib.errno = 0
        let flushed = lib.dumpFlush(dumper)
        var code = lib.errno
        var failed = flushed != 0 || file.map { lib.ferror($0) != 0 } ?? false
        if let file {
            lib.errno = 0
            if lib.fclose(file) != 0 && !failed {
                failed = true
                code = lib.errno
            }
        } else {
            lib.dumpClose(dumper)
        }
        if failed { throw CaptureError.writing(path, errno: code, fallback: "write error") }
    }
}
