import ArgumentParser
import QoSMapCapture
import QoSMapCore
import QoSMapPacket
import QoSMapTables

/// A packet described on the command line (`classify`, `explain --config`).
struct PacketOptions: ParsableArguments {
    @Option(name: .long, help: "The protocol: tcp, udp, icmp, icmpv6, sctp, ... or 0-255.")
    var `protocol`: String?

    @Option(name: .long, help: "The source address (IPv4 or IPv6).")
    var source: String?

    @Option(name: .long, help: "The destination address.")
    var destination: String?

    @Option(name: .customLong("source-port"), help: "The source port.")
    var sourcePort: String?

    @Option(name: .customLong("destination-port"), help: "The destination port.")
    var destinationPort: String?

    @Option(name: .long, help: "The DSCP it arrives with (a value or PHB name; default 0).")
    var dscp: String?

    @Option(name: .long, help: "The ECN bits it arrives with (0-3; default 0).")
    var ecn: UInt8 = 0

    @Option(
        name: .long,
        help: ArgumentHelp(
            "An address qosmapd would have learned from a DNS reply, for dns: rules (repeatable; TTL 300 s unless given).",
            valueName: "NAME=ADDRESS[,TTL]"))
    var learned: [String] = []

    @Flag(
        name: .long,
        help: "Use the addresses the running qosmapd learned for dns: rules (read from --socket).")
    var live = false

    @OptionGroup var status: StatusSocketOptions

    /// With `--live`, the daemon's learned addresses (``StatusClient``); else none.
    func liveLearned() throws -> [StatusReport.LearnedAddress] {
        guard live else { return [] }
        return try StatusClient.fetch(status.socket, limit: 100_000).dns.items
    }

    /// Whether any field was given.
    var isEmpty: Bool {
        `protocol` == nil && source == nil && destination == nil && sourcePort == nil
            && destinationPort == nil
            && dscp == nil
    }

    /// The packet, received on `ingress`; usage errors name the bad option.
    func packet(ingress: String?) throws -> FlowPacket {
        guard let sourceText = source, let destinationText = destination else {
            throw UsageError("a packet needs --source and --destination (IPv4 or IPv6 addresses)")
        }
        guard let src = IPAddress(parsing: sourceText) else {
            throw UsageError("invalid --source '\(sourceText)'; allowed: an IPv4 or IPv6 address")
        }
        guard let dst = IPAddress(parsing: destinationText) else {
            throw UsageError("invalid --destination '\(destinationText)'; allowed: an IPv4 or IPv6 address")
        }
        guard src.isIPv6 == dst.isIPv6 else {
            throw UsageError(
                "--source \(sourceText) and --destination \(destinationText) are of different families")
        }
        var proto: UInt8 = src.isIPv6 ? 58 : 1
        if let text = `protocol` {
            do { proto = try TransportProtocol.parse(text) } catch {
                throw UsageError("--protocol: \(error)")
            }
        } else if sourcePort != nil || destinationPort != nil {
            throw UsageError("ports need --protocol (tcp, udp, sctp, dccp or udplite)")
        }
        func port(_ text: String?, _ name: String) throws -> UInt16? {
            guard let text else { return TransportProtocol.hasPorts(proto) ? 0 : nil }
            guard TransportProtocol.hasPorts(proto) else {
                throw UsageError("--\(name): protocol \(TransportProtocol.name(proto)) has no ports")
            }
            guard let v = parseInteger(Substring(text)), (0...65535).contains(v) else {
                throw UsageError("invalid --\(name) '\(text)'; allowed: 0-65535")
            }
            return UInt16(v)
        }
        var d: UInt8 = 0
        if let text = dscp {
            do { d = try DSCP(parsing: text).rawValue } catch { throw UsageError("--dscp: \(error)") }
        }
        guard ecn <= 3 else { throw UsageError("invalid --ecn '\(ecn)'; allowed: 0-3") }
        return FlowPacket(
            protocolNumber: proto, source: src, destination: dst,
            sourcePort: try port(sourcePort, "source-port"),
            destinationPort: try port(destinationPort, "destination-port"),
            ingress: ingress, dscp: d)
    }
}

