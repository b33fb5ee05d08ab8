import Foundation
import QoSMapCore
import SystemPackage
import Testing

@testable import TrafficShaping

// The kernel tests build on veth pairs of their own in the current network
// namespace (names qmts<tag><pid>, removed afterwards) and read what they
// built back with iproute2's `tc` and `ip`, which share no code with the
// module under test.

let isRoot = geteuid() == 0

/// Runs `tool` (found in /usr/sbin, /sbin or /usr/bin) and returns its exit
/// status and output.
@discardableResult
func run(_ tool: String, _ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
    let path = ["/usr/sbin/", "/sbin/", "/usr/bin/"].map { $0 + tool }.first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try #require(path, "\(tool) is not installed"))
    process.arguments = arguments
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    let errData = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (
        process.terminationStatus, String(decoding: outData, as: UTF8.self),
        String(decoding: errData, as: UTF8.self)
    )
}

/// ``run(_:_:)`` with the arguments listed.
@discardableResult
func run(_ tool: String, _ arguments: String...) throws -> (status: Int32, out: String, err: String) {
    try run(tool, arguments)
}

/// A veth pair, both ends up, deleted when released.
final class VethPair {
    let name: String
    let ifindex: Int32

    init(_ tag: String) throws {
        name = "qmts\(tag)\(getpid())"
        _ = try? run("ip", "link", "del", name)  // left over from a killed run
        let created = try run("ip", "link", "add", name, "type", "veth", "peer", "name", name + "p")
        try #require(created.status == 0, "ip link add: \(created.err)")
        try run("ip", "link", "set", name, "up")
        try run("ip", "link", "set", name + "p", "up")
        ifindex = try #require(TrafficShaper.ifindex(named: name))
    }

    deinit { _ = try? run("ip", "link", "del", name) }

    /// `tc -j qdisc show dev NAME`.
    func tcQdiscs() throws -> [[String: Any]] {
        let shown = try run("tc", "-j", "qdisc", "show", "dev", name)
        try #require(shown.status == 0, "tc qdisc show: \(shown.err)")
        return try #require(
            try JSONSerialization.jsonObject(with: Data(shown.out.utf8)) as? [[String: Any]], "\(shown.out)")
    }

    /// `tc -d class show dev NAME`, one dictionary per class: the words after
    /// each of tc's keys (`tc` 6.1 has no JSON for classes).
    func tcClasses() throws -> [String: [String: String]] {
        let shown = try run("tc", "-d", "class", "show", "dev", name)
        try #require(shown.status == 0, "tc class show: \(shown.err)")
        var classes: [String: [String: String]] = [:]
        for line in shown.out.split(separator: "\n") where line.hasPrefix("class ") {
            let words = line.split(separator: " ").map(String.init)
            var fields: [String: String] = ["kind": words[1]]
            var index = 3
            while index < words.count {
                if words[index] == "root" {
                    fields["parent"] = "root"
                    index += 1
                } else if index + 1 < words.count {
                    fields[words[index]] = words[index + 1]
                    index += 2
                } else {
                    index += 1
                }
            }
            classes[words[2]] = fields
        }
        return classes
    }
}

/// The qdisc kinds this kernel has, tried with `tc` on a veth pair of their own.
let kernelKinds: Set<String> = {
    guard isRoot, let veth = try? VethPair("K") else { return [] }
    var kinds: Set<String> = []
    for (kind, words) in [("fq_codel", ["fq_codel"]), ("cake", ["cake"])] {
        let added = try? run("tc", (["qdisc", "add", "dev", veth.name, "root", "handle", "9:"] + words))
        if added?.status == 0 { kinds.insert(kind) }
        _ = try? run("tc", "qdisc", "del", "dev", veth.name, "root")
    }
    return kinds
}()

/// A rate as `tc` prints it (iproute2's `print_color_rate`): bits, divided
/// by 1000 while it is at least 1000 and either divisible or at least a
/// million, with K, M, G, T.
func tcRateText(bytesPerSecond: UInt64) -> String {
    var rate = bytesPerSecond << 3
    let units = ["", "K", "M", "G", "T"]
    var unit = 0
    while unit < units.count - 1 {
        if rate < 1_000 || (rate % 1_000 != 0 && rate < 1_000_000) { break }
        rate /= 1_000
        unit += 1
    }
    return "\(rate)\(units[unit])bit"
}

