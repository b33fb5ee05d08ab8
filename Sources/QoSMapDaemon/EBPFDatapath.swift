import BPFClassifier
import Logging
import QoSMapCore
import QoSMapPacket
import ServiceLifecycle
import Synchronization
import UnixSignals

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// `datapath: ebpf`: the tables compiled into a tc classifier
/// (`Bpf/qosmap.bpf.c`, embedded at build time) attached at clsact egress on
/// every interface named under `interfaces:`. No packet comes to user space;
/// the daemon writes tables, swaps them on SIGHUP and reads the counters.
///
/// Tables live in two slots; a reload writes the inactive one whole, then
/// flips `qm_gen` with one map update, so a packet decides with one slot.
/// SIGTERM detaches the filters unless `ebpf: {detach-on-exit: false}`; if
/// the daemon dies (or does not detach) the attached program keeps its maps
/// and marks with the last tables.
public final class EBPFDatapath: Service, Sendable {
    /// The tc filter handle and priority qosmapd's filter uses on every interface.
    public static let filterHandle: UInt32 = 0x7173
    /// See ``filterHandle``.
    public static let filterPriority: UInt32 = 0x7173
    /// The program's name in the object.
    public static let programName = "qosmap_egress"
    /// The classifier at clsact ingress of `trust: 8021p` interfaces: it
    /// carries the tag's PCP and DEI to egress in `ebpf.pcp-carry-mask`.
    public static let ingressProgramName = "qosmap_ingress"

    /// Where the config comes from: a file, or the embedded default.
    public let configPath: String?
    /// The snapshot in force.
    public let store: PolicyStore
    let metrics: DaemonMetrics
    let logger: Logger
    let notifier: SystemdNotifier
    let metricsEndpoint: (any MetricsEndpoint)?
    let attachmentMetrics: AttachmentMetrics
    private let state: Mutex<State>

    struct Maps: Sendable {
        let object: BPFObject
        let program: BPFProgram
        let gen, ingress, egress, table, counters: BPFMap
        /// Policies of interfaces whose ifindex is at least ``EBPFLayout/ifindexArray``.
        let ingressHash, egressHash: BPFMap
        /// `qm_config`: the carry mask and shift.
        let config: BPFMap
        /// ``EBPFDatapath/ingressProgramName``.
        let ingressProgram: BPFProgram
        /// The flow rules' maps (`qm_f*`) and the connection table (`qm_flows`).
        let fslot, frcount, flows: BPFMap
        /// `dns:` rules' learned addresses → group mask (``DNSLearning``).
        let fdns4, fdns6: BPFMap
        /// `qm_shape`: download shaping, ingress ifindex → ``EBPFShape``.
        let shape: BPFMap
    }

    struct State: Sendable {
        var maps: Maps?
        var active = 0
        /// Interface name → ifindex it is attached on.
        var attached: [String: Int32] = [:]
        /// Interface name → ifindex whose clsact ingress has the 802.1p classifier.
        var ingressAttached: [String: Int32] = [:]
        /// Interface policy numbers written, by ifindex (the active slot's half is kept on reload).
        var ingressSlots: [Int32: EBPFPolicySlots] = [:]
        var egressSlots: [Int32: EBPFPolicySlots] = [:]
        /// `qm_shape` as written, by ingress ifindex.
        var shaped: [Int32: EBPFShape] = [:]
        /// Counter sums at the last flush.
        var lastCounts = [UInt64](repeating: 0, count: EBPFLayout.counterEntries)
        /// `qm_bcount` sums at the last flush.
        var lastBehaviourCounts: [UInt64] = [0, 0, 0, 0]
        /// Per slot: the rule names its counters are for, and their packet
        /// and byte sums at the last flush (or when the slot was written).
        var ruleNames: [[String]] = [[], []]
        var lastRuleCounts: [[EBPFRuleCount]] = [[], []]
        /// The connection epoch of the last rules written (1-65535): a new
        /// one forgets every connection, as nfqueue's new table per snapshot.
        var epoch: UInt32 = 0
        var generation = 0
        /// The tables and snapshot in force: what the reconciliation between
        /// reloads puts back.
        var tables: EBPFTables?
        var snapshot: PolicySnapshot?
        /// The kernel's ids of this process's two programs.
        var programIDs: (egress: UInt32, ingress: UInt32) = (0, 0)
        /// The configured interfaces' locks (one qosmapd per interface).
        var locks: [String: InterfaceLock] = [:]
        /// The last line logged per failing key (``logOnce``).
        var logged: [String: String] = [:]
    }

    /// Starts from a loaded snapshot; nothing is loaded or attached until ``start()``.
    public init(
        configPath: String?, snapshot: PolicySnapshot, metrics: DaemonMetrics, logger: Logger,
        notifier: SystemdNotifier, metricsEndpoint: (any MetricsEndpoint)? = nil,
        attachmentMetrics: AttachmentMetrics = AttachmentMetrics()
    ) {
        self.configPath = configPath
        self.metrics = metrics
        self.attachmentMetrics = attachmentMetrics
        self.logger = logger
        self.notifier = notifier
        self.metricsEndpoint = metricsEndpoint
        store = PolicyStore(snapshot)
        state = Mutex(State(generation: snapshot.generation))
    }

