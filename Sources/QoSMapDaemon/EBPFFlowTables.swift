import QoSMapCore
import QoSMapPacket

/// The layout of the flow-rule maps of `Bpf/qosmap.bpf.c` (its "Flow rules"
/// section; `QM_*` constants there). A test loads the object and compares.
public enum EBPFFlowLayout {
    /// `QM_MAX_RULES`: rules per slot.
    public static let maxRules = FlowClassifier.maxRules
    /// `QM_MAX_INTERVALS`: address intervals per slot, field and family.
    public static let maxIntervals = FlowClassifier.maxIntervals
    /// `QM_CROSS`: cross-product entries per slot.
    public static let crossEntries = FlowClassifier.maxCrossEntries
    /// `QM_FLOW_SLOTS`: the connection table's slots (``ConnectionTable/slots``).
    public static let flowSlots = ConnectionTable.slots
    /// `QM_RULE_BASE`: where a pair's 24 entries by class × color cell start in `qm_table`.
    public static let ruleBase = 80
    /// `QM_GEN_RULES`: the bit of `qm_gen` that says the active slot has rules.
    public static let genRules: UInt32 = 2
    /// `QM_IDX`: the address index's buckets (then below, above, padding: `QM_IDX_N`).
    public static let indexBuckets = 1024
    /// `QM_IDX_N`: the address index's entries.
    public static let indexEntries = indexBuckets + 4
    /// `QM_IDX_ONE`: the steps (bits 12-15) of an index entry whose bucket
    /// has one class (in bits 16-31); a search takes at most 12.
    public static let indexOneClass: UInt32 = 15
    /// `QM_IDX_TWO`: the steps of an index entry whose bucket has two
    /// classes, one interval start inside it (its key in the bucket's
    /// `isplit`): bits 16-31 the class below that key, bits 0-11 the class
    /// from it.
    public static let indexTwoClass: UInt32 = 14
    /// `QM_FOLD4`, `QM_FOLD6`: where `qm_fconf.skip` holds each family's
    /// address fold (1: the source's classes are the address stage's
    /// results, 2: the destination's).
    public static let foldShift: (v4: UInt32, v6: UInt32) = (6, 8)
    /// `QM_FUSE`: the bit of `qm_fconf.skip` that says stages 0 and 5 are
    /// one table at `fbase` (``EBPFFlowTables/fused(_:)``).
    public static let fuseBit: UInt32 = 10
    /// `QM_RCELL`: the bit of `qm_fconf.skip` that says the final stage's
    /// results carry the rule's cell in bits ``cellShift``-15 above rule + 1
    /// (``EBPFFlowTables/cellCarried(_:ingress:track:)``): the program then does not wait
    /// for the rule's byte.
    public static let cellBit: UInt32 = 11
    /// `QM_RCELL_SHIFT`: where a carried cell starts (rule + 1 below it).
    public static let cellShift: UInt32 = 11
}

/// The address search's index (`QM_IDX_ENTRY` in `Bpf/qosmap.bpf.c`) over
/// sorted keys (IPv4 addresses, or IPv6 high halves): a window of
/// ``EBPFFlowLayout/indexBuckets`` buckets of 2^`shift` keys from `base`, then
/// one entry for keys below it and one for keys above. An entry is the
/// index of the last key not above the bucket's least key (bits 0-11) and
/// the steps that find the last key not above any key of the bucket (bits
/// 12-15). Where every address of the bucket has one class (no interval
/// starts inside it), the steps are ``EBPFFlowLayout/indexOneClass`` and
/// bits 16-31 hold that class: the program then neither searches nor waits
/// for a second load. Where one start lies inside it (a prefix's end: a /64
/// at the start of its bucket, say), the steps are
/// ``EBPFFlowLayout/indexTwoClass``: the class below it in bits 16-31, the
/// class from it in bits 0-11, its key in `splits` (a load beside the
/// entry's, not after it). The window is the one of least worst, then
/// total, steps.
struct EBPFAddressIndex: Equatable {
    /// The window's first key.
    var base: UInt64 = 0
    /// log2 of a bucket's keys.
    var shift: UInt32 = 0
    /// The entries (``EBPFFlowLayout/indexEntries``).
    var entries = [UInt32](repeating: 0, count: EBPFFlowLayout.indexEntries)
    /// By bucket: the key of the start inside a two-class bucket (else 0).
    var splits = [UInt64](repeating: 0, count: EBPFFlowLayout.indexBuckets)

