import CMnl
import SystemPackage

// The rtnetlink and tc numbers this module sends, from <linux/rtnetlink.h>,
// <linux/pkt_sched.h>, <linux/gen_stats.h> and <linux/if_link.h>, which
// CMnl does not include (it holds libmnl alone, for NFQueue too); they are
// kernel ABI and never change. Checked against the headers when written.
enum RT {
    static let newLink: UInt16 = 16  // RTM_NEWLINK
    static let deleteLink: UInt16 = 17  // RTM_DELLINK
    static let newQdisc: UInt16 = 36  // RTM_NEWQDISC
    static let deleteQdisc: UInt16 = 37  // RTM_DELQDISC
    static let getQdisc: UInt16 = 38  // RTM_GETQDISC
    static let newClass: UInt16 = 40  // RTM_NEWTCLASS
    static let deleteClass: UInt16 = 41  // RTM_DELTCLASS
    static let getClass: UInt16 = 42  // RTM_GETTCLASS
    static let newFilter: UInt16 = 44  // RTM_NEWTFILTER
    static let deleteFilter: UInt16 = 45  // RTM_DELTFILTER
    static let getFilter: UInt16 = 46  // RTM_GETTFILTER

    static let clsactHandle: UInt32 = 0xFFFF_0000  // TC_H_CLSACT, minor 0
    static let clsactParent: UInt32 = 0xFFFF_FFF1  // TC_H_CLSACT (= TC_H_INGRESS)
    static let clsactIngress: UInt32 = 0xFFFF_FFF2  // TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS)
    static let protocolAll: UInt32 = 0x0300  // htons(ETH_P_ALL)

    static let u32ClassID: UInt16 = 1  // TCA_U32_CLASSID
    static let u32Selector: UInt16 = 5  // TCA_U32_SEL: struct tc_u32_sel and its keys
    static let u32Actions: UInt16 = 7  // TCA_U32_ACT
    static let u32Terminal: UInt8 = 1  // TC_U32_TERMINAL
    static let actionKind: UInt16 = 1  // TCA_ACT_KIND
    static let actionOptions: UInt16 = 2  // TCA_ACT_OPTIONS
    static let mirredParameters: UInt16 = 2  // TCA_MIRRED_PARMS: struct tc_mirred
    static let actionStolen: Int32 = 4  // TC_ACT_STOLEN
    static let egressRedirect: Int32 = 1  // TCA_EGRESS_REDIR

    static let tcmsgSize = 20  // struct tcmsg
    static let ifinfomsgSize = 16  // struct ifinfomsg

    static let kind: UInt16 = 1  // TCA_KIND
    static let options: UInt16 = 2  // TCA_OPTIONS
    static let stats2: UInt16 = 7  // TCA_STATS2
    static let statsBasic: UInt16 = 1  // TCA_STATS_BASIC: struct gnet_stats_basic
    static let statsQueue: UInt16 = 3  // TCA_STATS_QUEUE: struct gnet_stats_queue
    static let statsApp: UInt16 = 4  // TCA_STATS_APP: the qdisc kind's own statistics
    static let statsPackets64: UInt16 = 8  // TCA_STATS_PKT64

    static let htbParameters: UInt16 = 1  // TCA_HTB_PARMS: struct tc_htb_opt
    static let htbInit: UInt16 = 2  // TCA_HTB_INIT: struct tc_htb_glob
    static let htbDirectQueueLength: UInt16 = 5  // TCA_HTB_DIRECT_QLEN
    static let htbRate64: UInt16 = 6  // TCA_HTB_RATE64
    static let htbCeil64: UInt16 = 7  // TCA_HTB_CEIL64
    static let htbVersion: UInt32 = 3  // TC_HTB_PROTOVER

