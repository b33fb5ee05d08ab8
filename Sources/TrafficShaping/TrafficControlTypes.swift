#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A qdisc handle or class id, `major:minor` (the kernel's `TC_H_MAKE`);
/// printed as `tc` prints it, in hexadecimal (`1:`, `1:10`, `root`).
public struct QdiscHandle: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    /// `major << 16 | minor`.
    public let rawValue: UInt32

    /// A handle from its 32-bit value.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `major:minor`.
    public init(major: UInt16, minor: UInt16 = 0) { rawValue = UInt32(major) << 16 | UInt32(minor) }

    /// The upper 16 bits: the qdisc.
    public var major: UInt16 { UInt16(truncatingIfNeeded: rawValue >> 16) }
    /// The lower 16 bits: the class (0 for the qdisc itself).
    public var minor: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    /// `TC_H_ROOT`: the parent of an interface's root qdisc.
    public static let root = QdiscHandle(rawValue: 0xFFFF_FFFF)
    /// `TC_H_UNSPEC`: let the kernel choose (a new qdisc) or match any (a delete).
    public static let unspecified = QdiscHandle(rawValue: 0)

    /// `root`, `1:` for a qdisc, `1:10` for a class.
    public var description: String {
        if self == .root { return "root" }
        let major = String(self.major, radix: 16)
        return minor == 0 ? "\(major):" : "\(major):\(String(minor, radix: 16))"
    }

    /// Orders by value.
    public static func < (a: QdiscHandle, b: QdiscHandle) -> Bool { a.rawValue < b.rawValue }
}

/// How a request treats an object that exists, as `tc add`, `tc replace` and
/// `tc change` do.
public enum ChangeMode: Sendable, Hashable {
    /// Create; fail with `EEXIST` if it exists (`NLM_F_CREATE | NLM_F_EXCL`).
    case create
    /// Create, or replace what is there (`NLM_F_CREATE | NLM_F_REPLACE`): a
    /// root qdisc of another handle is swapped out whole; one of the same
    /// handle is changed in place and must be of the same kind (`EINVAL`,
    /// "Invalid qdisc name: must match existing qdisc", otherwise).
    case replace
    /// Change what exists; fail with `ENOENT` if nothing does (no flags).
    case change
}

/// HTB's qdisc parameters (`TCA_HTB_INIT`, `struct tc_htb_glob`).
public struct HTBQdiscOptions: Hashable, Sendable {
    /// The minor of the class that takes packets no filter or priority
    /// classifies (`default`); 0 sends them unshaped (HTB's direct queue).
    public var defaultClass: UInt16
    /// `r2q`: a class given no quantum gets `rate / r2q` bytes.
    public var rateToQuantum: UInt32
    /// `direct_qlen`: the direct queue's limit in packets; nil for the
    /// kernel's default (the device's `txqueuelen`).
    public var directQueueLength: UInt32?

    /// HTB's parameters; `r2q` 10 is `tc`'s default.
    public init(defaultClass: UInt16, rateToQuantum: UInt32 = 10, directQueueLength: UInt32? = nil) {
        self.defaultClass = defaultClass
        self.rateToQuantum = rateToQuantum
        self.directQueueLength = directQueueLength
    }
}

/// fq_codel's parameters (`TCA_FQ_CODEL_*`); nil leaves the kernel's default
/// (10240 packets, 5 ms, 100 ms, ECN on).
public struct FQCodelOptions: Hashable, Sendable {
    /// `limit`, packets.
    public var limitPackets: UInt32?
    /// `target`, microseconds.
    public var targetMicroseconds: UInt32?
    /// `interval`, microseconds.
    public var intervalMicroseconds: UInt32?
    /// `ecn` or `noecn`.
    public var ecn: Bool?

    /// fq_codel's parameters.
    public init(
        limitPackets: UInt32? = nil, targetMicroseconds: UInt32? = nil, intervalMicroseconds: UInt32? = nil,
        ecn: Bool? = nil
    ) {
        self.limitPackets = limitPackets
        self.targetMicroseconds = targetMicroseconds
        self.intervalMicroseconds = intervalMicroseconds
        self.ecn = ecn
    }
}

/// CAKE's Diffserv modes (`CAKE_DIFFSERV_*`).
public enum CAKEDiffservMode: UInt32, Sendable, Hashable, CaseIterable {
    /// Three tins (CAKE's default).
    case diffserv3 = 0
    /// Four tins: bulk, best effort, video, voice.
    case diffserv4 = 1
    /// Eight tins.
    case diffserv8 = 2
    /// One tin; the skb priority is not read.
    case besteffort = 3
    /// Eight tins by IP precedence.
    case precedence = 4
}