    /// The index of `keys` (sorted; the first 0) of `width` bits (32 or 64),
    /// searched in a table of `slots` keys (the rest above every key).
    /// `classes`: each key's interval class. `lows`: for IPv6, each start's
    /// low half (a start whose high half is a bucket's least key but whose
    /// low half is not 0 lies inside that bucket).
    init(
        _ keys: [UInt64], classes: [UInt16], lows: [UInt64]? = nil, width: Int,
        slots: Int = EBPFFlowLayout.maxIntervals
    ) {
        let n = keys.count
        guard n > 1 else { return }
        let k = EBPFFlowLayout.indexBuckets.trailingZeroBitCount
        // The index of the last key not above `x` (keys[0] is 0).
        func last(_ x: UInt64) -> Int {
            var lo = 0
            var hi = n - 1
            while lo < hi {
                let mid = (lo + hi + 1) >> 1
                if keys[mid] <= x { lo = mid } else { hi = mid - 1 }
            }
            return lo
        }
        // The entry for keys low...high, whose candidates are first...through:
        // the search starts at first and reaches first + 2^steps - 1, which
        // must stay in the table (an earlier start is as right: its key is not
        // above either). One class when no start lies inside the addresses
        // low...high: none after `first` up to `high`, and `first`'s own at or
        // below the range's first address. Two classes (a bucket's entry
        // only, `two`) when one start lies inside, at a key whose low half is
        // 0 (the high half then decides), with a class that fits 12 bits.
        func entry(_ first: Int, _ through: Int, low: UInt64, two: Bool = false) -> (UInt32, Int, UInt64) {
            var steps = 0
            while (1 << steps) < through - first + 1 { steps += 1 }
            let from = min(first, slots - (1 << steps))
            let inside = keys[first] == low && (lows?[first] ?? 0) != 0
            if first == through, !inside {
                return (EBPFFlowLayout.indexOneClass << 12 | UInt32(classes[first]) << 16, 0, 0)
            }
            if two, through == first + 1, !inside, (lows?[through] ?? 0) == 0, classes[through] < 1 << 12 {
                let e =
                    EBPFFlowLayout.indexTwoClass << 12 | UInt32(classes[first]) << 16
                    | UInt32(classes[through])
                return (e, 0, keys[through])
            }
            return (UInt32(from) | UInt32(steps) << 12, steps, 0)
        }
        let top: UInt64 = width == 64 ? .max : (1 << UInt64(width)) - 1
        var best: (worst: Int, total: Int)?
        for shift in 0...(width - k) {
            let span = UInt64(1) << UInt64(shift)
            // The window from keys[1]'s bucket, moved down to end at the top.
            var base = keys[1] & ~(span - 1)
            if shift + k < width {
                let size = span << UInt64(k)
                base = min(base, top - size + 1)
            } else {
                base = 0
            }
            var e = [UInt32](repeating: 0, count: EBPFFlowLayout.indexEntries)
            var split = [UInt64](repeating: 0, count: EBPFFlowLayout.indexBuckets)
            var worst = 0
            var total = 0
            for b in 0..<EBPFFlowLayout.indexBuckets {
                let low = base + UInt64(b) * span
                let (v, s, k) = entry(last(low), last(low + (span - 1)), low: low, two: true)
                e[b] = v
                split[b] = k
                worst = max(worst, s)
                total += s
            }
            let end = base &+ (span << UInt64(k))
            let none = (UInt32(0), 0, UInt64(0))  // no keys there
            let below = base == 0 ? none : entry(0, last(base - 1), low: 0)
            let above = shift + k >= width || end > top ? none : entry(last(end), last(top), low: end)
            e[EBPFFlowLayout.indexBuckets] = below.0
            e[EBPFFlowLayout.indexBuckets + 1] = above.0
            worst = max(worst, below.1, above.1)
            total += below.1 + above.1
            if best.map({ worst < $0.worst || (worst == $0.worst && total < $0.total) }) ?? true {
                best = (worst, total)
                self.base = base
                self.shift = UInt32(shift)
                entries = e
                splits = split
            }
        }
    }

