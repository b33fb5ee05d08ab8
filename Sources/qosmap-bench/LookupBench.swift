import QoSMapCore
import QoSMapTables

#if canImport(Glibc)
    import Glibc
#endif

/// Monotonic nanoseconds.
func nowNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Times inbound and outbound lookups against a plain byte-array read (the
/// peer: the cheapest possible table lookup) in the same run.
func runLookupBenchmark(iterations: Int) {
    let domain = TableLoader.builtIn.domains["default"]!
    // A pseudo-random stream of code points, so the branch predictor cannot
    // learn a pattern; 4096 entries stay in L1.
    var state: UInt32 = 0x1234_5678
    var input = [UInt8](repeating: 0, count: 4096)
    for i in input.indices {
        state = state &* 1_664_525 &+ 1_013_904_223
        input[i] = UInt8(truncatingIfNeeded: state >> 26)
    }
    let plain = (0..<64).map { UInt8($0 * 7 % 64) }
    func measure(_ name: String, _ body: (UInt8) -> UInt8) -> Double {
        var best = Double.infinity
        var sink: UInt8 = 0
        for _ in 0..<7 {
            let start = nowNanoseconds()
            for i in 0..<iterations { sink &+= body(input[i & 4095]) }
            let ns = Double(nowNanoseconds() - start) / Double(iterations)
            best = min(best, ns)
        }
        print("\(name): \(format2(best)) ns/op (best of 7 x \(iterations); sink \(sink))")
        return best
    }
    let peer = measure("peer: [UInt8] array read") { plain[Int($0 & 63)] }
    let inbound = measure("classify(dscp:)") { v in
        let t = domain.classify(dscp: DSCP(truncating: v))
        return t.serviceClass.rawValue &+ t.color.rawValue
    }
    let outbound = measure("dscp(for:)") { v in
        domain.dscp(for: Treatment(ServiceClass(rawValue: v & 7)!, Color(rawValue: v % 3)!)).rawValue
    }
    let remark = measure("classify + dscp(for:) (a full remark decision)") { v in
        domain.dscp(for: domain.classify(dscp: DSCP(truncating: v))).rawValue
    }
    print(
        "ratio to peer: inbound \(format2(inbound / peer))x, outbound \(format2(outbound / peer))x, both \(format2(remark / peer))x"
    )
}

func format2(_ x: Double) -> String {
    let scaled = (x * 100).rounded() / 100
    return "\(scaled)"
}

/// Times loading the embedded built-in tables from their YAML text, which
/// every CLI start pays once.
func runLoadBenchmark(iterations: Int) {
    let sources = EmbeddedTables.files.map { TableSource(path: $0.path, text: $0.text) }
    var best = Double.infinity
    for _ in 0..<iterations {
        let start = nowNanoseconds()
        _ = try? TableLoader.load(sources, onto: TableSet(domains: DomainSet()), builtIn: true)
        best = min(best, Double(nowNanoseconds() - start) / 1000)
    }
    print("load built-in tables (\(sources.count) files): best \(format2(best)) us of \(iterations)")
}
