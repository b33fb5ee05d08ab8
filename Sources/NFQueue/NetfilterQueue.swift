import CMnl
import CNetfilterQueue
import CQoSMapShim
import Syscall
import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A bound netfilter queue: one netlink socket receiving the packets that an
/// iptables `-j NFQUEUE --queue-num N` rule queues, and sending verdicts back.
///
/// Wraps libmnl's `mnl_socket_open`, `mnl_socket_bind`, `mnl_socket_recvfrom`,
/// `mnl_socket_sendto` and libnetfilter_queue's `nfq_nlmsg_*` message builders
/// (the "new API" of libnetfilter_queue's `examples/nf-queue.c`).
///
/// Every system call goes through ``retryingOnInterrupt(_:)``: `EINTR` is
/// retried, any other errno becomes a ``NetfilterQueueError``.
///
/// A queue is used from one thread. Verdicts for the packets read in one
/// ``receive(_:)`` (the blocking read plus those already waiting) are collected
/// and sent together in one `sendto`.
public final class NetfilterQueue {
    /// The configuration in force: the one the queue was opened with, or the
    /// last one ``reconfigure(_:)`` applied.
    public private(set) var configuration: Configuration

    /// Counts of verdict messages sent, to show how many packets shared one.
    public struct Statistics: Sendable, Equatable {
        /// Packets given a verdict (one per packet, batched or not).
        public var verdicts = 0
        /// `NFQNL_MSG_VERDICT` and `NFQNL_MSG_VERDICT_BATCH` messages sent.
        public var messages = 0
        /// `sendto` calls of verdicts retried after a transient error
        /// (`ENOBUFS`, `ENOMEM`, `EAGAIN`; `EINTR` is retried uncounted).
        public var sendRetries = 0
        /// Verdict sends split into smaller ones after `EMSGSIZE` (the socket's
        /// send buffer shrank below what was collected).
        public var sendSplits = 0
        /// Verdict messages that could not be sent at all; each one's packet
        /// stays queued until the kernel's next batch verdict or unbind.
        public var verdictsLost = 0
        /// Creates zero counts.
        public init() {}
    }

    /// Counts since the queue was opened.
    public private(set) var statistics = Statistics()

    private let socket: OpaquePointer
    private var portID: UInt32 = 0
    private var receiveBuffer: UnsafeMutableRawBufferPointer
    private var sendBuffer: UnsafeMutableRawBufferPointer
    private var sendLength = 0
    /// The largest `sendto` the socket takes: netlink refuses with `EMSGSIZE`
    /// any message longer than `sk_sndbuf - 32` (`netlink_sendmsg`), so a batch
    /// is flushed before it would grow past this.
    private var sendLimit = 0
    private var sequence: UInt32 = 1
    private var isBound = false
    /// Where the last verdict message in the send buffer starts, while it is
    /// one that a following identical verdict may extend into a batch.
    private var extendable: (offset: Int, length: Int, verdict: Verdict)?
    /// Set once a packet's verdict was deferred (``Verdict/Decision/none``):
    /// from then on a batch could sweep it up, so verdicts are never merged.
    private var deferredSeen = false

    /// Bytes reserved per verdict message besides its payload.
    private static let verdictOverhead = 128