    /// `base`, `shift`, a pad word, the splits and the entries, as the
    /// struct holds them (host order, as ``EBPFFlowTables/body``).
    var bytes: [UInt8] {
        withUnsafeBytes(of: base) { Array($0) } + withUnsafeBytes(of: shift) { Array($0) } + [0, 0, 0, 0]
            + splits.withUnsafeBytes { Array($0) } + entries.withUnsafeBytes { Array($0) }
    }
}

/// `struct qm_fconf`, the head of a slot's `struct qm_fslot`.
struct EBPFFlowConfig: BitwiseCopyable, Equatable {
    var track: UInt32 = 0
    var epoch: UInt32 = 0
    /// Interval counts: source v4, destination v4, source v6, destination v6.
    var n: (UInt32, UInt32, UInt32, UInt32) = (0, 0, 0, 0)
    var base: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) = (0, 0, 0, 0, 0, 0)
    var width: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) = (0, 0, 0, 0, 0, 0)
    /// The class of every address where the count in `n` is 1 (the program
    /// then neither searches nor reads `qm_faddr*`).
    var addr0: (UInt16, UInt16, UInt16, UInt16) = (0, 0, 0, 0)
    /// 1 when some rule has `dns:`: the program reads `qm_fdns4`/`qm_fdns6`.
    var dns: UInt32 = 0
    /// Base and width of ``FlowClassifier/addressesDNS`` in the cross tables.
    var dbase: UInt32 = 0
    var dwidth: UInt32 = 0
    /// Base of ``FlowClassifier/dnsClass`` (by group mask) in the cross tables.
    var dclass: UInt32 = 0
    /// Bit k: cross table k is the identity in its row input
    /// (``CrossTable/isRowIdentity``); the program then takes the row class
    /// as the stage's result without reading the table. Then, at
    /// ``EBPFFlowLayout/foldShift``, each family's address fold (``EBPFFlowTables/fold(_:_:_:)``),
    /// and the bits ``EBPFFlowLayout/fuseBit`` and ``EBPFFlowLayout/cellBit``.
    var skip: UInt32 = 0
    /// With ``EBPFFlowLayout/fuseBit``: where the fused stages 0 and 5 start
    /// in the cross tables.
    var fbase: UInt32 = 0

    static func == (a: Self, b: Self) -> Bool {
        a.track == b.track && a.epoch == b.epoch && a.n == b.n && a.base == b.base && a.width == b.width
            && a.addr0 == b.addr0 && a.dns == b.dns && a.dbase == b.dbase && a.dwidth == b.dwidth
            && a.dclass == b.dclass && a.skip == b.skip && a.fbase == b.fbase
    }
}

extension CrossTable {
    /// One column and `table[i] == i` for every row `i`: the stage's result
    /// is its row input (the column's class is always 0). Read from the
    /// contents, not assumed from the rules: with one source-port class,
    /// say, the ports stage is the identity only while the classes keep
    /// their numbering.
    var isRowIdentity: Bool {
        width == 1 && table.count == rows
            && table.indices.allSatisfy { table[$0] == UInt16(truncatingIfNeeded: $0) }
    }
}

/// A rule's row of `qm_fslot.rule`: its class × color cell by ingress
/// policy, and whether it keeps its connection.
struct EBPFRule {
    /// `Treatment.cellIndex` by ingress policy (``EBPFLayout/maxIngress``).
    var cell = [UInt8](repeating: 0, count: EBPFLayout.maxIngress)
    var connection = false
    /// `QM_R_CONN`: in a row's byte, the rule keeps its connection.
    static let connectionBit: UInt8 = 0x80

    /// The row as the map holds it: each cell with ``connectionBit``.
    var bytes: [UInt8] { cell.map { $0 | (connection ? Self.connectionBit : 0) } }
}

/// `struct qm_rcount`: one CPU's packets and bytes for a rule.
struct EBPFRuleCount: BitwiseCopyable {
    var packets: UInt64
    var bytes: UInt64
}