    static let fqCodelTarget: UInt16 = 1  // TCA_FQ_CODEL_TARGET
    static let fqCodelLimit: UInt16 = 2  // TCA_FQ_CODEL_LIMIT
    static let fqCodelInterval: UInt16 = 3  // TCA_FQ_CODEL_INTERVAL
    static let fqCodelECN: UInt16 = 4  // TCA_FQ_CODEL_ECN

    static let cakeBaseRate64: UInt16 = 2  // TCA_CAKE_BASE_RATE64
    static let cakeDiffservMode: UInt16 = 3  // TCA_CAKE_DIFFSERV_MODE
    static let cakeStatsTinStats: UInt16 = 10  // TCA_CAKE_STATS_TIN_STATS: one nest per tin, 1…
    static let cakeTinSentPackets: UInt16 = 2  // TCA_CAKE_TIN_STATS_SENT_PACKETS (u32)
    static let cakeTinSentBytes64: UInt16 = 3  // TCA_CAKE_TIN_STATS_SENT_BYTES64
    static let cakeTinDroppedPackets: UInt16 = 4  // TCA_CAKE_TIN_STATS_DROPPED_PACKETS (u32)
    static let cakeTinAckDropsPackets: UInt16 = 6  // TCA_CAKE_TIN_STATS_ACKS_DROPPED_PACKETS (u32)
    static let cakeTinECNMarkedPackets: UInt16 = 8  // TCA_CAKE_TIN_STATS_ECN_MARKED_PACKETS (u32)
    static let cakeTinBacklogBytes: UInt16 = 11  // TCA_CAKE_TIN_STATS_BACKLOG_BYTES (u32)
    static let cakeTinThresholdRate64: UInt16 = 12  // TCA_CAKE_TIN_STATS_THRESHOLD_RATE64
    static let cakeTinWayCollisions: UInt16 = 17  // TCA_CAKE_TIN_STATS_WAY_COLLISIONS (u32)

    static let gredParameters: UInt16 = 1  // TCA_GRED_PARMS: struct tc_gred_qopt
    static let gredStab: UInt16 = 2  // TCA_GRED_STAB: 256 bytes
    static let gredTable: UInt16 = 3  // TCA_GRED_DPS: struct tc_gred_sopt
    static let gredMaxP: UInt16 = 4  // TCA_GRED_MAX_P
    static let gredLimit: UInt16 = 5  // TCA_GRED_LIMIT

    static let linkLayerEthernet: UInt8 = 1  // TC_LINKLAYER_ETHERNET

    static let interfaceName: UInt16 = 3  // IFLA_IFNAME
    static let linkInfo: UInt16 = 18  // IFLA_LINKINFO
    static let linkInfoKind: UInt16 = 1  // IFLA_INFO_KIND
    static let interfaceUp: UInt32 = 1  // IFF_UP
}

/// Native-endian bytes of a kernel struct, field by field, so that no Swift
/// struct layout is assumed.
struct StructBytes {
    var bytes: [UInt8] = []

    mutating func append<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value) { bytes.append(contentsOf: $0) }
    }

    /// `struct tc_ratespec` for a rate in bytes per second (`u32`, saturated:
    /// `TCA_HTB_RATE64` carries larger ones), Ethernet link layer, the cell
    /// size `tc` computes for `mtu`.
    mutating func appendRateSpec(bytesPerSecond: UInt64, mtu: UInt32) {
        var cellLog: UInt8 = 0
        while (mtu >> cellLog) > 255 { cellLog += 1 }
        append(cellLog)  // cell_log
        append(RT.linkLayerEthernet)  // linklayer: the kernel then needs no rate table
        append(UInt16(0))  // overhead
        append(Int16(-1))  // cell_align
        append(UInt16(0))  // mpu
        append(UInt32(min(bytesPerSecond, UInt64(UInt32.max))))  // rate
    }
}

/// A netlink message being written into a fixed buffer with libmnl's
/// bounds-checked attribute writers.
struct MessageWriter {
    let header: UnsafeMutablePointer<nlmsghdr>
    let capacity: Int