/// CAKE's parameters (`TCA_CAKE_*`); nil leaves the kernel's default.
public struct CAKEOptions: Hashable, Sendable {
    /// `bandwidth`, bits per second (sent as whole bytes); 0 for unlimited.
    public var bandwidthBitsPerSecond: UInt64?
    /// The Diffserv mode.
    public var diffserv: CAKEDiffservMode?

    /// CAKE's parameters.
    public init(bandwidthBitsPerSecond: UInt64? = nil, diffserv: CAKEDiffservMode? = nil) {
        self.bandwidthBitsPerSecond = bandwidthBitsPerSecond
        self.diffserv = diffserv
    }
}

/// A qdisc and its parameters, for a request or as the kernel reports it.
public enum QdiscOptions: Hashable, Sendable {
    /// `htb`.
    case htb(HTBQdiscOptions)
    /// `fq_codel`.
    case fqCodel(FQCodelOptions)
    /// `bfifo limit BYTES` (`struct tc_fifo_qopt`).
    case bfifo(limitBytes: UInt32)
    /// `pfifo limit PACKETS` (`struct tc_fifo_qopt`).
    case pfifo(limitPackets: UInt32)
    /// `cake`.
    case cake(CAKEOptions)
    /// `gred`: its table and virtual queues.
    case gred(GREDOptions)

    /// The kernel's name of the kind (`TCA_KIND`).
    public var kind: String {
        switch self {
        case .htb: "htb"
        case .fqCodel: "fq_codel"
        case .bfifo: "bfifo"
        case .pfifo: "pfifo"
        case .cake: "cake"
        case .gred: "gred"
        }
    }
}

/// One GRED virtual queue (a drop precedence): its RED thresholds, as
/// `tc qdisc change … gred DP N min … max … probability …` gives them.
public struct GREDVirtualQueue: Hashable, Sendable {
    /// The virtual queue, which `skb->tc_index`'s low 4 bits select (0–15).
    public var dp: UInt8
    /// The average backlog, bytes, where early drop starts.
    public var minBytes: UInt32
    /// The average backlog, bytes, where every packet is dropped.
    public var maxBytes: UInt32
    /// The hard limit of the backlog this queue's packets may find, bytes.
    public var limitBytes: UInt32
    /// The drop probability at `maxBytes`, 0 < p ≤ 1.
    public var probability: Double
    /// The average packet size, bytes (tc's `avpkt`, 1000 by default).
    public var averagePacketBytes: UInt32
    /// The drain rate, bytes per second (tc's `bandwidth`): how fast the
    /// average decays while the queue is idle.
    public var bandwidthBytesPerSecond: UInt64
    /// The priority in GRIO mode; equal for all queues gives WRED mode (one
    /// average over the whole backlog, each queue its own thresholds).
    public var prio: UInt8

    /// A virtual queue.
    public init(
        dp: UInt8, minBytes: UInt32, maxBytes: UInt32, limitBytes: UInt32, probability: Double,
        averagePacketBytes: UInt32 = 1000, bandwidthBytesPerSecond: UInt64, prio: UInt8 = 1
    ) {
        self.dp = dp
        self.minBytes = minBytes
        self.maxBytes = maxBytes
        self.limitBytes = limitBytes
        self.probability = probability
        self.averagePacketBytes = averagePacketBytes
        self.bandwidthBytesPerSecond = bandwidthBytesPerSecond
        self.prio = prio
    }
}

/// GRED's parameters (`TCA_GRED_*`): the table (`struct tc_gred_sopt`, the
/// qdisc's limit) and its virtual queues, which the kernel takes one
/// message each after the table.
public struct GREDOptions: Hashable, Sendable {
    /// How many virtual queues (1–16).
    public var virtualQueueCount: UInt32
    /// The queue of a packet whose `tc_index` names none.
    public var defaultQueue: UInt32
    /// GRIO mode; with equal prios it is WRED mode.
    public var grio: Bool
    /// The qdisc's hard limit, bytes.
    public var limitBytes: UInt32
    /// The virtual queues; empty when read back without them.
    public var virtualQueues: [GREDVirtualQueue]

    /// GRED's parameters.
    public init(
        virtualQueueCount: UInt32, defaultQueue: UInt32 = 0, grio: Bool = true, limitBytes: UInt32,
        virtualQueues: [GREDVirtualQueue]
    ) {
        self.virtualQueueCount = virtualQueueCount
        self.defaultQueue = defaultQueue
        self.grio = grio
        self.limitBytes = limitBytes
        self.virtualQueues = virtualQueues
    }
}