/// A snapshot's flow rules (``FlowRuntime``) as the contents of the
/// classifier's `qm_f*` maps for one slot: the same ``FlowClassifier`` the
/// nfqueue path runs, so both decide with the same tables.
struct EBPFFlowTables: Sendable {
    var config = EBPFFlowConfig()
    /// `struct qm_fslot` after its config: class by protocol, by DSCP, by
    /// source port, by destination port, then the six cross tables
    /// (`QM_CROSS` entries, the rest 0), u16 in host order as the map holds them.
    var body: [UInt8]
    /// `struct qm_faddr4` for source, destination (`qm_fslot.a4`).
    var addresses4: [[UInt8]]
    /// `struct qm_faddr6` for source, destination (`qm_fslot.a6`).
    var addresses6: [[UInt8]]
    /// `qm_fslot.rule`'s rows, from rule 0.
    var rules: [EBPFRule]
    /// The rules' names (the counters' labels).
    var names: [String]
    /// The flow rules' ingress class by interface name (written in the high
    /// half of the interface's ingress policy word).
    var ingressClass: [String: UInt16]

    /// Compiles `flows` for ingress policies `ins` (``EBPFTables``' order).
    init(_ flows: FlowRuntime, ingress ins: [MarkingPolicy]) {
        let c = flows.classifier
        // The classifier searches all 4,096 starts: the padding is all-ones
        // with the last interval's class, so an address at or above the last
        // start gets that class wherever the search ends.
        func padded(_ a: AddressIntervals, _ v6: Bool) -> (starts: [IPAddress], classes: [UInt16]) {
            let n = EBPFFlowLayout.maxIntervals - a.starts.count
            let top = IPAddress(ipv6: v6, high: v6 ? .max : 0, low: v6 ? .max : 0xFFFF_FFFF)
            return (
                a.starts + Array(repeating: top, count: n),
                a.classes + Array(repeating: a.classes.last ?? 0, count: n)
            )
        }
        func v4(_ unpadded: AddressIntervals) -> [UInt8] {
            let a = padded(unpadded, false)
            var b = [UInt8](repeating: 0, count: EBPFLayoutSizes.faddr4)
            for (i, s) in a.starts.enumerated() {
                let x = UInt32(truncatingIfNeeded: s.low)
                for k in 0..<4 { b[i * 4 + k] = UInt8(truncatingIfNeeded: x >> UInt32(8 * k)) }
            }
            let cls = 4 * EBPFFlowLayout.maxIntervals
            for (i, v) in a.classes.enumerated() {
                b[cls + 2 * i] = UInt8(v & 0xff)
                b[cls + 2 * i + 1] = UInt8(v >> 8)
            }
            let index = EBPFAddressIndex(
                unpadded.starts.map { $0.low & 0xFFFF_FFFF }, classes: unpadded.classes, width: 32
            ).bytes
            b.replaceSubrange((cls + 2 * EBPFFlowLayout.maxIntervals + 8)..., with: index)
            return b
        }
        func v6(_ unpadded: AddressIntervals) -> [UInt8] {
            let a = padded(unpadded, true)
            var b = [UInt8](repeating: 0, count: EBPFLayoutSizes.faddr6)
            let lo = 8 * EBPFFlowLayout.maxIntervals
            for (i, s) in a.starts.enumerated() {
                for k in 0..<8 {
                    b[i * 8 + k] = UInt8(truncatingIfNeeded: s.high >> UInt64(8 * k))
                    b[lo + i * 8 + k] = UInt8(truncatingIfNeeded: s.low >> UInt64(8 * k))
                }
            }
            let cls = 16 * EBPFFlowLayout.maxIntervals
            for (i, v) in a.classes.enumerated() {
                b[cls + 2 * i] = UInt8(v & 0xff)
                b[cls + 2 * i + 1] = UInt8(v >> 8)
            }
            let index = EBPFAddressIndex(
                unpadded.starts.map(\.high), classes: unpadded.classes, lows: unpadded.starts.map(\.low),
                width: 64
            ).bytes
            b.replaceSubrange((cls + 2 * EBPFFlowLayout.maxIntervals + 8)..., with: index)
            return b
        }
        // The address stage folded, per family, into the field that varies
        // where the other has one class: its classes become the stage's
        // results, and the program reads no cross table for the addresses
        // (a dependent load fewer on the way to the rule).
        let (source4, destination4, fold4) = Self.fold(c.source4, c.destination4, c.addresses)
        let (source6, destination6, fold6) = Self.fold(c.source6, c.destination6, c.addresses)
        addresses4 = [v4(source4), v4(destination4)]
        addresses6 = [v6(source6), v6(destination6)]
        config.n = (
            UInt32(source4.starts.count), UInt32(destination4.starts.count),
            UInt32(source6.starts.count), UInt32(destination6.starts.count)
        )
        config.addr0 = (
            source4.classes[0], destination4.classes[0], source6.classes[0], destination6.classes[0]
        )
        config.skip |= fold4 << EBPFFlowLayout.foldShift.v4 | fold6 << EBPFFlowLayout.foldShift.v6
        var all: [UInt16] = []
        var bases: [UInt32] = []
        var widths: [UInt32] = []
        for (k, t) in c.crossTables.enumerated() {
            if t.isRowIdentity { config.skip |= 1 << UInt32(k) }
            bases.append(UInt32(all.count))
            widths.append(UInt32(t.width))
            all += t.table
        }
        config.base = (bases[0], bases[1], bases[2], bases[3], bases[4], bases[5])
        config.width = (widths[0], widths[1], widths[2], widths[3], widths[4], widths[5])
        if c.dnsClass.count > 1 {
            // dns: rules: (addresses, dns) and the class by mask after the six.
            config.dns = 1
            config.dbase = UInt32(all.count)
            config.dwidth = UInt32(c.addressesDNS.width)
            all += c.addressesDNS.table
            config.dclass = UInt32(all.count)
            all += c.dnsClass
        }
        if let f = Self.fused(c.crossTables), all.count + f.count <= EBPFFlowLayout.crossEntries {
            config.fbase = UInt32(all.count)
            config.skip |= 1 << EBPFFlowLayout.fuseBit
            all += f
        }
        config.track = flows.connections == nil ? 0 : 1
        rules = flows.rules.map { rule in
            var r = EBPFRule()
            r.connection = rule.connection
            for (i, p) in ins.enumerated() where i < EBPFLayout.maxIngress {
                r.cell[i] = UInt8(rule.action.treatment(ingress: p.ingress).cellIndex)
            }
            return r
        }
        var protocolClass = c.protocolClass
        if let cells = Self.cellCarried(
            rules, ingress: min(ins.count, EBPFLayout.maxIngress), track: config.track)
        {
            // The final stage's results (the last stage the program reads:
            // the fused table, else 5, 4, 1, 0, else the protocol's classes)
            // with each rule's cell above rule + 1.
            func carry(_ v: UInt16) -> UInt16 {
                v == 0 || Int(v) > cells.count ? v : v | UInt16(cells[Int(v) - 1]) << EBPFFlowLayout.cellShift
            }
            let skip = config.skip
            let final = [5, 4, 1, 0].first { skip >> UInt32($0) & 1 == 0 }
            let range: Range<Int>? =
                skip >> EBPFFlowLayout.fuseBit & 1 == 1
                ? Int(config.fbase)..<all.count
                : final.map { Int(bases[$0])..<Int(bases[$0]) + c.crossTables[$0].table.count }
            if let range {
                for i in range { all[i] = carry(all[i]) }
            } else {
                protocolClass = protocolClass.map(carry)
            }
            config.skip |= 1 << EBPFFlowLayout.cellBit
        }
        all += [UInt16](repeating: 0, count: EBPFFlowLayout.crossEntries - all.count)
        let classes =
            protocolClass + c.dscpClass + c.sourcePortClass + c.destinationPortClass + all
        body = classes.withUnsafeBytes { Array($0) }
        names = flows.rules.map(\.name)
        ingressClass = c.ingressClass
    }