    /// Loads the embedded object (`bpf_object__open_mem`, `bpf_object__load`) and finds its maps.
    /// `bytes`: another build of the object (benchmarks compare builds).
    static func loadObject(_ bytes: [UInt8]? = nil) throws(BPFError) -> Maps {
        let object = try BPFObject(bytes: bytes ?? EmbeddedBPF.object, name: "qosmap")
        return Maps(
            object: object, program: try object.program(named: programName),
            gen: try object.map(named: EBPFLayout.genMap), ingress: try object.map(named: "qm_ingress"),
            egress: try object.map(named: "qm_egress"), table: try object.map(named: "qm_table"),
            counters: try object.map(named: "qm_counters"),
            ingressHash: try object.map(named: "qm_ingress_hash"),
            egressHash: try object.map(named: "qm_egress_hash"),
            config: try object.map(named: EBPFLayout.configMap),
            ingressProgram: try object.program(named: ingressProgramName),
            fslot: try object.map(named: "qm_fslot"), frcount: try object.map(named: "qm_frcount"),
            flows: try object.map(named: "qm_flows"), fdns4: try object.map(named: "qm_fdns4"),
            fdns6: try object.map(named: "qm_fdns6"), shape: try object.map(named: "qm_shape"))
    }

    /// Loads the classifier, writes the tables into slot 0 and attaches it
    /// on every configured interface that exists.
    /// - Throws: ``EBPFError`` naming the step (load, tables, attach).
    public func start() throws(EBPFError) {
        let snapshot = store.snapshot
        let tables: EBPFTables
        do {
            tables = try EBPFTables(snapshot)
        } catch {
            throw EBPFError(error.description)
        }
        if snapshot.config.interfaces.isEmpty {
            logger.warning("datapath ebpf with no interfaces: nothing is attached, so nothing is marked")
        }
        let maps: Maps
        do {
            maps = try Self.loadObject()
        } catch {
            let release = KernelRelease.running()
            throw EBPFError(
                Self.loadFailure(error, release: release, status: Self.ownStatus()),
                denied: Self.loadDenied(error, release: release))
        }
        // After the load: a kernel that refuses the program without
        // CAP_PERFMON (6.1) has said so in the error instead.
        if let warning = Self.perfmonWarning() { logger.warning("\(warning)") }
        try state.withLock { s throws(EBPFError) in
            s.maps = maps
            do {
                s.programIDs = (try maps.program.id(), try maps.ingressProgram.id())
            } catch {
                throw EBPFError("cannot read the classifier's program id: \(error)")
            }
            _ = try lock(snapshot.config.interfaces.keys.sorted(), &s)
            s.active = 1  // so that install writes slot 0 and flips to it
            guard install(tables, snapshot, &s) else {
                s.locks = [:]
                throw EBPFError("cannot attach the classifier; see the log")
            }
            Self.removeStaleClassifiers(
                keeping: Set(s.attached.values), Set(s.ingressAttached.values),
                ours: [s.programIDs.egress, s.programIDs.ingress], logger: logger, metrics: attachmentMetrics)
        }
        // dns: rules: the learned masks follow DNSLearning (all now, then each change).
        let log = logger
        DNSLearning.shared.setMirror { changes in Self.writeDNS(changes, maps, log) }
        metrics.loaded(at: Date().timeIntervalSince1970)
    }

    /// Writes `tables` into the inactive slot, attaches on new interfaces,
    /// flips the slot and detaches from interfaces no longer configured. On
    /// failure the filters attached here are removed and the old slot stays.
    private func install(_ tables: EBPFTables, _ snapshot: PolicySnapshot, _ s: inout State) -> Bool {
        guard let maps = s.maps else { return false }
        let next = 1 - s.active
        do {
            let base = next * EBPFLayout.slotEntries
            let keys = tables.entries.keys.sorted()
            try maps.table.update(
                keys: keys.map { UInt32(base + $0) }, values: keys.map { tables.entries[$0]! })
        } catch {
            logger.error("cannot write the tables", metadata: ["error": "\(error)"])
            return false
        }
        var epoch = s.epoch
        if let flows = tables.flows {
            epoch = s.epoch % 0xFFFF + 1
            do {
                try Self.writeFlows(flows, slot: next, epoch: epoch, maps)
                s.lastRuleCounts[next] = try Self.ruleCounts(maps, slot: next, count: flows.names.count)
            } catch {
                logger.error("cannot write the flow rules", metadata: ["error": "\(error)"])
                return false
            }
        }
        let behaviour = snapshot.config.classify.behaviour
        if !behaviour.isEmpty {
            do {
                try EBPFBehaviour.write(
                    behaviour, slot: next, epoch: UInt32(truncatingIfNeeded: snapshot.generation), maps)
            } catch {
                logger.error("cannot write the flow behaviour", metadata: ["error": "\(error)"])
                return false
            }
        }
        let interfaces = Self.resolve(snapshot, tables, logMissing: true, logger: logger)
        guard writePolicies(tables, interfaces, slot: next, new: false, maps, &s) else { return false }
        writeShaping(snapshot, interfaces, maps, &s)
        // The carry bits: the same in both slots, written before any
        // ingress classifier is attached.
        let mask = snapshot.config.ebpfCarryMask
        do {
            try maps.config.update(UInt32(0), EBPFCarry(mask: mask, shift: UInt32(mask.trailingZeroBitCount)))
        } catch {
            logger.error("cannot write the carry mask", metadata: ["error": "\(error)"])
            return false
        }
        var added: [(String, Int32, TrafficControl.Direction)] = []
        func undo() {
            for (n, i, d) in added { detach(n, i, direction: d) }
        }
        for (hook, wanted, program) in [
            (TrafficControl.Direction.ingress, interfaces.ingress, maps.ingressProgram),
            (.egress, interfaces.egress, maps.program),
        ] {
            for (name, index) in wanted.sorted(by: { $0.key < $1.key }) {
                do {
                    if try ensureAttached(name, index, hook, program, repair: false, &s) {
                        added.append((name, index, hook))
                    }
                } catch  where error.errno == .operationNotSupportedByDevice {
                    // Gone since it was looked up: the next reconciliation sees it.
                    continue
                } catch {
                    logger.error(
                        hook == .ingress
                            ? "cannot attach the 802.1p classifier" : "cannot attach the classifier",
                        metadata: ["interface": "\(name)", "error": "\(error)\(Self.hint(error))"])
                    undo()
                    return false
                }
            }
        }
        do {
            try maps.gen.update(
                UInt32(0),
                UInt32(next) | (tables.flows == nil ? 0 : EBPFFlowLayout.genRules)
                    | (behaviour.isEmpty ? 0 : EBPFBehaviour.genBehave))
        } catch {
            logger.error("cannot switch tables", metadata: ["error": "\(error)"])
            undo()
            return false
        }
        s.active = next
        s.epoch = epoch
        s.ruleNames[next] = tables.flows?.names ?? []
        if tables.flows == nil { s.lastRuleCounts[next] = [] }
        s.tables = tables
        s.snapshot = snapshot
        for (name, index) in s.attached where interfaces.egress[name] != index { detach(name, index) }
        for (name, index) in s.ingressAttached where interfaces.ingress[name] != index {
            detach(name, index, direction: .ingress)
        }
        s.attached = interfaces.egress
        s.ingressAttached = interfaces.ingress
        removeStalePolicies(interfaces, maps, &s)
        return true
    }

