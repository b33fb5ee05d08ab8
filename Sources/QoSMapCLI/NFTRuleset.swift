import QoSMapCore
import QoSMapPacket

/// A qosmapd config as one nftables table: the markings qosmapd would give,
/// set in the kernel with no daemon.
///
/// Every trust mode the config allows (`none`, `dscp`, `ip-precedence`) makes
/// the treatment a function of the 6 DSCP bits, so each (ingress, egress)
/// interface pair is a 64-entry table. Each entry is decided by running
/// ``PacketMarker/remark(_:format:policy:)`` (what qosmapd runs) on an IPv4 and
/// an IPv6 header with that DSCP, so the kernel rules cannot drift from the
/// daemon. The decision runs at the forward hook (and output with `rules.hooks:
/// [output]`): nft's `iifname` is unset at postrouting (no input device there),
/// so mark and priority are set in the same chain, which runs before
/// postrouting and the qdisc.
struct NFTRuleset {
    /// What one packet gets: nil fields are left as they are.
    struct Action: Hashable, Comparable {
        var dscp: UInt8?
        var mark: UInt32?
        /// The skb priority: a PCP (0–7) with `priority: true`, or a queue's
        /// class id (`7173:MINOR`) on an egress with `queues:`.
        var priority: UInt32?

        var isEmpty: Bool { dscp == nil && mark == nil && priority == nil }

        static func < (a: Action, b: Action) -> Bool {
            (Int(a.dscp ?? 255), a.mark ?? 0, Int(a.priority ?? UInt32.max))
                < (Int(b.dscp ?? 255), b.mark ?? 0, Int(b.priority ?? UInt32.max))
        }
    }

    enum Family: CaseIterable {
        case v4, v6
        var keyword: String { self == .v4 ? "ip" : "ip6" }
        var nfproto: String { self == .v4 ? "ipv4" : "ipv6" }
    }

    let text: String