/// The kernel's message for a refused `tc` command: its `Error: …` line
/// without the prefix and the full stop `tc` adds.
func tcKernelMessage(_ stderr: String) -> String? {
    guard let line = stderr.split(separator: "\n").first(where: { $0.hasPrefix("Error: ") }) else {
        return nil
    }
    var message = line.dropFirst("Error: ".count)
    if message.hasSuffix(".") { message = message.dropLast() }
    return String(message)
}

/// Builds `plan` on `ifindex` with `leaves`, as qosmapd will: the HTB qdisc,
/// the classes parents first, a leaf qdisc under every service class.
func build(_ plan: HTBPlan, leaves: [ServiceClass: LeafQueue], on ifindex: Int32, with shaper: TrafficShaper)
    throws
{
    try shaper.setQdisc(
        .htb(HTBQdiscOptions(defaultClass: plan.defaultClass.minor, rateToQuantum: plan.r2q)),
        ifindex: ifindex,
        parent: .root, handle: QdiscHandle(rawValue: plan.handle.rawValue))
    for node in plan.classes {
        try shaper.setHTBClass(
            HTBClassOptions(
                rateBitsPerSecond: node.rate.bitsPerSecond, ceilBitsPerSecond: node.ceil.bitsPerSecond,
                prio: node.prio, quantum: node.quantum),
            ifindex: ifindex, classID: QdiscHandle(rawValue: node.id.rawValue),
            parent: QdiscHandle(rawValue: node.parent.rawValue))
    }
    for serviceClass in ServiceClass.allCases {
        let options: QdiscOptions
        switch leaves[serviceClass]! {
        case .bfifo(let limit): options = .bfifo(limitBytes: limit)
        case .fqCodel(let codel):
            options = .fqCodel(
                FQCodelOptions(
                    targetMicroseconds: codel.targetMicroseconds,
                    intervalMicroseconds: codel.intervalMicroseconds,
                    ecn: codel.ecn))
        case .gred: throw Errno.notSupported  // GRED is modelled, not built
        }
        try shaper.setQdisc(
            options, ifindex: ifindex, parent: QdiscHandle(rawValue: plan.leaf(serviceClass).id.rawValue),
            handle: QdiscHandle(rawValue: plan.leafQdiscHandle(serviceClass).rawValue))
    }
}

/// The issue's default tree at 20 Mbit/s.
let plan20 = try! QueueConfig(rate: Rate(bitsPerSecond: 20_000_000)).htbPlan(.egress)!

@Suite("TrafficShaping: messages")
struct TrafficShapingMessageTests {
    @Test func pschedIsReadAsTcReadsIt() throws {
        // What every kernel since 2.6.31 writes, with high-resolution timers.
        let clock = try #require(PacketSchedulerClock.parse("000003e8 00000040 000f4240 3b9aca00\n"))
        #expect(clock.ticksPerMicrosecond == 15.625 && clock.hz == 1_000_000_000)
        // 1600 bytes at 1 Mbit/s take 12.8 ms: 200,000 ticks of 64 ns.
        #expect(clock.transmissionTicks(bytes: 1_600, bytesPerSecond: 125_000) == 200_000)
        #expect(clock.transmissionBytes(ticks: 200_000, bytesPerSecond: 125_000) == 1_600)
        #expect(clock.defaultBurst(bytesPerSecond: 125_000, mtu: 1_600) == 1_600)
        #expect(PacketSchedulerClock.parse("garbage") == nil)
        // A kernel without high-resolution timers: tc falls back to HZ 100.
        #expect(try #require(PacketSchedulerClock.parse("000003e8 00000040 000f4240 00000064")).hz == 100)
    }

