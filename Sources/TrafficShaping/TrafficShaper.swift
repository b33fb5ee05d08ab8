import CMnl
import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// An rtnetlink socket that lists and builds an interface's qdiscs and HTB
/// classes, and creates IFB devices: what `tc qdisc`, `tc class` and
/// `ip link add type ifb` do, by ifindex, without running them.
///
/// Wraps libmnl's `mnl_socket_open(NETLINK_ROUTE)`, `mnl_socket_bind`,
/// `mnl_socket_sendto`, `mnl_socket_recvfrom` and its message and attribute
/// builders. Each request waits for the kernel's answer (an ack, or the end of
/// a dump), and a refusal is thrown as a ``TrafficShapingError`` with the
/// errno and the kernel's extended-ack message (`NETLINK_EXT_ACK`), the
/// `Error: …` line `tc` prints. Needs CAP_NET_ADMIN for everything but the
/// dumps.
///
/// A shaper is used from one thread at a time.
public final class TrafficShaper {
    /// The clock HTB bursts are converted with.
    public let clock: PacketSchedulerClock

    private let socket: OpaquePointer
    private let portID: UInt32
    private var sequence: UInt32
    private let sendBuffer: UnsafeMutableRawBufferPointer
    private let receiveBuffer: UnsafeMutableRawBufferPointer

    /// How long a request waits for the kernel's answer. rtnetlink answers
    /// within the `sendto` that carries the request, so this only bounds a
    /// kernel that never does.
    public static let answerTimeoutSeconds = 5

