// `floor lookup dscp 46`'s output with no argument parser: the Swift runtime's
// and glibc's start-up alone.
let args = CommandLine.arguments
let domain = "default"
if args.count == 4, args[1] == "lookup" {
    print("domain \(domain): \(args[2]) \(args[3]) (EF) -> service class EF, color green")
    print("outbound EF/green in domain \(domain):")
    print("  dscp           46 (EF)\n  ip-precedence  5\n  8021p          5\n  exp            5")
}