    @Test func redParametersAreTcs() throws {
        // Worked by hand with iproute2's formulas: burst (2·5000 + 20000) /
        // 3000 = 10 packets; a = 10 + 1 − 5 = 6; (1 − (1 − W)^10) / W reaches
        // 6 first at W = 1/16 (7.61; 5.90 at 1/8): Wlog 4. P 0.1 / 15000 is
        // above 1 after 18 doublings: Plog 18. 1000 bytes at 500 kB/s are
        // 31250 ticks; 31 / (−ln(15/16) / 31250) = 1.5e7 ticks is below 512
        // cells of 2^15: Scell_log 15.
        let clock = PacketSchedulerClock(ticksPerMicrosecond: 15.625, hz: 1_000_000_000)
        let queue = GREDVirtualQueue(
            dp: 2, minBytes: 5_000, maxBytes: 20_000, limitBytes: 50_000, probability: 0.1,
            bandwidthBytesPerSecond: 500_000)
        let red = try #require(REDParameters(queue, clock: clock))
        #expect(red.wlog == 4 && red.plog == 18 && red.scellLog == 15)
        #expect(red.maxP == 429_496_729)
        #expect(red.stab.count == 256 && red.stab[0] == 0 && red.stab[255] == 31)
        #expect(red.stab.allSatisfy { $0 < 32 })
        // A minimum the burst cannot reach, and max below min: no parameters.
        var bad = queue
        bad.maxBytes = 4_000
        #expect(REDParameters(bad, clock: clock) == nil)
        // Thresholds so large that the kernel's fixed point would overflow:
        // Wlog shrinks so that fls(max) + Wlog stays below 32.
        let big = GREDVirtualQueue(
            dp: 0, minBytes: 40_000_000, maxBytes: 80_000_000, limitBytes: 100_000_000, probability: 0.1,
            bandwidthBytesPerSecond: 125_000_000)
        let wide = try #require(REDParameters(big, clock: clock))
        #expect(Int(wide.wlog) + (32 - UInt32(80_000_000).leadingZeroBitCount) < 32)
    }

    @Test func gredLeavesRankColorsByDropPrecedence() {
        let leaf = GREDLeaf(drainRate: Rate(bitsPerSecond: 4_000_000))
        #expect(leaf.limitBytes == 50_000 && leaf.drainBytesPerSecond == 500_000)
        let t = leaf.thresholds
        #expect(t.map(\.color) == [.green, .yellow, .red])
        // Red starts dropping first and is all dropped first; green last.
        #expect(t[2].minBytes < t[1].minBytes && t[1].minBytes < t[0].minBytes)
        #expect(t[2].maxBytes < t[1].maxBytes && t[1].maxBytes < t[0].maxBytes)
        #expect(t.allSatisfy { $0.maxBytes < leaf.limitBytes })
        // Each color's parameters exist at this rate.
        let clock = PacketSchedulerClock(ticksPerMicrosecond: 15.625, hz: 1_000_000_000)
        for threshold in t {
            let queue = GREDVirtualQueue(
                dp: threshold.color.rawValue, minBytes: threshold.minBytes, maxBytes: threshold.maxBytes,
                limitBytes: leaf.limitBytes, probability: 0.1,
                bandwidthBytesPerSecond: leaf.drainBytesPerSecond)
            #expect(REDParameters(queue, clock: clock) != nil, "\(threshold.color)")
        }
    }

    @Test func htbParametersAreLaidOutAsTcHtbOpt() throws {
        let clock = PacketSchedulerClock(ticksPerMicrosecond: 15.625, hz: 1_000_000_000)
        let shaper = try TrafficShaper(clock: clock)
        let bytes = shaper.htbParameters(
            HTBClassOptions(
                rateBitsPerSecond: 8_000_000, ceilBitsPerSecond: 80_000_000_000, prio: 3, quantum: 4_560)
        ).bytes
        #expect(bytes.count == 44)
        func u32(_ offset: Int) -> UInt32 {
            bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
        }
        #expect(bytes[0] == 3 && bytes[1] == 1)  // cell_log for mtu 1600, TC_LINKLAYER_ETHERNET
        #expect(u32(8) == 1_000_000)  // rate.rate, bytes per second
        #expect(u32(20) == UInt32.max)  // ceil.rate saturated: 10 GB/s travels in TCA_HTB_CEIL64
        #expect(u32(24) == clock.transmissionTicks(bytes: 1_600, bytesPerSecond: 1_000_000))  // buffer
        #expect(u32(28) == clock.transmissionTicks(bytes: 1_610, bytesPerSecond: 10_000_000_000))  // cbuffer
        #expect(u32(32) == 4_560 && u32(36) == 0 && u32(40) == 3)  // quantum, level, prio
    }