    /// Opens a netlink socket, binds the queue and applies the configuration.
    ///
    /// Wraps `mnl_socket_open(NETLINK_NETFILTER)`, `mnl_socket_bind`,
    /// `NFQNL_CFG_CMD_BIND`, `nfq_nlmsg_cfg_put_params`, `NFQA_CFG_FLAGS`,
    /// `nfq_nlmsg_cfg_put_qmaxlen`, `NETLINK_NO_ENOBUFS` and `SO_RCVBUFFORCE`.
    /// - Throws: ``NetfilterQueueError`` with the errno of the step that failed
    ///   (`EPERM` without CAP_NET_ADMIN, `EBUSY` when another process holds the queue).
    public init(configuration: Configuration) throws(NetfilterQueueError) {
        self.configuration = configuration
        socket = try Self.system(.open) { mnl_socket_open(NETLINK_NETFILTER) }
        // Room for one full 64 KiB (GSO) packet plus netlink headers, and more
        // small packets per recvfrom.
        let size = max(Int(cqosmap_mnl_socket_buffer_size()), 0xFFFF + 4096) * 4
        receiveBuffer = .allocate(byteCount: size, alignment: 16)
        sendBuffer = .allocate(byteCount: size, alignment: 16)
        do throws(NetfilterQueueError) {
            try Self.system(.bind) { [socket] in mnl_socket_bind(socket, 0, pid_t(MNL_SOCKET_AUTOPID)) }
            portID = mnl_socket_get_portid(socket)
            try tuneSocket()
            try command(CQoSMapShim_NFQNL_CFG_CMD_BIND, operation: .bindQueue)
            isBound = true
            try configure()
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// Runs a system call through ``retryingOnInterrupt(_:)`` and names the
    /// step in the error.
    @inline(__always) @discardableResult
    private static func system<Value: BinaryInteger>(
        _ operation: NetfilterQueueError.Operation, _ call: () -> Value
    ) throws(NetfilterQueueError) -> Value {
        do throws(Errno) {
            return try retryingOnInterrupt(call)
        } catch {
            throw NetfilterQueueError(operation: operation, errno: error)
        }
    }

    /// ``system(_:_:)`` for a call that fails with `NULL`.
    @inline(__always) @discardableResult
    private static func system<Value>(
        _ operation: NetfilterQueueError.Operation, _ call: () -> Value?
    ) throws(NetfilterQueueError) -> Value {
        do throws(Errno) {
            return try retryingOnInterrupt(call)
        } catch {
            throw NetfilterQueueError(operation: operation, errno: error)
        }
    }

    /// `setsockopt(fd, level, name, &value)` for an `Int32` option.
    private static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32)
        throws(NetfilterQueueError)
    {
        var value = value
        try system(.setSocketOption) {
            setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// Applies the socket options of ``configuration``: `NETLINK_NO_ENOBUFS`,
    /// `SO_RCVBUFFORCE` (falling back to `SO_RCVBUF`) and the `SO_RCVTIMEO`
    /// receive timeout; socket options libmnl leaves to the caller.
    private func tuneSocket() throws(NetfilterQueueError) {
        let fd = mnl_socket_get_fd(socket)
        // Set either way, so a reconfiguration can turn it off again.
        try Self.setOption(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, configuration.noENOBUFS ? 1 : 0)
        if configuration.receiveBufferSize > 0 {
            // SO_RCVBUFFORCE passes rmem_max with CAP_NET_ADMIN; SO_RCVBUF does without it.
            let size = Int32(clamping: configuration.receiveBufferSize)
            do throws(NetfilterQueueError) {
                try Self.setOption(fd, SOL_SOCKET, SO_RCVBUFFORCE, size)
            } catch {
                try Self.setOption(fd, SOL_SOCKET, SO_RCVBUF, size)
            }
        }
        sendLimit = Self.sendLimit(fd: fd, buffer: sendBuffer.count)
        // A receive timeout lets the owning thread notice a stop request.
        var tv = timeval(
            tv_sec: Int(configuration.receiveTimeoutMilliseconds / 1000),
            tv_usec: Int(configuration.receiveTimeoutMilliseconds % 1000) * 1000)
        try Self.system(.setSocketOption) {
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        }
    }

    /// Applies a new configuration to the bound queue without unbinding it, so
    /// no packet is lost: copy mode and range, flags and maxlen
    /// (`NFQNL_MSG_CONFIG`), then the socket options. Verdicts still pending
    /// are sent first, and packets that arrive while the kernel's answer is
    /// awaited are decided by `body` (by default accepted unchanged). The
    /// queue number cannot change.
    /// - Throws: ``NetfilterQueueError``; `EINVAL` for another queue number.
    ///   On error the configuration in force is the old one, except for what
    ///   the kernel had already accepted.
    public func reconfigure(
        _ new: Configuration, handling body: (inout QueuedPacket) -> Verdict = { _ in .accept }
    ) throws(NetfilterQueueError) {
        guard new.queueNumber == configuration.queueNumber else {
            throw NetfilterQueueError(operation: .configureQueue, errno: .invalidArgument)
        }
        if let e = flush() { throw NetfilterQueueError(operation: .verdict, errno: e) }
        let old = configuration
        configuration = new
        do throws(NetfilterQueueError) {
            try configure(handling: body)
            try tuneSocket()
        } catch {
            configuration = old
            throw error
        }
    }

    /// Unbinds the queue (`NFQNL_CFG_CMD_UNBIND`) and closes the socket
    /// (`mnl_socket_close`). Packets still queued are then handled by the
    /// kernel: dropped, or accepted with `--queue-bypass` / fail-open.
    public func close() {
        guard receiveBuffer.count > 0 else { return }
        if isBound {
            try? command(CQoSMapShim_NFQNL_CFG_CMD_UNBIND, operation: .unbindQueue)
            isBound = false
        }
        mnl_socket_close(socket)
        receiveBuffer.deallocate()
        sendBuffer.deallocate()
        receiveBuffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)
        sendBuffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    }

    private func command(_ cmd: UInt8, operation: NetfilterQueueError.Operation) throws(NetfilterQueueError) {
        var message = cqosmap_nfq_config()
        message.queue = configuration.queueNumber
        message.command = cmd
        message.sequence = nextSequence()
        message.ack = true
        let len = cqosmap_nfq_put_config(
            sendBuffer.baseAddress!.assumingMemoryBound(to: CChar.self), &message)
        try sendAndAwaitAck(len, operation: operation)
    }

    private func configure(handling body: (inout QueuedPacket) -> Verdict = { _ in .accept })
        throws(NetfilterQueueError)
    {
        var message = cqosmap_nfq_config()
        message.queue = configuration.queueNumber
        switch configuration.copyMode {
        case .none: message.copy_mode = CQoSMapShim_NFQNL_COPY_NONE
        case .metadata: message.copy_mode = CQoSMapShim_NFQNL_COPY_META
        case .packet(let range):
            message.copy_mode = CQoSMapShim_NFQNL_COPY_PACKET
            message.copy_range = range
        }
        message.flags = configuration.flags.rawValue
        message.flags_mask = Flags.all.rawValue
        message.max_length = configuration.maximumLength
        message.sequence = nextSequence()
        message.ack = true
        let len = cqosmap_nfq_put_config(
            sendBuffer.baseAddress!.assumingMemoryBound(to: CChar.self), &message)
        try sendAndAwaitAck(len, operation: .configureQueue, handling: body)
    }

    private func nextSequence() -> UInt32 {
        sequence &+= 1
        return sequence
    }

    /// Sends a config message and reads until its ACK; packets that arrive in
    /// between are decided by `body` so none is left without a verdict.
    private func sendAndAwaitAck(
        _ len: Int, operation: NetfilterQueueError.Operation,
        handling body: (inout QueuedPacket) -> Verdict = { _ in .accept }
    ) throws(NetfilterQueueError) {
        try Self.system(operation) { [socket, sendBuffer] in
            mnl_socket_sendto(socket, sendBuffer.baseAddress, len)
        }
        let want = sequence
        for _ in 0..<64 {
            let n: Int
            do throws(Errno) {
                n = try retryingOnInterrupt { [socket, receiveBuffer] in
                    mnl_socket_recvfrom(socket, receiveBuffer.baseAddress, receiveBuffer.count)
                }
            } catch .noBufferSpace {
                continue  // packets were lost meanwhile, not our answer
            } catch {
                throw NetfilterQueueError(operation: operation, errno: error)
            }
            var remaining = Int32(n)
            var nlh = receiveBuffer.baseAddress!.assumingMemoryBound(to: nlmsghdr.self)
            var acked = false
            while mnl_nlmsg_ok(nlh, remaining) {
                if nlh.pointee.nlmsg_type == UInt16(NLMSG_ERROR), nlh.pointee.nlmsg_seq == want {
                    let err = mnl_nlmsg_get_payload(nlh)!.assumingMemoryBound(to: nlmsgerr.self).pointee.error
                    guard err == 0 else {
                        throw NetfilterQueueError(operation: operation, errno: Errno(rawValue: -err))
                    }
                    acked = true
                }
                nlh = mnl_nlmsg_next(nlh, &remaining)
            }
            if acked { return }
            // Not our ACK: packets queued meanwhile.
            _ = try? dispatch(bytes: Int(n), body)
        }
        throw NetfilterQueueError(operation: operation, errno: .timedOut)
    }

    /// Receives the queued packets, calls `body` for each and sends every
    /// verdict back in one batch of messages.
    ///
    /// Netlink returns one queued packet per datagram, so after the blocking
    /// receive the datagrams already waiting (up to ``maximumDrain``) are read
    /// without blocking and their verdicts share the same `sendto`.
    ///
    /// Wraps `mnl_socket_recvfrom`, `recvfrom(MSG_DONTWAIT)`, `nfq_nlmsg_parse`,
    /// `nfq_nlmsg_verdict_put`, `nfq_nlmsg_verdict_put_mark`, `NFQA_PRIORITY`,
    /// `nfq_nlmsg_verdict_put_pkt` and `mnl_socket_sendto`.
    /// - Parameter body: decides one packet. The packet's payload points into
    ///   the receive buffer and is valid only during the call; the body may
    ///   modify it in place and return it in the verdict.
    /// - Returns: the number of packets handled; 0 when the receive timed out.
    /// - Throws: ``NetfilterQueueError``; `ENOBUFS` (``Errno/noBufferSpace``)
    ///   means the kernel dropped messages and the queue remains usable.
    @discardableResult
    public func receive(_ body: (inout QueuedPacket) -> Verdict) throws(NetfilterQueueError) -> Int {
        let n: Int
        do throws(Errno) {
            n = try retryingOnInterrupt { [socket, receiveBuffer] in
                mnl_socket_recvfrom(socket, receiveBuffer.baseAddress, receiveBuffer.count)
            }
        } catch .resourceTemporarilyUnavailable {
            return 0  // SO_RCVTIMEO expired (EAGAIN, which is EWOULDBLOCK on Linux)
        } catch {
            throw NetfilterQueueError(operation: .receive, errno: error)
        }
        var total = try dispatch(bytes: Int(n), body, flushing: false)
        let fd = mnl_socket_get_fd(socket)
        for _ in 1..<Self.maximumDrain {
            var from = sockaddr_nl()
            var fromLength = socklen_t(MemoryLayout<sockaddr_nl>.size)
            let m: Int
            do throws(Errno) {
                m = try retryingOnInterrupt { [receiveBuffer] in
                    withUnsafeMutablePointer(to: &from) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                            recvfrom(
                                fd, receiveBuffer.baseAddress, receiveBuffer.count, Int32(MSG_DONTWAIT), $0,
                                &fromLength)
                        }
                    }
                }
            } catch .noBufferSpace {
                // An overrun is reported once; other errors recur on the next blocking receive.
                if let e = flush() { throw NetfilterQueueError(operation: .verdict, errno: e) }
                throw NetfilterQueueError(operation: .receive, errno: .noBufferSpace)
            } catch {
                break  // nothing more waiting
            }
            guard m > 0 else { break }
            // As mnl_socket_recvfrom: only the kernel may send to this socket.
            guard from.nl_pid == 0 else { continue }
            total += try dispatch(bytes: m, body, flushing: false)
        }
        if let e = flush() { throw NetfilterQueueError(operation: .verdict, errno: e) }
        return total
    }

