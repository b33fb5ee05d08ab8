// Release-mode benchmark harness: `qosmap-bench lookup [ITERATIONS]`, `qosmap-bench dns [ROUNDS]`.
#if canImport(Glibc)
    import Glibc
#endif

let args = CommandLine.arguments.dropFirst()
switch args.first {
case "lookup", nil:
    runLookupBenchmark(iterations: args.dropFirst().first.flatMap { Int($0) } ?? 50_000_000)
case "dns":
    runDNSBenchmark(pairs: 4096, rounds: args.dropFirst().first.flatMap { Int($0) } ?? 100)
case "dns-pcap":
    let rest = Array(args.dropFirst())
    guard let path = rest.first, writeDNSPcap(path, rounds: rest.dropFirst().first.flatMap { Int($0) } ?? 25)
    else {
        print("usage: qosmap-bench dns-pcap FILE [ROUNDS]")
        exit(1)
    }
case "load":
    runLoadBenchmark(iterations: 50)
default:
    print("usage: qosmap-bench lookup [ITERATIONS] | dns [ROUNDS] | dns-pcap FILE [ROUNDS] | load")
}