    /// The interfaces a snapshot puts classifiers on, by the ifindex they
    /// have now: egress on every configured interface that exists, ingress on
    /// those that trust 802.1p; `policies` adds the interfaces that flow rules
    /// name by `ingress:` (their class goes in the ingress word).
    struct Interfaces: Equatable {
        var egress: [String: Int32] = [:]
        var ingress: [String: Int32] = [:]
        var policies: [String: Int32] = [:]
    }

    static func resolve(
        _ snapshot: PolicySnapshot, _ tables: EBPFTables, logMissing: Bool, logger: Logger
    ) -> Interfaces {
        var r = Interfaces()
        for name in snapshot.config.interfaces.keys.sorted() {
            let index = Int32(bitPattern: if_nametoindex(name))
            if index == 0 {
                if logMissing {
                    logger.warning(
                        "interface not found; attached as soon as it exists",
                        metadata: ["interface": "\(name)"])
                }
                continue
            }
            r.egress[name] = index
        }
        r.ingress = r.egress.filter {
            snapshot.policy(input: $0.key, output: nil).trust == .dot1p
                || snapshot.config.downloadPriorities(input: $0.key) != nil
        }
        r.policies = r.egress
        for name in (tables.flows?.ingressClass.keys).map(Array.init) ?? [] where r.policies[name] == nil {
            let index = Int32(bitPattern: if_nametoindex(name))
            if index != 0 { r.policies[name] = index }
        }
        return r
    }

    /// Writes the interface policy numbers of `slot` for the interfaces now
    /// there. For a reload (`new: false`) the other slot's half stays as it
    /// is, since packets read it until the flip; for the reconciliation
    /// between reloads (`new: true`, `slot` the active one) an interface not
    /// in the map yet gets the value in both halves, and one whose value is
    /// right is not written.
    private func writePolicies(
        _ tables: EBPFTables, _ interfaces: Interfaces, slot: Int, new: Bool, _ maps: Maps, _ s: inout State
    ) -> Bool {
        let ingressClass = tables.flows?.ingressClass ?? [:]
        for (maps:(array, hash), names:names, slots:slotsPath, isIngress:isIngress) in [
            ((maps.ingress, maps.ingressHash), tables.ingress, \State.ingressSlots, true),
            ((maps.egress, maps.egressHash), tables.egress, \State.egressSlots, false),
        ] {
            var slots = s[keyPath: slotsPath]
            let present = isIngress ? interfaces.policies : interfaces.egress
            for (name, index) in present {
                let flowClass = isIngress ? UInt32(ingressClass[name] ?? 0) << 16 : 0
                let value = (names[name] ?? 0) | flowClass
                var v = slots[index] ?? EBPFPolicySlots()
                if new {
                    if slots[index] == nil { v[1 - slot] = value } else if v[slot] == value { continue }
                }
                v[slot] = value
                // Small ifindexes go in the array the classifier reads without a hash lookup.
                let map = UInt32(bitPattern: index) < EBPFLayout.ifindexArray ? array : hash
                do {
                    try map.update(UInt32(bitPattern: index), v)
                    slots[index] = v
                } catch {
                    logger.error(
                        "cannot write interface policies",
                        metadata: ["interface": "\(name)", "ifindex": "\(index)", "error": "\(error)"])
                    return false
                }
            }
            s[keyPath: slotsPath] = slots
        }
        return true
    }