    /// The slot's whole `struct qm_fslot` value: `config` (with the epoch
    /// the caller gives), the class tables, the address intervals and the
    /// rules' rows, padded to ``EBPFLayoutSizes/fslot``.
    func slotValue(epoch: UInt32) -> [UInt8] {
        var c = config
        c.epoch = epoch
        var b = withUnsafeBytes(of: c) { Array($0) } + body
        b.reserveCapacity(EBPFLayoutSizes.fslot)
        b += [UInt8](repeating: 0, count: EBPFLayoutSizes.addresses - b.count)
        for a in addresses4 + addresses6 { b += a }
        for r in rules.prefix(EBPFFlowLayout.maxRules) { b += r.bytes }
        b += [UInt8](repeating: 0, count: EBPFLayoutSizes.fslot - b.count)
        return b
    }

    /// Each rule's cell, where the final stage's results can carry it
    /// (``EBPFFlowLayout/cellBit``): rule + 1 fits below
    /// ``EBPFFlowLayout/cellShift``, the cell is the same for every ingress
    /// policy (no `dscp:` action that the ingress domains classify apart),
    /// and whether a matched packet's connection is recorded is the same
    /// for every rule (`track` then says it). Else nil: the program reads the
    /// rule's byte (`qm_fslot.rule`) as before.
    static func cellCarried(_ rules: [EBPFRule], ingress n: Int, track: UInt32) -> [UInt8]? {
        guard rules.count < 1 << EBPFFlowLayout.cellShift, n > 0 else { return nil }
        var cells: [UInt8] = []
        cells.reserveCapacity(rules.count)
        for r in rules {
            let cell = r.cell[0]
            guard r.cell[1..<n].allSatisfy({ $0 == cell }), r.connection == (track != 0),
                cell < 1 << (16 - EBPFFlowLayout.cellShift)
            else { return nil }
            cells.append(cell)
        }
        return cells
    }

