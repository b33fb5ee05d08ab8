import Foundation
import NFQueue
import QoSMapCore
import QoSMapDaemon
import QoSMapPacket
import Testing

@testable import QoSMapCLI

/// The flow-rule config of the `export nft --config` golden and model tests:
/// the issue's rules plus rules by protocol list, source port, v6-only set,
/// DSCP and a portless protocol, over interfaces with different domains.
let nftClassifyConfig = """
    system-tables: false
    interfaces:
      in1: {trust: dscp}
      in2: {trust: none, inbound-domain: site-in}
      out1: {outbound-domain: default}
      out2: {outbound-domain: site}
    actions:
      mark: {mask: 0xff}
      priority: true
    classify:
      sets:
        voip-servers: [198.18.2.0/24, fd00:2::/64]
        web: [fd00:5::/48, fd00:5:1::/64, 198.18.5.0/25, 198.18.5.128/25]
      rules:
        - name: voip
          match:
            protocol: udp
            destination-port: [5060, 10000-20000]
            destination: [voip-servers]
          set: {class: EF}
        - name: backup
          match: {protocol: tcp, destination-port: 873}
          set: {class: AF1, color: yellow}
        - name: from-cameras
          match: {ingress: [in2], source: [198.18.3.0/24, fd00:3::/64]}
          set: {dscp: AF41}
          connection: false
        - name: web
          match: {protocol: [tcp, sctp], source-port: [80, 443], source: [web]}
          set: {class: AF2, color: red}
        - name: remarked
          match: {dscp: [EF, 10], protocol: [udp, gre]}
          set: {class: AF3, color: yellow}
        - name: any-port
          match: {destination-port: 9000-9099}
          set: {dscp: CS1}
          connection: false
        - name: dccp
          match: {protocol: dccp, source-port: 5004}
          set: {class: AF4}
          connection: false
        - name: gre-to-v6
          match: {protocol: gre, destination: [fd00:2::/64]}
          set: {class: CS6}
      connection-mark-mask: 0x0ff00000
    """

/// A deterministic generator (SplitMix64), so a failure can be replayed.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476C_E5B9_1CE5
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A small interpreter of the ruleset text `export nft --config` writes: the
/// statements it uses, evaluated as the kernel does (inet table, forward
/// hook, `goto` chains, conntrack marks). It reads the text, not the
/// generator's model, so a wrong rule in the text is a wrong result here.
struct NFTInterpreter {
    /// A packet at the forward hook.
    struct Packet {
        var v6: Bool
        var l4proto: UInt8
        var source: IPAddress
        var destination: IPAddress
        /// The first four transport bytes (`th sport`, `th dport`), nil when absent.
        var th: (UInt16, UInt16)?
        var iif: String
        var oif: String
        var dscp: UInt8
        var mark: UInt32
        var priority: UInt32 = 0
    }

    /// A conntrack entry as the kernel keeps one: the mark, confirmation and
    /// whether the reply direction was seen.
    struct Conntrack {
        var mark: UInt32 = 0
        var confirmed = false
        var replied = false
        var state = "new"
    }

    enum Value: Equatable {
        case int(UInt64)
        case string(String)
        case address(IPAddress)
        case tuple([Value])
    }

    var chains: [String: [[String]]] = [:]
    var sets: [String: [IPPrefix]] = [:]
    var counters: [String: Int] = [:]

