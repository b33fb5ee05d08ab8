import Logging
import QoSMapCore
import ServiceLifecycle
import Synchronization
import TrafficShaping

#if canImport(Glibc)
    import Glibc
#endif

extension DaemonConfig {
    /// The `skb->priority` of each service class (indexed by its raw value)
    /// for packets leaving by interface `name`, nil when it has no queues:
    /// what both daemon datapaths set, in place of `priority: true`'s PCP.
    public func queuePriorities(output name: String) -> [UInt32]? {
        guard let queues = interfaceQueues[name] else { return nil }
        return ServiceClass.allCases.sorted { $0.rawValue < $1.rawValue }.map {
            EgressQueues.skbPriority($0, config: queues.config)
        }
    }
}

extension DaemonConfig {
    /// The `skb->priority` of each service class (by raw value) in the
    /// download queues of interface `name` (`ingress-rate`), nil without them:
    /// what the ebpf ingress classifier sets before the IFB.
    public func downloadPriorities(input name: String) -> [UInt32]? {
        guard let queues = interfaceQueues[name], queues.config.ingressRate != nil else { return nil }
        return ServiceClass.allCases.sorted { $0.rawValue < $1.rawValue }.map {
            EgressQueues.skbPriority($0, config: queues.config, direction: .ingress)
        }
    }
}

extension PolicySnapshot {
    /// The u32 classifier of each download (``DownloadClassifierPlan``) by
    /// interface name, for the datapaths without a tc ingress classifier:
    /// empty with `datapath: ebpf`, whose `qosmap_ingress` sets each
    /// packet's skb priority before the IFB (and sees connections).
    public func downloadPlans() -> [String: DownloadClassifierPlan] {
        guard config.datapath != .ebpf else { return [:] }
        var plans: [String: DownloadClassifierPlan] = [:]
        for (name, queues) in config.interfaceQueues where queues.config.ingressRate != nil {
            guard let plan = try? queues.config.htbPlan(.ingress, major: EgressQueues.major) else { continue }
            let (trust, domain) = inbound[name] ?? (config.trust, defaultDomain)
            plans[name] = DownloadClassifierPlan(
                interface: name, trust: trust, domain: domain, rules: config.classify, plan: plan)
        }
        return plans
    }
}

/// A refusal or failure to build an interface's queues, in one line.
public struct EgressQueueError: Error, Sendable, CustomStringConvertible {
    /// The line.
    public let description: String
    /// The kernel lacks what the config asks for (sch_cake, ifb): qosmapd
    /// exits 77 at start, as for any feature its environment cannot give.
    public var unavailable = false
}

/// What qosmapd built on one device.
struct BuiltQueues {
    var ifindex: Int32
    var config: QueueConfig
    /// For an IFB: the interface whose ingress redirects to it, and the IFB's
    /// ifindex the redirect names, as last set.
    var redirect: (from: Int32, to: Int32)?
    /// For an IFB: the u32 classifier last put on its HTB root, if any.
    var download: DownloadClassifierPlan?
}

/// The queues wanted on one device: an interface's egress, or the download
/// of an interface with `ingress-rate`, on the IFB device qosmapd makes for it.
struct WantedQueues: Equatable {
    var config: QueueConfig
    var direction: QueueDirection
    /// The configured interface (for ``QueueDirection/ingress``, the one whose download the IFB shapes).
    var interface: String
    /// For ``QueueDirection/ingress`` without the ebpf classifier: the u32
    /// filters on the IFB's HTB root that give each arrival its class.
    var download: DownloadClassifierPlan?
}

/// Builds, changes, repairs and removes the egress queues of the interfaces
/// whose config has `queues:` (issue 38): an HTB tree (``HTBPlan``) or a CAKE
/// qdisc (``CAKEPlan``) at the root, with handle ``EgressQueues/major``, so
/// that a root qdisc of any other non-zero handle is the operator's. Not
/// thread-safe: ``EgressQueueService`` holds it under a lock.
public final class EgressQueues {
    /// The major of qosmapd's root qdisc: 0x7173 ("qs"), the handle of
    /// qosmapd's tc filter too; not 1:, which operators use. Packets reach a
    /// class through `skb->priority` = `0x7173_00MM`.
    public static let major: UInt16 = QueueConfig.qosmapdMajor
    /// qosmapd's root handle.
    public static let rootHandle = QdiscHandle(major: major)
    /// The clsact ingress priority of the u32 filter that redirects a
    /// download to its IFB: right after the ebpf classifier (0x7173), which
    /// gives each packet its class's skb priority first.
    public static let redirectPriority: UInt16 = DownloadClassifierPlan.redirectPriority