/// A qosmapd config's flow rules and policies, deciding packets as qosmapd
/// does (``FlowClassifier``, the connection table, then trust).
struct FlowDecider {
    let policies: ExportPolicies
    let classifier: FlowClassifier
    let connections = ConnectionTable()
    /// The `--learned` addresses, in the config's `dns:` lists.
    let learned: DNSAddressStore
    /// `classify.flows` as the daemon runs it (the same table and state
    /// machine), fed with each captured packet's time; nil without flows.
    let behaviour: FlowBehaviourTable?

    /// What one packet gets.
    struct Decision {
        var rule: FlowRule?
        var ruleIndex: Int?
        var viaConnection = false
        var treatment: Treatment
        /// Where trust's cell is written (when no rule classified the packet).
        var trustSource: String?
        var trust: TrustMode
        var inboundDomain: String
        var outboundDomain: String
        var leavingDSCP: UInt8?
        var mark: UInt32?
        /// The skb priority: the egress queue's class id (`7173:MINOR`) when
        /// it has queues, else the PCP with `priority: true`.
        var priority: UInt32?
        /// The egress queue, `7173:15 (EF, pq)`, when the egress has queues.
        var queue: String?
        /// For a `dns:` rule: the learned entry that put the destination in its list.
        var learned: DNSLearnedEntry?
        /// The destination, for the `learned` text.
        var destination: IPAddress?
        /// What flow behaviour did (`.none` also when not checked).
        var behaviour: FlowVerdict = .none
        /// The class and color before flow behaviour replaced them.
        var beforeBehaviour: Treatment?
    }

    /// `learned`: `--learned NAME=ADDRESS[,TTL]` values, learned at time 0.
    /// `live`: the running daemon's learned addresses (`--live`), each
    /// expiring when the daemon's does; a name no `dns:` list of this config
    /// matches (the daemon runs another config) is skipped.
    init(
        _ policies: ExportPolicies, file: String, learned: [String] = [],
        live: [StatusReport.LearnedAddress] = []
    ) throws {
        self.policies = policies
        do {
            classifier = try FlowClassifier(policies.config.classify)
        } catch {
            throw DataError("\(file):1:1: classify: \(error)")
        }
        let set = policies.config.classify
        var store = DNSAddressStore(groups: set.dnsGroups, settings: set.dns)
        for text in learned {
            let parts = text.split(separator: "=", maxSplits: 1)
            let rest =
                parts.count == 2 ? parts[1].split(separator: ",", omittingEmptySubsequences: false) : []
            let usage =
                "invalid --learned '\(text)'; allowed: NAME=ADDRESS or NAME=ADDRESS,TTL (e.g. a.zoom.us=198.18.5.1,60)"
            guard parts.count == 2, rest.count == 1 || rest.count == 2,
                let address = IPAddress(parsing: rest[0])
            else {
                throw UsageError(usage)
            }
            var ttl: UInt32 = 300
            if rest.count == 2 {
                guard let t = parseInteger(rest[1]), (0...Int(Int32.max)).contains(t) else {
                    throw UsageError(usage)
                }
                ttl = UInt32(t)
            }
            let pattern: DNSNamePattern
            do { pattern = try DNSNamePattern(parsing: String(parts[0])) } catch {
                throw UsageError("--learned: \(error)")
            }
            guard !pattern.isSuffix else { throw UsageError("\(usage): a name, not a pattern") }
            guard !store.matchingGroups([pattern.name]).isEmpty else {
                throw UsageError(
                    "--learned '\(text)': \(pattern.name) matches no dns: list of the config (\(set.dnsGroups.isEmpty ? "it has none" : set.dnsGroups.map { $0.map(\.description).joined(separator: ", ") }.joined(separator: "; ")))"
                )
            }
            _ = store.learn(
                names: [pattern.name], addresses: [DNSAddressAnswer(address: address, ttl: ttl)], now: 0)
        }
        for entry in live {
            guard let address = IPAddress(parsing: entry.address),
                let name = try? DNSNamePattern(parsing: entry.name), !name.isSuffix,
                !store.matchingGroups([name.name]).isEmpty
            else { continue }
            let question = (try? DNSNamePattern(parsing: entry.question))?.name ?? name.name
            // Learned as long ago as makes it expire when the daemon's entry
            // does (time 0 is now): the reply's TTL and the daemon's expiry both shown.
            let lifetime = Int64(set.dns.lifetime(ttl: entry.ttl))
            _ = store.learn(
                names: question == name.name ? [name.name] : [question, name.name],
                addresses: [DNSAddressAnswer(address: address, ttl: entry.ttl)],
                interface: "qosmapd (--live)",
                now: entry.expiresIn - lifetime)
        }
        self.learned = store
        behaviour = set.behaviour.isEmpty ? nil : FlowBehaviourTable(set.behaviour)
    }