    @Test func errorsNameTheRequestTheInterfaceAndTheKernelsWords() {
        let error = TrafficShapingError(
            operation: .newQdisc, errno: .fileExists, subject: "htb 1:", ifindex: 5,
            kernelMessage: "Exclusivity flag on, cannot modify")
        #expect(
            error.description
                == "RTM_NEWQDISC htb 1: on ifindex 5: File exists (errno 17): Exclusivity flag on, cannot modify"
        )
        #expect(
            TrafficShapingError(operation: .deleteLink, errno: .operationNotSupportedByDevice, ifindex: 9)
                .description
                == "RTM_DELLINK on ifindex 9: No such device (errno 19)")
    }

    @Test func handlesPrintAsTcDoes() {
        #expect(QdiscHandle(major: 1, minor: 0x10).description == "1:10")
        #expect(QdiscHandle(major: 0x8001).description == "8001:")
        #expect(QdiscHandle.root.description == "root")
    }
}

@Suite(
    "TrafficShaping: the kernel",
    .enabled(if: isRoot, "needs root (CAP_NET_ADMIN): creates veth pairs, qdiscs, classes and an IFB"))
struct TrafficShapingKernelTests {
    @Test func listsTheDefaultRootQdiscAsTcDoes() throws {
        let veth = try VethPair("a")
        let shaper = try TrafficShaper()
        let mine = try shaper.qdiscs(ifindex: veth.ifindex)
        let tcs = try veth.tcQdiscs()
        #expect(mine.count == tcs.count)
        let root = try #require(mine.first { $0.isRoot })
        #expect(root.kind == tcs.first { $0["root"] as? Bool == true }?["kind"] as? String)
        #expect(root.handle == .unspecified && root.options == nil)
    }

    @Test func buildsTheIssuesTreeAndReadsItBack() throws {
        let veth = try VethPair("b")
        let shaper = try TrafficShaper()
        let leaves = plan20.leaves(available: [.fifo, .htb])
        try build(plan20, leaves: leaves, on: veth.ifindex, with: shaper)

        // tc's view of the qdiscs: the HTB root, default BE, and a bfifo under every leaf.
        let qdiscs = try veth.tcQdiscs()
        let htb = try #require(qdiscs.first { $0["kind"] as? String == "htb" })
        #expect(htb["handle"] as? String == "1:" && htb["root"] as? Bool == true)
        let htbOptions = try #require(htb["options"] as? [String: Any])
        #expect(htbOptions["default"] as? String == "0x10" && htbOptions["r2q"] as? Int == 10)
        for serviceClass in ServiceClass.allCases {
            let leaf = plan20.leaf(serviceClass)
            let fifo = try #require(qdiscs.first { $0["parent"] as? String == leaf.id.description })
            #expect(fifo["kind"] as? String == "bfifo")
            #expect(fifo["handle"] as? String == plan20.leafQdiscHandle(serviceClass).description)
            guard case .bfifo(let limit) = leaves[serviceClass] else { Issue.record("not a bfifo"); continue }
            #expect((fifo["options"] as? [String: Any])?["limit"] as? Int == Int(limit))
        }

        // tc's view of the classes: every rate, ceil, parent, prio and quantum.
        let classes = try veth.tcClasses()
        #expect(classes.count == plan20.classes.count)
        for node in plan20.classes {
            let shown = try #require(classes[node.id.description], "\(node.id) missing")
            #expect(shown["kind"] == "htb")
            #expect(shown["rate"] == tcRateText(bytesPerSecond: node.rate.bytesPerSecond), "\(node.id)")
            #expect(shown["ceil"] == tcRateText(bytesPerSecond: node.ceil.bytesPerSecond), "\(node.id)")
            #expect(shown["parent"] == (node.role == .root ? "root" : node.parent.description), "\(node.id)")
            if let serviceClass = node.serviceClass {
                #expect(
                    shown["prio"] == "\(node.prio)" && shown["quantum"] == "\(node.quantum)", "\(node.id)")
                #expect(shown["leaf"] == plan20.leafQdiscHandle(serviceClass).description)
                #expect(shown["level"] == "0")
            } else {
                #expect(shown["level"] != "0", "\(node.id) is an inner class")
            }
        }