    let shaper: TrafficShaper
    let logger: Logger
    let metrics: QueueMetrics
    /// By device name (an interface, or an IFB of ``ifbName(for:)``).
    var built: [String: BuiltQueues] = [:]
    /// What is wanted per device name (built or not).
    var wanted: [String: WantedQueues] = [:]
    /// Whether the kernel has fq_codel; nil until the first leaf is built.
    var hasFQCodel: Bool?
    /// Whether the kernel has GRED; nil until the first AF leaf is built
    /// with ``colorAware``.
    var hasGRED: Bool?
    /// Whether the datapath gives each packet its color in `skb->tc_index`
    /// (the ebpf classifier does; nfqueue's verdict cannot), so that an AF
    /// leaf may be GRED with green, yellow and red as drop precedences.
    let colorAware: Bool
    /// Interfaces whose absence or refusal was already logged, so that the
    /// 1 s check logs once.
    var reported: Set<String> = []

    /// Opens the rtnetlink socket.
    /// - Throws: ``EgressQueueError`` when the socket cannot be opened.
    /// - Parameter colorAware: whether the datapath sets `skb->tc_index` to
    ///   the packet's color (``colorAware``).
    public init(logger: Logger, metrics: QueueMetrics = QueueMetrics(), colorAware: Bool = false)
        throws(EgressQueueError)
    {
        do {
            shaper = try TrafficShaper()
        } catch {
            throw EgressQueueError(description: "queues: cannot open rtnetlink: \(error)")
        }
        self.logger = logger
        self.metrics = metrics
        self.colorAware = colorAware
    }

    /// The `skb->priority` that puts `serviceClass` into its queue under
    /// `config`: the leaf class id (HTB) or the tin's (CAKE), major ``major``.
    public static func skbPriority(
        _ serviceClass: ServiceClass, config: QueueConfig, direction: QueueDirection = .egress
    ) -> UInt32 {
        config.skbPriority(serviceClass, major: major, direction: direction)
    }

    /// The IFB device that holds the download queues of `interface`
    /// (`ingress-rate`): `qmi-` and the name, or for a name longer than 11
    /// characters its first 6 and a hash of it (IFNAMSIZ is 16).
    public static func ifbName(for interface: String) -> String {
        DownloadClassifierPlan.ifbName(for: interface)
    }

    /// The devices `queues` asks for: each interface's egress, and the IFB of
    /// each that has `ingress-rate`.
    static func wants(_ queues: [String: InterfaceQueues], download: [String: DownloadClassifierPlan])
        -> [String: WantedQueues]
    {
        var r: [String: WantedQueues] = [:]
        for (name, q) in queues {
            r[name] = WantedQueues(config: q.config, direction: .egress, interface: name)
            if q.config.ingressRate != nil {
                r[ifbName(for: name)] = WantedQueues(
                    config: q.config, direction: .ingress, interface: name, download: download[name])
            }
        }
        return r
    }

    /// Builds every interface's queues at start; the first refusal or
    /// failure is thrown (an interface that does not exist yet is built when
    /// it appears). `download` (``PolicySnapshot/downloadPlans()``) classifies
    /// the downloads with u32 filters where no ebpf classifier does; what
    /// such a plan ignores is said in one line per interface.
    public func start(_ queues: [String: InterfaceQueues], download: [String: DownloadClassifierPlan] = [:])
        throws(EgressQueueError)
    {
        wanted = Self.wants(queues, download: download)
        for name in wanted.keys.sorted() {
            try ensure(name, atStart: true)
        }
        // Said once the trees are built, so that a refused start prints its
        // one error line alone.
        if !colorAware, wanted.values.contains(where: { $0.config.discipline == .htb }) {
            // Said once: the AF classes' colors give no drop order here.
            logger.notice(
                "queues: no color-aware drop: GRED picks a packet's drop precedence from skb->tc_index, which only datapath: ebpf sets; AF leaves are fq_codel or bfifo"
            )
        }
        for (name, plan) in download.sorted(by: { $0.key < $1.key }) {
            if let line = plan.notice(interface: name, ifb: Self.ifbName(for: name)) {
                logger.notice("\(line)")
            }
        }
    }