    /// Parses the `table inet` part of `text`.
    init(_ text: String) throws {
        var chain: String?
        var statement: [String] = []
        var depth = 0
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = String(raw)
            if line.hasPrefix("table netdev") { break }
            if line.hasPrefix("  chain "), line.hasSuffix(" {") {
                chain = String(line.dropFirst(8).dropLast(2))
                chains[chain!] = []
                continue
            }
            if line.hasPrefix("  counter ") {
                counters[String(line.dropFirst(10).dropLast(2))] = 0
                continue
            }
            if line.hasPrefix("  set ") {
                chain = nil
                sets[String(line.dropFirst(6).dropLast(2))] = []
                continue
            }
            if line.hasPrefix("    elements = { ") {
                let name = try #require(sets.keys.first { sets[$0]!.isEmpty })
                sets[name] = try line.dropFirst(17).dropLast(2).split(separator: ", ").map {
                    try IPPrefix(parsing: $0)
                }
                continue
            }
            if line == "  }" {
                chain = nil
                continue
            }
            guard let c = chain, line.hasPrefix("    "), !line.hasPrefix("    #"),
                !line.hasPrefix("    type filter hook")
            else { continue }
            statement += Self.tokens(line)
            depth += line.filter { $0 == "{" }.count - line.filter { $0 == "}" }.count
            if depth == 0 {
                chains[c]!.append(statement)
                statement = []
            }
        }
    }

    static func tokens(_ line: String) -> [String] {
        var s = ""
        for ch in line {
            if ch == "{" || ch == "}" || ch == "," {
                s += " \(ch) "
            } else {
                s.append(ch)
            }
        }
        return s.split(separator: " ").map(String.init)
    }

    /// Evaluates the forward chain on `p` with its conntrack entry `ct` (nil:
    /// untracked). Returns nothing: the packet, entry and counters change.
    mutating func run(_ p: inout Packet, _ ct: inout Conntrack?, hook: String) {
        var chain = hook
        var hops = 0
        while hops < 100 {
            hops += 1
            var next: String?
            statements: for s in chains[chain] ?? [] {
                switch evaluate(s, &p, &ct) {
                case .next: continue
                case .goto(let c):
                    next = c
                    break statements
                case .accept: return
                }
            }
            // The end of a goto chain returns to the base chain's policy: accept.
            guard let n = next else { return }
            chain = n
        }
        Issue.record("goto loop")
    }

    enum Outcome { case next, accept, goto(String) }

    func integer(_ t: String) -> UInt64? {
        if t.hasPrefix("0x") { return UInt64(t.dropFirst(2), radix: 16) }
        if let v = UInt64(t) { return v }
        switch t {
        case "ipv4": return 2
        case "ipv6": return 10
        case "confirmed": return 8
        default: return nil
        }
    }

    /// A literal: number, quoted string, address, state name.
    func literal(_ t: String) -> Value {
        if t.hasPrefix("\"") { return .string(String(t.dropFirst().dropLast())) }
        if let v = integer(t) { return .int(v) }
        if let a = IPAddress(parsing: t) { return .address(a) }
        return .string(t)
    }

    /// Reads the expression at `i` (a concatenation of selectors); nil when
    /// it cannot be loaded (nft's break: the rule does not match).
    func expression(_ s: [String], _ i: inout Int, _ p: Packet, _ ct: Conntrack?) -> Value?? {
        var parts: [Value] = []
        repeat {
            if !parts.isEmpty { i += 1 }  // "."
            let a = s[i]
            let b = i + 1 < s.count ? s[i + 1] : ""
            var v: Value?
            switch (a, b) {
            case ("meta", "nfproto"): v = .int(p.v6 ? 10 : 2)
            case ("meta", "l4proto"): v = .int(UInt64(p.l4proto))
            case ("meta", "mark"): v = .int(UInt64(p.mark))
            case ("iifname", _), ("oifname", _):
                v = .string(a == "iifname" ? p.iif : p.oif)
                i -= 1
            case ("ip", "saddr"), ("ip6", "saddr"):
                if p.v6 == (a == "ip6") { v = .address(p.source) }
            case ("ip", "daddr"), ("ip6", "daddr"):
                if p.v6 == (a == "ip6") { v = .address(p.destination) }
            case ("ip", "dscp"), ("ip6", "dscp"):
                if p.v6 == (a == "ip6") { v = .int(UInt64(p.dscp)) }
            case ("th", "sport"): v = p.th.map { .int(UInt64($0.0)) }
            case ("th", "dport"): v = p.th.map { .int(UInt64($0.1)) }
            case ("ct", "mark"): v = ct.map { .int(UInt64($0.mark)) }
            case ("ct", "state"): v = ct.map { .string($0.state) }
            case ("ct", "status"): v = ct.map { .int($0.confirmed ? 8 : 0) }
            default: return .some(nil)  // not an expression
            }
            i += 2
            guard let value = v else { return nil }
            parts.append(value)
        } while i < s.count && s[i] == "."
        // `& M` and `| V` on integers.
        while i + 1 < s.count, s[i] == "&" || s[i] == "|", case .int(let x)? = parts.last,
            let m = integer(s[i + 1])
        {
            parts[parts.count - 1] = .int(s[i] == "&" ? x & m : x | m)
            i += 2
        }
        return .some(parts.count == 1 ? parts[0] : .tuple(parts))
    }

    /// `{ a, b-c, ... }` or one element at `i`: whether `v` is in it.
    func member(_ v: Value, _ s: [String], _ i: inout Int) -> Bool {
        var elements: [String] = []
        if s[i] == "{" {
            i += 1
            while s[i] != "}" {
                if s[i] != "," { elements.append(s[i]) }
                i += 1
            }
            i += 1
        } else {
            elements = [s[i]]
            i += 1
        }
        return elements.contains { e in
            if case .int(let x) = v, let dash = e.firstIndex(of: "-"), let lo = integer(String(e[..<dash])),
                let hi = integer(String(e[e.index(after: dash)...]))
            {
                return lo <= x && x <= hi
            }
            return literal(e) == v
        }
    }

    /// One statement.
    mutating func evaluate(_ s: [String], _ p: inout Packet, _ ct: inout Conntrack?) -> Outcome {
        var i = 0
        while i < s.count {
            switch s[i] {
            case "goto": return .goto(s[i + 1])
            case "accept": return .accept
            case "counter":
                counters[String(s[i + 2].dropFirst().dropLast()), default: 0] += 1
                i += 3
                continue
            default: break
            }
            // A statement `X set RHS`.
            if i + 2 < s.count, s[i + 2] == "set" {
                let target = s[i] + " " + s[i + 1]
                i += 3
                var rhs: Value
                if target == "meta priority" {
                    let parts = s[i].split(separator: ":")
                    rhs = .int(UInt64(parts[0])! << 16 | UInt64(parts[1])!)
                    i += 1
                } else if let v = integer(s[i]) {
                    rhs = .int(v)
                    i += 1
                } else {
                    guard case .some(.some(let v)) = expression(s, &i, p, ct) else { return .next }
                    rhs = v
                }
                guard case .int(let x) = rhs else { return .next }
                switch target {
                case "ip dscp", "ip6 dscp":
                    if p.v6 == (target == "ip6 dscp") { p.dscp = UInt8(x) }
                case "meta mark": p.mark = UInt32(x)
                case "meta priority": p.priority = UInt32(x)
                case "ct mark": ct?.mark = UInt32(x)
                default:
                    Issue.record("unknown statement \(target)")
                    return .next
                }
                continue
            }
            guard case .some(let loaded) = expression(s, &i, p, ct) else { return .next }
            guard let v = loaded else {
                Issue.record("unknown token '\(s[i])' in \(s.joined(separator: " "))")
                return .next
            }
            switch s[i] {
            case "vmap":
                i += 2  // "vmap {"
                var entries: [(key: Value, verdict: Outcome)] = []
                while s[i] != "}" {
                    if s[i] == "," {
                        i += 1
                        continue
                    }
                    var keyParts: [Value] = [literal(s[i])]
                    i += 1
                    while s[i] == "." {
                        keyParts.append(literal(s[i + 1]))
                        i += 2
                    }
                    i += 1  // ":"
                    let verdict: Outcome = s[i] == "accept" ? .accept : .goto(s[i + 1])
                    i += s[i] == "accept" ? 1 : 2
                    entries.append((keyParts.count == 1 ? keyParts[0] : .tuple(keyParts), verdict))
                }
                return entries.first { $0.key == v }?.verdict ?? .next
            case "==":
                i += 1
                guard member(v, s, &i) else { return .next }
            case "!=":
                i += 1
                guard !member(v, s, &i) else { return .next }
            default:
                if s[i].hasPrefix("@") {
                    guard case .address(let a) = v, let prefixes = sets[String(s[i].dropFirst())] else {
                        Issue.record("bad set lookup \(s[i])")
                        return .next
                    }
                    i += 1
                    guard prefixes.contains(where: { $0.contains(a) }) else { return .next }
                } else {
                    guard member(v, s, &i) else { return .next }
                }
            }
        }
        return .next
    }
}