/// RED's derived parameters, as iproute2's `tc_red_eval_ewma`,
/// `tc_red_eval_P` and `tc_red_eval_idle_damping` compute them: the kernel
/// takes logarithms and a table, not the thresholds' intent.
public struct REDParameters: Hashable, Sendable {
    /// log2 of the average's weight's inverse.
    public var wlog: UInt8
    /// log2 of P_max / (max − min).
    public var plog: UInt8
    /// The idle damping table's cell size, log2 of ticks.
    public var scellLog: UInt8
    /// The idle damping table: how many halvings of the average per cell idle.
    public var stab: [UInt8]
    /// P_max × 2^32.
    public var maxP: UInt32

    /// Derives them for `queue` with the scheduler's `clock`; nil when no
    /// valid set exists (a burst below what the minimum needs, or the
    /// thresholds too large for the kernel's fixed point: `fls(max) + Wlog`
    /// must stay below 32).
    public init?(_ queue: GREDVirtualQueue, clock: PacketSchedulerClock) {
        let avpkt = Double(max(queue.averagePacketBytes, 1))
        let minimum = Double(queue.minBytes), maximum = Double(queue.maxBytes)
        guard queue.maxBytes >= queue.minBytes, queue.probability > 0, queue.probability <= 1 else {
            return nil
        }
        // tc's gred default burst: (2 min + max) / (3 avpkt) packets.
        let burst = max(((2 * minimum + maximum) / (3 * avpkt)).rounded(.down), 1)
        // Wlog: the least weight W = 2^-wlog whose average reaches min from
        // empty within `burst` packets (tc_red_eval_ewma).
        let a = burst + 1 - minimum / avpkt
        guard a >= 1 else { return nil }
        var wlog = 1
        var w = 0.5
        while wlog < 32 {
            if a <= (1 - pow(1 - w, burst)) / w { break }
            wlog += 1
            w /= 2
        }
        let bits = UInt32.bitWidth - queue.maxBytes.leadingZeroBitCount
        wlog = min(wlog, 31 - bits)
        guard wlog >= 1 else { return nil }
        // Plog (tc_red_eval_P).
        var plog = 0
        let span = maximum - minimum
        if span > 0 {
            var p = queue.probability / span
            while plog < 32, p <= 1 {
                p *= 2
                plog += 1
            }
            guard plog < 32 else { return nil }
        }
        // Idle damping (tc_red_eval_idle_damping): per cell of 2^clog ticks
        // idle, the average decays as if that many average packets had left.
        let xmit = Double(
            clock.transmissionTicks(
                bytes: UInt64(avpkt), bytesPerSecond: max(queue.bandwidthBytesPerSecond, 1)))
        let lw = -log(1 - 1 / Double(1 << wlog)) / max(xmit, 1)
        let maxTime = 31 / lw
        var clog = 0
        while clog < 32, maxTime / Double(UInt64(1) << clog) >= 512 { clog += 1 }
        guard clog < 32 else { return nil }
        var table = [UInt8](repeating: 31, count: 256)
        table[0] = 0
        for i in 1..<255 { table[i] = UInt8(min(Double(i << clog) * lw, 31)) }
        self.wlog = UInt8(wlog)
        self.plog = UInt8(plog)
        scellLog = UInt8(clog)
        stab = table
        maxP = UInt32(min(queue.probability * 4_294_967_296, Double(UInt32.max)))
    }
}

/// An HTB class's parameters for a request (`struct tc_htb_opt`,
/// `TCA_HTB_RATE64`, `TCA_HTB_CEIL64`).
public struct HTBClassOptions: Hashable, Sendable {
    /// `rate`, bits per second: the guaranteed rate (sent as whole bytes).
    public var rateBitsPerSecond: UInt64
    /// `ceil`, bits per second: the most the class may take by borrowing.
    public var ceilBitsPerSecond: UInt64
    /// `prio`, 0–7: lower is served first.
    public var prio: UInt32
    /// `quantum`, bytes; nil lets the kernel use `rate / r2q` (and warn when
    /// that falls outside 1000–200000).
    public var quantum: UInt32?
    /// `burst`, bytes; nil for `tc`'s default (``PacketSchedulerClock/defaultBurst(bytesPerSecond:mtu:)``).
    public var burstBytes: UInt32?
    /// `cburst`, bytes; nil for `tc`'s default.
    public var cburstBytes: UInt32?
    /// The largest packet the burst must hold, `tc`'s `mtu` (1600 by default).
    public var mtu: UInt32