    /// Stages 0 and 5 as one table, by (protocol class × destination-port
    /// class) row and address class column: stage 5 of stage 0's result.
    /// Only where stages 1 (source ports) and 4 (arrival) are identities, so
    /// that stage 0's result is stage 5's row, and neither 0 nor 5 is (else
    /// the chain has one table already): the program then reads one table
    /// where it read two in a row.
    static func fused(_ t: [CrossTable]) -> [UInt16]? {
        guard t.count == 6, t[1].isRowIdentity, t[4].isRowIdentity, !t[0].isRowIdentity, !t[5].isRowIdentity
        else { return nil }
        var f: [UInt16] = []
        f.reserveCapacity(t[0].table.count * t[5].width)
        for x in t[0].table { f += t[5].table[Int(x) * t[5].width..<(Int(x) + 1) * t[5].width] }
        return f
    }

    /// One family's source and destination intervals with the address stage
    /// `stage` folded into the one that varies, and the fold's code
    /// (`QM_FOLD4`/`QM_FOLD6`): 2, the destination's classes are now the
    /// stage's results (the source has one class); 1, the source's (the
    /// destination has one); 0, neither varies alone, nothing folded.
    static func fold(
        _ source: AddressIntervals, _ destination: AddressIntervals, _ stage: CrossTable
    ) -> (AddressIntervals, AddressIntervals, UInt32) {
        var s = source
        var d = destination
        if source.starts.count <= 1 {
            d.classes = destination.classes.map { stage.at(source.classes[0], $0) }
            return (s, d, 2)
        }
        if destination.starts.count <= 1 {
            s.classes = source.classes.map { stage.at($0, destination.classes[0]) }
            return (s, d, 1)
        }
        return (s, d, 0)
    }
}

/// The sizes of the big map values, as the C structs have them.
enum EBPFLayoutSizes {
    /// `struct qm_faddr4`: u32 starts, u16 classes, then the `zero` and `pad`
    /// words, then the index (``EBPFAddressIndex/bytes``).
    static let faddr4 = 6 * EBPFFlowLayout.maxIntervals + 8 + index
    /// `struct qm_faddr6`: u64 high halves, u64 low halves, u16 classes, `zero`, `pad`, the index.
    static let faddr6 = 18 * EBPFFlowLayout.maxIntervals + 8 + index
    /// The index: `ibase`, `ishift`, `ipad`, `isplit` (u64 by bucket), `idx` (u32 entries).
    static let index = 16 + 8 * EBPFFlowLayout.indexBuckets + 4 * EBPFFlowLayout.indexEntries
    /// `struct qm_fslot`: the config, then u16 classes by protocol, DSCP,
    /// source and destination port, the cross tables, the addresses
    /// (`qm_faddr4` source, destination, then `qm_faddr6`'s) and a row of
    /// ``EBPFLayout/maxIngress`` bytes per rule (``EBPFRule/bytes``).
    static let fslot = addresses + 2 * faddr4 + 2 * faddr6 + EBPFFlowLayout.maxRules * EBPFLayout.maxIngress
    /// Where `qm_fslot.a4` starts: after the class tables, 8-aligned (the
    /// address structs hold u64).
    static let addresses =
        (MemoryLayout<EBPFFlowConfig>.size + 2 * (256 + 64 + 2 * 65536 + EBPFFlowLayout.crossEntries) + 7)
        & ~7
}
