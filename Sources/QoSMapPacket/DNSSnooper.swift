import QoSMapCore

// The snooping engine: frames in, replies that answer a remembered query out.
// All state is preallocated at init (the query ring, its hash buckets, the
// question names, the TCP stream slots); a frame allocates only what the
// parser returns for a reply that is delivered, and a TCP stream's buffer
// grows once up to its bound and is reused.

/// The interface a frame was read on: its index keys the tracking (a reply is
/// accepted only on the interface its query was seen on), its name is delivered.
public struct DNSSnoopInterface: Sendable, Hashable {
    /// The interface index (`if_nametoindex`).
    public var index: Int32
    /// The interface name.
    public var name: String

    /// An interface.
    public init(index: Int32, name: String) {
        self.index = index
        self.name = name
    }
}

/// Limits of a ``DNSSnooper``; every structure is bounded by one of them.
public struct DNSSnoopLimits: Sendable, Equatable {
    /// Queries remembered at most; when full, the oldest is dropped.
    public var maxQueries: Int = 4096
    /// How long a query waits for its reply, in nanoseconds.
    public var queryTimeout: UInt64 = 10_000_000_000
    /// TCP streams (one per direction) reassembled at once; when full, the
    /// least recently active is dropped.
    public var maxStreams: Int = 64
    /// Bytes a stream may hold while a message is incomplete: one message of
    /// the largest size DNS allows (2-byte prefix + 65535) by default.
    public var maxStreamBuffer: Int = 65537
    /// A stream idle this long (nanoseconds) is dropped.
    public var streamTimeout: UInt64 = 30_000_000_000
    /// The answer cap passed to ``DNSReplyParser``.
    public var maxAnswers: Int = DNSReplyParser.defaultMaxAnswers

    /// The defaults.
    public init() {}
}

/// The query tracker and TCP reassembler. Not thread-safe: one reading
/// thread owns it.
public struct DNSSnooper {
    /// The limits it was made with.
    public let limits: DNSSnoopLimits
    /// What it has seen so far.
    public var counters = DNSSnoopCounters()

    // The query ring: a new query takes the next slot in order; a slot still
    // live when its turn comes is the oldest query, evicted.
    private var queries: [QuerySlot]
    private var names: [UInt8]  // slot i's folded question name at i * 256
    private var buckets: [Int32]  // hash → first slot in its chain, -1 empty
    private var nextSlot = 0
    private var streams: [Stream]
    private let seed: Int

    /// Makes a snooper; allocates everything it will use but the stream
    /// buffers (which grow up to `maxStreamBuffer` once and are reused).
    public init(limits: DNSSnoopLimits = DNSSnoopLimits()) {
        var l = limits
        l.maxQueries = max(1, l.maxQueries)
        l.maxStreams = max(0, l.maxStreams)
        l.maxStreamBuffer = max(2, l.maxStreamBuffer)
        self.limits = l
        queries = Array(repeating: QuerySlot(), count: l.maxQueries)
        names = Array(repeating: 0, count: l.maxQueries * 256)
        var b = 1
        while b < 2 * l.maxQueries { b <<= 1 }
        buckets = Array(repeating: -1, count: b)
        streams = Array(repeating: Stream(), count: l.maxStreams)
        seed = Int.random(in: Int.min...Int.max)
    }

    /// Queries remembered now (not yet answered, expired or evicted).
    public var liveQueries: Int { queries.reduce(0) { $0 + ($1.live ? 1 : 0) } }