    /// Starts a message of `type` with `flags` and a zeroed fixed header of
    /// `extraSize` bytes (`mnl_nlmsg_put_header`, `mnl_nlmsg_put_extra_header`).
    init(buffer: UnsafeMutableRawBufferPointer, type: UInt16, flags: Int32, sequence: UInt32, extraSize: Int)
    {
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        header = mnl_nlmsg_put_header(buffer.baseAddress)
        header.pointee.nlmsg_type = type
        header.pointee.nlmsg_flags = UInt16(truncatingIfNeeded: flags)
        header.pointee.nlmsg_seq = sequence
        capacity = buffer.count
        _ = mnl_nlmsg_put_extra_header(header, extraSize)
    }

    /// The fixed header after the netlink header.
    var extraHeader: UnsafeMutableRawPointer { mnl_nlmsg_get_payload(header) }

    /// The message's length so far.
    var length: Int { Int(header.pointee.nlmsg_len) }

    /// Writes the fixed header's bytes.
    func setExtraHeader(_ bytes: StructBytes) {
        bytes.bytes.withUnsafeBytes { extraHeader.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
    }

    func put(_ type: UInt16, _ data: StructBytes) throws(Errno) {
        let fits = data.bytes.withUnsafeBytes {
            mnl_attr_put_check(header, capacity, type, $0.count, $0.baseAddress)
        }
        guard fits else { throw .messageTooLong }
    }

    func put(_ type: UInt16, _ value: UInt32) throws(Errno) {
        guard mnl_attr_put_u32_check(header, capacity, type, value) else { throw .messageTooLong }
    }

    func put(_ type: UInt16, _ value: UInt64) throws(Errno) {
        guard mnl_attr_put_u64_check(header, capacity, type, value) else { throw .messageTooLong }
    }

    func put(_ type: UInt16, _ value: String) throws(Errno) {
        guard mnl_attr_put_strz_check(header, capacity, type, value) else { throw .messageTooLong }
    }

    /// Writes a nested attribute whose contents `body` writes.
    func nest(_ type: UInt16, _ body: () throws(Errno) -> Void) throws(Errno) {
        guard let start = mnl_attr_nest_start_check(header, capacity, type) else { throw .messageTooLong }
        try body()
        mnl_attr_nest_end(header, start)
    }
}

/// One attribute of a received message.
struct Attribute {
    let pointer: UnsafePointer<nlattr>

    var type: UInt16 { mnl_attr_get_type(pointer) }
    var payload: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(
            start: mnl_attr_get_payload(pointer), count: Int(mnl_attr_get_payload_len(pointer)))
    }
    var string: String { String(cString: mnl_attr_get_str(pointer)) }

    /// A native-endian integer at `offset` of the payload, nil when the
    /// payload is too short.
    func integer<T: FixedWidthInteger>(_: T.Type, at offset: Int = 0) -> T? {
        payload.integer(T.self, at: offset)
    }

    /// The attributes nested in this one.
    var nested: [Attribute] { Attribute.walk(payload) }

    /// The attributes laid out in `region` (`mnl_attr_ok`, `mnl_attr_next`).
    static func walk(_ region: UnsafeRawBufferPointer) -> [Attribute] {
        guard let base = region.baseAddress else { return [] }
        var attributes: [Attribute] = []
        var attribute = base.assumingMemoryBound(to: nlattr.self)
        let end = base + region.count
        while mnl_attr_ok(attribute, Int32(end - UnsafeRawPointer(attribute))) {
            attributes.append(Attribute(pointer: attribute))
            attribute = UnsafePointer(mnl_attr_next(attribute))
        }
        return attributes
    }
}

extension UnsafeRawBufferPointer {
    /// A native-endian integer at `offset`, nil past the end.
    func integer<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T? {
        guard offset >= 0, offset + MemoryLayout<T>.size <= count else { return nil }
        return loadUnaligned(fromByteOffset: offset, as: T.self)
    }
}