    /// Applies a reloaded config: changed rates and scheduling as class
    /// changes, new interfaces built, removed ones' trees deleted. Errors are
    /// logged; what was built stays.
    public func apply(_ queues: [String: InterfaceQueues], download: [String: DownloadClassifierPlan] = [:]) {
        let next = Self.wants(queues, download: download)
        for name in Set(built.keys).union(wanted.keys).sorted() where next[name] == nil {
            remove(name)
        }
        wanted = next
        for name in next.keys.sorted() {
            do {
                if let have = built[name], have.config != next[name]!.config {
                    try change(name, from: have, to: next[name]!)
                }
                // The redirect and the download's filters (new rules, or a rebuilt tree).
                try ensure(name, atStart: false)
            } catch {
                logger.error("queues not changed", metadata: ["interface": "\(name)", "error": "\(error)"])
            }
        }
    }

    /// The 1 s check: an interface re-created, or whose root qdisc went,
    /// gets its queues again.
    public func repair() {
        for name in wanted.keys.sorted() {
            do {
                try ensure(name, atStart: false)
            } catch {
                if reported.insert("error \(name)").inserted {
                    logger.error("queues not built", metadata: ["interface": "\(name)", "error": "\(error)"])
                }
            }
        }
    }

    /// Reads the kernel's counters of every HTB leaf class qosmapd built into
    /// ``QueueMetrics`` (one class dump per device), or for CAKE those of
    /// each tin (one qdisc dump), labelled by the class the tin is for
    /// (``CAKEPlan/tinLabels``).
    public func recordCounters() {
        for (name, have) in built {
            guard let want = wanted[name] else { continue }
            if let cake = have.config.cakePlan(want.direction, major: Self.major) {
                recordTins(cake, ifindex: have.ifindex, want)
                continue
            }
            guard let classes = try? shaper.classes(ifindex: have.ifindex) else { continue }
            for c in classes where c.kind == "htb" && c.handle.major == Self.major {
                guard let stats = c.statistics,
                    let serviceClass = ServiceClass.allCases.first(where: {
                        HTBPlan.leafMinor($0) == c.handle.minor
                    })
                else { continue }
                metrics.record(
                    interface: want.interface, direction: want.direction, serviceClass: serviceClass, stats)
            }
        }
    }

    /// Records the tins of qosmapd's CAKE root on `ifindex`, when it is there and
    /// has as many tins as `plan` (a tree being rebuilt is read at the next
    /// check).
    func recordTins(_ plan: CAKEPlan, ifindex: Int32, _ want: WantedQueues) {
        guard
            let root = try? shaper.qdiscs(ifindex: ifindex).first(where: {
                $0.isRoot && $0.handle == Self.rootHandle && $0.kind == "cake"
            }),
            let tins = root.cakeTins, tins.count == plan.tinCount
        else { return }
        for (tin, label) in zip(tins, plan.tinLabels) {
            guard let serviceClass = label else { continue }
            metrics.record(
                interface: want.interface, direction: want.direction, serviceClass: serviceClass, tin)
        }
    }

    /// Removes every tree qosmapd built (at stop).
    public func removeAll() {
        for name in Set(built.keys).union(wanted.keys).sorted() { remove(name) }
        wanted = [:]
    }

