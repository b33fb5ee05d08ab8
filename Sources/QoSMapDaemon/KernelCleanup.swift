import BPFClassifier
import TrafficShaping

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// `qosmapd --cleanup`: removes from this network namespace what a qosmapd
/// that died without its shutdown (SIGKILL, a crash, a power cut of the
/// process) left in the kernel, and what `qosmap export nft` loaded: the tc
/// filters (ebpf datapath), the IFB devices `qmi-*` of download queues, the
/// iptables/ip6tables chains (nfqueue `rules: install`), the root qdiscs of
/// egress queues (handle 7173:) and the nftables tables `inet qosmap*`. Each removal is one line; nothing to
/// remove is one line too.
public enum KernelCleanup {
    /// What ``run(runner:)`` did.
    public struct Outcome: Sendable {
        /// One line per thing removed.
        public var removed: [String] = []
        /// One line per thing that could not be removed (or read).
        public var errors: [String] = []
    }

    /// Why cleanup must not run now: a qosmapd of this network namespace is
    /// running (its things are in use, and it would put them back), or nil.
    /// A daemon holding an interface lock (ebpf) shows as an abstract socket
    /// `@qosmapd/interface/NAME` in `/proc/net/unix`; any other (nfqueue) as
    /// a process named qosmapd whose network namespace is this one.
    public static func runningDaemon() -> String? {
        if let unix = try? String(contentsOfFile: "/proc/net/unix", encoding: .utf8) {
            for line in unix.split(separator: "\n") {
                guard let path = line.split(separator: " ").last, path.hasPrefix("@qosmapd/interface/") else {
                    continue
                }
                return "a qosmapd holds interface \(path.dropFirst("@qosmapd/interface/".count))"
            }
        }
        let ownNet = link("/proc/self/ns/net")
        let own = getpid()
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in pids {
            guard let pid = Int32(entry), pid != own else { continue }
            guard let comm = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8),
                comm == "qosmapd\n",
                ownNet != nil, link("/proc/\(pid)/ns/net") == ownNet
            else { continue }
            return "qosmapd pid \(pid) runs in this network namespace"
        }
        return nil
    }

    /// Removes everything; errors are collected, not thrown, so that one
    /// refusal does not keep the rest in place.
    public static func run(runner: CommandRunner = .system) -> Outcome {
        var outcome = Outcome()
        removeClassifiers(&outcome)
        removeDownloadIFBs(&outcome)
        removeQueues(&outcome)
        removeRules(runner, &outcome)
        removeNFTTables(runner, &outcome)
        return outcome
    }

    /// The target of a symbolic link, or nil.
    static func link(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The interfaces of this namespace, by index and name.
    static func interfaces() -> [(index: Int32, name: String)] {
        guard let list = if_nameindex() else { return [] }
        defer { if_freenameindex(list) }
        var out: [(Int32, String)] = []
        var i = 0
        while list[i].if_index != 0, i < 65536 {
            out.append((Int32(bitPattern: list[i].if_index), String(cString: list[i].if_name)))
            i += 1
        }
        return out
    }

    /// qosmapd's tc filter (``EBPFDatapath/filterHandle`` at
    /// ``EBPFDatapath/filterPriority``), egress and ingress; the clsact
    /// qdisc stays, since other filters may hang there.
    static func removeClassifiers(_ outcome: inout Outcome) {
        for (index, name) in interfaces() {
            for (hook, label) in [(TrafficControl.Direction.egress, "egress"), (.ingress, "ingress")] {
                let f = TrafficControl.Filter(
                    ifindex: index, direction: hook, handle: EBPFDatapath.filterHandle,
                    priority: EBPFDatapath.filterPriority)
                guard let id = (try? TrafficControl.attachedProgram(f)) ?? nil else { continue }
                do {
                    try TrafficControl.detach(f)
                    outcome.removed.append("removed the tc filter of \(name) (\(label), bpf program \(id))")
                } catch {
                    outcome.errors.append("cannot remove the tc filter of \(name) (\(label)): \(error)")
                }
            }
        }
    }

    /// The IFB devices of download queues (``EgressQueues/ifbName(for:)``:
    /// `qmi-` and the interface), deleted whole with their qdiscs. Only a
    /// virtual device of that name counts (sysfs, as this namespace mounts
    /// it); the ingress classifier that redirected to it is removed above.
    static func removeDownloadIFBs(_ outcome: inout Outcome) {
        // The redirects to the IFBs first: without its IFB, mirred drops what arrives.
        if let shaper = try? TrafficShaper() {
            for (index, name) in interfaces() {
                guard
                    let filters = try? shaper.ingressFilters(ifindex: index),
                    filters.contains(where: {
                        $0.priority == EgressQueues.redirectPriority && $0.kind == "u32"
                    })
                else { continue }
                do {
                    try shaper.deleteIngressFilters(ifindex: index, priority: EgressQueues.redirectPriority)
                    outcome.removed.append(
                        "removed the download redirect of \(name) (ingress u32 mirred filter)")
                } catch {
                    outcome.errors.append("cannot remove the download redirect of \(name): \(error)")
                }
            }
        }
        let ifbs = interfaces().filter {
            $0.name.hasPrefix("qmi-")
                && link("/sys/class/net/\($0.name)")?.contains("/devices/virtual/net/") == true
        }
        guard !ifbs.isEmpty else { return }
        let shaper: TrafficShaper
        do {
            shaper = try TrafficShaper()
        } catch {
            outcome.errors.append("cannot open rtnetlink to remove the IFB devices: \(error)")
            return
        }
        for (index, name) in ifbs {
            do {
                try shaper.deleteLink(ifindex: index)
                outcome.removed.append("removed the download IFB device \(name) (with its queues)")
            } catch {
                outcome.errors.append("cannot remove the IFB device \(name): \(error)")
            }
        }
    }

    /// Root qdiscs with qosmapd's handle (``EgressQueues/rootHandle``), with
    /// their classes and leaves.
    static func removeQueues(_ outcome: inout Outcome) {
        let shaper: TrafficShaper
        do {
            shaper = try TrafficShaper()
        } catch {
            outcome.errors.append("cannot open rtnetlink to read the qdiscs: \(error)")
            return
        }
        for (index, name) in interfaces() {
            guard let qdiscs = try? shaper.qdiscs(ifindex: index),
                let root = qdiscs.first(where: { $0.isRoot && $0.handle == EgressQueues.rootHandle })
            else { continue }
            do {
                try shaper.deleteQdisc(ifindex: index, handle: EgressQueues.rootHandle)
                outcome.removed.append(
                    "removed the egress queues of \(name) (root qdisc \(root.kind) \(root.handle))")
            } catch {
                outcome.errors.append("cannot remove the egress queues of \(name): \(error)")
            }
        }
    }

    /// qosmapd's iptables and ip6tables chains and the jumps to them, in one
    /// `iptables-restore --noflush` per family (as a daemon's own removal).
    static func removeRules(_ runner: CommandRunner, _ outcome: inout Outcome) {
        var none = DaemonConfig()
        none.rules.mode = .external
        for family in RuleFamily.allCases {
            // Without the command there can be no such rule.
            guard CommandRunner.which(family.save) != nil else { continue }
            do {
                let save = try runner.run(family.save, [], nil)
                guard let script = RuleSet.script(none, save: save) else { continue }
                _ = try runner.run(family.restore, ["--noflush"], script)
                let tool = family == .ipv4 ? "iptables" : "ip6tables"
                for (table, saved) in RuleSet.parseSave(save).sorted(by: { $0.key < $1.key }) {
                    let chains = RuleSet.ourChains.filter(saved.chains.contains)
                    if !chains.isEmpty {
                        let noun = chains.count == 1 ? "chain" : "chains"
                        outcome.removed.append(
                            "removed the \(tool) \(noun) \(chains.joined(separator: ", ")) (table \(table))")
                    }
                }
            } catch {
                outcome.errors.append("cannot remove the \(family.rawValue) NFQUEUE rules: \(error)")
            }
        }
    }

    /// The tables `qosmap export nft` writes: family inet, named `qosmap`
    /// followed by letters, digits or `_`.
    static func removeNFTTables(_ runner: CommandRunner, _ outcome: inout Outcome) {
        guard CommandRunner.which("nft") != nil else { return }
        let listing: String
        do {
            listing = try runner.run("nft", ["list", "tables", "inet"], nil)
        } catch {
            outcome.errors.append("cannot list the nftables tables: \(error)")
            return
        }
        for line in listing.split(separator: "\n") {
            let words = line.split(separator: " ")
            guard words.count == 3, words[0] == "table", words[1] == "inet", isExportTable(words[2]) else {
                continue
            }
            do {
                _ = try runner.run("nft", ["delete", "table", "inet", String(words[2])], nil)
                outcome.removed.append("removed the nftables table inet \(words[2])")
            } catch {
                outcome.errors.append("cannot remove the nftables table inet \(words[2]): \(error)")
            }
        }
    }

    /// Whether `name` is a name `qosmap export nft --table` allows.
    static func isExportTable(_ name: Substring) -> Bool {
        name.hasPrefix("qosmap")
            && name.dropFirst(6).allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
    }
}
