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
        var priority: UInt8?

        var isEmpty: Bool { dscp == nil && mark == nil && priority == nil }

        static func < (a: Action, b: Action) -> Bool {
            (Int(a.dscp ?? 255), a.mark ?? 0, Int(a.priority ?? 255))
                < (Int(b.dscp ?? 255), b.mark ?? 0, Int(b.priority ?? 255))
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

        /// The actions for a frame tagged PCP/DEI (index `PCP << 1 | DEI`) under
        /// a trust-8021p policy: `PacketMarker` on a tagged Ethernet frame (an
        /// S-tag for DEI 1, whose DEI alone means drop eligibility).
        func tagActions(_ policy: MarkingPolicy, _ family: Family) -> [Action] {
            (0..<16).map { k in
                let (pcp, dei) = (UInt8(k >> 1), k & 1 == 1)
                let tci = UInt16(pcp) << 13 | (dei ? 0x1000 : 0)
                var frame: [UInt8] = [
                    2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, dei ? 0x88 : 0x81, dei ? 0xa8 : 0x00,
                ]
                frame +=
                    [UInt8(tci >> 8), UInt8(tci & 0xff)] + (family == .v4 ? [0x08, 0x00] : [0x86, 0xdd])
                frame += Self.header(family, dscp: 0)
                let result = PacketMarker.remark(&frame, format: .ethernet, policy: policy)
                var a = Action()
                // The DSCP is written whatever the packet carried (0 here), so always set it.
                if rewrite, let new = result.newDSCP?.rawValue { a.dscp = new }
                if let encoding = config.mark { a.mark = encoding.value(for: result.treatment) }
                if config.priority { a.priority = policy.egress.pcp(for: result.treatment).rawValue }
                return a
            }
        }

        func actions(_ policy: MarkingPolicy, _ family: Family) -> [Action] {
            (0..<64).map { d in
                var packet = Self.header(family, dscp: UInt8(d))
                let result = PacketMarker.remark(&packet, format: .ip, policy: policy)
                var a = Action()
                if rewrite, let new = result.newDSCP?.rawValue, new != UInt8(d) { a.dscp = new }
                if let encoding = config.mark { a.mark = encoding.value(for: result.treatment) }
                if config.priority { a.priority = policy.egress.pcp(for: result.treatment).rawValue }
                return a
            }
        }

        var chains = Set<String>()
        var bodies: [String: String] = [:]
        let carry = config.carryMask
        let carryShift = UInt32(carry.trailingZeroBitCount)
        let clearCarry = "    meta mark set meta mark & \(QoSMapCommand.Export.hex(~carry))\n"
        /// The chain for action `a`; with `clearing`, one that first clears
        /// the 802.1p carry bits (a packet classified by them).
        func verdict(_ a: Action, _ f: Family, clearing: Bool = false) -> String {
            if clearing {
                guard !a.isEmpty else {
                    chains.insert("clear_carry")
                    bodies["clear_carry"] = clearCarry
                    return "goto clear_carry"
                }
                let inner = verdict(a, f)
                let name = "c_" + inner.dropFirst("goto ".count)
                chains.insert(name)
                bodies[name] = clearCarry + (bodies[String(inner.dropFirst("goto ".count))] ?? "")
                return "goto \(name)"
            }
            guard !a.isEmpty else { return "accept" }
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
                name += "_p\(p)"
                body += "    meta priority set 0:\(p)\n"
            }
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
        func policyChain(_ i: String?, _ o: String?) -> String {
            let policy = policies.policy(input: i, output: o)
            var body = ""
            if policy.trust == .dot1p {
                // Tagged frames: the ingress chain put 1, PCP, DEI in the carry bits.
                for f in Family.allCases {
                    let elements = tagActions(policy, f).enumerated().map {
                        QoSMapCommand.Export.hex((0x10 | UInt32($0.offset)) << carryShift & carry) + " : "
                            + verdict($0.element, f, clearing: true)
                    }
                    body += vmap(
                        "meta nfproto \(f.nfproto) meta mark & \(QoSMapCommand.Export.hex(carry))", elements,
                        indent: "    ")
                }
                // Untagged: no carry; the DSCP tables below hold the engine's fallback.
            }
            for f in Family.allCases {
                let elements = actions(policy, f).enumerated().map {
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
        base += only ?? ""
        base += rules(inputs: inputs, outputs: outputs)
        base += "  }\n"
        if config.hooks.contains("output") {
            // Host-originated packets have no input interface: the config's defaults.
            base += "  chain output {\n"
            base += "    type filter hook output priority \(priority); policy accept;\n"
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
        out += QoSMapCommand.Export.tableHeader(table)
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
                "# mark bits \(QoSMapCommand.Export.hex(carry)) (ebpf.pcp-carry-mask); the forward chain above maps them.\n"
            out += "table netdev \(table) {\n  comment \"\(NFTIdentifier.marker)\"\n"
            for name in tagged {
                out += "  chain ingress_\(Self.chainSafe(name)) {\n"
                out += "    type filter hook ingress device \(quoted(name)) priority -500; policy accept;\n"
                out += clearCarry
                // A C-tag's bit is the old CFI, not drop eligibility: DEI only from S-tags.
                for (tpid, deis) in [("8021q", [0]), ("8021ad", [0, 1])] {
                    for pcp in 0..<8 {
                        for dei in deis {
                            let v = (0x10 | UInt32(pcp << 1 | dei)) << carryShift & carry
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
        switch family {
        case .v4:
            var h: [UInt8] = [0x45, dscp << 2, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 19, 0, 1]
            h += [0, 1, 0, 2, 0, 8, 0, 0]
            return h
        case .v6:
            let tc = dscp << 2
            var h: [UInt8] = [0x60 | tc >> 4, (tc & 0xF) << 4, 0, 0, 0, 8, 17, 64]
            h += [0xFD] + [UInt8](repeating: 0, count: 14) + [1]
            h += [0xFD] + [UInt8](repeating: 0, count: 14) + [2]
            h += [0, 1, 0, 2, 0, 8, 0, 0]
            return h
        }
    }
}