    /// Builds `name`'s queues unless they are there: a missing interface is
    /// waited for; an operator's root qdisc is refused unless `replace`.
    func ensure(_ name: String, atStart: Bool) throws(EgressQueueError) {
        guard let want = wanted[name] else { return }
        let config = want.config
        var ifindex = Int32(bitPattern: if_nametoindex(name))
        if ifindex == 0, want.direction == .ingress {
            ifindex = try createIFB(name, for: want.interface)
        }
        guard ifindex > 0 else {
            built[name] = nil
            if reported.insert("absent \(name)").inserted {
                logger.warning(
                    "interface absent; its queues are built when it appears",
                    metadata: ["interface": "\(name)"])
            }
            return
        }
        reported.remove("absent \(name)")
        let root = try rootQdisc(ifindex, name)
        if let have = built[name], have.ifindex == ifindex, let root, root.handle == Self.rootHandle {
            if want.direction == .ingress {
                try ensureDownloadFilters(name, want, ifb: ifindex)
                try ensureRedirect(name, want, ifb: ifindex)
            }
            return  // in place
        }
        var mode = ChangeMode.create
        if let root, root.handle != .unspecified {
            if root.handle == Self.rootHandle {
                // Ours, left by a qosmapd that was killed: built again from
                // nothing (HTB refuses a replace of itself in place, EINVAL
                // "Change operation not supported by specified qdisc").
                do {
                    try shaper.deleteQdisc(ifindex: ifindex, handle: Self.rootHandle)
                } catch {
                    throw EgressQueueError(description: "queues of '\(name)': \(error)")
                }
            } else if config.replace {
                mode = .replace
            } else {
                throw EgressQueueError(
                    description:
                        "queues of '\(name)': the interface has a root qdisc \(root.kind) \(root.handle) that qosmapd did not make; allowed: remove it, or set queues.replace: true to replace it"
                )
            }
        }
        reported.remove("error \(name)")
        let why = built[name] == nil && atStart ? "built" : "rebuilt"
        try build(name, ifindex: ifindex, config: config, direction: want.direction, mode: mode)
        built[name] = BuiltQueues(ifindex: ifindex, config: config)
        if want.direction == .ingress {
            // The classifier before the redirect: nothing arrives unclassified.
            try ensureDownloadFilters(name, want, ifb: ifindex)
            try ensureRedirect(name, want, ifb: ifindex)
        }
        logger.info(
            "queues \(why)",
            metadata: [
                "interface": "\(name)", "direction": "\(want.direction.rawValue)",
                "rate": "\(config.rate(want.direction) ?? config.rate)",
                "discipline": "\(disciplineName(config))",
                "leaves": "\(leafName(config))",
                "replaced": "\(root.map { "\($0.kind) \($0.handle)" } ?? "none")",
            ])
    }

    /// Creates the IFB `name` for `interface`'s download, up; an existing
    /// device of that name is the IFB a killed qosmapd left (it is reused).
    func createIFB(_ name: String, for interface: String) throws(EgressQueueError) -> Int32 {
        do {
            let index = try shaper.createIFB(named: name)
            try shaper.setLink(ifindex: index, up: true)
            logger.info(
                "ifb created for the download", metadata: ["interface": "\(interface)", "ifb": "\(name)"])
            return index
        } catch {
            throw EgressQueueError(
                description:
                    "ingress-rate of '\(interface)': cannot create the IFB device \(name): \(error)\(error.errno.rawValue == EOPNOTSUPP ? " (this kernel has no ifb)" : "")",
                unavailable: error.errno.rawValue == EOPNOTSUPP)
        }
    }

    /// Puts the download's u32 classifier (``DownloadClassifierPlan``) on the
    /// IFB's HTB root unless the kernel has exactly its priorities from the
    /// same plan: a reload with other rules, or filters another tool
    /// removed, replace them all (between the delete and the adds, arrivals
    /// go to BE). Nothing with the ebpf datapath, whose classifier sets the
    /// skb priority that HTB reads before any filter.
    func ensureDownloadFilters(_ name: String, _ want: WantedQueues, ifb: Int32) throws(EgressQueueError) {
        guard let plan = want.download else { return }
        let priorities = Set(plan.filters.map(\.priority))
        if built[name]?.download == plan,
            (try? shaper.filterPriorities(ifindex: ifb, parent: Self.rootHandle)) == priorities
        {
            return
        }
        do {
            try? shaper.deleteFilters(ifindex: ifb, parent: Self.rootHandle)
            for filter in plan.filters {
                try shaper.addU32Filter(
                    ifindex: ifb, parent: Self.rootHandle, priority: filter.priority,
                    etherType: filter.family.etherType,
                    keys: filter.keys.map { U32MatchKey(value: $0.value, mask: $0.mask, offset: $0.offset) },
                    classID: QdiscHandle(rawValue: filter.classID.rawValue))
            }
        } catch {
            throw EgressQueueError(
                description: "ingress-rate of '\(want.interface)': cannot classify on \(name): \(error)")
        }
        built[name]?.download = plan
        logger.info(
            "download classifier set",
            metadata: [
                "interface": "\(want.interface)", "ifb": "\(name)", "filters": "\(plan.filters.count)",
            ])
    }