    /// Points each interface with `ingress-rate` at its IFB (``EgressQueues``
    /// makes it; until it exists the download passes unshaped) with its
    /// classes' priorities there, and clears every other entry: a packet is
    /// redirected only to an IFB that existed at the last check (link events
    /// and the 1 s reconciliation keep this current).
    private func writeShaping(
        _ snapshot: PolicySnapshot, _ interfaces: Interfaces, _ maps: Maps, _ s: inout State
    ) {
        var want: [Int32: EBPFShape] = [:]
        for (name, index) in interfaces.ingress {
            guard let prios = snapshot.config.downloadPriorities(input: name) else { continue }
            let ifb = if_nametoindex(EgressQueues.ifbName(for: name))
            if ifb != 0 { want[index] = EBPFShape(ifb: ifb, priorities: prios) }
        }
        for (index, value) in want where s.shaped[index] != value {
            do {
                try maps.shape.update(UInt32(bitPattern: index), value)
                s.shaped[index] = value
                s.logged["shape:\(index)"] = nil
            } catch {
                logOnce(
                    "shape:\(index)", "cannot point the download at its IFB",
                    ["ifindex": "\(index)", "error": "\(error)"], &s)
            }
        }
        for index in s.shaped.keys where want[index] == nil {
            do {
                try maps.shape.delete(UInt32(bitPattern: index))
                s.shaped[index] = nil
            } catch {
                logOnce(
                    "shape:\(index)", "cannot clear a download's IFB",
                    ["ifindex": "\(index)", "error": "\(error)"], &s)
            }
        }
    }

    /// Clears the policies of every ifindex that is no longer a configured
    /// interface present now (deleted, re-created with another ifindex,
    /// moved away or renamed): the maps hold exactly the configured
    /// interfaces that exist, so re-created interfaces cannot fill the hash.
    private func removeStalePolicies(_ interfaces: Interfaces, _ maps: Maps, _ s: inout State) {
        for (array, hash, slotsPath, keep) in [
            (maps.ingress, maps.ingressHash, \State.ingressSlots, Set(interfaces.policies.values)),
            (maps.egress, maps.egressHash, \State.egressSlots, Set(interfaces.egress.values)),
        ] {
            for index in s[keyPath: slotsPath].keys where !keep.contains(index) {
                let key = UInt32(bitPattern: index)
                do {
                    if key < EBPFLayout.ifindexArray {
                        try array.update(key, EBPFPolicySlots())
                    } else {
                        try hash.delete(key)
                    }
                    s[keyPath: slotsPath][index] = nil
                } catch {
                    logOnce(
                        "stale:\(array.name):\(index)", "cannot clear the policy of a removed interface",
                        ["ifindex": "\(index)", "error": "\(error)"], &s)
                }
            }
        }
    }

    /// Makes the kernel run `program` at `hook` of `index`, checking the
    /// kernel rather than this process's record. Attaches (creating clsact)
    /// when the filter is missing or runs another program.
    /// - Parameter repair: the reconciliation between reloads: a missing
    ///   filter is a repair (logged as such and counted).
    /// - Returns: whether it attached.
    private func ensureAttached(
        _ name: String, _ index: Int32, _ hook: TrafficControl.Direction, _ program: BPFProgram, repair: Bool,
        _ s: inout State
    ) throws(BPFError) -> Bool {
        let f = filter(index, direction: hook)
        let ours = hook == .ingress ? s.programIDs.ingress : s.programIDs.egress
        let current = (try? TrafficControl.attachedProgram(f)) ?? nil
        if current == ours { return false }
        let created = current == nil ? try TrafficControl.createClsact(ifindex: index) : false
        let id = try TrafficControl.attach(program, at: f)
        let hookName = hook == .ingress ? "ingress" : "egress"
        var metadata: Logger.Metadata = [
            "interface": "\(name)", "ifindex": "\(index)", "hook": "\(hookName)", "prog_id": "\(id)",
        ]
        let known = hook == .ingress ? s.ingressAttached[name] : s.attached[name]
        if let other = current {
            // This process holds the interface's lock: no running qosmapd put it there.
            metadata["replaced_prog_id"] = "\(other)"
            logger.notice(
                "classifier taken over from a qosmapd that is gone (or another program at qosmapd's handle and priority)",
                metadata: metadata)
            attachmentMetrics.staleTakenOver.increment()
        } else if repair {
            metadata["clsact"] = "\(created ? "created" : "existing")"
            let why =
                known == nil
                ? "the interface appeared"
                : known != index
                    ? "the interface came back with another ifindex (was \(known!))"
                    : "its filter was gone (removed by another tool, or the interface re-created or back from another namespace)"
            logger.notice("classifier re-attached: \(why)", metadata: metadata)
            attachmentMetrics.repaired(interface: name, hook: hookName)
        } else {
            metadata["clsact"] = "\(created ? "created" : "existing")"
            logger.info(
                hook == .ingress
                    ? "ingress classifier attached (802.1p carry, download classes)" : "classifier attached",
                metadata: metadata)
        }
        return true
    }

    /// Logs `message` at error level once until it changes for `key`
    /// (a failure repeated every second is one line).
    private func logOnce(_ key: String, _ message: String, _ metadata: Logger.Metadata, _ s: inout State) {
        let text = "\(message) \(metadata)"
        guard s.logged[key] != text else { return }
        s.logged[key] = text
        logger.error("\(message)", metadata: metadata)
    }

