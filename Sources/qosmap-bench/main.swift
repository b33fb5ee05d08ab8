// Release-mode benchmark harness: `qosmap-bench lookup [ITERATIONS]`, `qosmap-bench dns [ROUNDS]`.
let args = CommandLine.arguments.dropFirst()
switch args.first {
case "lookup", nil:
    runLookupBenchmark(iterations: args.dropFirst().first.flatMap { Int($0) } ?? 50_000_000)
case "dns":
    runDNSBenchmark(pairs: 4096, rounds: args.dropFirst().first.flatMap { Int($0) } ?? 100)
case "load":
    runLoadBenchmark(iterations: 50)
default:
    print("usage: qosmap-bench lookup [ITERATIONS] | dns [ROUNDS] | load")
}
