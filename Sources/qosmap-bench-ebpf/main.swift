// The eBPF classifier's cost per packet in the kernel (BPF_PROG_TEST_RUN),
// loaded as qosmapd loads it, with and without flow rules, against an empty
// program run the same way (the peer: the test-run loop itself).
// Usage: qosmap-bench-ebpf NULL_OBJECT [REPEAT [ROUNDS]]
// Prints one line per case: name, ns per run (median of ROUNDS), ns over the empty program.
import BPFClassifier
import Foundation
import QoSMapCore
import QoSMapDaemon

let args = CommandLine.arguments
guard args.count >= 2, let nullBytes = FileManager.default.contents(atPath: args[1]) else {
    FileHandle.standardError.write(Data("usage: qosmap-bench-ebpf NULL_OBJECT [REPEAT [ROUNDS]]\n".utf8))
    exit(64)
}
let repeatCount = args.count > 2 ? UInt32(args[2]) ?? 1_000_000 : 1_000_000
let rounds = args.count > 3 ? Int(args[3]) ?? 5 : 5
/// QOSMAP_BPF_OBJECT: builds of Bpf/qosmap.bpf.c to measure instead of the
/// embedded one, separated by `:`; several are run in turn within each round
/// (an A/B comparison that one burst of machine load hits alike).
let objectPaths = ProcessInfo.processInfo.environment["QOSMAP_BPF_OBJECT"].map {
    $0.split(separator: ":").map(String.init)
}
let objects: [(String, [UInt8]?)] =
    objectPaths?.map { path in
        guard let d = FileManager.default.contents(atPath: path) else {
            FileHandle.standardError.write(Data("qosmap-bench-ebpf: cannot read \(path)\n".utf8))
            exit(66)
        }
        return ((path as NSString).lastPathComponent, [UInt8](d))
    } ?? [("", nil)]
/// QOSMAP_BENCH_CASES: only the configs whose name contains this.
let only = ProcessInfo.processInfo.environment["QOSMAP_BENCH_CASES"]
/// QOSMAP_BENCH_ROWS: only the packets whose "IPvN packet" contains this
/// (e.g. "IPv6 CIDR"), so that a profiler sees one row alone.
let rowsOnly = ProcessInfo.processInfo.environment["QOSMAP_BENCH_ROWS"]

let head = """
    datapath: ebpf
    system-tables: false
    interfaces:
      in1: {}
      out1: {}

    """
/// 100 rules, each one UDP destination port.
var portRules = ""
for i in 0..<100 {
    portRules +=
        "    - {name: port\(i), match: {protocol: udp, destination-port: \(10000 + i * 7)}, set: {class: AF\(1 + i % 4)}}\n"
}
/// 1,000 rules, each one IPv4 and one IPv6 destination prefix.
var cidrRules = ""
for i in 0..<1000 {
    cidrRules +=
        "    - {name: net\(i), match: {destination: [198.18.\(i / 4).\((i % 4) * 64)/26, fd00:\(String(i, radix: 16))::/64]}, set: {class: AF\(1 + i % 4), color: yellow}}\n"
}
/// `classify.flows` as the issue writes it, applied to every class: a test
/// run repeats the program on one skb, which the first run remarks, so the
/// later runs must be checked too whatever class the remarked DSCP gives.
let flowBehaviour = """
        bulk: {packets-per-second: 100, bytes: 10000000, hold: 5, set: {class: BE, color: yellow}}
        interactive: {max-average-size: 200, set: {class: AF4}}
        apply-to: [BE, AF1, AF2, AF3, AF4, EF, CS6, CS7]

    """
/// The same rules, none keeping its connection (no connection table).
let oneWayRules = portRules.replacingOccurrences(of: "}, set:", with: "}, connection: false, set:")
let configs: [(String, String)] = [
    ("no rules", head),
    ("100 port rules", head + "classify:\n  rules:\n" + portRules),
    ("100 port rules, connection: false", head + "classify:\n  rules:\n" + oneWayRules),
    ("1,000 CIDR + 100 port rules", head + "classify:\n  rules:\n" + cidrRules + portRules),
    // Every run is checked (bulk after the first 100 runs of a second).
    ("flow behaviour", head + "classify:\n  flows:\n" + flowBehaviour),
    (
        "flow behaviour + 100 port rules",
        head + "classify:\n  flows:\n" + flowBehaviour + "  rules:\n" + portRules
    ),
]

/// A UDP frame to `dst` port `port`, DSCP 11 (rewritten by the default tables) unless given.
/// `extensions`: IPv6 only, that many 8-byte extension headers before UDP (a
/// hop-by-hop header, then destination options), which the classifier walks
/// in its slow parser.
func frame(v6: Bool, dst: [UInt8], port: UInt16, dscp: UInt8 = 11, extensions: Int = 0) -> [UInt8] {
    var f: [UInt8] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1] + (v6 ? [0x86, 0xDD] : [8, 0])
    let udp: [UInt8] =
        [0x9C, 0x40, UInt8(port >> 8), UInt8(port & 0xFF), 0, 40, 0, 0] + [UInt8](repeating: 0, count: 32)
    let tos: UInt8 = dscp << 2 | 1
    if v6 {
        f += [
            0x60 | tos >> 4, tos << 4, 0, 0, 0, UInt8(udp.count + 8 * extensions), extensions > 0 ? 0 : 17,
            64,
        ]
        f += [0xFD, 0, 0, 1] + [UInt8](repeating: 0, count: 11) + [2]
        f += dst
        for i in 0..<extensions {
            // Next header, length 0 (8 bytes), a PadN option of 4 bytes.
            f += [i == extensions - 1 ? 17 : 60, 0, 1, 4, 0, 0, 0, 0]
        }
    } else {
        var h: [UInt8] =
            [0x45, tos, 0, UInt8(20 + udp.count), 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 1, 2] + dst
        var sum: UInt32 = 0
        for i in stride(from: 0, to: 20, by: 2) { sum += UInt32(h[i]) << 8 | UInt32(h[i + 1]) }
        while sum > 0xFFFF { sum = (sum & 0xFFFF) + (sum >> 16) }
        h[10] = UInt8(~sum >> 8 & 0xFF)
        h[11] = UInt8(~sum & 0xFF)
        f += h
    }
    return f + udp
}