    /// The most datagrams read per ``receive(_:)`` before the verdicts are sent.
    public static let maximumDrain = 64

    /// What the C callback of `cqosmap_nfq_walk` needs; one per queue, reused
    /// so that no datagram allocates.
    private final class Context {
        var body: ((inout QueuedPacket) -> Verdict)?
        unowned let queue: NetfilterQueue
        var sendError: Int32 = 0
        init(queue: NetfilterQueue) { self.queue = queue }
    }
    private lazy var context = Context(queue: self)

    /// Decides the packets of one datagram and appends their verdicts; sends
    /// them now when `flushing` or when there is an error to report.
    private func dispatch(bytes: Int, _ body: (inout QueuedPacket) -> Verdict, flushing: Bool = true)
        throws(NetfilterQueueError) -> Int
    {
        var ackError: Int32 = 0
        let count = withoutActuallyEscaping(body) { escapable in
            let ctx = context
            ctx.body = escapable
            ctx.sendError = 0
            defer { ctx.body = nil }  // the closure must not outlive this call
            let n = withExtendedLifetime(ctx) {
                cqosmap_nfq_walk(
                    receiveBuffer.baseAddress, bytes, Unmanaged.passUnretained(ctx).toOpaque(),
                    { raw, cpkt in
                        let ctx = Unmanaged<Context>.fromOpaque(raw!).takeUnretainedValue()
                        var packet = QueuedPacket(cpkt!.pointee)
                        let verdict = ctx.body!(&packet)
                        if let id = packet.id, let e = ctx.queue.append(verdict, id: id, batch: false) {
                            ctx.sendError = e.rawValue
                        }
                    }, &ackError)
            }
            if ctx.sendError != 0 { ackError = ctx.sendError }
            return n
        }
        let failed = count < 0 || ackError != 0
        let flushed = flushing || failed ? flush() : nil
        if count < 0 { throw NetfilterQueueError(operation: .receive, errno: .badMessage) }
        if let flushed { throw NetfilterQueueError(operation: .verdict, errno: flushed) }
        if ackError != 0 { throw NetfilterQueueError(operation: .verdict, errno: Errno(rawValue: ackError)) }
        return Int(count)
    }

