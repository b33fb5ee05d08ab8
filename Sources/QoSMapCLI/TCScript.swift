import QoSMapCore

/// The leaf qdisc `export tc` puts under each HTB class.
///
/// qosmapd finds out at run time whether the kernel has fq_codel (and falls
/// back to bfifo); a script is written offline for a kernel it cannot see, so
/// the operator chooses.
enum TCLeaf: String, CaseIterable {
    /// fq_codel, sized as qosmapd sizes it; what Debian's kernels have.
    case fqCodel = "fq_codel"
    /// A bfifo of 100 ms of the class's ceil: every kernel with tc has it.
    case bfifo

    /// The names `--leaf` takes, for messages.
    static let allowedNames = allCases.map(\.rawValue).joined(separator: ", ")

    /// The qdisc kinds to choose leaves among (``LeafQueue/choose(for:drainRate:available:colorAware:)``).
    var kinds: QdiscKinds { self == .fqCodel ? [.fifo, .fqCodel] : [.fifo] }
}

/// A `tc -batch` script that builds, for every interface with `queues:`, the
/// tree qosmapd builds through rtnetlink (``QoSMapDaemon.EgressQueues``): the
/// root qdisc at ``QueueConfig/qosmapdMajor`` (HTB with ``HTBPlan``'s classes
/// and a leaf each, or CAKE diffserv8), with the same requests: the root
/// added (replaced with `replace: true`), classes and leaves replaced. The
/// bursts are `tc`'s defaults, as qosmapd's are.
struct TCScript {
    /// The script, ending in a newline.
    let text: String

    /// The characters an interface name may not have in a batch line: blanks
    /// and quotes would split or quote the word, `#` starts a comment, `/`
    /// and `:` are not in Linux interface names.
    static func nameProblem(_ name: String) -> String? {
        let bad = name.unicodeScalars.first {
            !$0.isASCII || $0.properties.isWhitespace || "\"'#/:\\".unicodeScalars.contains($0)
                || $0.value < 0x20 || $0.value == 0x7F
        }
        guard name.isEmpty || name.utf8.count > 15 || bad != nil else { return nil }
        return
            "interface name '\(name)' cannot be written for tc; allowed: 1-15 ASCII characters without blanks, quotes, '#', '/' or ':'"
    }

    /// The script for `queues` (interface name to config), in name order.
    /// - Parameters:
    ///   - download: the u32 classifier of each interface with
    ///     `ingress-rate` (``DownloadClassifierPlan``): its download tree is
    ///     built on the IFB ``DownloadClassifierPlan/ifbName(for:)``, the
    ///     filters put on that tree's root, and the interface's arrivals
    ///     redirected to it, as qosmapd's nfqueue datapath does.
    ///   - leaf: the HTB leaves' kind.
    ///   - source: the config path, for the header.
    init(
        queues: [String: QueueConfig], download: [String: DownloadClassifierPlan] = [:], leaf: TCLeaf,
        source: String
    ) {
        let major = QueueConfig.qosmapdMajor
        let root = TCHandle(major: major, minor: 0)
        let shown = String(source.map { $0.isNewline ? " " : $0 })
        var out = "# qosmap export tc --config \(shown) --leaf \(leaf.rawValue)\n"
        out += "# qosmapd's egress queues without the daemon; apply with: tc -batch FILE\n"
        out += "# A packet reaches its class by skb priority \(root)MINOR, which qosmapd or\n"
        out += "# `qosmap export nft --config` sets; any other priority goes to the default class (BE).\n"
        out += "# The root is added, so it fails on a root qdisc already there; to apply again,\n"
        out += "# first: tc qdisc del dev IFNAME root\n"
        let ifbs = queues.keys.sorted().filter { queues[$0]!.ingressRate != nil }.map {
            DownloadClassifierPlan.ifbName(for: $0)
        }
        if !ifbs.isEmpty {
            // tc -batch runs tc commands only: the IFB devices are ip's.
            out += "# Download queues (ingress-rate) live on IFB devices, which tc cannot create; first:\n"
            for ifb in ifbs { out += "#   ip link add \(ifb) type ifb && ip link set dev \(ifb) up\n" }
            out +=
                "# and to apply again: ip link del IFB (its tree and filters go with it), tc filter del dev IFNAME ingress\n"
        }
        for name in queues.keys.sorted() {
            let config = queues[name]!
            out += Self.tree(dev: name, for: name, config: config, direction: .egress, leaf: leaf)
            guard config.ingressRate != nil, let plan = download[name] else { continue }
            let ifb = DownloadClassifierPlan.ifbName(for: name)
            out += Self.tree(dev: ifb, for: name, config: config, direction: .ingress, leaf: leaf)
            out +=
                "# \(name) download classifier: u32 on \(ifb)'s root, first match wins, else the default class \(plan.defaultClass)\n"
            if let line = plan.notice(interface: name, ifb: ifb) { out += "# \(line)\n" }
            for filter in plan.filters {
                out +=
                    "filter add dev \(ifb) parent \(root) prio \(filter.priority) protocol \(filter.family.rawValue) u32 "
                    + (filter.keys.isEmpty
                        ? "match u32 0 0 at 0" : filter.keys.map(\.description).joined(separator: " "))
                    + " classid \(filter.classID)  # \(filter.origin) -> \(filter.serviceClass)\n"
            }
            // The redirect last, once the IFB classifies and shapes.
            // replace: a clsact already there (an ebpf classifier's) is kept with its filters.
            out += "qdisc replace dev \(name) clsact\n"
            out +=
                "filter add dev \(name) ingress prio \(DownloadClassifierPlan.redirectPriority) protocol all u32 match u32 0 0 action mirred egress redirect dev \(ifb)\n"
        }
        text = out
    }