    /// Decides a described packet, built as a bare IP packet
    /// (``ProbeFrame/packet(_:ecn:payload:)``), that leaves by `egress`.
    func decide(_ p: FlowPacket, ecn: UInt8, egress: String?) -> (fields: FlowFields, decision: Decision)? {
        var bytes = ProbeFrame.packet(p, ecn: ecn)
        return bytes.withUnsafeMutableBytes { buf in
            PacketFlow.fields(UnsafeRawBufferPointer(buf), format: .ip).map {
                (
                    $0,
                    decide(
                        UnsafeRawBufferPointer(buf), format: .ip, fields: $0, ingress: p.ingress,
                        egress: egress)
                )
            }
        }
    }

    /// Decides a packet (`bytes` a bare IP packet or frame of `format`) that
    /// arrives on `ingress` and leaves by `egress`.
    /// `now`: the packet's time in nanoseconds (a capture's timestamp), for
    /// flow behaviour; nil for a described packet, which has no flow history.
    func decide(
        _ bytes: UnsafeRawBufferPointer, format: PacketFormat, fields f: FlowFields, ingress: String?,
        egress: String?, now: UInt64? = nil
    ) -> Decision {
        let policy = policies.policy(input: ingress, output: egress)
        let rules = policies.config.classify.rules
        let matched = classifier.classify(
            protocolNumber: f.protocolNumber, source: f.source, destination: f.destination,
            sourcePort: f.sourcePort, destinationPort: f.destinationPort,
            ingress: ingress.flatMap { classifier.ingressClass[$0] } ?? 0, dscp: f.dscp,
            dnsMask: learned.mask(of: f.destination))
        // Connection first, as the daemon decides (ConnectionTable.resolve).
        let resolved = connections.resolve(
            f.flowKey, matched: matched, keepsConnection: { rules[$0].connection }, epoch: 0)
        let index = resolved?.index
        let via = resolved?.viaConnection ?? false
        var result: RemarkResult
        var source: String?
        if let index {
            result = PacketMarker.classify(
                bytes, format: format, policy: policy,
                treatment: rules[index].action.treatment(ingress: policy.ingress))
        } else {
            result = PacketMarker.classify(bytes, format: format, policy: policy)
            if let field = policy.trust.field, field == .dscp || field == .ipPrecedence {
                let v = field == .dscp ? f.dscp : f.dscp >> 3
                source = policies.tables.source(policy.ingress, .inbound(field, v))
            }
        }
        // Flow behaviour after rules and trust, as the daemon: the packet's
        // class's tests, the same table, the capture's clock.
        var verdict = FlowVerdict.none
        var before: Treatment?
        if let table = behaviour, let now,
            let tests = table.perClass[Int(result.treatment.serviceClass.rawValue)]
        {
            // The length the daemon sees is the IP header's (a capture may
            // keep less); above the MTU, a capture taken before GSO
            // segmentation: counted as its segments, as nfqueue does.
            let ip = UnsafeRawBufferPointer(rebasing: bytes[(bytes.count - f.ipLength)...])
            var length = f.ipLength
            if ip.count >= 40, ip[0] >> 4 == 6 {
                length = 40 + (Int(ip[4]) << 8 | Int(ip[5]))
            } else if ip.count >= 20, ip[0] >> 4 == 4 {
                length = Int(ip[2]) << 8 | Int(ip[3])
            }
            let segments = FlowBehaviourTable.segments(
                ip, length: length, gso: length > FlowBehaviourTable.assumedMTU)
            let e = table.update(
                f.flowKey, length: UInt32(clamping: length), segments: segments, now: now, tests: tests)
            let replaced: Treatment? =
                switch e.verdict {
                case .none: nil
                case .bulk: tests.bulk?.treatment
                case .interactive: tests.interactive?.treatment
                }
            if let replaced {
                verdict = e.verdict
                before = result.treatment
                result = PacketMarker.classify(bytes, format: format, policy: policy, treatment: replaced)
            }
        }
        let config = policies.config
        let t = result.treatment
        var entry: DNSLearnedEntry?
        if let index, !via, let list = rules[index].match.dns,
            let g = classifier.dnsGroups.firstIndex(of: list)
        {
            entry = learned.entries(of: f.destination).first { $0.group == g }
        }
        return Decision(
            rule: index.map { rules[$0] }, ruleIndex: index, viaConnection: via, treatment: t,
            trustSource: source,
            trust: policy.trust, inboundDomain: policy.ingress.name, outboundDomain: policy.egress.name,
            leavingDSCP: config.rewriteDSCP || config.markOnly ? result.newDSCP?.rawValue : f.dscp,
            mark: config.mark?.value(for: t),
            // Queues win over `priority: true`, as in qosmapd's datapaths.
            priority: config.queuePriorities(output: egress)?[Int(t.serviceClass.rawValue)]
                ?? (config.priority ? UInt32(policy.egress.pcp(for: t).rawValue) : nil),
            queue: config.queueName(output: egress, t.serviceClass), learned: entry,
            destination: f.destination, behaviour: verdict, beforeBehaviour: before)
    }
}