    /// An HTB class's parameters.
    public init(
        rateBitsPerSecond: UInt64, ceilBitsPerSecond: UInt64? = nil, prio: UInt32 = 0, quantum: UInt32? = nil,
        burstBytes: UInt32? = nil, cburstBytes: UInt32? = nil, mtu: UInt32 = 1600
    ) {
        self.rateBitsPerSecond = rateBitsPerSecond
        self.ceilBitsPerSecond = ceilBitsPerSecond ?? rateBitsPerSecond
        self.prio = prio
        self.quantum = quantum
        self.burstBytes = burstBytes
        self.cburstBytes = cburstBytes
        self.mtu = mtu
    }
}

/// The kernel's counters of a qdisc or class (`TCA_STATS2`).
public struct TrafficStatistics: Hashable, Sendable {
    /// Bytes sent.
    public var bytes: UInt64 = 0
    /// Packets sent.
    public var packets: UInt64 = 0
    /// Packets dropped.
    public var drops: UInt32 = 0
    /// Times the class or qdisc was over its limit (for HTB, throttled).
    public var overlimits: UInt32 = 0
    /// Packets requeued.
    public var requeues: UInt32 = 0
    /// Bytes waiting.
    public var backlogBytes: UInt32 = 0
    /// Packets waiting.
    public var queueLength: UInt32 = 0

    /// Zero counts.
    public init() {}
}

/// One CAKE tin's counters (`TCA_CAKE_STATS_TIN_STATS` in the qdisc's
/// `TCA_STATS_APP`). CAKE counts a packet's bytes and packets when it is
/// queued, not when it leaves, so what it drops later is counted in both
/// `sent` and `dropped`; its packet counters are 32 bits wide and wrap. It
/// reports no per-tin packet backlog and no per-tin overlimits.
public struct CAKETinStatistics: Hashable, Sendable {
    /// Bytes queued into the tin (`SENT_BYTES64`).
    public var sentBytes: UInt64 = 0
    /// Packets queued into the tin (`SENT_PACKETS`).
    public var sentPackets: UInt32 = 0
    /// Packets CAKE dropped from the tin (COBALT's drops and overflow's).
    public var droppedPackets: UInt32 = 0
    /// Packets the ACK filter dropped (none: qosmapd enables no ACK filter).
    public var ackDroppedPackets: UInt32 = 0
    /// Packets marked CE instead of dropped.
    public var ecnMarkedPackets: UInt32 = 0
    /// Bytes waiting.
    public var backlogBytes: UInt32 = 0
    /// The tin's threshold rate, bytes per second.
    public var thresholdRateBytesPerSecond: UInt64 = 0
    /// Flows that found all the ways of their hash set taken.
    public var wayCollisions: UInt32 = 0

    /// Zero counts.
    public init() {}
}

/// A qdisc as the kernel reports it (`RTM_NEWQDISC` in a dump).
public struct QdiscInfo: Hashable, Sendable {
    /// The interface.
    public var ifindex: Int32
    /// The kind: `htb`, `noqueue`, `pfifo_fast`, `mq`, `fq_codel` …
    public var kind: String
    /// Its handle (`0:` for the default qdiscs the kernel attaches).
    public var handle: QdiscHandle
    /// Its parent: ``QdiscHandle/root`` for the root qdisc, a class id for a leaf.
    public var parent: QdiscHandle
    /// Its parameters, for the kinds this module writes; nil for others.
    public var options: QdiscOptions?
    /// Its counters, when the kernel sent them.
    public var statistics: TrafficStatistics?
    /// For a CAKE qdisc, each tin's counters in the order the kernel dumps
    /// them (CAKE's `tin_order`: for diffserv8 tin 0 first, for diffserv4
    /// bulk first); nil for other kinds.
    public var cakeTins: [CAKETinStatistics]? = nil

    /// Whether it is the interface's root qdisc.
    public var isRoot: Bool { parent == .root }
}

/// An HTB class's parameters as the kernel holds them.
public struct HTBClassInfo: Hashable, Sendable {
    /// `rate`, whole bytes per second.
    public var rateBytesPerSecond: UInt64
    /// `ceil`, whole bytes per second.
    public var ceilBytesPerSecond: UInt64
    /// The burst, in the kernel's 64 ns ticks (`buffer`).
    public var bufferTicks: UInt32
    /// The ceil burst, in ticks (`cbuffer`).
    public var cbufferTicks: UInt32
    /// `quantum`, bytes.
    public var quantum: UInt32
    /// `prio`.
    public var prio: UInt32
    /// The level in the tree: 0 for a leaf.
    public var level: UInt32
}