        // The module's own dump: exact bytes, ticks and leaves.
        let mine = try shaper.classes(ifindex: veth.ifindex)
        #expect(mine.count == plan20.classes.count)
        for node in plan20.classes {
            let info = try #require(mine.first { $0.handle.rawValue == node.id.rawValue })
            let htbInfo = try #require(info.htb)
            #expect(htbInfo.rateBytesPerSecond == node.rate.bytesPerSecond)
            #expect(htbInfo.ceilBytesPerSecond == node.ceil.bytesPerSecond)
            let burst = shaper.clock.defaultBurst(bytesPerSecond: node.rate.bytesPerSecond, mtu: 1_600)
            #expect(
                htbInfo.bufferTicks
                    == shaper.clock.transmissionTicks(bytes: burst, bytesPerSecond: node.rate.bytesPerSecond))
            #expect(info.statistics != nil)
            if let serviceClass = node.serviceClass {
                #expect(htbInfo.prio == node.prio && htbInfo.quantum == node.quantum && htbInfo.level == 0)
                #expect(info.leafQdisc?.rawValue == plan20.leafQdiscHandle(serviceClass).rawValue)
            }
        }
        let myQdiscs = try shaper.qdiscs(ifindex: veth.ifindex)
        // direct_qlen: the kernel's default, the device's txqueuelen, as tc shows it.
        let directQueueLength = try #require(htbOptions["direct_qlen"] as? Int)
        #expect(
            myQdiscs.first { $0.isRoot }?.options
                == .htb(
                    HTBQdiscOptions(
                        defaultClass: 0x10, rateToQuantum: 10, directQueueLength: UInt32(directQueueLength))))
        #expect(myQdiscs.filter { $0.kind == "bfifo" }.count == 8)
    }

    @Test func changesAClassRateInPlace() throws {
        let veth = try VethPair("c")
        let shaper = try TrafficShaper()
        try build(plan20, leaves: plan20.leaves(available: [.fifo]), on: veth.ifindex, with: shaper)
        let af4 = plan20.leaf(.af4)
        let before = try veth.tcClasses()
        for (mode, bits) in [(ChangeMode.replace, UInt64(3_000_000)), (.change, 4_200_000)] {
            try shaper.setHTBClass(
                HTBClassOptions(
                    rateBitsPerSecond: bits, ceilBitsPerSecond: af4.ceil.bitsPerSecond, prio: af4.prio,
                    quantum: af4.quantum),
                ifindex: veth.ifindex, classID: QdiscHandle(rawValue: af4.id.rawValue),
                parent: QdiscHandle(rawValue: af4.parent.rawValue), mode: mode)
            let after = try veth.tcClasses()
            #expect(after[af4.id.description]?["rate"] == tcRateText(bytesPerSecond: bits / 8), "\(mode)")
            // Its leaf stays, and no other class moved.
            #expect(after[af4.id.description]?["leaf"] == plan20.leafQdiscHandle(.af4).description)
            for (id, fields) in before where id != af4.id.description {
                #expect(after[id] == fields, "\(id)")
            }
        }
    }

    @Test func deletingTheRootLeavesNothingOfTheTree() throws {
        let veth = try VethPair("d")
        let shaper = try TrafficShaper()
        let defaultKind = try #require(try shaper.qdiscs(ifindex: veth.ifindex).first { $0.isRoot }?.kind)
        try build(plan20, leaves: plan20.leaves(available: [.fifo]), on: veth.ifindex, with: shaper)
        #expect(try shaper.qdiscs(ifindex: veth.ifindex).count == 9)
        // One leaf first: its qdisc, then its class.
        let af1 = plan20.leaf(.af1)
        try shaper.deleteQdisc(
            ifindex: veth.ifindex, parent: QdiscHandle(rawValue: af1.id.rawValue),
            handle: QdiscHandle(rawValue: plan20.leafQdiscHandle(.af1).rawValue))
        try shaper.deleteClass(ifindex: veth.ifindex, classID: QdiscHandle(rawValue: af1.id.rawValue))
        let classesLeft = try veth.tcClasses()
        #expect(classesLeft.count == plan20.classes.count - 1 && classesLeft[af1.id.description] == nil)
        #expect(try veth.tcQdiscs().count == 8)
        try shaper.deleteQdisc(ifindex: veth.ifindex, parent: .root, handle: QdiscHandle(major: 1))
        let left = try shaper.qdiscs(ifindex: veth.ifindex)
        #expect(left.count == 1 && left.first?.kind == defaultKind && left.first?.isRoot == true)
        #expect(try shaper.classes(ifindex: veth.ifindex).isEmpty)
        #expect(try veth.tcClasses().isEmpty)
        #expect(try veth.tcQdiscs().map { $0["kind"] as? String } == [defaultKind])
    }

    @Test func aSecondRootWithTheExclusiveFlagGivesTheErrnoAndTheKernelsWords() throws {
        let veth = try VethPair("e")
        let shaper = try TrafficShaper()
        let htb = QdiscOptions.htb(HTBQdiscOptions(defaultClass: 0x10))
        try shaper.setQdisc(htb, ifindex: veth.ifindex, handle: QdiscHandle(major: 1))
        do {
            try shaper.setQdisc(htb, ifindex: veth.ifindex, handle: QdiscHandle(major: 1), mode: .create)
            Issue.record("a second root htb with NLM_F_EXCL was taken")
        } catch {
            #expect(
                error.operation == .newQdisc && error.errno == .fileExists && error.ifindex == veth.ifindex)
            let tc = try run(
                "tc", "qdisc", "add", "dev", veth.name, "root", "handle", "1:", "htb", "default", "10")
            #expect(tc.status != 0)
            let message = try #require(error.kernelMessage)
            #expect(message == tcKernelMessage(tc.err))
            #expect(
                error.description
                    == "RTM_NEWQDISC htb 1: on ifindex \(veth.ifindex): File exists (errno 17): \(message)")
        }
    }

    @Test func anOperatorsRootQdiscIsToldApartAndReplacedOnlyWhenAsked() throws {
        let veth = try VethPair("f")
        let shaper = try TrafficShaper()
        let added = try run(
            "tc", "qdisc", "add", "dev", veth.name, "root", "handle", "8001:", "bfifo", "limit", "5000")
        try #require(added.status == 0, "\(added.err)")
        let root = try #require(try shaper.qdiscs(ifindex: veth.ifindex).first { $0.isRoot })
        #expect(
            root.kind == "bfifo" && root.handle == QdiscHandle(major: 0x8001)
                && root.options == .bfifo(limitBytes: 5_000))

        let htb = QdiscOptions.htb(HTBQdiscOptions(defaultClass: 0x10))
        do {
            try shaper.setQdisc(htb, ifindex: veth.ifindex, handle: QdiscHandle(major: 1), mode: .create)
            Issue.record("the operator's root qdisc was overridden without NLM_F_REPLACE")
        } catch {
            #expect(error.errno == .fileExists)
            let tc = try run("tc", "qdisc", "add", "dev", veth.name, "root", "handle", "1:", "htb")
            #expect(error.kernelMessage != nil && error.kernelMessage == tcKernelMessage(tc.err))
        }
        try shaper.setQdisc(htb, ifindex: veth.ifindex, handle: QdiscHandle(major: 1), mode: .replace)
        let qdiscs = try veth.tcQdiscs()
        #expect(
            qdiscs.count == 1 && qdiscs.first?["kind"] as? String == "htb"
                && qdiscs.first?["handle"] as? String == "1:")
    }

    @Test func deletingWhatIsNotThereGivesENOENTAndTheKernelsWords() throws {
        let veth = try VethPair("g")
        let shaper = try TrafficShaper()
        do {
            try shaper.deleteQdisc(ifindex: veth.ifindex, parent: .root)
            Issue.record("deleting the default root qdisc succeeded")
        } catch {
            let tc = try run("tc", "qdisc", "del", "dev", veth.name, "root")
            #expect(tc.status != 0)
            #expect(error.operation == .deleteQdisc && error.errno.rawValue > 0)
            #expect(error.kernelMessage != nil && error.kernelMessage == tcKernelMessage(tc.err))
        }
        try shaper.setQdisc(
            .htb(HTBQdiscOptions(defaultClass: 0x10)), ifindex: veth.ifindex, handle: QdiscHandle(major: 1))
        do {
            try shaper.deleteClass(ifindex: veth.ifindex, classID: QdiscHandle(major: 1, minor: 0x99))
            Issue.record("deleting a missing class succeeded")
        } catch {
            #expect(error.operation == .deleteClass && error.errno == .noSuchFileOrDirectory)
            #expect(error.description.hasPrefix("RTM_DELTCLASS class 1:99 on ifindex \(veth.ifindex): "))
        }
    }

    @Test func ratesPast32BitsTravelIn64BitAttributes() throws {
        let veth = try VethPair("h")
        let shaper = try TrafficShaper()
        try shaper.setQdisc(
            .htb(HTBQdiscOptions(defaultClass: 1)), ifindex: veth.ifindex, handle: QdiscHandle(major: 1))
        // 40 Gbit/s is 5e9 bytes per second, past tc_ratespec's 32 bits.
        try shaper.setHTBClass(
            HTBClassOptions(
                rateBitsPerSecond: 40_000_000_000, ceilBitsPerSecond: 100_000_000_000, quantum: 200_000),
            ifindex: veth.ifindex, classID: QdiscHandle(major: 1, minor: 1), parent: QdiscHandle(major: 1))
        let shown = try #require(try veth.tcClasses()["1:1"])
        #expect(shown["rate"] == "40Gbit" && shown["ceil"] == "100Gbit")
        let info = try #require(try shaper.classes(ifindex: veth.ifindex).first?.htb)
        #expect(info.rateBytesPerSecond == 5_000_000_000 && info.ceilBytesPerSecond == 12_500_000_000)
    }

    @Test func anIFBIsCreatedSetUpAndDeleted() throws {
        let shaper = try TrafficShaper()
        let name = "qmtsI\(getpid())"
        _ = try? run("ip", "link", "del", name)
        let ifindex = try shaper.createIFB(named: name)
        defer { _ = try? run("ip", "link", "del", name) }
        #expect(TrafficShaper.ifindex(named: name) == ifindex)
        let details = try run("ip", "-d", "-j", "link", "show", "dev", name)
        let link = try #require(
            (try JSONSerialization.jsonObject(with: Data(details.out.utf8)) as? [[String: Any]])?.first)
        #expect((link["linkinfo"] as? [String: Any])?["info_kind"] as? String == "ifb")
        #expect((link["flags"] as? [String])?.contains("UP") == false)
        try shaper.setLink(ifindex: ifindex, up: true)
        let up = try run("ip", "-j", "link", "show", "dev", name)
        let upLink = try #require(
            (try JSONSerialization.jsonObject(with: Data(up.out.utf8)) as? [[String: Any]])?.first)
        #expect((upLink["flags"] as? [String])?.contains("UP") == true)
        // The same tree builds on it as on the interface.
        try build(plan20, leaves: plan20.leaves(available: [.fifo]), on: ifindex, with: shaper)
        #expect(try shaper.classes(ifindex: ifindex).count == plan20.classes.count)
        do {
            _ = try shaper.createIFB(named: name)
            Issue.record("a second ifb of the same name was created")
        } catch {
            #expect(
                error.operation == .newLink && error.errno == .fileExists && error.subject == "ifb \(name)")
        }
        try shaper.deleteLink(ifindex: ifindex)
        #expect(TrafficShaper.ifindex(named: name) == nil)
        #expect(throws: TrafficShapingError.self) { try shaper.deleteLink(ifindex: ifindex) }
    }

    @Test func fifosTakeTheirLimits() throws {
        let veth = try VethPair("p")
        let shaper = try TrafficShaper()
        try shaper.setQdisc(.pfifo(limitPackets: 50), ifindex: veth.ifindex, handle: QdiscHandle(major: 5))
        var shown = try #require(try veth.tcQdiscs().first)
        #expect(
            shown["kind"] as? String == "pfifo"
                && (shown["options"] as? [String: Any])?["limit"] as? Int == 50)
        // The same handle may only be changed, not given another kind …
        #expect(throws: TrafficShapingError.self) {
            try shaper.setQdisc(
                .bfifo(limitBytes: 30_000), ifindex: veth.ifindex, handle: QdiscHandle(major: 5),
                mode: .replace)
        }
        try shaper.setQdisc(
            .pfifo(limitPackets: 70), ifindex: veth.ifindex, handle: QdiscHandle(major: 5), mode: .change)
        shown = try #require(try veth.tcQdiscs().first)
        #expect((shown["options"] as? [String: Any])?["limit"] as? Int == 70)
        // … while a root of another handle replaces it whole.
        try shaper.setQdisc(
            .bfifo(limitBytes: 30_000), ifindex: veth.ifindex, handle: QdiscHandle(major: 6), mode: .replace)
        let all = try veth.tcQdiscs()
        #expect(all.count == 1)
        shown = try #require(all.first)
        #expect(shown["kind"] as? String == "bfifo" && shown["handle"] as? String == "6:")
        #expect((shown["options"] as? [String: Any])?["limit"] as? Int == 30_000)
        #expect(try shaper.qdiscs(ifindex: veth.ifindex).first?.options == .bfifo(limitBytes: 30_000))
    }

    @Test(
        .enabled(
            if: !kernelKinds.contains("fq_codel"),
            "the kernel has fq_codel: a kind it lacks cannot be tried with it"))
    func aKindTheKernelLacksGivesENOENTAndTheKernelsWords() throws {
        let veth = try VethPair("u")
        let shaper = try TrafficShaper()
        do throws(TrafficShapingError) {
            try shaper.setQdisc(
                .fqCodel(FQCodelOptions()), ifindex: veth.ifindex, handle: QdiscHandle(major: 1))
            Issue.record("fq_codel was created where tc could not create it")
        } catch {
            // qosmapd can fall back to a fifo on this errno.
            #expect(error.errno == .noSuchFileOrDirectory)
            let tc = try run("tc", "qdisc", "add", "dev", veth.name, "root", "handle", "1:", "fq_codel")
            #expect(error.kernelMessage != nil && error.kernelMessage == tcKernelMessage(tc.err))
        }
    }

    @Test(
        .enabled(
            if: kernelKinds.contains("fq_codel"),
            "the kernel has no fq_codel (sch_fq_codel); run it where it has, e.g. the Debian 12 VM"))
    func fqCodelLeavesCarryTheirTargets() throws {
        let veth = try VethPair("q")
        let shaper = try TrafficShaper()
        let leaves = plan20.leaves(available: [.fqCodel, .fifo])
        try build(plan20, leaves: leaves, on: veth.ifindex, with: shaper)
        let mine = try shaper.qdiscs(ifindex: veth.ifindex).filter { $0.kind == "fq_codel" }
        #expect(mine.count == 8)
        for serviceClass in ServiceClass.allCases {
            guard case .fqCodel(let codel) = leaves[serviceClass] else {
                Issue.record("not fq_codel"); continue
            }
            let leaf = try #require(
                mine.first { $0.parent.rawValue == plan20.leaf(serviceClass).id.rawValue })
            guard case .fqCodel(let options) = leaf.options else {
                Issue.record("no fq_codel options"); continue
            }
            let target = Int(try #require(options.targetMicroseconds))
            let interval = Int(try #require(options.intervalMicroseconds))
            #expect((Int(codel.targetMicroseconds) - 2...Int(codel.targetMicroseconds)).contains(target))
            #expect(
                (Int(codel.intervalMicroseconds) - 2...Int(codel.intervalMicroseconds)).contains(interval))
            #expect(options.ecn == true)
        }
        // tc's view. fq_codel keeps times in 1024 ns units (CODEL_SHIFT), so a
        // time in microseconds comes back up to 2 µs lower.
        let shown = try veth.tcQdiscs().filter { $0["kind"] as? String == "fq_codel" }
        #expect(shown.count == 8)
        for serviceClass in ServiceClass.allCases {
            guard case .fqCodel(let codel) = leaves[serviceClass] else { continue }
            let qdisc = try #require(
                shown.first { $0["parent"] as? String == plan20.leaf(serviceClass).id.description })
            let options = try #require(qdisc["options"] as? [String: Any])
            let target = try #require(options["target"] as? Int)
            let interval = try #require(options["interval"] as? Int)
            #expect((Int(codel.targetMicroseconds) - 2...Int(codel.targetMicroseconds)).contains(target))
            #expect(
                (Int(codel.intervalMicroseconds) - 2...Int(codel.intervalMicroseconds)).contains(interval))
        }
    }

    @Test(
        .enabled(
            if: kernelKinds.contains("cake"),
            "the kernel has no cake (sch_cake); run it where it has, e.g. the Debian 12 VM"))
    func cakeTakesItsBandwidthAndMode() throws {
        let veth = try VethPair("k")
        let shaper = try TrafficShaper()
        let plan = CAKEPlan(rate: Rate(bitsPerSecond: 20_000_000), diffserv: .diffserv8)
        try shaper.setQdisc(
            .cake(CAKEOptions(bandwidthBitsPerSecond: plan.rate.bitsPerSecond, diffserv: .diffserv8)),
            ifindex: veth.ifindex, handle: QdiscHandle(rawValue: plan.handle.rawValue))
        let root = try #require(try shaper.qdiscs(ifindex: veth.ifindex).first { $0.isRoot })
        #expect(root.options == .cake(CAKEOptions(bandwidthBitsPerSecond: 20_000_000, diffserv: .diffserv8)))
        let shown = try #require(try veth.tcQdiscs().first)
        let options = try #require(shown["options"] as? [String: Any])
        #expect(options["bandwidth"] as? Int == 2_500_000 && options["diffserv"] as? String == "diffserv8")
    }
}