    /// Puts the u32 mirred filter that sends `want.interface`'s arrivals to
    /// the IFB `ifb` at ``redirectPriority`` (with a clsact qdisc), unless it
    /// is there for this pair; an interface that does not exist is waited for.
    func ensureRedirect(_ name: String, _ want: WantedQueues, ifb: Int32) throws(EgressQueueError) {
        let from = Int32(bitPattern: if_nametoindex(want.interface))
        guard from > 0 else {
            built[name]?.redirect = nil
            return
        }
        do {
            if let r = built[name]?.redirect, r.from == from, r.to == ifb,
                try shaper.ingressFilters(ifindex: from).contains(where: {
                    $0.priority == Self.redirectPriority && $0.kind == "u32"
                })
            {
                return
            }
            try shaper.ensureClsact(ifindex: from)
            try shaper.setIngressRedirect(ifindex: from, priority: Self.redirectPriority, to: ifb)
        } catch {
            throw EgressQueueError(
                description: "ingress-rate of '\(want.interface)': cannot redirect to \(name): \(error)")
        }
        built[name]?.redirect = (from, ifb)
        logger.info(
            "download redirected to its ifb", metadata: ["interface": "\(want.interface)", "ifb": "\(name)"])
    }

    func disciplineName(_ config: QueueConfig) -> String {
        if case .cake = config.discipline { return "cake" }
        return "htb"
    }

    func leafName(_ config: QueueConfig) -> String {
        if case .cake = config.discipline { return "none" }
        return hasFQCodel == false ? "bfifo" : "fq_codel"
    }

    func rootQdisc(_ ifindex: Int32, _ name: String) throws(EgressQueueError) -> QdiscInfo? {
        do {
            return try shaper.qdiscs(ifindex: ifindex).first { $0.isRoot }
        } catch {
            throw EgressQueueError(description: "queues of '\(name)': cannot list qdiscs: \(error)")
        }
    }

    /// The root qdisc and, for HTB, every class and leaf.
    func build(
        _ name: String, ifindex: Int32, config: QueueConfig, direction: QueueDirection, mode: ChangeMode
    )
        throws(EgressQueueError)
    {
        if let cake = config.cakePlan(direction, major: Self.major) {
            do {
                try shaper.setQdisc(
                    .cake(CAKEOptions(bandwidthBitsPerSecond: cake.rate.bitsPerSecond, diffserv: .diffserv8)),
                    ifindex: ifindex, handle: Self.rootHandle, mode: mode)
            } catch  where error.errno.rawValue == ENOENT {
                throw EgressQueueError(
                    description:
                        "queues of '\(name)': discipline: cake needs the kernel's sch_cake, which this kernel does not have (\(error.kernelMessage ?? "\(error.errno)")); allowed here: discipline: htb",
                    unavailable: true)
            } catch {
                throw EgressQueueError(description: "queues of '\(name)': \(error)")
            }
            return
        }
        do {
            guard let plan = try? config.htbPlan(direction, major: Self.major) else { return }
            try shaper.setQdisc(
                .htb(HTBQdiscOptions(defaultClass: plan.defaultClass.minor, rateToQuantum: plan.r2q)),
                ifindex: ifindex, handle: Self.rootHandle, mode: mode)
            for node in plan.classes {
                try shaper.setHTBClass(
                    options(node), ifindex: ifindex, classID: QdiscHandle(rawValue: node.id.rawValue),
                    parent: QdiscHandle(rawValue: node.parent.rawValue), mode: .replace)
            }
            for serviceClass in ServiceClass.allCases {
                try setLeaf(plan, serviceClass, ifindex: ifindex, mode: .replace)
            }
        } catch {
            throw EgressQueueError(description: "queues of '\(name)': \(error)")
        }
    }

    func options(_ node: HTBPlan.Class) -> HTBClassOptions {
        HTBClassOptions(
            rateBitsPerSecond: node.rate.bitsPerSecond, ceilBitsPerSecond: node.ceil.bitsPerSecond,
            prio: node.prio, quantum: node.quantum)
    }