    /// Puts the kernel in the state the config says, between reloads:
    /// each configured interface that exists runs this process's classifier
    /// (re-attached where it is missing or replaced), the interface maps
    /// hold exactly those interfaces, and with `sweep` no other interface
    /// carries a qosmapd classifier of a process that is gone. Called every
    /// second and on rtnetlink link and tc events.
    func reconcile(sweep: Bool) {
        state.withLock { s in
            guard let maps = s.maps, let tables = s.tables, let snapshot = s.snapshot else { return }
            for lock in s.locks.values { lock.drain() }
            let interfaces = Self.resolve(snapshot, tables, logMissing: false, logger: logger)
            if !writePolicies(tables, interfaces, slot: s.active, new: true, maps, &s) { return }
            writeShaping(snapshot, interfaces, maps, &s)
            for (hook, wanted, program) in [
                (TrafficControl.Direction.ingress, interfaces.ingress, maps.ingressProgram),
                (.egress, interfaces.egress, maps.program),
            ] {
                for (name, index) in wanted.sorted(by: { $0.key < $1.key }) {
                    do throws(BPFError) {
                        _ = try ensureAttached(name, index, hook, program, repair: true, &s)
                        s.logged["attach:\(name):\(hook.rawValue)"] = nil
                    } catch {
                        logOnce(
                            "attach:\(name):\(hook.rawValue)", "cannot re-attach the classifier",
                            [
                                "interface": "\(name)", "ifindex": "\(index)",
                                "error": "\(error)\(Self.hint(error))",
                            ],
                            &s)
                    }
                }
            }
            for (name, index) in s.attached where interfaces.egress[name] == nil {
                logger.notice(
                    "interface gone; its classifier is attached again when it is back",
                    metadata: ["interface": "\(name)", "ifindex": "\(index)"])
            }
            s.attached = interfaces.egress
            s.ingressAttached = interfaces.ingress
            removeStalePolicies(interfaces, maps, &s)
            if sweep {
                Self.removeStaleClassifiers(
                    keeping: Set(interfaces.egress.values), Set(interfaces.ingress.values),
                    ours: [s.programIDs.egress, s.programIDs.ingress], logger: logger,
                    metrics: attachmentMetrics)
            }
        }
    }

    /// Removes qosmapd's classifier (the filter at ``filterHandle`` and
    /// ``filterPriority``) from every interface of this namespace except
    /// `egress` and `ingress` (by ifindex): this process's own where it no
    /// longer belongs, and another's when no running qosmapd holds that
    /// interface's ``InterfaceLock`` (a daemon killed, or stopped with
    /// `detach-on-exit: false`). A classifier whose interface is held by a
    /// running qosmapd is that daemon's, and stays.
    /// - Returns: how many were removed.
    @discardableResult
    public static func removeStaleClassifiers(
        keeping egress: Set<Int32> = [], _ ingress: Set<Int32> = [], ours: Set<UInt32> = [], logger: Logger,
        metrics: AttachmentMetrics
    ) -> Int {
        guard let list = if_nameindex() else { return 0 }
        defer { if_freenameindex(list) }
        var removed = 0
        var i = 0
        while list[i].if_index != 0, i < 65536 {
            let index = Int32(bitPattern: list[i].if_index)
            let name = String(cString: list[i].if_name)
            i += 1
            for (hook, keep) in [(TrafficControl.Direction.egress, egress), (.ingress, ingress)]
            where !keep.contains(index) {
                let f = TrafficControl.Filter(
                    ifindex: index, direction: hook, handle: filterHandle, priority: filterPriority)
                guard let id = (try? TrafficControl.attachedProgram(f)) ?? nil else { continue }
                var metadata: Logger.Metadata = [
                    "interface": "\(name)", "ifindex": "\(index)",
                    "hook": "\(hook == .ingress ? "ingress" : "egress")",
                    "prog_id": "\(id)",
                ]
                if !ours.contains(id) {
                    // A live daemon's.
                    guard case .acquired = try? InterfaceLock.acquire(name) else { continue }
                }
                do {
                    try TrafficControl.detach(f)
                    removed += 1
                    if ours.contains(id) {
                        logger.info(
                            "classifier detached: the interface is not configured", metadata: metadata)
                    } else {
                        metrics.staleRemoved.increment()
                        logger.notice(
                            "removed the classifier of a qosmapd that is gone from an interface this config does not name",
                            metadata: metadata)
                    }
                } catch {
                    metadata["error"] = "\(error)"
                    logger.error("cannot remove a stale classifier", metadata: metadata)
                }
            }
        }
        return removed
    }

    /// Takes the locks of `names` not held yet (one qosmapd per interface).
    /// - Returns: the names newly locked.
    /// - Throws: one line naming the interface and the process that holds it.
    private func lock(_ names: [String], _ s: inout State) throws(EBPFError) -> [String] {
        var taken: [String] = []
        for name in names where s.locks[name] == nil {
            let outcome: InterfaceLock.Outcome
            do {
                outcome = try InterfaceLock.acquire(name)
            } catch {
                for n in taken { s.locks[n] = nil }
                throw EBPFError("\(error)")
            }
            switch outcome {
            case .acquired(let l):
                s.locks[name] = l
                taken.append(name)
            case .held(let pid):
                for n in taken { s.locks[n] = nil }
                let who = pid.map { "qosmapd pid \($0)" } ?? "another qosmapd"
                throw EBPFError(
                    "interface \(name) is managed by \(who) in this network namespace; stop it, or name \(name) in one config only"
                )
            }
        }
        return taken
    }