    /// Sends one verdict for every packet with an id up to and including `id`
    /// (`NFQNL_MSG_VERDICT_BATCH`). A batch verdict carries no payload.
    public func batchVerdict(upTo id: UInt32, _ verdict: Verdict) throws(NetfilterQueueError) {
        var v = verdict
        v.payload = nil
        if let e = append(v, id: id, batch: true) { throw NetfilterQueueError(operation: .verdict, errno: e) }
        if let e = flush() { throw NetfilterQueueError(operation: .verdict, errno: e) }
    }

    /// Sends one verdict now (`nfq_nlmsg_verdict_put`), for packets whose
    /// decision was deferred past ``receive(_:)`` (with ``Verdict/Decision/none``).
    public func verdict(_ verdict: Verdict, for id: UInt32) throws(NetfilterQueueError) {
        if let e = append(verdict, id: id, batch: false) {
            throw NetfilterQueueError(operation: .verdict, errno: e)
        }
        if let e = flush() { throw NetfilterQueueError(operation: .verdict, errno: e) }
    }

    /// Appends a verdict message; flushes first when the buffer is full.
    ///
    /// With ``Configuration/batchVerdicts``, a verdict without payload that
    /// repeats the previous message's decision, mark and priority rewrites that
    /// message in place into one `NFQNL_MSG_VERDICT_BATCH` up to this id. That
    /// covers exactly the packets since the previous message: the kernel keeps
    /// a packet only once its message reached this socket, messages arrive in
    /// id order, and every earlier one already has its verdict in this buffer
    /// or an earlier `sendto` (unless one was deferred, which turns this off).
    private func append(_ verdict: Verdict, id: UInt32, batch: Bool) -> Errno? {
        if verdict.decision == .none {
            deferredSeen = true
            return nil
        }
        statistics.verdicts &+= 1
        if !batch, configuration.batchVerdicts, !deferredSeen, verdict.payload == nil,
            let last = extendable, last.verdict.decision == verdict.decision,
            last.verdict.mark == verdict.mark,
            last.verdict.priority == verdict.priority
        {
            let at = (sendBuffer.baseAddress! + last.offset).assumingMemoryBound(to: CChar.self)
            let len = encode(verdict, id: id, batch: true, at: at)
            // Same attributes, so the same length; anything else would corrupt the buffer.
            precondition(len == last.length, "batch verdict length differs from the verdict it replaces")
            return nil
        }
        let payloadLength = verdict.payload?.count ?? 0
        let need = payloadLength + Self.verdictOverhead
        if sendLength + need > sendLimit, let e = flush() { return e }
        guard need <= sendLimit else {
            statistics.verdictsLost &+= 1
            return .messageTooLong
        }
        let at = (sendBuffer.baseAddress! + sendLength).assumingMemoryBound(to: CChar.self)
        let len = encode(verdict, id: id, batch: batch, at: at)
        extendable = verdict.payload == nil && !batch ? (sendLength, len, verdict) : nil
        sendLength += len
        statistics.messages &+= 1
        return nil
    }