    /// Opens and binds the socket and asks for extended acks.
    /// - Parameter clock: the packet scheduler's clock (read from
    ///   `/proc/net/psched` by default).
    /// - Throws: ``TrafficShapingError`` for `.open` or `.bind`.
    public init(clock: PacketSchedulerClock = .current) throws(TrafficShapingError) {
        self.clock = clock
        guard let socket = mnl_socket_open(NETLINK_ROUTE) else {
            throw TrafficShapingError(operation: .open, errno: Errno(rawValue: errno))
        }
        if mnl_socket_bind(socket, 0, pid_t(MNL_SOCKET_AUTOPID)) < 0 {
            let error = Errno(rawValue: errno)
            mnl_socket_close(socket)
            throw TrafficShapingError(operation: .bind, errno: error)
        }
        self.socket = socket
        portID = mnl_socket_get_portid(socket)
        sequence = UInt32(truncatingIfNeeded: time(nil))
        // Requests with two 1 KiB rate tables would fit; ours are far smaller.
        sendBuffer = .allocate(byteCount: 8_192, alignment: 16)
        // Large enough that no dump message is truncated (the kernel sizes
        // them to at most 32 KiB).
        receiveBuffer = .allocate(byteCount: 65_536, alignment: 16)
        let fd = mnl_socket_get_fd(socket)
        // Extended acks carry the kernel's message; capped acks leave the
        // request out of the error. Kernels before 4.12 refuse both options,
        // and then errors have no message.
        var on: Int32 = 1
        _ = setsockopt(
            fd, 270 /* SOL_NETLINK */, 11 /* NETLINK_EXT_ACK */, &on, socklen_t(MemoryLayout<Int32>.size))
        _ = setsockopt(
            fd, 270 /* SOL_NETLINK */, 10 /* NETLINK_CAP_ACK */, &on, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: Self.answerTimeoutSeconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        mnl_socket_close(socket)
        sendBuffer.deallocate()
        receiveBuffer.deallocate()
    }

    /// The ifindex of the interface named `name` (`if_nametoindex`), nil when none.
    public static func ifindex(named name: String) -> Int32? {
        let index = if_nametoindex(name)
        return index == 0 ? nil : Int32(bitPattern: index)
    }

    // MARK: Qdiscs

    /// The qdiscs of an interface: its root qdisc (the operator's, qosmapd's or
    /// the kernel's default, `noqueue` or `pfifo_fast` with handle `0:`) and
    /// those below it, with their counters (`RTM_GETQDISC` dump).
    /// - Throws: ``TrafficShapingError`` for `.getQdisc`.
    public func qdiscs(ifindex: Int32) throws(TrafficShapingError) -> [QdiscInfo] {
        var found: [QdiscInfo] = []
        try perform(
            .getQdisc, subject: nil, ifindex: ifindex, type: RT.getQdisc, flags: NLM_F_DUMP,
            extraHeader: Self.tcmsg(ifindex: ifindex, handle: .unspecified, parent: .unspecified),
            each: { message in
                // The kernel may dump every interface's; keep this one's.
                guard let qdisc = Self.qdisc(message), qdisc.ifindex == ifindex else { return }
                found.append(qdisc)
            })
        return found
    }

    /// The qdisc that an `RTM_NEWQDISC` message describes; nil for a message
    /// too short to hold a `struct tcmsg`.
    static func qdisc(_ message: UnsafePointer<nlmsghdr>) -> QdiscInfo? {
        guard let object = TCObject(message) else { return nil }
        return QdiscInfo(
            ifindex: object.ifindex, kind: object.kind, handle: object.handle, parent: object.parent,
            options: object.options.flatMap { Self.decodeQdiscOptions(kind: object.kind, $0) },
            statistics: object.statistics,
            cakeTins: object.kind == "cake" ? object.application.map(Self.decodeCAKETins) : nil)
    }

    /// Adds, replaces or changes a qdisc (`RTM_NEWQDISC`).
    /// - Parameters:
    ///   - parent: ``QdiscHandle/root``, or the class it hangs under.
    ///   - handle: its handle, `major:0`; ``QdiscHandle/unspecified`` lets the
    ///     kernel choose one.
    ///   - mode: what to do if one is there (see ``ChangeMode``).
    /// - Throws: ``TrafficShapingError`` for `.newQdisc`, e.g. `EEXIST` for
    ///   `.create` where a qdisc is ("Exclusivity flag on, cannot modify" for
    ///   one of the same handle, "NLM_F_REPLACE needed to override" for an
    ///   operator's root of another), `ENOENT` ("Specified qdisc kind is
    ///   unknown") for a kind the kernel lacks.
    public func setQdisc(
        _ options: QdiscOptions, ifindex: Int32, parent: QdiscHandle = .root, handle: QdiscHandle,
        mode: ChangeMode = .create
    ) throws(TrafficShapingError) {
        let subject =
            options.kind + (handle == .unspecified ? "" : " \(handle)")
            + (parent == .root ? "" : " parent \(parent)")
        try perform(
            .newQdisc, subject: subject, ifindex: ifindex, type: RT.newQdisc, flags: Self.flags(mode),
            extraHeader: Self.tcmsg(ifindex: ifindex, handle: handle, parent: parent),
            attributes: { (message: MessageWriter) throws(Errno) in
                try message.put(RT.kind, options.kind)
                try Self.encode(options, into: message)
            })
        // GRED takes its table first, then each virtual queue in a change
        // of its own (the kernel refuses both in one message).
        if case .gred(let gred) = options {
            let clock = PacketSchedulerClock.current
            for queue in gred.virtualQueues {
                guard let red = REDParameters(queue, clock: clock) else {
                    throw TrafficShapingError(
                        operation: .newQdisc, errno: .invalidArgument, subject: subject + " DP \(queue.dp)",
                        ifindex: ifindex,
                        kernelMessage: "no RED parameters fit min \(queue.minBytes) max \(queue.maxBytes)")
                }
                try perform(
                    .newQdisc, subject: subject + " DP \(queue.dp)", ifindex: ifindex, type: RT.newQdisc,
                    flags: 0,
                    extraHeader: Self.tcmsg(ifindex: ifindex, handle: handle, parent: parent),
                    attributes: { (message: MessageWriter) throws(Errno) in
                        try message.put(RT.kind, options.kind)
                        try message.nest(RT.options) { () throws(Errno) in
                            var qopt = StructBytes()
                            qopt.append(queue.limitBytes)  // limit
                            qopt.append(queue.minBytes)  // qth_min
                            qopt.append(queue.maxBytes)  // qth_max
                            qopt.append(UInt32(queue.dp))  // DP
                            for _ in 0..<6 { qopt.append(UInt32(0)) }  // backlog … pdrop: counters
                            qopt.append(red.wlog)
                            qopt.append(red.plog)
                            qopt.append(red.scellLog)
                            qopt.append(queue.prio)
                            qopt.append(UInt32(0))  // packets
                            qopt.append(UInt32(0))  // bytesin
                            try message.put(RT.gredParameters, qopt)
                            var stab = StructBytes()
                            stab.bytes = red.stab
                            try message.put(RT.gredStab, stab)
                            try message.put(RT.gredMaxP, red.maxP)
                        }
                    })
            }
        }
    }

    /// Deletes a qdisc and everything below it (`RTM_DELQDISC`). Deleting the
    /// root qdisc gives the interface back its default one.
    /// - Parameters:
    ///   - parent: ``QdiscHandle/root`` or the class it hangs under.
    ///   - handle: its handle, or ``QdiscHandle/unspecified`` for whichever is there.
    /// - Throws: ``TrafficShapingError`` for `.deleteQdisc`: `ENOENT` when there
    ///   is none to delete (the kernel's defaults have handle 0 and cannot be).
    public func deleteQdisc(ifindex: Int32, parent: QdiscHandle = .root, handle: QdiscHandle = .unspecified)
        throws(TrafficShapingError)
    {
        let subject =
            (parent == .root ? "root" : "parent \(parent)") + (handle == .unspecified ? "" : " \(handle)")
        try perform(
            .deleteQdisc, subject: subject, ifindex: ifindex, type: RT.deleteQdisc, flags: 0,
            extraHeader: Self.tcmsg(ifindex: ifindex, handle: handle, parent: parent))
    }

    // MARK: Classes

    /// The classes of an interface's qdiscs, with HTB's parameters and the
    /// counters (`RTM_GETTCLASS` dump).
    /// - Throws: ``TrafficShapingError`` for `.getClass`.
    public func classes(ifindex: Int32) throws(TrafficShapingError) -> [ClassInfo] {
        var found: [ClassInfo] = []
        try perform(
            .getClass, subject: nil, ifindex: ifindex, type: RT.getClass, flags: NLM_F_DUMP,
            extraHeader: Self.tcmsg(ifindex: ifindex, handle: .unspecified, parent: .unspecified),
            each: { message in
                guard let object = TCObject(message), object.ifindex == ifindex else { return }
                found.append(
                    ClassInfo(
                        ifindex: object.ifindex, kind: object.kind, handle: object.handle,
                        parent: object.parent,
                        leafQdisc: object.info == 0 ? nil : QdiscHandle(rawValue: object.info),
                        htb: object.kind == "htb" ? object.options.flatMap(Self.decodeHTBClass) : nil,
                        statistics: object.statistics))
            })
        return found
    }

    /// Adds, replaces or changes an HTB class (`RTM_NEWTCLASS`), as
    /// `tc class add … htb` sends it: `struct tc_htb_opt` with the Ethernet
    /// link layer (so the kernel needs no rate tables), the rates in bytes
    /// per second (`TCA_HTB_RATE64`/`TCA_HTB_CEIL64` beside it from 2^32
    /// bytes per second), and the bursts as transmission times in the
    /// kernel's ticks.
    /// - Parameters:
    ///   - classID: `major:minor`, the major being the HTB qdisc's.
    ///   - parent: the parent class, or the HTB qdisc (`major:0`) for a top class.
    /// - Throws: ``TrafficShapingError`` for `.newClass`.
    public func setHTBClass(
        _ options: HTBClassOptions, ifindex: Int32, classID: QdiscHandle, parent: QdiscHandle,
        mode: ChangeMode = .create
    ) throws(TrafficShapingError) {
        let parameters = htbParameters(options)
        let rate = options.rateBitsPerSecond / 8
        let ceil = options.ceilBitsPerSecond / 8
        try perform(
            .newClass, subject: "htb class \(classID)", ifindex: ifindex, type: RT.newClass,
            flags: Self.flags(mode),
            extraHeader: Self.tcmsg(ifindex: ifindex, handle: classID, parent: parent),
            attributes: { (message: MessageWriter) throws(Errno) in
                try message.put(RT.kind, "htb")
                try message.nest(RT.options) { () throws(Errno) in
                    if rate > UInt64(UInt32.max) { try message.put(RT.htbRate64, rate) }
                    if ceil > UInt64(UInt32.max) { try message.put(RT.htbCeil64, ceil) }
                    try message.put(RT.htbParameters, parameters)
                }
            })
    }

    /// Deletes a class (`RTM_DELTCLASS`); the kernel refuses one with children
    /// or with filters bound to it.
    /// - Throws: ``TrafficShapingError`` for `.deleteClass` (`ENOENT` when
    ///   there is no such class).
    public func deleteClass(ifindex: Int32, classID: QdiscHandle) throws(TrafficShapingError) {
        try perform(
            .deleteClass, subject: "class \(classID)", ifindex: ifindex, type: RT.deleteClass, flags: 0,
            extraHeader: Self.tcmsg(ifindex: ifindex, handle: classID, parent: .unspecified))
    }

    /// `struct tc_htb_opt` for `options`: what ``setHTBClass(_:ifindex:classID:parent:mode:)``
    /// sends. The bursts default to `tc`'s: a tick of HZ at the rate plus one MTU.
    func htbParameters(_ options: HTBClassOptions) -> StructBytes {
        let rate = options.rateBitsPerSecond / 8
        let ceil = options.ceilBitsPerSecond / 8
        let burst =
            options.burstBytes.map(UInt64.init) ?? clock.defaultBurst(bytesPerSecond: rate, mtu: options.mtu)
        let cburst =
            options.cburstBytes.map(UInt64.init) ?? clock.defaultBurst(bytesPerSecond: ceil, mtu: options.mtu)
        var opt = StructBytes()
        opt.appendRateSpec(bytesPerSecond: rate, mtu: options.mtu)  // rate
        opt.appendRateSpec(bytesPerSecond: ceil, mtu: options.mtu)  // ceil
        opt.append(clock.transmissionTicks(bytes: burst, bytesPerSecond: rate))  // buffer
        opt.append(clock.transmissionTicks(bytes: cburst, bytesPerSecond: ceil))  // cbuffer
        opt.append(options.quantum ?? 0)  // quantum: 0 is "from r2q"
        opt.append(UInt32(0))  // level: the kernel's to set
        opt.append(options.prio)  // prio
        return opt
    }

    // MARK: Links

    /// Creates an IFB device, down (`ip link add NAME type ifb`), and returns
    /// its ifindex.
    /// - Throws: ``TrafficShapingError`` for `.newLink`: `EEXIST` when the name
    ///   is taken, `EOPNOTSUPP` when the kernel has no ifb.
    public func createIFB(named name: String) throws(TrafficShapingError) -> Int32 {
        try perform(
            .newLink, subject: "ifb \(name)", ifindex: nil, type: RT.newLink,
            flags: NLM_F_CREATE | NLM_F_EXCL, extraHeader: Self.ifinfomsg(ifindex: 0, flags: 0, change: 0),
            attributes: { (message: MessageWriter) throws(Errno) in
                try message.put(RT.interfaceName, name)
                try message.nest(RT.linkInfo) { () throws(Errno) in try message.put(RT.linkInfoKind, "ifb") }
            })
        guard let index = Self.ifindex(named: name) else {
            throw TrafficShapingError(
                operation: .newLink, errno: .operationNotSupportedByDevice, subject: "ifb \(name)")
        }
        return index
    }

    /// Sets a link up or down (`ip link set … up`).
    /// - Throws: ``TrafficShapingError`` for `.newLink`.
    public func setLink(ifindex: Int32, up: Bool) throws(TrafficShapingError) {
        try perform(
            .newLink, subject: up ? "up" : "down", ifindex: ifindex, type: RT.newLink, flags: 0,
            extraHeader: Self.ifinfomsg(
                ifindex: ifindex, flags: up ? RT.interfaceUp : 0, change: RT.interfaceUp))
    }

    /// Deletes a link (`ip link del`).
    /// - Throws: ``TrafficShapingError`` for `.deleteLink` (`ENODEV`, `.operationNotSupportedByDevice`, when it is gone).
    public func deleteLink(ifindex: Int32) throws(TrafficShapingError) {
        try perform(
            .deleteLink, subject: nil, ifindex: ifindex, type: RT.deleteLink, flags: 0,
            extraHeader: Self.ifinfomsg(ifindex: ifindex, flags: 0, change: 0))
    }

    // MARK: Filters

    /// Adds the clsact qdisc (`tc qdisc add dev … clsact`); one already there
    /// (the ebpf classifier's) is kept.
    /// - Throws: ``TrafficShapingError`` for `.newQdisc`.
    public func ensureClsact(ifindex: Int32) throws(TrafficShapingError) {
        do {
            try perform(
                .newQdisc, subject: "clsact", ifindex: ifindex, type: RT.newQdisc,
                flags: NLM_F_CREATE | NLM_F_EXCL,
                extraHeader: Self.tcmsg(
                    ifindex: ifindex, handle: QdiscHandle(rawValue: RT.clsactHandle),
                    parent: QdiscHandle(rawValue: RT.clsactParent)),
                attributes: { (message: MessageWriter) throws(Errno) in try message.put(RT.kind, "clsact") })
        } catch  where error.errno == .fileExists {
            return
        }
    }

    /// Redirects every packet that reaches filter priority `priority` of
    /// `ifindex`'s clsact ingress to the egress of `target` (an IFB): `tc
    /// filter add dev … ingress prio P protocol all u32 match u32 0 0 action
    /// mirred egress redirect dev TARGET`. act_mirred marks the packet as
    /// redirected from ingress, which the IFB needs to hand it back (a BPF
    /// `bpf_redirect` does not, before Linux 6.4 or so: Debian 12's 6.1
    /// drops it at the IFB). A filter already at that priority is replaced.
    /// - Throws: ``TrafficShapingError`` for `.newFilter`, `.deleteFilter`.
    public func setIngressRedirect(ifindex: Int32, priority: UInt16, to target: Int32)
        throws(TrafficShapingError)
    {
        try? deleteIngressFilters(ifindex: ifindex, priority: priority)
        // One all-zero key: every packet.
        let selector = Self.u32Selector([U32MatchKey(value: 0, mask: 0, offset: 0)])
        var mirred = StructBytes()
        mirred.append(UInt32(0))  // index: a new action
        mirred.append(UInt32(0))  // capab
        mirred.append(RT.actionStolen)  // action
        mirred.append(Int32(0))  // refcnt
        mirred.append(Int32(0))  // bindcnt
        mirred.append(RT.egressRedirect)  // eaction
        mirred.append(UInt32(bitPattern: target))  // ifindex
        try perform(
            .newFilter, subject: "u32 mirred prio \(priority)", ifindex: ifindex, type: RT.newFilter,
            flags: NLM_F_CREATE | NLM_F_EXCL,
            extraHeader: Self.tcmsg(
                ifindex: ifindex, handle: .unspecified, parent: QdiscHandle(rawValue: RT.clsactIngress),
                info: UInt32(priority) << 16 | RT.protocolAll),
            attributes: { (message: MessageWriter) throws(Errno) in
                try message.put(RT.kind, "u32")
                try message.nest(RT.options) { () throws(Errno) in
                    try message.put(RT.u32Selector, selector)
                    try message.nest(RT.u32Actions) { () throws(Errno) in
                        try message.nest(1) { () throws(Errno) in
                            try message.put(RT.actionKind, "mirred")
                            try message.nest(RT.actionOptions) { () throws(Errno) in
                                try message.put(RT.mirredParameters, mirred)
                            }
                        }
                    }
                }
            })
    }

    /// Adds a u32 filter that sends a packet to `classID` when all of `keys`
    /// hold: `tc filter add dev … parent PARENT prio P protocol ETHERTYPE u32
    /// match u32 VALUE MASK at OFFSET … classid CLASSID`, as the download
    /// queues' classifier on an IFB's HTB root (``U32MatchKey``).
    /// - Parameters:
    ///   - parent: the qdisc, `major:0`.
    ///   - etherType: the filter's `protocol` (0x0800 IPv4, 0x86DD IPv6).
    /// - Throws: ``TrafficShapingError`` for `.newFilter`.
    public func addU32Filter(
        ifindex: Int32, parent: QdiscHandle, priority: UInt16, etherType: UInt16, keys: [U32MatchKey],
        classID: QdiscHandle
    ) throws(TrafficShapingError) {
        // A match-all is one all-zero key, as `tc … u32 match u32 0 0` sends it.
        let keys = keys.isEmpty ? [U32MatchKey(value: 0, mask: 0, offset: 0)] : keys
        let selector = Self.u32Selector(keys)
        try perform(
            .newFilter, subject: "u32 prio \(priority) classid \(classID)", ifindex: ifindex,
            type: RT.newFilter,
            flags: NLM_F_CREATE | NLM_F_EXCL,
            extraHeader: Self.tcmsg(
                ifindex: ifindex, handle: .unspecified, parent: parent,
                info: UInt32(priority) << 16 | UInt32(etherType.bigEndian)),
            attributes: { (message: MessageWriter) throws(Errno) in
                try message.put(RT.kind, "u32")
                try message.nest(RT.options) { () throws(Errno) in
                    try message.put(RT.u32ClassID, classID.rawValue)
                    try message.put(RT.u32Selector, selector)
                }
            })
    }

    /// Deletes the filters of the qdisc `parent` at `priority`, or all of
    /// them with priority 0 (`tc filter del dev … parent PARENT`).
    /// - Throws: ``TrafficShapingError`` for `.deleteFilter`.
    public func deleteFilters(ifindex: Int32, parent: QdiscHandle, priority: UInt16 = 0)
        throws(TrafficShapingError)
    {
        try perform(
            .deleteFilter, subject: "parent \(parent) prio \(priority)", ifindex: ifindex,
            type: RT.deleteFilter,
            flags: 0,
            extraHeader: Self.tcmsg(
                ifindex: ifindex, handle: .unspecified, parent: parent, info: UInt32(priority) << 16))
    }

    /// The priorities of the filters of the qdisc `parent` (each once).
    /// - Throws: ``TrafficShapingError`` for `.getFilter`.
    public func filterPriorities(ifindex: Int32, parent: QdiscHandle) throws(TrafficShapingError) -> Set<
        UInt16
    > {
        var found = Set<UInt16>()
        try perform(
            .getFilter, subject: nil, ifindex: ifindex, type: RT.getFilter, flags: NLM_F_DUMP,
            extraHeader: Self.tcmsg(ifindex: ifindex, handle: .unspecified, parent: parent),
            each: { message in
                guard let object = TCObject(message), object.ifindex == ifindex else { return }
                found.insert(UInt16(truncatingIfNeeded: object.info >> 16))
            })
        return found
    }

    /// Deletes every filter at `priority` of `ifindex`'s clsact ingress.
    /// - Throws: ``TrafficShapingError`` for `.deleteFilter` (`ENOENT` when none is there).
    public func deleteIngressFilters(ifindex: Int32, priority: UInt16) throws(TrafficShapingError) {
        try perform(
            .deleteFilter, subject: "prio \(priority)", ifindex: ifindex, type: RT.deleteFilter, flags: 0,
            extraHeader: Self.tcmsg(
                ifindex: ifindex, handle: .unspecified, parent: QdiscHandle(rawValue: RT.clsactIngress),
                info: UInt32(priority) << 16))
    }

    /// The filters of `ifindex`'s clsact ingress, as (priority, kind); empty
    /// without a clsact qdisc.
    /// - Throws: ``TrafficShapingError`` for `.getFilter`.
    public func ingressFilters(ifindex: Int32) throws(TrafficShapingError) -> [(
        priority: UInt16, kind: String
    )] {
        var found: [(priority: UInt16, kind: String)] = []
        do {
            try perform(
                .getFilter, subject: nil, ifindex: ifindex, type: RT.getFilter, flags: NLM_F_DUMP,
                extraHeader: Self.tcmsg(
                    ifindex: ifindex, handle: .unspecified, parent: QdiscHandle(rawValue: RT.clsactIngress)),
                each: { message in
                    guard let object = TCObject(message), object.ifindex == ifindex else { return }
                    found.append((UInt16(truncatingIfNeeded: object.info >> 16), object.kind))
                })
        } catch  where error.errno == .invalidArgument || error.errno == .noSuchFileOrDirectory {
            return []  // no clsact qdisc
        }
        return found
    }

    // MARK: Requests

    private static func flags(_ mode: ChangeMode) -> Int32 {
        switch mode {
        case .create: NLM_F_CREATE | NLM_F_EXCL
        case .replace: NLM_F_CREATE | NLM_F_REPLACE
        case .change: 0
        }
    }

    /// `struct tc_u32_sel` with `keys` (each a `struct tc_u32_key`: mask and
    /// value big-endian, offsets in host order), terminal: a match is final.
    private static func u32Selector(_ keys: [U32MatchKey]) -> StructBytes {
        var selector = StructBytes()
        selector.append(RT.u32Terminal)  // flags
        selector.append(UInt8(0))  // offshift
        selector.append(UInt8(keys.count))  // nkeys
        selector.append(UInt8(0))  // (padding)
        selector.append(UInt16(0))  // offmask
        selector.append(UInt16(0))  // off
        selector.append(Int16(0))  // offoff
        selector.append(Int16(0))  // hoff
        selector.append(UInt32(0))  // hmask
        for key in keys {
            selector.append(key.mask.bigEndian)
            selector.append(key.value.bigEndian)
            selector.append(key.offset)
            selector.append(Int32(0))  // offmask
        }
        return selector
    }

    /// `struct tcmsg`.
    private static func tcmsg(ifindex: Int32, handle: QdiscHandle, parent: QdiscHandle, info: UInt32 = 0)
        -> StructBytes
    {
        var bytes = StructBytes()
        bytes.append(UInt8(AF_UNSPEC))  // tcm_family
        bytes.append(UInt8(0))  // tcm__pad1
        bytes.append(UInt16(0))  // tcm__pad2
        bytes.append(ifindex)  // tcm_ifindex
        bytes.append(handle.rawValue)  // tcm_handle
        bytes.append(parent.rawValue)  // tcm_parent
        bytes.append(info)  // tcm_info: a filter's priority << 16 | protocol
        return bytes
    }

    /// `struct ifinfomsg`.
    private static func ifinfomsg(ifindex: Int32, flags: UInt32, change: UInt32) -> StructBytes {
        var bytes = StructBytes()
        bytes.append(UInt8(AF_UNSPEC))  // ifi_family
        bytes.append(UInt8(0))  // __ifi_pad
        bytes.append(UInt16(0))  // ifi_type
        bytes.append(ifindex)  // ifi_index
        bytes.append(flags)  // ifi_flags
        bytes.append(change)  // ifi_change
        return bytes
    }

    /// Sends one request and reads until its ack, or for a dump until
    /// `NLMSG_DONE`, handing each answer message of a dump to `each`.
    private func perform(
        _ operation: TrafficShapingError.Operation, subject: String?, ifindex: Int32?, type: UInt16,
        flags: Int32, extraHeader: StructBytes,
        attributes: (MessageWriter) throws(Errno) -> Void = { _ in },
        each: (UnsafePointer<nlmsghdr>) -> Void = { _ in }
    ) throws(TrafficShapingError) {
        func failure(_ errno: Errno, _ message: String? = nil) -> TrafficShapingError {
            TrafficShapingError(
                operation: operation, errno: errno, subject: subject, ifindex: ifindex, kernelMessage: message
            )
        }
        let isDump = flags & NLM_F_DUMP == NLM_F_DUMP
        sequence &+= 1
        let want = sequence
        let message = MessageWriter(
            buffer: sendBuffer, type: type, flags: NLM_F_REQUEST | (isDump ? 0 : NLM_F_ACK) | flags,
            sequence: want, extraSize: extraHeader.bytes.count)
        message.setExtraHeader(extraHeader)
        do throws(Errno) {
            try attributes(message)
        } catch {
            throw failure(error)
        }
        let sent = Self.retrying { [socket, sendBuffer] in
            mnl_socket_sendto(socket, sendBuffer.baseAddress, message.length)
        }
        guard sent >= 0 else { throw failure(Errno(rawValue: errno)) }

        while true {
            let received = Self.retrying { [socket, receiveBuffer] in
                mnl_socket_recvfrom(socket, receiveBuffer.baseAddress, receiveBuffer.count)
            }
            guard received >= 0 else {
                let error = Errno(rawValue: errno)
                throw failure(error == .wouldBlock ? .timedOut : error)
            }
            var remaining = Int32(received)
            var header = UnsafePointer(receiveBuffer.baseAddress!.assumingMemoryBound(to: nlmsghdr.self))
            while mnl_nlmsg_ok(header, remaining) {
                // Answers to an earlier request (one that timed out) are not ours.
                if header.pointee.nlmsg_seq == want, header.pointee.nlmsg_pid == portID {
                    switch Int32(header.pointee.nlmsg_type) {
                    case NLMSG_ERROR:
                        let (code, text) = Self.status(header, errorMessage: true)
                        if code < 0 { throw failure(Errno(rawValue: -code), text) }
                        if !isDump { return }
                    case NLMSG_DONE:
                        let (code, text) = Self.status(header, errorMessage: false)
                        if code < 0 { throw failure(Errno(rawValue: -code), text) }
                        return
                    default:
                        each(header)
                    }
                }
                header = UnsafePointer(mnl_nlmsg_next(header, &remaining))
            }
        }
    }

    /// Runs a socket call again while it fails with `EINTR`.
    private static func retrying(_ call: () -> Int) -> Int {
        while true {
            let result = call()
            if result >= 0 || errno != EINTR { return result }
        }
    }

    /// The status of an `NLMSG_ERROR` (0 for an ack) or `NLMSG_DONE` message
    /// and the extended ack's `NLMSGERR_ATTR_MSG`, if any. An error's TLVs
    /// follow `struct nlmsgerr` and, unless the ack is capped, the whole
    /// request it echoes; a done's follow its status.
    private static func status(_ header: UnsafePointer<nlmsghdr>, errorMessage: Bool) -> (Int32, String?) {
        let payload = UnsafeRawBufferPointer(
            start: mnl_nlmsg_get_payload(header),
            count: Int(header.pointee.nlmsg_len) - MemoryLayout<nlmsghdr>.size)
        let code = payload.integer(Int32.self, at: 0) ?? 0
        guard Int32(header.pointee.nlmsg_flags) & NLM_F_ACK_TLVS != 0 else { return (code, nil) }
        var offset = 4
        if errorMessage {
            let echoed = Int(payload.integer(UInt32.self, at: 4) ?? 0)
            let capped = Int32(header.pointee.nlmsg_flags) & NLM_F_CAPPED != 0
            offset += capped ? MemoryLayout<nlmsghdr>.size : (echoed + 3) & ~3
        }
        guard offset < payload.count else { return (code, nil) }
        let tlvs = UnsafeRawBufferPointer(rebasing: payload[offset...])
        let text = Attribute.walk(tlvs).first { $0.type == 1 /* NLMSGERR_ATTR_MSG */ }?.string
        return (code, text)
    }

    // MARK: Encoding and decoding options

    private static func encode(_ options: QdiscOptions, into message: MessageWriter) throws(Errno) {
        switch options {
        case .htb(let htb):
            try message.nest(RT.options) { () throws(Errno) in
                var glob = StructBytes()
                glob.append(RT.htbVersion)  // version
                glob.append(htb.rateToQuantum)  // rate2quantum
                glob.append(UInt32(htb.defaultClass))  // defcls: the minor
                glob.append(UInt32(0))  // debug
                glob.append(UInt32(0))  // direct_pkts: the kernel's counter
                try message.put(RT.htbInit, glob)
                if let length = htb.directQueueLength { try message.put(RT.htbDirectQueueLength, length) }
            }
        case .bfifo(let limit), .pfifo(let limit):
            // struct tc_fifo_qopt, not nested.
            var qopt = StructBytes()
            qopt.append(limit)
            try message.put(RT.options, qopt)
        case .fqCodel(let codel):
            try message.nest(RT.options) { () throws(Errno) in
                if let value = codel.limitPackets { try message.put(RT.fqCodelLimit, value) }
                if let value = codel.targetMicroseconds { try message.put(RT.fqCodelTarget, value) }
                if let value = codel.intervalMicroseconds { try message.put(RT.fqCodelInterval, value) }
                if let value = codel.ecn { try message.put(RT.fqCodelECN, UInt32(value ? 1 : 0)) }
            }
        case .gred(let gred):
            try message.nest(RT.options) { () throws(Errno) in
                var sopt = StructBytes()
                sopt.append(gred.virtualQueueCount)  // DPs
                sopt.append(gred.defaultQueue)  // def_DP
                sopt.append(UInt8(gred.grio ? 1 : 0))  // grio
                sopt.append(UInt8(0))  // flags
                sopt.append(UInt16(0))  // pad1
                try message.put(RT.gredTable, sopt)
                try message.put(RT.gredLimit, gred.limitBytes)
            }
        case .cake(let cake):
            try message.nest(RT.options) { () throws(Errno) in
                // CAKE's base rate is bytes per second, as tc's get_rate64 gives it.
                if let bits = cake.bandwidthBitsPerSecond { try message.put(RT.cakeBaseRate64, bits / 8) }
                if let mode = cake.diffserv { try message.put(RT.cakeDiffservMode, mode.rawValue) }
            }
        }
    }

    private static func decodeQdiscOptions(kind: String, _ options: Attribute) -> QdiscOptions? {
        func u32(_ type: UInt16) -> UInt32? {
            options.nested.first { $0.type == type }?.integer(UInt32.self)
        }
        switch kind {
        case "htb":
            guard let glob = options.nested.first(where: { $0.type == RT.htbInit }),
                let r2q = glob.integer(UInt32.self, at: 4), let defcls = glob.integer(UInt32.self, at: 8)
            else { return nil }
            return .htb(
                HTBQdiscOptions(
                    defaultClass: UInt16(truncatingIfNeeded: defcls), rateToQuantum: r2q,
                    directQueueLength: u32(RT.htbDirectQueueLength)))
        case "bfifo":
            return options.integer(UInt32.self).map { .bfifo(limitBytes: $0) }
        case "pfifo":
            return options.integer(UInt32.self).map { .pfifo(limitPackets: $0) }
        case "fq_codel":
            return .fqCodel(
                FQCodelOptions(
                    limitPackets: u32(RT.fqCodelLimit), targetMicroseconds: u32(RT.fqCodelTarget),
                    intervalMicroseconds: u32(RT.fqCodelInterval), ecn: u32(RT.fqCodelECN).map { $0 != 0 }))
        case "cake":
            let rate = options.nested.first { $0.type == RT.cakeBaseRate64 }?.integer(UInt64.self)
            return .cake(
                CAKEOptions(
                    bandwidthBitsPerSecond: rate.map { $0 * 8 },
                    diffserv: u32(RT.cakeDiffservMode).flatMap(CAKEDiffservMode.init(rawValue:))))
        case "gred":
            guard let table = options.nested.first(where: { $0.type == RT.gredTable }),
                let count = table.integer(UInt32.self), let def = table.integer(UInt32.self, at: 4),
                let grio = table.integer(UInt8.self, at: 8)
            else { return nil }
            var queues: [GREDVirtualQueue] = []
            if let parms = options.nested.first(where: { $0.type == RT.gredParameters })?.payload {
                // One struct tc_gred_qopt (52 bytes) per possible DP; an
                // absent one has DP 16 + its index.
                var at = 0
                while at + 52 <= parms.count {
                    let field = { (o: Int) in parms.loadUnaligned(fromByteOffset: at + o, as: UInt32.self) }
                    if field(12) < 16 {
                        queues.append(
                            GREDVirtualQueue(
                                dp: UInt8(field(12)), minBytes: field(4), maxBytes: field(8),
                                limitBytes: field(0),
                                probability: 0, bandwidthBytesPerSecond: 0,
                                prio: parms.loadUnaligned(fromByteOffset: at + 43, as: UInt8.self)))
                    }
                    at += 52
                }
            }
            return .gred(
                GREDOptions(
                    virtualQueueCount: count, defaultQueue: def, grio: grio != 0,
                    limitBytes: u32(RT.gredLimit) ?? 0, virtualQueues: queues))
        default:
            return nil
        }
    }

    /// CAKE's `TCA_STATS_APP`: the tins nested in `TCA_CAKE_STATS_TIN_STATS`
    /// as attributes 1, 2 … in dump order, each holding its counters
    /// (`TCA_CAKE_TIN_STATS_*`, with pad attributes where the kernel aligns a
    /// 64-bit one). Attributes this does not read are skipped, so that a
    /// kernel that adds some still parses.
    static func decodeCAKETins(_ application: Attribute) -> [CAKETinStatistics] {
        guard let tins = application.nested.first(where: { $0.type == RT.cakeStatsTinStats }) else {
            return []
        }
        return tins.nested.sorted { $0.type < $1.type }.map { tin in
            var s = CAKETinStatistics()
            for a in tin.nested {
                switch a.type {
                case RT.cakeTinSentBytes64: s.sentBytes = a.integer(UInt64.self) ?? 0
                case RT.cakeTinSentPackets: s.sentPackets = a.integer(UInt32.self) ?? 0
                case RT.cakeTinDroppedPackets: s.droppedPackets = a.integer(UInt32.self) ?? 0
                case RT.cakeTinAckDropsPackets: s.ackDroppedPackets = a.integer(UInt32.self) ?? 0
                case RT.cakeTinECNMarkedPackets: s.ecnMarkedPackets = a.integer(UInt32.self) ?? 0
                case RT.cakeTinBacklogBytes: s.backlogBytes = a.integer(UInt32.self) ?? 0
                case RT.cakeTinThresholdRate64: s.thresholdRateBytesPerSecond = a.integer(UInt64.self) ?? 0
                case RT.cakeTinWayCollisions: s.wayCollisions = a.integer(UInt32.self) ?? 0
                default: break
                }
            }
            return s
        }
    }

    private static func decodeHTBClass(_ options: Attribute) -> HTBClassInfo? {
        let nested = options.nested
        guard let parameters = nested.first(where: { $0.type == RT.htbParameters })?.payload,
            parameters.count >= 44
        else { return nil }
        let rate32 = UInt64(parameters.integer(UInt32.self, at: 8)!)  // rate.rate
        let ceil32 = UInt64(parameters.integer(UInt32.self, at: 20)!)  // ceil.rate
        let rate64 = nested.first { $0.type == RT.htbRate64 }?.integer(UInt64.self)
        let ceil64 = nested.first { $0.type == RT.htbCeil64 }?.integer(UInt64.self)
        return HTBClassInfo(
            rateBytesPerSecond: rate64 ?? rate32, ceilBytesPerSecond: ceil64 ?? ceil32,
            bufferTicks: parameters.integer(UInt32.self, at: 24)!,
            cbufferTicks: parameters.integer(UInt32.self, at: 28)!,
            quantum: parameters.integer(UInt32.self, at: 32)!, prio: parameters.integer(UInt32.self, at: 40)!,
            level: parameters.integer(UInt32.self, at: 36)!)
    }
}

/// The common part of a qdisc or class message: `struct tcmsg`, `TCA_KIND`,
/// `TCA_OPTIONS` and the counters of `TCA_STATS2`.
private struct TCObject {
    var ifindex: Int32
    var handle: QdiscHandle
    var parent: QdiscHandle
    var info: UInt32
    var kind = ""
    var options: Attribute?
    var statistics: TrafficStatistics?
    /// `TCA_STATS_APP` in `TCA_STATS2`: the kind's own statistics.
    var application: Attribute?