    /// A class's leaf: fq_codel, or a bfifo where the kernel has no fq_codel
    /// (found by trying once: ENOENT, "Specified qdisc kind is unknown"), said
    /// once.
    func setLeaf(_ plan: HTBPlan, _ serviceClass: ServiceClass, ifindex: Int32, mode: ChangeMode)
        throws(TrafficShapingError)
    {
        let parent = QdiscHandle(rawValue: plan.leaf(serviceClass).id.rawValue)
        let handle = QdiscHandle(rawValue: plan.leafQdiscHandle(serviceClass).rawValue)
        let leaf = plan.leaves(available: leafKinds, colorAware: colorAware)[serviceClass]!
        switch leaf {
        case .fqCodel(let codel):
            do {
                try shaper.setQdisc(
                    .fqCodel(
                        FQCodelOptions(
                            targetMicroseconds: codel.targetMicroseconds,
                            intervalMicroseconds: codel.intervalMicroseconds, ecn: codel.ecn)),
                    ifindex: ifindex, parent: parent, handle: handle, mode: mode)
                if hasFQCodel == nil {
                    hasFQCodel = true
                    logger.info("queue leaves: fq_codel")
                }
            } catch  where error.errno.rawValue == ENOENT && hasFQCodel == nil {
                hasFQCodel = false
                logger.info(
                    "queue leaves: bfifo (100 ms of each class's ceil); this kernel has no fq_codel",
                    metadata: ["kernel": "\(error.kernelMessage ?? "\(error.errno)")"])
                try setLeaf(plan, serviceClass, ifindex: ifindex, mode: mode)
            }
        case .bfifo(let limit):
            try shaper.setQdisc(
                .bfifo(limitBytes: limit), ifindex: ifindex, parent: parent, handle: handle, mode: mode)
        case .gred(let gred):
            do {
                try shaper.setQdisc(
                    .gred(Self.gredOptions(gred)), ifindex: ifindex, parent: parent, handle: handle,
                    mode: mode)
                if hasGRED == nil {
                    hasGRED = true
                    logger.notice(
                        "queues: color-aware drop: AF1-AF4 leaves are GRED in WRED mode, red dropped first, then yellow, then green",
                        metadata: [
                            "green": "\(gred.thresholds[0].minBytes)-\(gred.thresholds[0].maxBytes) B",
                            "red": "\(gred.thresholds[2].minBytes)-\(gred.thresholds[2].maxBytes) B",
                        ])
                }
            } catch  where error.errno.rawValue == ENOENT && hasGRED == nil {
                hasGRED = false
                logger.notice(
                    "queues: no color-aware drop: this kernel has no sch_gred; AF leaves are fq_codel or bfifo",
                    metadata: ["kernel": "\(error.kernelMessage ?? "\(error.errno)")"])
                try setLeaf(plan, serviceClass, ifindex: ifindex, mode: mode)
            }
        }
    }

    /// The leaf kinds the kernel is known or assumed to have.
    var leafKinds: QdiscKinds {
        var kinds: QdiscKinds = hasFQCodel == false ? [.fifo] : [.fifo, .fqCodel]
        if colorAware, hasGRED != false { kinds.insert(.gred) }
        return kinds
    }

    /// The kernel's GRED parameters for a leaf: one virtual queue per color
    /// (its ``Color`` raw value, which the classifier writes into
    /// `skb->tc_index`), all of prio 1 in GRIO mode, which is WRED mode: one
    /// average over the leaf's whole backlog, each color its own thresholds.
    static func gredOptions(_ leaf: GREDLeaf) -> GREDOptions {
        GREDOptions(
            virtualQueueCount: UInt32(Color.allCases.count), defaultQueue: UInt32(Color.green.rawValue),
            grio: true,
            limitBytes: leaf.limitBytes,
            virtualQueues: leaf.thresholds.map {
                GREDVirtualQueue(
                    dp: $0.color.rawValue, minBytes: $0.minBytes, maxBytes: $0.maxBytes,
                    limitBytes: leaf.limitBytes,
                    probability: Double($0.probabilityPercent) / 100,
                    bandwidthBytesPerSecond: leaf.drainBytesPerSecond, prio: 1)
            })
    }