extension DNSLearnedEntry {
    /// `198.18.5.1 learned for eu01.zoom.us (question eu01.zoom.us, TTL 10 s, from 198.18.0.53 on in1); expires in 60 s`.
    func text(_ address: IPAddress, now: Int64) -> String {
        var from: [String] = ["TTL \(source.ttl) s"]
        if let server = source.server { from.append("from \(server)") }
        if let i = source.interface { from.append("on \(i)") }
        if source.server == nil, source.interface == nil { from.append("--learned") }
        return
            "\(address) learned for \(source.name) (question \(source.question), \(from.joined(separator: ", "))); expires in \(expires - now) s"
    }
}

/// How a packet's flow reads in text: `udp 198.18.1.2:40000 -> 198.18.2.9:5060`.
func flowText(_ f: FlowFields) -> String {
    let proto = f.protocolNumber.map(TransportProtocol.name) ?? "?"
    func end(_ a: IPAddress, _ p: UInt16?) -> String {
        guard let p else { return a.description }
        return a.isIPv6 ? "[\(a)]:\(p)" : "\(a):\(p)"
    }
    return "\(proto) \(end(f.source, f.sourcePort)) -> \(end(f.destination, f.destinationPort))"
}

extension FlowDecider.Decision {
    /// `rule voip (q.yaml:12)`, `connection of rule voip (q.yaml:12)` or `trust dscp in default (default.yaml:40)`.
    var classifiedBy: String {
        if let rule {
            let dns = learned.flatMap { e in destination.map { "; " + e.text($0, now: 0) } } ?? ""
            return (viaConnection ? "connection of rule " : "rule ") + "\(rule.name) (\(rule.position))" + dns
        }
        let where_ = trustSource.map { " (\($0))" } ?? ""
        return "trust \(trust.name) in \(inboundDomain)\(where_)"
    }

    /// `; then flow behaviour: bulk (was EF/green)`, or empty.
    var behaviourText: String {
        guard let beforeBehaviour else { return "" }
        return
            "; then flow behaviour: \(behaviour == .bulk ? "bulk" : "interactive") (was \(beforeBehaviour))"
    }

    /// `dscp 46 (EF)`, with mark and priority when the config sets them, or
    /// the queue (`queue 7173:15 (EF, pq)`) when the egress has queues.
    var leavesText: String {
        var parts = [leavingDSCP.map { "dscp \(DSCP(truncating: $0))" } ?? "dscp unchanged"]
        if let mark { parts.append("mark 0x" + String(mark, radix: 16)) }
        // The queue's class id is the priority, so the queue is named instead.
        if let queue {
            parts.append("queue \(queue)")
        } else if let priority {
            parts.append("priority \(priority)")
        }
        return parts.joined(separator: ", ")
    }
}