@Suite("export nft --config: flow rules")
struct NFTFlowModelTests {
    /// The interfaces of the test: ifindex 1... (0: none).
    static let interfaces = ["in1", "in2", "out1", "out2", "eth9"]

    /// Random packets of random flows, both directions, through the ruleset
    /// text's interpreter (with a conntrack model) and through qosmapd's
    /// nfqueue pipeline (PolicySnapshot, FlowRuntime, PacketMarker): the same
    /// DSCP, mark, priority and rule counted for every packet.
    /// With `output: true`, the config adds `rules.hooks: [forward, output]`
    /// and half the packets are the host's own (output hook, no ingress).
    @Test(arguments: [1, 2, 3, 4] as [UInt64], [false, true])
    func rulesetMarksAsQosmapd(seed: UInt64, output: Bool) throws {
        let yaml = nftClassifyConfig + (output ? "\nrules: {hooks: [forward, output]}\n" : "")
        let text = try nftRuleset("nft-classify", yaml)
        #expect(text.contains("  chain output {\n") == output)
        var nft = try NFTInterpreter(text)
        let daemonConfig = try DaemonConfig.parse(yaml, file: "nft-classify.yaml")
        var withTables = daemonConfig
        withTables.tables = [nftTablesDirectory]
        let snapshot = try PolicySnapshot(config: withTables, generation: 1)
        var pipeline = PacketPipeline(interfaceName: { i in Self.interfaces[safe: Int(i) - 1] })
        var rng = SplitMix(state: seed)

        func address(_ v6: Bool) -> IPAddress {
            let v4Pool = [
                "198.18.2.7", "198.18.2.200", "198.18.3.4", "198.18.5.1", "198.18.5.130", "198.18.9.9",
            ]
            let v6Pool = [
                "fd00:2::7", "fd00:3::4", "fd00:5:7::1", "fd00:5:1::9", "fd00:6::1", "fd00:2:0:1::1",
            ]
            if Int.random(in: 0..<4, using: &rng) == 0 {
                return v6
                    ? IPAddress(
                        ipv6: true, high: 0xFD00_0000_0000_0000 | UInt64.random(in: 0..<8, using: &rng) << 32,
                        low: UInt64.random(in: 1..<9, using: &rng))
                    : IPAddress(ipv4: 0xC612_0000 | UInt32.random(in: 0..<0x1_0000, using: &rng))
            }
            return IPAddress(parsing: (v6 ? v6Pool : v4Pool).randomElement(using: &rng)!)!
        }
        func port() -> UInt16 {
            [5060, 10000, 15000, 20000, 20001, 873, 80, 443, 9000, 9099, 9100, 1024, 5004]
                .randomElement(using: &rng) ?? UInt16.random(in: 0...65535, using: &rng)
        }

        var flows: [FlowPacket] = []
        var slots: Set<UInt32> = []
        var seen: Set<FlowKey> = []
        /// conntrack's tuple: this kernel has no DCCP tracker, so DCCP is
        /// kept as an unknown protocol, by address pair.
        func tracked(_ f: FlowPacket) -> FlowPacket {
            var t = f
            if f.protocolNumber == 33 {
                t.sourcePort = nil
                t.destinationPort = nil
            }
            return t
        }
        var conntrack: [FlowKey: (NFTInterpreter.Conntrack, original: FlowPacket)] = [:]
        var expectedCounts = [Int](repeating: 0, count: daemonConfig.classify.rules.count)
        var ruledPackets = 0
        var connectionPackets = 0
        for step in 0..<3000 {
            // A new flow, or a packet of a known one in either direction.
            var flow: FlowPacket
            if flows.isEmpty || Int.random(in: 0..<3, using: &rng) == 0 {
                let v6 = Bool.random(using: &rng)
                let proto = ([6, 17, 17, 132, 33, 136, v6 ? 58 : 1, 47, 50, 253] as [UInt8]).randomElement(
                    using: &rng)!
                let ports = TransportProtocol.hasPorts(proto)
                flow = FlowPacket(
                    protocolNumber: proto, source: address(v6), destination: address(v6),
                    sourcePort: ports ? port() : nil, destinationPort: ports ? port() : nil)
                // Two flows in one slot of qosmapd's table evict each other
                // (the documented "when full" difference): keep them apart.
                let slot = FlowKey(flow).hash32 & UInt32(ConnectionTable.slots - 1)
                if !seen.contains(FlowKey(flow)) {
                    guard !slots.contains(slot) else { continue }
                    slots.insert(slot)
                    seen.insert(FlowKey(flow))
                }
                flows.append(flow)
            } else {
                flow = flows.randomElement(using: &rng)!
                if Bool.random(using: &rng) { flow = flow.reversed }
            }
            flow.dscp =
                ([0, 0, 46, 10, 34] as [UInt8]).randomElement(using: &rng)
                ?? UInt8.random(in: 0..<64, using: &rng)
            let local = output && Bool.random(using: &rng)
            let inIndex = local ? 0 : Int.random(in: 0...Self.interfaces.count, using: &rng)
            var outIndex = Int.random(in: 1...Self.interfaces.count, using: &rng)
            if outIndex == inIndex { outIndex = outIndex % Self.interfaces.count + 1 }
            flow.ingress = inIndex == 0 ? nil : Self.interfaces[inIndex - 1]
            let mark = UInt32.random(in: 0...UInt32.max, using: &rng)

            // qosmapd.
            var bytes = ProbeFrame.packet(flow, ecn: UInt8.random(in: 0..<4, using: &rng), payload: 4)
            let l4 = flow.source.isIPv6 ? 40 : 20
            if !TransportProtocol.hasPorts(flow.protocolNumber!), flow.protocolNumber != 1,
                flow.protocolNumber != 58
            {
                // Port-like bytes where a protocol without ports has its header:
                // `th dport` reads them, so a port rule must check the protocol.
                for (k, v) in [port(), port()].enumerated() {
                    bytes[l4 + 2 * k] = UInt8(v >> 8)
                    bytes[l4 + 2 * k + 1] = UInt8(v & 0xFF)
                }
            }
            let before = pipeline.counts.rulePackets
            let verdict = bytes.withUnsafeMutableBytes { buf in
                var q = QueuedPacket(
                    id: 1, hook: local ? 3 : 2, mark: mark, inputInterface: local ? nil : UInt32(inIndex),
                    outputInterface: UInt32(outIndex),
                    payload: buf)
                return pipeline.decide(&q, snapshot: snapshot)
            }
            let tos = flow.source.isIPv6 ? (bytes[0] & 0x0F) << 4 | bytes[1] >> 4 : bytes[1]
            let ruled = pipeline.counts.rulePackets.indices.first {
                pipeline.counts.rulePackets[$0] != (before[safe: $0] ?? 0)
            }

            // nft, with conntrack's view of the flow (ICMP keyed as qosmapd's:
            // the echo identifier does not matter, since the export refuses
            // connection rules that can match ICMP).
            let th = (
                UInt16(bytes[l4]) << 8 | UInt16(bytes[l4 + 1]),
                UInt16(bytes[l4 + 2]) << 8 | UInt16(bytes[l4 + 3])
            )
            var p = NFTInterpreter.Packet(
                v6: flow.source.isIPv6, l4proto: flow.protocolNumber!, source: flow.source,
                destination: flow.destination, th: th, iif: flow.ingress ?? "",
                oif: Self.interfaces[outIndex - 1], dscp: flow.dscp, mark: mark)
            let key = FlowKey(tracked(flow))
            var entry = conntrack[key] ?? (NFTInterpreter.Conntrack(), flow)
            let isReply =
                (flow.source, tracked(flow).sourcePort)
                != (entry.original.source, tracked(entry.original).sourcePort)
            if entry.0.confirmed, isReply { entry.0.replied = true }
            entry.0.state = entry.0.replied ? "established" : "new"
            var ct: NFTInterpreter.Conntrack? = entry.0
            let counted = nft.counters
            nft.run(&p, &ct, hook: local ? "output" : "forward")
            entry.0 = ct!
            entry.0.confirmed = true
            conntrack[key] = entry
            let nftRuled = nft.counters.keys.filter { nft.counters[$0] != counted[$0] }

            let context = "seed \(seed) step \(step): \(flow) in \(inIndex) out \(outIndex)"
            #expect(p.dscp == tos >> 2, "DSCP: \(context)")
            #expect(p.mark == verdict.mark ?? mark, "mark: \(context)")
            #expect(p.priority == verdict.priority ?? 0, "priority: \(context)")
            let ruleName = ruled.map { "rule-" + daemonConfig.classify.rules[$0].name }
            #expect(nftRuled == (ruleName.map { [$0] } ?? []), "rule: \(context)")
            if let ruled {
                expectedCounts[ruled] += 1
                ruledPackets += 1
                if daemonConfig.classify.firstMatch(flow) == nil { connectionPackets += 1 }
            }
        }
        for (n, rule) in daemonConfig.classify.rules.enumerated() {
            #expect(nft.counters["rule-" + rule.name] == expectedCounts[n], "\(rule.name)")
        }
        // The test means something: rules matched, and connections marked replies.
        #expect(ruledPackets > 300)
        #expect(connectionPackets > 50)
    }