    /// Reads one frame seen on `interface` at monotonic time `now`
    /// (nanoseconds); calls `deliver` for each reply in it that answers a
    /// remembered query (TCP segments may complete several messages).
    public mutating func frame(
        _ buffer: UnsafeRawBufferPointer, format: PacketFormat, interface: DNSSnoopInterface, now: UInt64,
        deliver: (DNSObservedReply) -> Void
    ) {
        counters.frames &+= 1
        guard let base = buffer.baseAddress else {
            counters.framesIgnored &+= 1
            return
        }
        let p = UnsafeMutableRawPointer(mutating: base)  // only read
        var f = ParsedFrame()
        guard parse(p, buffer.count, format, &f), f.l3 >= 0, !f.tailMalformed else {
            counters.framesIgnored &+= 1
            return
        }
        let l3 = f.l3
        var ipEnd: Int
        var l4: Int
        var proto: UInt8
        var src: IPAddress
        var dst: IPAddress
        if f.ipVersion == 4 {
            ipEnd = l3 &+ Int(u16(p, l3 &+ 2))
            // Fragments: the first lacks the end of the message, later ones the header.
            guard u16(p, l3 &+ 6) & 0x3FFF == 0 else {
                counters.framesIgnored &+= 1
                return
            }
            proto = u8(p, l3 &+ 9)
            l4 = l3 &+ Int(u8(p, l3) & 0x0F) &* 4
            src = IPAddress(ipv4: u32(p, l3 &+ 12))
            dst = IPAddress(ipv4: u32(p, l3 &+ 16))
        } else {
            let payload = Int(u16(p, l3 &+ 4))
            ipEnd = payload == 0 ? buffer.count : l3 &+ 40 &+ payload
            guard let chain = walkIPv6(p, l3, ipEnd), !chain.fragmented else {
                counters.framesIgnored &+= 1
                return
            }
            proto = chain.proto
            l4 = chain.offset
            src = IPAddress(ipv6: true, high: u64(p, l3 &+ 8), low: u64(p, l3 &+ 16))
            dst = IPAddress(ipv6: true, high: u64(p, l3 &+ 24), low: u64(p, l3 &+ 32))
        }
        let t = Tuple(
            interface: interface.index, transport: proto, source: src, destination: dst, sourcePort: 0,
            destinationPort: 0)
        if proto == 17 {
            guard l4 &+ 8 <= ipEnd else {
                counters.framesIgnored &+= 1
                return
            }
            let udpLength = Int(u16(p, l4 &+ 4))
            guard udpLength >= 8, l4 &+ udpLength <= ipEnd else {
                counters.framesIgnored &+= 1
                return
            }
            var tu = t
            tu.sourcePort = u16(p, l4)
            tu.destinationPort = u16(p, l4 &+ 2)
            message(
                UnsafeRawBufferPointer(start: p + l4 + 8, count: udpLength &- 8), tu, interface, now,
                deliver)
        } else if proto == 6 {
            guard l4 &+ 20 <= ipEnd else {
                counters.framesIgnored &+= 1
                return
            }
            let dataOffset = Int(u8(p, l4 &+ 12) >> 4) &* 4
            guard dataOffset >= 20, l4 &+ dataOffset <= ipEnd else {
                counters.framesIgnored &+= 1
                return
            }
            var tt = t
            tt.sourcePort = u16(p, l4)
            tt.destinationPort = u16(p, l4 &+ 2)
            guard tt.sourcePort == 53 || tt.destinationPort == 53 else {
                counters.framesIgnored &+= 1
                return
            }
            segment(
                seq: u32(p, l4 &+ 4), flags: u8(p, l4 &+ 13),
                payload: UnsafeRawBufferPointer(start: p + l4 + dataOffset, count: ipEnd &- l4 &- dataOffset),
                tt, interface, now, deliver)
        } else {
            counters.framesIgnored &+= 1
        }
    }

    /// Reads one frame held in an array.
    public mutating func frame(
        _ bytes: [UInt8], format: PacketFormat, interface: DNSSnoopInterface, now: UInt64,
        deliver: (DNSObservedReply) -> Void
    ) {
        bytes.withUnsafeBytes { frame($0, format: format, interface: interface, now: now, deliver: deliver) }
    }

    /// Drops the queries and TCP streams that timed out (the reading thread
    /// calls it about once a second; lookups also ignore timed-out queries).
    public mutating func expire(now: UInt64) {
        for i in queries.indices where queries[i].live && queries[i].expires <= now {
            unlink(i)
            counters.queriesExpired &+= 1
        }
        for i in streams.indices where streams[i].live && now &- streams[i].lastSeen >= limits.streamTimeout {
            dropStream(i)
        }
    }

    // MARK: - Messages

    /// One DNS message (a UDP payload or a de-framed TCP message).
    private mutating func message(
        _ m: UnsafeRawBufferPointer, _ t: Tuple, _ interface: DNSSnoopInterface, _ now: UInt64,
        _ deliver: (DNSObservedReply) -> Void
    ) {
        guard m.count >= 12 else {
            if t.sourcePort == 53 || t.destinationPort == 53 {
                counters.countRefused(.truncated)
            } else {
                counters.framesIgnored &+= 1
            }
            return
        }
        let isReply = m[2] & 0x80 != 0
        let id = UInt16(m[0]) << 8 | UInt16(m[1])
        if !isReply {
            guard t.destinationPort == 53 else {
                counters.framesIgnored &+= 1
                return
            }
            query(m, t, id, now)
            return
        }
        guard t.sourcePort == 53 else {
            counters.framesIgnored &+= 1
            return
        }
        // The query this answers went the other way.
        let q = Tuple(
            interface: t.interface, transport: t.transport, source: t.destination, destination: t.source,
            sourcePort: t.destinationPort, destinationPort: t.sourcePort)
        guard let slot = find(q, id: id, bucket: bucket(q, id), now: now) else {
            counters.repliesUnsolicited &+= 1
            return
        }
        switch DNSReplyParser.parse(m, maxAnswers: limits.maxAnswers) {
        case .failure(let e):
            counters.countRefused(e)
        case .success(let reply):
            counters.repliesParsed &+= 1
            guard reply.questionType == queries[slot].questionType, sameQuestion(slot, reply.question.wire)
            else {
                counters.repliesMismatched &+= 1
                return
            }
            unlink(slot)
            counters.repliesDelivered &+= 1
            deliver(
                DNSObservedReply(
                    reply: reply, interface: interface.name, server: t.source, client: t.destination,
                    transport: t.transport))
        }
    }