    init?(_ header: UnsafePointer<nlmsghdr>) {
        let length = Int(header.pointee.nlmsg_len) - MemoryLayout<nlmsghdr>.size
        guard length >= RT.tcmsgSize else { return nil }
        let payload = UnsafeRawBufferPointer(start: mnl_nlmsg_get_payload(header), count: length)
        ifindex = payload.integer(Int32.self, at: 4)!
        handle = QdiscHandle(rawValue: payload.integer(UInt32.self, at: 8)!)
        parent = QdiscHandle(rawValue: payload.integer(UInt32.self, at: 12)!)
        info = payload.integer(UInt32.self, at: 16)!
        for attribute in Attribute.walk(UnsafeRawBufferPointer(rebasing: payload[RT.tcmsgSize...])) {
            switch attribute.type {
            case RT.kind: kind = attribute.string
            case RT.options: options = attribute
            case RT.stats2:
                statistics = Self.statistics(attribute)
                application = attribute.nested.first { $0.type == RT.statsApp }
            default: break
            }
        }
    }

    static func statistics(_ stats: Attribute) -> TrafficStatistics {
        var counters = TrafficStatistics()
        for attribute in stats.nested {
            switch attribute.type {
            case RT.statsBasic:
                counters.bytes = attribute.integer(UInt64.self) ?? 0
                // Keep a 64-bit count already read (TCA_STATS_PKT64 may come first).
                if counters.packets == 0 {
                    counters.packets = UInt64(attribute.integer(UInt32.self, at: 8) ?? 0)
                }
            case RT.statsPackets64:
                counters.packets = attribute.integer(UInt64.self) ?? counters.packets
            case RT.statsQueue:
                counters.queueLength = attribute.integer(UInt32.self, at: 0) ?? 0
                counters.backlogBytes = attribute.integer(UInt32.self, at: 4) ?? 0
                counters.drops = attribute.integer(UInt32.self, at: 8) ?? 0
                counters.requeues = attribute.integer(UInt32.self, at: 12) ?? 0
                counters.overlimits = attribute.integer(UInt32.self, at: 16) ?? 0
            default: break
            }
        }
        return counters
    }
}