/// A class as the kernel reports it (`RTM_NEWTCLASS` in a dump).
public struct ClassInfo: Hashable, Sendable {
    /// The interface.
    public var ifindex: Int32
    /// The kind of its qdisc: `htb`, `cake` …
    public var kind: String
    /// Its class id.
    public var handle: QdiscHandle
    /// Its parent class, or ``QdiscHandle/root`` under the qdisc itself.
    public var parent: QdiscHandle
    /// The qdisc attached under it (`tcm_info`), if any.
    public var leafQdisc: QdiscHandle?
    /// HTB's parameters, for an HTB class.
    public var htb: HTBClassInfo?
    /// Its counters, when the kernel sent them.
    public var statistics: TrafficStatistics?
}

/// The packet scheduler's clock, from `/proc/net/psched`, as `tc` reads it
/// (`tc_core_init`, `get_hz`): HTB's bursts travel as transmission times in
/// the kernel's ticks, not as bytes.
public struct PacketSchedulerClock: Hashable, Sendable {
    /// Ticks per microsecond (15.625 on every kernel since 2.6.31: 64 ns ticks).
    public var ticksPerMicrosecond: Double
    /// What `tc` calls HZ for its default burst (1e9 with high-resolution timers).
    public var hz: UInt64

    /// A clock with these values.
    public init(ticksPerMicrosecond: Double, hz: UInt64) {
        self.ticksPerMicrosecond = ticksPerMicrosecond
        self.hz = hz
    }

    /// The kernel's: read from `/proc/net/psched`; the values every current
    /// kernel reports (64 ns ticks, 1e9 Hz) when it cannot be read.
    public static var current: PacketSchedulerClock {
        parse(readPsched() ?? "") ?? PacketSchedulerClock(ticksPerMicrosecond: 1_000 / 64, hz: 1_000_000_000)
    }

    /// Parses the four hexadecimal words of `/proc/net/psched`
    /// (`NSEC_PER_USEC`, `PSCHED_TICKS2NS(1)`, 1000000, the timer's Hz) as
    /// `tc` does, with its compatibility rule for a clock resolution of 1e9.
    public static func parse(_ text: String) -> PacketSchedulerClock? {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap {
            UInt64($0, radix: 16)
        }
        guard words.count >= 4, words[1] != 0 else { return nil }
        var t2us = words[0]
        let us2t = words[1]
        let clockResolution = words[2]
        if clockResolution == 1_000_000_000 { t2us = us2t }
        let clockFactor = Double(clockResolution) / 1_000_000
        let hz = clockResolution == 1_000_000 && words[3] != 0 ? words[3] : 100
        return PacketSchedulerClock(ticksPerMicrosecond: Double(t2us) / Double(us2t) * clockFactor, hz: hz)
    }

    /// The ticks to send `bytes` at `bytesPerSecond` (`tc_calc_xmittime`),
    /// rounded up, at most `UInt32.max`.
    public func transmissionTicks(bytes: UInt64, bytesPerSecond: UInt64) -> UInt32 {
        guard bytesPerSecond > 0 else { return .max }
        let ticks = (1_000_000 * ticksPerMicrosecond * Double(bytes) / Double(bytesPerSecond)).rounded(.up)
        return ticks >= Double(UInt32.max) ? .max : UInt32(ticks)
    }

    /// The bytes sent at `bytesPerSecond` in `ticks` (`tc_calc_xmitsize`).
    public func transmissionBytes(ticks: UInt32, bytesPerSecond: UInt64) -> UInt64 {
        UInt64(Double(bytesPerSecond) * Double(ticks) / ticksPerMicrosecond / 1_000_000)
    }

    /// `tc`'s default burst: what the rate sends in one tick of HZ, plus one
    /// `mtu` so that a full packet always fits.
    public func defaultBurst(bytesPerSecond: UInt64, mtu: UInt32) -> UInt64 {
        bytesPerSecond / max(hz, 1) + UInt64(mtu)
    }

    private static func readPsched() -> String? {
        let fd = open("/proc/net/psched", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }
}

/// One key of a u32 filter (`struct tc_u32_key`): the 32-bit word at
/// `offset` bytes from the network header, masked, must equal `value`.
/// Host order here; ``TrafficShaper/addU32Filter(ifindex:parent:priority:etherType:keys:classID:)``
/// sends mask and value big-endian, as the kernel compares them.
public struct U32MatchKey: Hashable, Sendable {
    /// The bits wanted under `mask`.
    public var value: UInt32
    /// The bits compared.
    public var mask: UInt32
    /// The word's offset from the network header (4-aligned).
    public var offset: Int32

    /// A key.
    public init(value: UInt32, mask: UInt32, offset: Int32) {
        self.value = value
        self.mask = mask
        self.offset = offset
    }
}