    private func encode(_ verdict: Verdict, id: UInt32, batch: Bool, at: UnsafeMutablePointer<CChar>) -> Int {
        var message = cqosmap_nfq_verdict(
            queue: configuration.queueNumber, id: id, verdict: verdict.decision.rawValue, batch: batch,
            has_mark: verdict.mark != nil, mark: verdict.mark ?? 0,
            has_priority: verdict.priority != nil, priority: verdict.priority ?? 0,
            payload: verdict.payload?.baseAddress, payload_len: UInt32(verdict.payload?.count ?? 0))
        return cqosmap_nfq_put_verdict(at, &message)
    }

    /// Sends the collected verdict messages in one `sendto`.
    private func flush() -> Errno? {
        guard sendLength > 0 else { return nil }
        defer {
            sendLength = 0
            extendable = nil
        }
        return send(UnsafeRawBufferPointer(rebasing: sendBuffer[0..<sendLength]))
    }

    /// Sends verdict messages so that none is lost while the kernel can take
    /// it: transient errors are retried (with a short back-off), and a send
    /// the socket refuses as too large (`EMSGSIZE`) or that keeps failing is
    /// split at message boundaries and resent piece by piece. Nothing is
    /// processed by the kernel when `sendto` fails, so a resend never doubles
    /// a verdict, and order is kept, so a batch verdict never overtakes the
    /// payload verdicts before it.
    private func send(_ messages: UnsafeRawBufferPointer) -> Errno? {
        var failures = 0
        while true {
            let e: Errno
            do throws(Errno) {
                _ = try retryingOnInterrupt { [socket] in
                    mnl_socket_sendto(socket, messages.baseAddress, messages.count)
                }
                return nil
            } catch {
                e = error
            }
            switch e {
            case .noBufferSpace where failures < 6, .noMemory where failures < 6,
                .resourceTemporarilyUnavailable where failures < 6:
                failures += 1
                statistics.sendRetries &+= 1
                usleep(useconds_t(50 << failures))  // 100 µs to 3.2 ms: let the allocator recover
                continue
            case .messageTooLong, .noBufferSpace, .noMemory, .resourceTemporarilyUnavailable:
                let pieces = Self.split(messages, limit: e == .messageTooLong ? refreshSendLimit() : 0)
                guard pieces.count > 1 else {
                    statistics.verdictsLost &+= 1
                    return e
                }
                statistics.sendSplits &+= 1
                var first: Errno?
                for piece in pieces {
                    if let failed = send(piece), first == nil { first = failed }
                }
                return first
            default:
                statistics.verdictsLost &+= 1
                return e
            }
        }
    }