func median(_ v: [Double]) -> Double {
    let s = v.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

do {
    let null = try BPFObject(bytes: [UInt8](nullBytes), name: "null")
    let nullProgram = try null.program(named: "qosmap_null")
    // Port 10350 is rule port50's; 198.18.125.130 is net502's, fd00:1f4::2 net500's.
    let v4dst: [UInt8] = [198, 18, 125, 130]
    let v6dst: [UInt8] = [0xFD, 0, 0x01, 0xF4] + [UInt8](repeating: 0, count: 11) + [2]
    // Outside every CIDR rule (those end at 198.18.249.255 and fd00:3e7::/64):
    // with the CIDR rules first, a port rule is the first match only there.
    let v4outside: [UInt8] = [198, 18, 255, 130]
    let v6outside: [UInt8] = [0xFD, 0, 0xFF, 0xFF] + [UInt8](repeating: 0, count: 11) + [2]
    print("repeat \(repeatCount), median of \(rounds) rounds (min in brackets); ns per run")
    let objectColumn = objects.count > 1 ? " object |" : ""
    print("| case | family | packet |\(objectColumn) ns | empty program ns | over empty |")
    print("|---|---|---|\(objects.count > 1 ? "---|" : "")---|---|---|")
    for (name, text) in configs where only.map({ name.contains($0) }) ?? true {
        let snapshot = try PolicySnapshot(
            config: DaemonConfig.parse(text, file: "bench.yaml"), generation: 0,
            systemDirectory: "/nonexistent")
        let benches = try objects.map {
            try EBPFTestBench(snapshot, interfaces: ["in1": 2, "out1": 1], object: $0.1)
        }
        for v6 in [false, true] {
            var cases: [(String, [UInt8])] = [
                ("port rule hit", frame(v6: v6, dst: v6 ? v6dst : v4dst, port: 10350)),
                ("no rule hit", frame(v6: v6, dst: v6 ? v6dst : v4dst, port: 9)),
            ]
            if name == "100 port rules" && v6 {
                cases.append(
                    (
                        "port rule hit, 2 extension headers",
                        frame(v6: true, dst: v6dst, port: 10350, extensions: 2)
                    ))
            }
            if name.hasPrefix("1,000") {
                cases[0].1 = frame(v6: v6, dst: v6 ? v6outside : v4outside, port: 10350)
                cases[1].0 = "CIDR rule hit"
            } else if name == "flow behaviour" {
                cases = [("tracked flow", cases[1].1)]
            } else if name == "no rules" {
                cases = [("rewrite", cases[0].1)]
            }
            for (what, f) in cases where rowsOnly.map({ "IPv\(v6 ? 6 : 4) \(what)".contains($0) }) ?? true {
                var ns = [[Double]](repeating: [], count: benches.count)
                var base: [Double] = []
                for _ in 0..<rounds {
                    base.append(
                        Double(try nullProgram.testRun(packet: f, repeat: repeatCount).averageNanoseconds))
                    for (i, bench) in benches.enumerated() {
                        ns[i].append(
                            Double(
                                try bench.run(f, ingressIfindex: 2, repeat: repeatCount).averageNanoseconds))
                    }
                }
                let b = median(base)
                let bmin = base.min() ?? 0
                for (i, v) in ns.enumerated() {
                    let m = median(v)
                    let column = objects.count > 1 ? " \(objects[i].0) |" : ""
                    let low = v.min() ?? 0
                    print(
                        "| \(name) | IPv\(v6 ? 6 : 4) | \(what) |\(column) \(String(format: "%.1f", m)) (\(String(format: "%.0f", low))) | \(String(format: "%.1f", b)) (\(String(format: "%.0f", bmin))) | \(String(format: "%+.1f", m - b)) (\(String(format: "%+.0f", low - bmin))) |"
                    )
                }
            }
        }
        if name.hasPrefix("flow behaviour"), let bench = benches.first {
            let c = try bench.behaviourCounts()
            print("  (flows tracked \(c[0]), demoted \(c[2]), promoted \(c[3]))")
        }
        if name.contains("rules"), name != "no rules", let bench = benches.first {
            let hit = try bench.ruleCounts().enumerated().filter { $0.element.packets > 0 }.map { $0.offset }
            print("  (rules that counted packets: \(hit.count))")
        }
    }
} catch {
    FileHandle.standardError.write(Data("qosmap-bench-ebpf: \(error)\n".utf8))
    exit(1)
}