    /// A reload's change: class changes when the tree keeps its shape (the
    /// same classes under the same parents), else a rebuild in place.
    func change(_ name: String, from have: BuiltQueues, to want: WantedQueues) throws(EgressQueueError) {
        let ifindex = have.ifindex
        let config = want.config, direction = want.direction
        do {
            if let cake = config.cakePlan(direction, major: Self.major), case .cake = have.config.discipline {
                try shaper.setQdisc(
                    .cake(CAKEOptions(bandwidthBitsPerSecond: cake.rate.bitsPerSecond, diffserv: .diffserv8)),
                    ifindex: ifindex, handle: Self.rootHandle, mode: .change)
            } else if let old = try? have.config.htbPlan(direction, major: Self.major),
                let new = try? config.htbPlan(direction, major: Self.major),
                old.classes.map({ [$0.id, $0.parent] }) == new.classes.map({ [$0.id, $0.parent] })
            {
                let before = old.leaves(available: leafKinds, colorAware: colorAware)
                for (node, was) in zip(new.classes, old.classes) where node != was {
                    try shaper.setHTBClass(
                        options(node), ifindex: ifindex, classID: QdiscHandle(rawValue: node.id.rawValue),
                        parent: QdiscHandle(rawValue: node.parent.rawValue), mode: .change)
                }
                let after = new.leaves(available: leafKinds, colorAware: colorAware)
                for serviceClass in ServiceClass.allCases where after[serviceClass] != before[serviceClass] {
                    try setLeaf(new, serviceClass, ifindex: ifindex, mode: .change)
                }
            } else {
                // Another discipline, or classes moved between pq and wfq:
                // HTB cannot move a class, so the tree is built again.
                try? shaper.deleteQdisc(ifindex: ifindex, handle: Self.rootHandle)
                built[name] = nil
                try build(name, ifindex: ifindex, config: config, direction: direction, mode: .create)
            }
        } catch let error as TrafficShapingError {
            throw EgressQueueError(description: "queues of '\(name)': \(error)")
        } catch let error as EgressQueueError {
            throw error
        } catch {
            throw EgressQueueError(description: "queues of '\(name)': \(error)")
        }
        built[name] = BuiltQueues(
            ifindex: ifindex, config: config, redirect: built[name]?.redirect, download: built[name]?.download
        )
        logger.info(
            "queues changed",
            metadata: [
                "interface": "\(name)", "rate": "\(config.rate)", "discipline": "\(disciplineName(config))",
            ])
    }

    /// Deletes qosmapd's root qdisc (with its classes and leaves) from `name`;
    /// an IFB qosmapd made is deleted whole.
    func remove(_ name: String) {
        if let want = wanted[name], want.direction == .ingress {
            // The redirect first: without its IFB, mirred would drop what arrives.
            if let r = built[name]?.redirect, Int32(bitPattern: if_nametoindex(want.interface)) == r.from {
                try? shaper.deleteIngressFilters(ifindex: r.from, priority: Self.redirectPriority)
            }
            built[name] = nil
            let index = Int32(bitPattern: if_nametoindex(name))
            guard index > 0 else { return }
            do {
                try shaper.deleteLink(ifindex: index)
                logger.info("ifb removed", metadata: ["ifb": "\(name)"])
            } catch {
                logger.error("ifb not removed", metadata: ["ifb": "\(name)", "error": "\(error)"])
            }
            return
        }
        guard let have = built.removeValue(forKey: name) else { return }
        do {
            if let root = try shaper.qdiscs(ifindex: have.ifindex).first(where: { $0.isRoot }),
                root.handle == Self.rootHandle
            {
                try shaper.deleteQdisc(ifindex: have.ifindex, handle: Self.rootHandle)
                logger.info("queues removed", metadata: ["interface": "\(name)"])
            }
        } catch {
            logger.error("queues not removed", metadata: ["interface": "\(name)", "error": "\(error)"])
        }
    }
}

/// Keeps the queues in step with the config in force: polls the store every
/// 250 ms for a reload (the datapath commits the snapshot, so a bad config
/// keeps the old queues too) and the kernel every second; removes the trees
/// at graceful shutdown.
public final class EgressQueueService: Service, Sendable {
    let queues: Mutex<EgressQueues>
    let store: PolicyStore

    /// A service over queues already built by ``EgressQueues/start(_:)``.
    public init(queues: sending EgressQueues, store: PolicyStore) {
        self.queues = Mutex(queues)
        self.store = store
    }

    /// Removes what was built, for a start that fails after the queues were
    /// built and before the service ran.
    public func stop() { queues.withLock { $0.removeAll() } }

    /// Runs until graceful shutdown, then removes what was built.
    public func run() async throws {
        var generation = store.snapshot.generation
        var nextCheck = ContinuousClock.now + .seconds(1)
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let snapshot = store.snapshot
            if snapshot.generation != generation {
                generation = snapshot.generation
                queues.withLock {
                    $0.apply(snapshot.config.interfaceQueues, download: snapshot.downloadPlans())
                }
            }
            if ContinuousClock.now >= nextCheck {
                queues.withLock {
                    $0.repair()
                    $0.recordCounters()
                }
                nextCheck = .now + .seconds(1)
            }
            try? await Task.sleep(for: .milliseconds(250))
        }
        queues.withLock { $0.removeAll() }
    }
}