    /// Builds the ruleset for `policies` in table `table`, chains at `priority`.
    init(policies: ExportPolicies, table: String, priority: Int, source: String) {
        let config = policies.config
        let named = config.interfaces.keys.sorted()
        let inputs: [String?] = named.map { $0 } + [nil]
        let outputs: [String?] = named.map { $0 } + [nil]
        // The mark-only split moves the DSCP write to nft; here nft does it all.
        let rewrite = config.rewriteDSCP || config.markOnly

        /// What the engine's `result` asks of nft; `newDSCP` is nil when the
        /// DSCP is left as it is.
        /// `queues` are the egress's skb priorities per class, when it has
        /// queues: they win over `priority: true`, as in qosmapd's datapaths.
        func action(_ result: RemarkResult, _ policy: MarkingPolicy, _ queues: [UInt32]?, newDSCP: UInt8?)
            -> Action
        {
            var a = Action()
            if rewrite { a.dscp = newDSCP }
            if let encoding = config.mark { a.mark = encoding.value(for: result.treatment) }
            if let queues {
                a.priority = queues[Int(result.treatment.serviceClass.rawValue)]
            } else if config.priority {
                a.priority = UInt32(policy.egress.pcp(for: result.treatment).rawValue)
            }
            return a
        }

        /// The actions for a frame tagged PCP/DEI (index `PCP << 1 | DEI`) under
        /// a trust-8021p policy. The DSCP is written whatever the packet
        /// carried (0 in the probe), so it is always set.
        func tagActions(_ policy: MarkingPolicy, _ queues: [UInt32]?, _ family: Family) -> [Action] {
            (0..<16).map { k in
                var frame = ProbeFrame.tagged(pcp: UInt8(k >> 1), dei: k & 1 == 1, ipv6: family == .v6)
                let result = PacketMarker.remark(&frame, format: .ethernet, policy: policy)
                return action(result, policy, queues, newDSCP: result.newDSCP?.rawValue)
            }
        }

        func actions(_ policy: MarkingPolicy, _ queues: [UInt32]?, _ family: Family) -> [Action] {
            (0..<64).map { d in
                var packet = Self.header(family, dscp: UInt8(d))
                let result = PacketMarker.remark(&packet, format: .ip, policy: policy)
                let new = result.newDSCP?.rawValue
                return action(result, policy, queues, newDSCP: new == UInt8(d) ? nil : new)
            }
        }

        var chains = Set<String>()
        var bodies: [String: String] = [:]
        let carry = config.carry
        let clearCarry = "    meta mark set meta mark & \(QoSMapCommand.Export.hex(~carry.mask))\n"
        /// The chain that applies `a` (name and body); nil when there is nothing to do.
        func chain(_ a: Action, _ f: Family) -> (name: String, body: String)? {
            guard !a.isEmpty else { return nil }
            var name = f.keyword
            var body = ""
            if let d = a.dscp {
                name += "_d\(d)"
                body += "    \(f.keyword) dscp set \(d)\n"
            }
            if let m = a.mark, let encoding = config.mark {
                name += "_m" + String(m, radix: 16)
                body +=
                    "    meta mark set meta mark & \(QoSMapCommand.Export.hex(~encoding.mask)) | \(QoSMapCommand.Export.hex(m))\n"
            }
            if let p = a.priority {
                // A PCP keeps its old name; a queue's class id is major:minor in hex, as tc writes it.
                let handle = TCHandle(rawValue: p)
                name +=
                    handle.major == 0
                    ? "_p\(p)" : "_q\(String(handle.major, radix: 16))_\(String(handle.minor, radix: 16))"
                body += "    meta priority set \(handle.major == 0 ? "0:\(p)" : handle.description)\n"
            }
            return (name, body)
        }
        /// The verdict for action `a`; with `clearing`, through a chain that
        /// first clears the 802.1p carry bits (a packet classified by them).
        func verdict(_ a: Action, _ f: Family, clearing: Bool = false) -> String {
            var target = chain(a, f)
            if clearing {
                // The plain chain is declared too, as the export always has.
                if let plain = target {
                    chains.insert(plain.name)
                    bodies[plain.name] = plain.body
                }
                target = target.map { ("c_" + $0.name, clearCarry + $0.body) } ?? ("clear_carry", clearCarry)
            }
            guard let (name, body) = target else { return "accept" }
            chains.insert(name)
            bodies[name] = body
            return "goto \(name)"
        }

        func quoted(_ s: String) -> String { "\"\(s)\"" }

        func vmap(_ selector: String, _ elements: [String], indent: String) -> String {
            var rule = "\(indent)\(selector) vmap {\n"
            var row: [String] = []
            for (n, e) in elements.enumerated() {
                row.append(e)
                if row.count == 4 || n == elements.count - 1 {
                    rule +=
                        indent + "  " + row.joined(separator: ", ") + (n == elements.count - 1 ? "\n" : ",\n")
                    row = []
                }
            }
            return rule + "\(indent)}\n"
        }

        // One chain per distinct 64-entry table (both families), shared by
        // every interface pair that has it. Two lookups (interfaces, then
        // DSCP) rather than one on `iifname . oifname . ip6 dscp`: nft 1.0.6
        // compiles `ip6 dscp` inside a concatenation as `ip6 dscp >> 6` on the
        // little-endian register, so every IPv6 key misses (seen on this VM).
        var policyChains: [(body: String, pairs: [String])] = []
        let flows = NFTFlowRules(config.classify)
        /// Rule chains by (rule, IPv4 verdict, IPv6 verdict, clears carry).
        var ruleChains: [String: String] = [:]
        var ruleChainCount: [Int: Int] = [:]
        /// The chain of rule `n` under `policy`: count, connection, then the
        /// egress marking of the rule's class and color, as trust's.
        func ruleChain(_ n: Int, _ policy: MarkingPolicy, _ queues: [UInt32]?) -> String {
            let t = config.classify.rules[n].action.treatment(ingress: policy.ingress)
            let verdicts = Family.allCases.map { f in
                var probe = Self.header(f, dscp: 0)
                let result = PacketMarker.remark(&probe, format: .ip, policy: policy, treatment: t)
                return verdict(action(result, policy, queues, newDSCP: result.newDSCP?.rawValue), f)
            }
            let clearing = policy.trust == .dot1p && carry.mask != 0
            let key = "\(n) \(verdicts.joined(separator: " ")) \(clearing)"
            if let name = ruleChains[key] { return name }
            let k = (ruleChainCount[n] ?? 0) + 1
            ruleChainCount[n] = k
            let name = "rule\(n + 1)_\(k)"
            ruleChains[key] = name
            var body = flows.chainHead(n)
            // A tagged frame a rule classified leaves no carry bits, as when trust did.
            if clearing { body += clearCarry }
            if verdicts.allSatisfy({ $0 == "accept" }) {
                body += "    accept\n"
            } else {
                body += "    meta nfproto vmap { ipv4 : \(verdicts[0]), ipv6 : \(verdicts[1]) }\n"
            }
            chains.insert(name)
            bodies[name] = body
            return name
        }
        func policyChain(_ i: String?, _ o: String?) -> String {
            let policy = policies.policy(input: i, output: o)
            let queues = config.queuePriorities(output: o)
            // Flow rules first, then the connection's rule, then trust.
            var body = flows.scan { ruleChain($0, policy, queues) }
            if policy.trust == .dot1p {
                // Tagged frames: the ingress chain put 1, PCP, DEI in the carry bits.
                for f in Family.allCases {
                    let elements = tagActions(policy, queues, f).enumerated().map {
                        QoSMapCommand.Export.hex(
                            carry.value(pcp: UInt8($0.offset >> 1), dei: $0.offset & 1 == 1))
                            + " : "
                            + verdict($0.element, f, clearing: true)
                    }
                    body += vmap(
                        "meta nfproto \(f.nfproto) meta mark & \(QoSMapCommand.Export.hex(carry.mask))",
                        elements,
                        indent: "    ")
                }
                // Untagged: no carry; the DSCP tables below hold the engine's fallback.
            }
            for f in Family.allCases {
                let elements = actions(policy, queues, f).enumerated().map {
                    "\($0.offset) : " + verdict($0.element, f)
                }
                body += vmap("\(f.keyword) dscp", elements, indent: "    ")
            }
            let pair = "\(i ?? "*") -> \(o ?? "*")"
            if let n = policyChains.firstIndex(where: { $0.body == body }) {
                policyChains[n].pairs.append(pair)
                return "policy_\(n + 1)"
            }
            policyChains.append((body, [pair]))
            return "policy_\(policyChains.count)"
        }

        // One rule per specificity, most specific first, then the defaults:
        // a packet goes to the first rule whose interfaces match.
        func rules(inputs: [String?], outputs: [String?]) -> String {
            var text = ""
            for (wantIn, wantOut) in [(true, true), (true, false), (false, true)] {
                var elements: [String] = []
                for i in inputs where (i != nil) == wantIn {
                    for o in outputs where (o != nil) == wantOut {
                        let key = [i.map(quoted), o.map(quoted)].compactMap { $0 }.joined(separator: " . ")
                        elements.append(key + " : goto " + policyChain(i, o))
                    }
                }
                guard !elements.isEmpty else { continue }
                let selector = [wantIn ? "iifname" : nil, wantOut ? "oifname" : nil].compactMap { $0 }
                text += vmap(selector.joined(separator: " . "), elements, indent: "    ")
            }
            return text + "    goto \(policyChain(nil, nil))\n"
        }

        // `rules: install` queues only these egress interfaces; the rest pass unmarked.
        let only = config.markedEgress.map { names in
            "    oifname != { " + names.map(quoted).joined(separator: ", ") + " } accept\n"
        }
        var base = ""
        base += "  chain forward {\n"
        base += "    type filter hook forward priority \(priority); policy accept;\n"
        base += flows.clearNewConnection
        base += only ?? ""
        base += rules(inputs: inputs, outputs: outputs)
        base += "  }\n"
        if config.hooks.contains("output") {
            // Host-originated packets have no input interface: the config's defaults.
            base += "  chain output {\n"
            base += "    type filter hook output priority \(priority); policy accept;\n"
            base += flows.clearNewConnection
            base += only ?? ""
            base += rules(inputs: [nil], outputs: outputs)
            base += "  }\n"
        }

        var out = "# qosmap export nft --config \(source)\n"
        out +=
            "# qosmapd's markings in the kernel, no daemon: iifname . oifname -> DSCP table -> one chain per action.\n"
        out +=
            "# Interfaces: \(named.isEmpty ? "none named (config defaults only)" : named.joined(separator: ", "))"
        out += "; others get the config's defaults. ECN bits are kept.\n"
        out += flows.comment
        // nft cannot shape: the download queues are `export tc --config`'s,
        // classified there by u32 on the IFB (netfilter runs after it).
        for name in config.queues.keys.sorted() where config.queues[name]!.ingressRate != nil {
            out +=
                "# Download queues of \(name) (ingress-rate): not in this ruleset; `qosmap export tc --config` builds them on its IFB and classifies there.\n"
        }
        out += QoSMapCommand.Export.tableHeader(table)
        out += flows.declarations
        for name in chains.sorted() {
            out += "  chain \(name) {\n" + (bodies[name] ?? "") + "  }\n"
        }
        for (n, chain) in policyChains.enumerated() {
            out +=
                "  chain policy_\(n + 1) {\n    # \(chain.pairs.joined(separator: ", "))\n" + chain.body
                + "  }\n"
        }
        out += base
        out += "}\n"
        let tagged = named.filter { policies.policy(input: $0, output: nil).trust == .dot1p }
        // The netdev table of the same name is replaced too, so that one left
        // by an earlier export with 802.1p interfaces goes.
        out +=
            "table netdev \(table) { comment \"\(NFTIdentifier.marker)\"; }\ndelete table netdev \(table)\n"
        if !tagged.isEmpty {
            out +=
                "# trust 8021p: the ingress hook of each such interface puts 1, PCP, DEI (S-tags only) in the\n"
            out +=
                "# mark bits \(QoSMapCommand.Export.hex(carry.mask)) (ebpf.pcp-carry-mask); the forward chain above maps them.\n"
            out += "table netdev \(table) {\n  comment \"\(NFTIdentifier.marker)\"\n"
            for name in tagged {
                out += "  chain ingress_\(Self.chainSafe(name)) {\n"
                out += "    type filter hook ingress device \(quoted(name)) priority -500; policy accept;\n"
                out += clearCarry
                // A C-tag's bit is the old CFI, not drop eligibility: DEI only from S-tags.
                for (tpid, deis) in [("8021q", [0]), ("8021ad", [0, 1])] {
                    for pcp in 0..<8 {
                        for dei in deis {
                            let v = carry.value(pcp: UInt8(pcp), dei: dei == 1)
                            out +=
                                "    ether type \(tpid) vlan pcp \(pcp)"
                                + (tpid == "8021ad" ? " vlan cfi \(dei)" : "")
                                + " meta mark set meta mark | \(QoSMapCommand.Export.hex(v))\n"
                        }
                    }
                }
                out += "  }\n"
            }
            out += "}\n"
        }
        text = out
    }

    /// An interface name as part of a chain name (letters, digits and _).
    static func chainSafe(_ name: String) -> String {
        String(name.map { $0.isASCII && ($0.isLetter || $0.isNumber) ? $0 : "_" })
    }

    /// A minimal IPv4 or IPv6 header plus UDP header with `dscp` and ECN 0.
    static func header(_ family: Family, dscp: UInt8) -> [UInt8] {
        ProbeFrame.ip(ipv6: family == .v6, dscp: dscp)
    }
}