    private func filter(_ ifindex: Int32, direction: TrafficControl.Direction = .egress)
        -> TrafficControl.Filter
    {
        TrafficControl.Filter(
            ifindex: ifindex, direction: direction, handle: Self.filterHandle, priority: Self.filterPriority)
    }

    private func detach(_ name: String, _ index: Int32, direction: TrafficControl.Direction = .egress) {
        do {
            try TrafficControl.detach(filter(index, direction: direction))
            logger.info(
                "classifier detached",
                metadata: [
                    "interface": "\(name)", "ifindex": "\(index)",
                    "hook": "\(direction == .ingress ? "ingress" : "egress")",
                ])
        } catch {
            // The interface may be gone, and its filter with it.
            logger.info("classifier not detached", metadata: ["interface": "\(name)", "error": "\(error)"])
        }
    }

    /// Re-reads config and tables and swaps them in; a bad config, one that
    /// changes the datapath, or a failed attach keeps the old tables.
    /// - Returns: whether the new tables are in force.
    @discardableResult
    public func reload() -> Bool {
        notifier.reloading()
        defer { notifier.ready() }
        let next = state.withLock { s in
            s.generation += 1
            return s.generation
        }
        let snapshot: PolicySnapshot
        let tables: EBPFTables
        do throws(ConfigError) {
            snapshot = try QueueService.load(configPath, generation: next)
            guard snapshot.config.datapath == .ebpf else {
                throw ConfigError(
                    file: configPath ?? "<embedded default>", "datapath: nfqueue needs a restart of qosmapd")
            }
            tables = try EBPFTables(snapshot)
        } catch {
            for d in error.diagnostics {
                logger.error(
                    "reload failed; keeping the old tables", metadata: ["diagnostic": "\(d.description)"])
            }
            metrics.reloaded(success: false, at: Date().timeIntervalSince1970)
            return false
        }
        let port = snapshot.config.metricsPort
        if let endpoint = metricsEndpoint, endpoint.port != port {
            do {
                try endpoint.rebind(port: port)
            } catch {
                logger.error(
                    "reload failed: cannot move the metrics endpoint; keeping the old tables",
                    metadata: ["port": "\(port)", "error": "\(error)"])
                metrics.reloaded(success: false, at: Date().timeIntervalSince1970)
                return false
            }
        }
        let ok = state.withLock { s in
            let taken: [String]
            do {
                taken = try lock(snapshot.config.interfaces.keys.sorted(), &s)
            } catch {
                logger.error("reload failed; keeping the old tables", metadata: ["error": "\(error)"])
                return false
            }
            guard install(tables, snapshot, &s) else {
                for name in taken { s.locks[name] = nil }
                return false
            }
            // Detached by install: the interfaces left the config.
            for name in s.locks.keys where snapshot.config.interfaces[name] == nil { s.locks[name] = nil }
            return true
        }
        if ok {
            store.replace(snapshot)
            DNSLearning.shared.committed(snapshot.config, table: snapshot.flows?.dns, logger: logger)
        }
        metrics.reloaded(success: ok, at: Date().timeIntervalSince1970)
        logger.info(
            ok ? "reloaded" : "reload failed; keeping the old tables",
            metadata: ["generation": "\(next)", "domains": "\(snapshot.tables.domains.names)"])
        return ok
    }

    /// Adds the per-CPU counters' growth since the last call to the
    /// `qosmapd_packets_total` metrics (the nfqueue path's labels).
    public func flushCounters() {
        var counts = PacketCounts()
        state.withLock { s in
            guard let counters = s.maps?.counters else { return }
            for key in 0..<EBPFLayout.counterEntries {
                guard let values = try? counters.perCPUCounters(UInt32(key)) else { continue }
                let sum = values.reduce(0, &+)
                let delta = sum &- s.lastCounts[key]
                guard delta != 0 else { continue }
                s.lastCounts[key] = sum
                let (cell, outcome) =
                    key == EBPFLayout.counterEntries - 1
                    ? (Treatment.bestEffort.cellIndex, PacketOutcome.malformed.rawValue)
                    : (key / EBPFLayout.outcomesPerCell, key % EBPFLayout.outcomesPerCell)
                guard outcome < PacketOutcome.caseCount else { continue }
                counts.byTreatment[cell * PacketOutcome.caseCount + outcome] += Int(delta)
            }
            if let maps = s.maps, let now = try? EBPFBehaviour.counts(maps), now.count == 4 {
                let d = zip(now, s.lastBehaviourCounts).map { Int(truncatingIfNeeded: $0 &- $1) }
                counts.flows.tracked = d[0]
                counts.flows.evicted = d[1]
                counts.flows.demoted = d[2]
                counts.flows.promoted = d[3]
                s.lastBehaviourCounts = now
            }
            // Both slots: packets that read the old slot just before a flip count under its rules.
            for slot in 0..<2 where !s.ruleNames[slot].isEmpty {
                let names = s.ruleNames[slot]
                guard let maps = s.maps, s.lastRuleCounts[slot].count == names.count,
                    let now = try? Self.ruleCounts(maps, slot: slot, count: names.count)
                else { continue }
                var c = PacketCounts()
                c.resetRules(names)
                for i in names.indices {
                    c.rulePackets[i] = now[i].packets &- s.lastRuleCounts[slot][i].packets
                    c.ruleBytes[i] = now[i].bytes &- s.lastRuleCounts[slot][i].bytes
                    if c.rulePackets[i] != 0 { c.ruleTouched = true }
                }
                s.lastRuleCounts[slot] = now
                if c.ruleTouched { metrics.flush(&c) }
            }
        }
        metrics.flush(&counts)
    }