    /// Remembers a query (or refreshes a retransmitted one).
    private mutating func query(_ m: UnsafeRawBufferPointer, _ t: Tuple, _ id: UInt16, _ now: UInt64) {
        let flags = UInt16(m[2]) << 8 | UInt16(m[3])
        guard (flags >> 11) & 0xF == 0, m[4] == 0, m[5] == 1 else {
            counters.countRefused(.unsupported)
            return
        }
        // The question name: plain labels (a query has nothing before it to point to).
        var i = 12
        while true {
            guard i < m.count else {
                counters.countRefused(.truncated)
                return
            }
            let b = m[i]
            if b == 0 { break }
            guard b & 0xC0 == 0 else {
                counters.countRefused(b & 0xC0 == 0xC0 ? .forwardPointer : .badLabelType)
                return
            }
            i &+= Int(b) &+ 1
            guard i &- 12 < 255 else {
                counters.countRefused(.nameTooLong)
                return
            }
        }
        let nameLength = i &- 12 &+ 1
        guard i &+ 4 < m.count else {
            counters.countRefused(.truncated)
            return
        }
        let qtype = UInt16(m[i &+ 1]) << 8 | UInt16(m[i &+ 2])
        counters.queriesSeen &+= 1
        let slot: Int
        let b = bucket(t, id)
        if let s = find(t, id: id, bucket: b, now: now) {
            slot = s
        } else {
            slot = nextSlot
            nextSlot = nextSlot &+ 1 == queries.count ? 0 : nextSlot &+ 1
            if queries[slot].live {
                if queries[slot].expires <= now {
                    counters.queriesExpired &+= 1
                } else {
                    counters.queriesEvicted &+= 1
                }
                unlink(slot)
            }
            queries[slot] = QuerySlot(
                tuple: t, id: id, questionType: qtype, nameLength: UInt16(nameLength), expires: 0,
                live: true, bucket: Int32(b), next: buckets[b])
            buckets[b] = Int32(slot)
        }
        queries[slot].expires = now &+ limits.queryTimeout
        queries[slot].questionType = qtype
        queries[slot].nameLength = UInt16(nameLength)
        let base = slot &* 256
        for k in 0..<nameLength { names[base &+ k] = foldCase(m[12 &+ k]) }
    }

    private func sameQuestion(_ slot: Int, _ wire: [UInt8]) -> Bool {
        guard wire.count == Int(queries[slot].nameLength) else { return false }
        let base = slot &* 256
        for k in 0..<wire.count where names[base &+ k] != wire[k] { return false }
        return true
    }

    // MARK: - The query table

    private func bucket(_ t: Tuple, _ id: UInt16) -> Int {
        var h = Hasher()
        h.combine(seed)
        h.combine(t)
        h.combine(id)
        return h.finalize() & (buckets.count &- 1)
    }

    /// The live, unexpired slot for `t` and `id` (whose bucket is `b`).
    private mutating func find(_ t: Tuple, id: UInt16, bucket b: Int, now: UInt64) -> Int? {
        var s = buckets[b]
        while s >= 0 {
            let i = Int(s)
            if queries[i].id == id, queries[i].tuple == t {
                if queries[i].expires <= now {
                    unlink(i)
                    counters.queriesExpired &+= 1
                    return nil
                }
                return i
            }
            s = queries[i].next
        }
        return nil
    }

    /// Removes a live slot from its chain.
    private mutating func unlink(_ i: Int) {
        let b = Int(queries[i].bucket)
        if buckets[b] == Int32(i) {
            buckets[b] = queries[i].next
        } else {
            var s = buckets[b]
            while s >= 0 {
                if queries[Int(s)].next == Int32(i) {
                    queries[Int(s)].next = queries[i].next
                    break
                }
                s = queries[Int(s)].next
            }
        }
        queries[i].live = false
        queries[i].next = -1
    }

    // MARK: - TCP