/// `qosmap classify --json`, one packet.
struct ClassifyJSON: Encodable {
    struct Packet: Encodable {
        var `protocol`: Int?
        var source: String
        var destination: String
        var sourcePort: Int?
        var destinationPort: Int?
        var ingress: String?
        var egress: String?
        var dscp: Int
    }
    struct Rule: Encodable {
        var name: String
        var file: String
        var line: Int
        var column: Int
        var set: String
        var viaConnection: Bool
    }
    struct Leaves: Encodable {
        var dscp: Int?
        var mark: UInt32?
        var priority: Int?
    }
    /// The DNS reply that put the destination in a `dns:` rule's list.
    struct Learned: Encodable {
        var address: String
        var name: String
        var question: String
        var ttl: Int
        var expiresIn: Int
    }
    var index: Int?
    var packet: Packet
    var rule: Rule?
    var classifiedBy: String
    var serviceClass: String
    var color: String
    var leaves: Leaves
    var learned: Learned?
    /// `bulk` or `interactive` when flow behaviour replaced the class.
    var flowBehaviour: String?

    init(index: Int? = nil, _ f: FlowFields, ingress: String?, egress: String?, _ d: FlowDecider.Decision) {
        self.index = index
        packet = Packet(
            protocol: f.protocolNumber.map(Int.init), source: f.source.description,
            destination: f.destination.description, sourcePort: f.sourcePort.map(Int.init),
            destinationPort: f.destinationPort.map(Int.init), ingress: ingress, egress: egress,
            dscp: Int(f.dscp))
        rule = d.rule.map {
            Rule(
                name: $0.name, file: $0.position.file, line: $0.position.line, column: $0.position.column,
                set: $0.action.description, viaConnection: d.viaConnection)
        }
        classifiedBy = d.classifiedBy
        flowBehaviour = d.beforeBehaviour == nil ? nil : (d.behaviour == .bulk ? "bulk" : "interactive")
        serviceClass = d.treatment.serviceClass.name
        color = d.treatment.color.name
        leaves = Leaves(dscp: d.leavingDSCP.map(Int.init), mark: d.mark, priority: d.priority.map(Int.init))
        learned = d.learned.map {
            Learned(
                address: f.destination.description, name: $0.source.name.description,
                question: $0.source.question.description, ttl: Int($0.source.ttl), expiresIn: Int($0.expires))
        }
    }
}

/// `qosmap classify --in FILE --json`.
struct ClassifyCaptureJSON: Encodable {
    var packets: [ClassifyJSON]
    var notIP: [Int]
    var byRule: [String: Int]
    var byTrust: Int
}

extension QoSMapCommand {
    /// `qosmap classify`: which flow rule a packet meets, and what it leaves with.
    struct Classify: TextCommand {
        static let configuration = CommandConfiguration(
            commandName: "classify",
            abstract:
                "Show which flow rule (classify:) of a qosmapd config a packet matches, and its markings.",
            discussion: """
                Describe a packet (--protocol, --source, --destination, ports, --dscp) or give a capture \
                (--in FILE: pcap or pcapng, each packet decided in order, so that replies take their \
                connection's rule as qosmapd would). --ingress and --egress name the interfaces it \
                arrives on and leaves by (others get the config's defaults). Prints the rule that matched \
                with its file:line (or the trust cell that classified it), the class and color, and the \
                markings it leaves with. Exit 0; 64 a bad option; 65 a bad config or capture.

                Examples:
                  qosmap classify --config qosmapd.yaml --protocol udp --source 198.18.1.2 \\
                      --destination 198.18.2.9 --destination-port 5060 --ingress in1 --egress out1
                  qosmap classify --config qosmapd.yaml --in trace.pcap --ingress in1 --json
                """)

        @Option(
            name: .long, help: ArgumentHelp("The qosmapd config.", valueName: "FILE"), completion: .file())
        var config: String

        @Option(name: .long, help: "The interface the packet arrives on.")
        var ingress: String?

        @Option(name: .long, help: "The interface the packet leaves by.")
        var egress: String?

        @Option(
            name: .customLong("in"),
            help: ArgumentHelp("A capture to classify packet by packet.", valueName: "FILE"),
            completion: .file())
        var input: String?

        @OptionGroup var packet: PacketOptions
        @OptionGroup var tableOptions: TableOptions
        @OptionGroup var output: OutputOptions