    /// Writes the flow rules into `slot` of the `qm_f*` maps (the classifier
    /// reads them only once `qm_gen` points at the slot).
    /// Writes learned-address masks into `qm_fdns4`/`qm_fdns6` (mask 0 deletes).
    static func writeDNS(_ changes: [DNSMaskChange], _ maps: Maps, _ logger: Logger) {
        for c in changes {
            let a = c.address
            do throws(BPFError) {
                if a.isIPv6 {
                    let key = (
                        UInt32(truncatingIfNeeded: a.high >> 32), UInt32(truncatingIfNeeded: a.high),
                        UInt32(truncatingIfNeeded: a.low >> 32), UInt32(truncatingIfNeeded: a.low)
                    )
                    if c.mask == 0 {
                        try? maps.fdns6.delete(key)
                    } else {
                        try maps.fdns6.update(key, UInt32(c.mask))
                    }
                } else {
                    let key = UInt32(truncatingIfNeeded: a.low)
                    if c.mask == 0 {
                        try? maps.fdns4.delete(key)
                    } else {
                        try maps.fdns4.update(key, UInt32(c.mask))
                    }
                }
            } catch {
                logger.error(
                    "cannot write a learned address", metadata: ["address": "\(a)", "error": "\(error)"])
            }
        }
    }

    static func writeFlows(_ f: EBPFFlowTables, slot: Int, epoch: UInt32, _ maps: Maps) throws(BPFError) {
        try maps.fslot.update(UInt32(slot), bytes: f.slotValue(epoch: epoch))
    }

    /// The packets and bytes of rules `0..<count` of `slot`, summed over CPUs.
    static func ruleCounts(_ maps: Maps, slot: Int, count: Int) throws(BPFError) -> [EBPFRuleCount] {
        var r: [EBPFRuleCount] = []
        r.reserveCapacity(count)
        for i in 0..<count {
            let v = try maps.frcount.perCPUValues(
                UInt32(slot * EBPFFlowLayout.maxRules + i), as: EBPFRuleCount.self)
            r.append(
                v.reduce(EBPFRuleCount(packets: 0, bytes: 0)) {
                    EBPFRuleCount(packets: $0.packets &+ $1.packets, bytes: $0.bytes &+ $1.bytes)
                })
        }
        return r
    }

    /// What `qosmap status` reads the kernel's tables with: the maps, the
    /// connection epoch and rule names in force, and the flow-behaviour
    /// epoch (the snapshot's generation); nil before the classifier loaded.
    func statusState() -> (
        maps: Maps, epoch: UInt32, rules: [String], behaviourEpoch: UInt32, behaviour: Bool
    )? {
        state.withLock { s in
            guard let maps = s.maps else { return nil }
            let snapshot = s.snapshot ?? store.snapshot
            return (
                maps, s.epoch, s.ruleNames[s.active], UInt32(truncatingIfNeeded: snapshot.generation),
                !snapshot.config.classify.behaviour.isEmpty
            )
        }
    }

    /// Detaches the classifier from every interface (unless `detach-on-exit: false`).
    public func stop() {
        let keep = !store.snapshot.config.ebpfDetachOnExit
        state.withLock { s in
            if keep {
                logger.info(
                    "classifier left attached (detach-on-exit: false); it marks with the last tables",
                    metadata: ["interfaces": "\(s.attached.keys.sorted())"])
            } else {
                for (name, index) in s.attached.sorted(by: { $0.key < $1.key }) { detach(name, index) }
                for (name, index) in s.ingressAttached.sorted(by: { $0.key < $1.key }) {
                    detach(name, index, direction: .ingress)
                }
                s.attached = [:]
                s.ingressAttached = [:]
            }
            s.maps = nil
            s.locks = [:]
        }
    }

    /// Loads and attaches, then serves SIGHUP reloads and flushes counters
    /// every second until graceful shutdown.
    public func run() async throws {
        try start()
        notifier.ready()
        let snapshot = store.snapshot
        logger.info(
            "qosmapd ready",
            metadata: [
                "datapath": "ebpf", "interfaces": "\(state.withLock { $0.attached.keys.sorted() })",
                "domains": "\(snapshot.tables.domains.names)",
            ])
        // The kernel is the truth: every second, and at once on rtnetlink
        // link and tc events (an interface re-created, renamed or moved, a
        // clsact or filter deleted by another tool), the classifiers are put
        // back where the config wants them. A burst of events is one pass.
        let (events, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let monitor = LinkMonitor(logger: logger, trafficControl: true) { wake.yield() }
        monitor.start()
        let watcher = Task { [self] in
            for await _ in events {
                try? await Task.sleep(for: .milliseconds(20))
                reconcile(sweep: true)
            }
        }
        let flusher = Task { [self] in
            var tick = 0
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                flushCounters()
                tick += 1
                // Other interfaces are checked on events and every 10 s: one
                // query per interface of the namespace.
                reconcile(sweep: tick % 10 == 0)
            }
        }
        let signals = await UnixSignalsSequence(trapping: .sighup)
        for await _ in signals.cancelOnGracefulShutdown() {
            logger.info("SIGHUP: reloading", metadata: ["config": "\(configPath ?? "<embedded default>")"])
            reload()
        }
        notifier.stopping()
        flusher.cancel()
        await flusher.value
        monitor.stop()
        wake.finish()
        await watcher.value
        flushCounters()
        stop()
        logger.info("ebpf datapath stopped")
    }
}