    /// Re-reads the socket's send buffer (someone may have shrunk it).
    private func refreshSendLimit() -> Int {
        sendLimit = Self.sendLimit(fd: mnl_socket_get_fd(socket), buffer: sendBuffer.count)
        return sendLimit
    }

    /// `SO_SNDBUF` (the kernel's doubled `sk_sndbuf`) less netlink's 32
    /// bytes, capped by our own buffer.
    private static func sendLimit(fd: Int32, buffer: Int) -> Int {
        var size: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        // On error the buffer's own size is the limit, and EMSGSIZE splits.
        guard (try? retryingOnInterrupt { getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &length) }) != nil,
            size > 32
        else { return buffer }
        return min(buffer, Int(size) - 32)
    }

    /// Cuts a run of netlink messages at message boundaries into pieces of at
    /// most `limit` bytes (0: one message per piece). A single message longer
    /// than the limit stays whole.
    static func split(_ messages: UnsafeRawBufferPointer, limit: Int) -> [UnsafeRawBufferPointer] {
        var pieces: [UnsafeRawBufferPointer] = []
        var start = 0
        var offset = 0
        while offset + MemoryLayout<nlmsghdr>.size <= messages.count {
            let length = Int(messages.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
            let aligned = (length + 3) & ~3
            guard length >= MemoryLayout<nlmsghdr>.size, offset + length <= messages.count else { break }
            let end = min(offset + aligned, messages.count)
            if offset > start, limit == 0 || end - start > limit {
                pieces.append(UnsafeRawBufferPointer(rebasing: messages[start..<offset]))
                start = offset
            }
            offset = end
        }
        if start < messages.count { pieces.append(UnsafeRawBufferPointer(rebasing: messages[start...])) }
        return pieces
    }
}