    /// One TCP segment of a port-53 connection.
    private mutating func segment(
        seq: UInt32, flags: UInt8, payload: UnsafeRawBufferPointer, _ t: Tuple,
        _ interface: DNSSnoopInterface,
        _ now: UInt64, _ deliver: (DNSObservedReply) -> Void
    ) {
        let syn = flags & 0x02 != 0
        let fin = flags & 0x01 != 0
        let rst = flags & 0x04 != 0
        var s = streams.firstIndex { $0.live && $0.tuple == t }
        if syn {
            // A new connection (or a retransmitted SYN): data starts after the SYN's sequence number.
            if s == nil { s = newStream(now) }
            guard let i = s else { return }
            streams[i].tuple = t
            streams[i].live = true
            streams[i].next = seq &+ 1
            streams[i].buffer.removeAll(keepingCapacity: true)
            streams[i].start = 0
            streams[i].lastSeen = now
            counters.tcpStreams = UInt64(streams.count { $0.live })
            return
        }
        guard let i = s else {
            if payload.count > 0 { counters.tcpSegmentsUntracked &+= 1 }
            return
        }
        if rst {
            closeStream(i)
            return
        }
        streams[i].lastSeen = now
        if payload.count > 0 {
            // Signed distance from the next expected byte, modulo 2^32.
            let d = Int(Int32(bitPattern: seq &- streams[i].next))
            if d > 0 {
                dropStream(i)  // a gap: the bytes in between were not seen
                return
            }
            let skip = -d
            if skip < payload.count {
                let fresh = UnsafeRawBufferPointer(rebasing: payload[skip...])
                guard streams[i].buffer.count &- streams[i].start &+ fresh.count <= limits.maxStreamBuffer
                else {
                    dropStream(i)
                    return
                }
                streams[i].buffer.append(contentsOf: fresh)
                streams[i].next = streams[i].next &+ UInt32(truncatingIfNeeded: fresh.count)
                drain(i, interface, now, deliver)
                guard streams[i].live else { return }
            }  // else a retransmission of bytes already read
        }
        if fin { closeStream(i) }
    }

    /// Hands every complete message in stream `i`'s buffer to `message`.
    private mutating func drain(
        _ i: Int, _ interface: DNSSnoopInterface, _ now: UInt64, _ deliver: (DNSObservedReply) -> Void
    ) {
        let t = streams[i].tuple
        // Take the buffer out so that `message` can mutate self meanwhile.
        var buf = streams[i].buffer
        streams[i].buffer = []
        var start = streams[i].start
        buf.withUnsafeBytes { b in
            while b.count &- start >= 2 {
                let len = Int(b[start]) << 8 | Int(b[start &+ 1])
                guard b.count &- start &- 2 >= len else { break }
                message(
                    UnsafeRawBufferPointer(rebasing: b[(start &+ 2)..<(start &+ 2 &+ len)]), t, interface,
                    now, deliver)
                start &+= 2 &+ len
            }
        }
        if start == buf.count {
            buf.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 0 {
            buf.removeSubrange(0..<start)
            start = 0
        }
        streams[i].buffer = buf
        streams[i].start = start
    }

    /// A free stream slot, or the least recently active one dropped.
    private mutating func newStream(_ now: UInt64) -> Int? {
        guard !streams.isEmpty else { return nil }
        if let free = streams.firstIndex(where: { !$0.live }) { return free }
        var oldest = 0
        for i in streams.indices where streams[i].lastSeen < streams[oldest].lastSeen { oldest = i }
        dropStream(oldest)
        return oldest
    }

    private mutating func dropStream(_ i: Int) {
        counters.tcpStreamsDropped &+= 1
        closeStream(i)
    }

    private mutating func closeStream(_ i: Int) {
        streams[i].live = false
        streams[i].buffer.removeAll(keepingCapacity: true)
        streams[i].start = 0
        counters.tcpStreams = UInt64(streams.count { $0.live })
    }
}

/// A directional 5-tuple on one interface.
struct Tuple: Hashable {
    var interface: Int32
    var transport: UInt8
    var source: IPAddress
    var destination: IPAddress
    var sourcePort: UInt16
    var destinationPort: UInt16

    init(
        interface: Int32 = 0, transport: UInt8 = 0, source: IPAddress = IPAddress(ipv4: 0),
        destination: IPAddress = IPAddress(ipv4: 0), sourcePort: UInt16 = 0, destinationPort: UInt16 = 0
    ) {
        self.interface = interface
        self.transport = transport
        self.source = source
        self.destination = destination
        self.sourcePort = sourcePort
        self.destinationPort = destinationPort
    }
}

/// A remembered query: keyed by its tuple (client → server) and ID.
struct QuerySlot {
    var tuple = Tuple()
    var id: UInt16 = 0
    var questionType: UInt16 = 0
    var nameLength: UInt16 = 0
    var expires: UInt64 = 0
    var live = false
    /// Its hash bucket (kept: unlinking need not hash again).
    var bucket: Int32 = 0
    var next: Int32 = -1
}

/// One direction of a TCP connection being reassembled.
struct Stream {
    var tuple = Tuple()
    var live = false
    var next: UInt32 = 0
    var buffer: [UInt8] = []
    var start = 0
    var lastSeen: UInt64 = 0
}