/// The eBPF datapath could not start.
public struct EBPFError: Error, CustomStringConvertible {
    /// What failed.
    public var description: String
    /// Whether the system will not allow it however often it is tried (the
    /// kernel refused the classifier, or the process may not load it), so
    /// that qosmapd exits 77, which the unit does not restart.
    public var denied: Bool
    /// Creates an error.
    public init(_ description: String, denied: Bool = false) {
        self.description = description
        self.denied = denied
    }
}

extension EBPFDatapath {
    /// The bit of `CAP_PERFMON` (38) in a capability set.
    static let perfmonCapability: UInt64 = 1 << 38

    /// The effective capabilities in a /proc/PID/status text (its `CapEff:`
    /// line, hexadecimal), nil if there is none.
    static func effectiveCapabilities(status: String) -> UInt64? {
        for line in status.split(separator: "\n") where line.hasPrefix("CapEff:") {
            return line.split(whereSeparator: \.isWhitespace).dropFirst().first.flatMap {
                UInt64($0, radix: 16)
            }
        }
        return nil
    }

    /// The warning qosmapd logs before loading the classifier without
    /// `CAP_PERFMON`: the kernel then hardens the program against Spectre
    /// (sanitized pointer arithmetic, barriers), as for a program an
    /// untrusted user wrote, which cost 8-10 times the time per packet here
    /// (docs/PERFORMANCE.md). Nil with it, or when `status` (this process's
    /// /proc/self/status) cannot tell.
    static func perfmonWarning(status: String) -> String? {
        guard let caps = effectiveCapabilities(status: status), caps & perfmonCapability == 0 else {
            return nil
        }
        return
            "without CAP_PERFMON the kernel hardens the eBPF classifier against Spectre, which made it 8-10 times slower per packet in tools/bench/ebpf-rules; grant CAP_PERFMON (dist/qosmapd.service does)"
    }

    /// ``perfmonWarning(status:)`` for this process.
    public static func perfmonWarning() -> String? {
        ownStatus().flatMap { perfmonWarning(status: $0) }
    }

    /// This process's /proc/self/status, nil if unreadable.
    static func ownStatus() -> String? {
        FileManager.default.contents(atPath: "/proc/self/status").map { String(decoding: $0, as: UTF8.self) }
    }

    /// The oldest kernel the classifier loads on, from what it uses: the
    /// newest is `bpf_ktime_get_coarse_ns` (5.11; flow behaviour's clock,
    /// which the verifier checks whether or not a config uses it). The rest
    /// is older: CAP_BPF and CAP_PERFMON 5.8, batched array updates 5.6,
    /// global data 5.2, 32-bit jumps 5.1; the program has no loop.
    static let oldestKernel = (5, 11)

    /// The one line qosmapd stops with when the classifier does not load:
    /// on a kernel older than ``oldestKernel`` that it is too old; for a
    /// program the verifier refused, the kernel and the verifier's reason,
    /// and CAP_PERFMON when the process lacks it (Debian 12's 6.1 refuses
    /// the classifier without it); EPERM names the capabilities needed.
    /// `status`: /proc/self/status, for the capabilities.
    static func loadFailure(_ error: BPFError, release: String, status: String?) -> String {
        if let v = KernelRelease.version(release), (v.major, v.minor) < oldestKernel {
            return
                "cannot load the classifier: datapath ebpf needs Linux \(oldestKernel.0).\(oldestKernel.1) or later, "
                + "this is \(release) (datapath nfqueue runs there): \(error)"
        }
        if let reason = error.verifier {
            let caps = status.flatMap { effectiveCapabilities(status: $0) }
            let perfmon =
                caps.map { $0 & perfmonCapability == 0 } == true
                ? "; without CAP_PERFMON some kernels refuse it (6.1 does): grant CAP_PERFMON (dist/qosmapd.service does)"
                : ""
            return "cannot load the classifier: the verifier of Linux \(release) refused \(reason) "
                + "(errno \(error.errno.rawValue))\(perfmon)"
        }
        return "cannot load the classifier: \(error)\(hint(error))"
    }

    /// Whether a failed load would fail again however often it is retried:
    /// a kernel older than ``oldestKernel``, a verifier that refused the
    /// program, or a process without the rights (EPERM).
    static func loadDenied(_ error: BPFError, release: String) -> Bool {
        let tooOld = KernelRelease.version(release).map { ($0.major, $0.minor) < oldestKernel } ?? false
        return tooOld || error.verifier != nil || error.errno == .notPermitted
    }

    /// What EPERM from libbpf means here.
    static func hint(_ error: BPFError) -> String {
        error.errno == .notPermitted ? " (CAP_BPF and CAP_NET_ADMIN are needed)" : ""
    }
}