    /// Runs `export nft --config` on `yaml` written to a file; extra arguments after.
    static func export(_ yaml: String, _ extra: [String] = []) throws -> (
        status: Int32, out: String, err: String
    ) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "qosmap-nft-flow-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("q.yaml")
        try yaml.write(to: file, atomically: true, encoding: .utf8)
        let result = qosmapInProcess(["export", "nft", "--config", file.path] + extra)
        return (result.status, result.out, result.err.replacingOccurrences(of: file.path, with: "q.yaml"))
    }

    /// What nft cannot do as qosmapd does is refused: one positioned line
    /// per problem, exit 65, nothing on standard output.
    @Test(
        arguments: [
            (
                "classify:\n  rules:\n    - name: cams\n      match: {source: [198.18.3.0/24]}\n      set: {class: AF4}\n",
                [], "q.yaml:3:7: rule 'cams' has connection: true and can match icmp, icmpv6, dccp, whose"
            ),
            (
                "classify:\n  rules:\n    - name: ping\n      match: {protocol: [tcp, icmpv6]}\n      set: {class: AF4}\n",
                [], "q.yaml:3:7: rule 'ping' has connection: true and can match icmpv6, whose"
            ),
            (
                "classify:\n  rules:\n    - name: ports\n      match: {destination-port: 443}\n      set: {class: AF4}\n",
                [], "q.yaml:3:7: rule 'ports' has connection: true and can match dccp, whose"
            ),
            (
                "classify:\n  connection-mark-mask: 0x3\n  rules:\n"
                    + (1...4).map {
                        "    - {name: r\($0), match: {protocol: tcp, destination-port: \($0)}, set: {class: EF}}\n"
                    }.joined(),
                [],
                "q.yaml:7:7: rule 'r4' is rule 4 with connection: true, but connection-mark-mask 0x3 numbers at most 3 rules;"
            ),
            (
                "rules: {hooks: [forward, output]}\nclassify:\n  rules:\n    - name: web\n      match: {protocol: tcp}\n      set: {class: AF2}\n",
                ["--priority", "raw"],
                "q.yaml:4:7: rules.hooks has output and a rule has connection: true, but --priority -300 runs before conntrack (-200)"
            ),
            (
                "classify:\n  rules:\n    - name: q\n      match: {ingress: ['a\"b'], protocol: tcp}\n      set: {class: AF2}\n",
                [], "q.yaml:3:7: rule 'q': interface name 'a\"b' cannot be written as an nft string;"
            ),
            (
                "classify:\n  flows:\n    bulk: {packets-per-second: 100, hold: 5, set: {class: BE, color: yellow}}\n",
                [], "q.yaml:3:5: classify.flows cannot be exported: nft meters are not exact"
            ),
        ] as [(String, [String], String)])
    func refusals(yaml: String, extra: [String], message: String) throws {
        let r = try Self.export(yaml, extra)
        #expect(r.status == 65)
        #expect(r.out == "")
        #expect(r.err.hasPrefix(message), "\(r.err)")
        #expect(r.err.split(separator: "\n").count == 1, "\(r.err)")
    }

    /// The same rules without what nft cannot do are accepted: ICMP with
    /// `connection: false`, a protocol, 3 rules in a 2-bit mask, output after conntrack.
    @Test func acceptedNeighbours() throws {
        let yaml = """
            rules: {hooks: [forward, output]}
            classify:
              connection-mark-mask: 0x3
              rules:
                - {name: cams, match: {source: [198.18.3.0/24]}, set: {class: AF4}, connection: false}
                - {name: r2, match: {protocol: udp}, set: {class: EF}}
                - {name: r3, match: {protocol: [tcp, gre]}, set: {class: EF}}
                - {name: r4, match: {protocol: icmp}, set: {class: BE}, connection: false}
            """
        let r = try Self.export(yaml, ["--priority", "-199", "--table", "qosmap_check"])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("ct mark set ct mark & 0xfffffffc | 0x3\n"))
        #expect(!r.out.contains("| 0x4\n"))
        if nftCheckable { #expect(try nftCheck(r.out) == nil) }
    }

    /// Trust 802.1p: a tagged frame that a rule classified leaves no carry
    /// bits (as one trust classified), and nft accepts the ruleset.
    @Test func carryClearedByRules() throws {
        let yaml =
            try #require(nftTestConfigs.first { $0.0 == "nft-8021p" }?.1)
            + "\nclassify:\n  rules:\n    - {name: web, match: {protocol: tcp, source-port: 443}, set: {class: AF2}}\n"
        let text = try nftRuleset("c", yaml, table: "qosmap_check")
        let start = try #require(text.range(of: "  chain rule1_1 {\n"))
        let body = text[start.upperBound...].prefix { $0 != "}" }
        #expect(body.contains("    meta mark set meta mark & 0xffffe0ff\n"))
        if nftCheckable { #expect(try nftCheck(text) == nil) }
    }
}

extension Array {
    fileprivate subscript(safe i: Int) -> Element? { indices.contains(i) ? self[i] : nil }
}