        func validate() throws {
            if input != nil, !packet.isEmpty {
                throw ValidationError("give a packet (--source, --destination, ...) or --in FILE, not both")
            }
            if input == nil, packet.isEmpty {
                throw ValidationError(
                    "missing packet; give --source and --destination (and --protocol, ports, --dscp), or --in FILE"
                )
            }
        }

        func standardOutput() throws -> String {
            let policies = try Explain.snapshot(config, tableOptions)
            let decider = try FlowDecider(
                policies, file: config, learned: packet.learned, live: try packet.liveLearned())
            if let input { return try capture(input, decider) }
            let p = try packet.packet(ingress: ingress)
            guard let (f, d) = decider.decide(p, ecn: packet.ecn, egress: egress) else {
                throw UsageError("the described packet could not be built")
            }
            do {
                if output.json {
                    return jsonText(ClassifyJSON(f, ingress: ingress, egress: egress, d)) + "\n"
                }
                let path = "\(ingress ?? "(local)") -> \(egress ?? "(any)")"
                var lines = ["packet: \(flowText(f)) dscp \(DSCP(truncating: f.dscp)), \(path)"]
                if let rule = d.rule {
                    lines.append("rule: \(rule.name) (\(rule.position)): set \(rule.action)")
                } else {
                    lines.append(
                        "rule: none of \(policies.config.classify.rules.count) matched; trust decides")
                }
                lines.append("classified: \(d.treatment) by \(d.classifiedBy)")
                lines.append("leaves: \(d.leavesText) (outbound domain \(d.outboundDomain))")
                return lines.joined(separator: "\n") + "\n"
            }
        }

        func capture(_ path: String, _ decider: FlowDecider) throws -> String {
            let reader: CaptureReader
            do {
                reader = try CaptureReader(path: path)
            } catch {
                throw Remark.commandError(error, outputPath: path)
            }
            guard let link = LinkLayer(reader.linkType) else {
                throw DataError(
                    "\(path): link type \(reader.linkType) is not supported; allowed: the link types remark reads"
                )
            }
            let buffer = UnsafeMutableRawBufferPointer.allocate(
                byteCount: max(reader.snapshotLength, 262_144), alignment: 8)
            defer { buffer.deallocate() }
            var packets: [ClassifyJSON] = []
            var lines: [String] = []
            var notIP: [Int] = []
            var byRule: [String: Int] = [:]
            var byTrust = 0
            var n = 0
            while true {
                let next: CaptureRecord?
                do {
                    next = try reader.next(into: buffer)
                } catch {
                    throw Remark.commandError(error, outputPath: path)
                }
                guard let record = next else { break }
                n += 1
                let bytes = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<record.capturedLength])
                guard case .packet(let inner, let format) = link.view(bytes),
                    let f = PacketFlow.fields(UnsafeRawBufferPointer(inner), format: format)
                else {
                    notIP.append(n)
                    if !output.json { lines.append("\(n) not an IP packet") }
                    continue
                }
                let d = decider.decide(
                    UnsafeRawBufferPointer(inner), format: format, fields: f, ingress: ingress,
                    egress: egress,
                    now: UInt64(clamping: record.seconds) &* 1_000_000_000
                        &+ UInt64(clamping: record.nanoseconds))
                if let rule = d.rule { byRule[rule.name, default: 0] += 1 } else { byTrust += 1 }
                if output.json {
                    packets.append(ClassifyJSON(index: n, f, ingress: ingress, egress: egress, d))
                } else {
                    lines.append(
                        "\(n) \(flowText(f)) dscp \(f.dscp): \(d.treatment) by \(d.classifiedBy)\(d.behaviourText); leaves \(d.leavesText)"
                    )
                }
            }
            if output.json {
                return jsonText(
                    ClassifyCaptureJSON(packets: packets, notIP: notIP, byRule: byRule, byTrust: byTrust))
                    + "\n"
            }
            lines.append("")
            lines.append(
                "\(n) packets: \(n - notIP.count - byTrust) by rules, \(byTrust) by trust, \(notIP.count) not IP"
            )
            for rule in decider.policies.config.classify.rules where byRule[rule.name] != nil {
                lines.append("  \(rule.name) (\(rule.position)): \(byRule[rule.name]!)")
            }
            return lines.joined(separator: "\n") + "\n"
        }
    }
}