    /// The tree of `config`'s `direction` on device `dev` (the interface, or
    /// the IFB of `name`'s download).
    static func tree(
        dev: String, for name: String, config: QueueConfig, direction: QueueDirection, leaf: TCLeaf
    )
        -> String
    {
        let major = QueueConfig.qosmapdMajor
        // qosmapd's ChangeMode: create (NLM_F_EXCL), replace with `replace: true`.
        let verb = config.replace ? "replace" : "add"
        let label = direction == .egress ? name : "\(name) download on \(dev)"
        var out = "\n"
        if let cake = config.cakePlan(direction, major: major) {
            out += "# \(label): cake \(cake.rate) \(cake.diffserv.rawValue); one tin per class\n"
            out +=
                "qdisc \(verb) dev \(dev) root handle \(cake.handle) cake bandwidth \(cake.rate) \(cake.diffserv.rawValue)\n"
            return out
        }
        // A config is validated when read: its plan compiles.
        guard let plan = try? config.htbPlan(direction, major: major) else { return out }
        let leaves = plan.leaves(available: leaf.kinds, colorAware: false)
        out +=
            "# \(label): htb \(plan.rate), pq-max \(config.pqMaxPercent)% (pq cap \(plan.pqCap)), leaves \(leaf.rawValue)\n"
        out +=
            "qdisc \(verb) dev \(dev) root handle \(plan.handle) htb default \(String(plan.defaultClass.minor, radix: 16)) r2q \(plan.r2q)\n"
        for node in plan.classes {
            let what: String
            switch node.role {
            case .root: what = "the shaper"
            case .pqParent: what = "pq parent (the pq-max cap)"
            case .wfqParent: what = "wfq parent"
            case .leaf(let serviceClass): what = "\(serviceClass) \(config.scheduling[serviceClass]!)"
            }
            out +=
                "class replace dev \(dev) parent \(node.parent) classid \(node.id) htb rate \(node.rate) ceil \(node.ceil) prio \(node.prio) quantum \(node.quantum)  # \(what)\n"
        }
        for serviceClass in ServiceClass.allCases {
            let parent = plan.leaf(serviceClass).id
            let handle = plan.leafQdiscHandle(serviceClass)
            out += "qdisc replace dev \(dev) parent \(parent) handle \(handle) "
            switch leaves[serviceClass]! {
            case .fqCodel(let codel):
                out +=
                    "fq_codel target \(codel.targetMicroseconds)us interval \(codel.intervalMicroseconds)us"
                    + (codel.ecn ? " ecn" : " noecn") + "\n"
            case .bfifo(let limit):
                out += "bfifo limit \(limit)\n"
            case .gred:
                out += "bfifo limit \(LeafQueue.fifoLimit(drainRate: plan.leaf(serviceClass).ceil))\n"
            }
        }
        return out
    }
}
