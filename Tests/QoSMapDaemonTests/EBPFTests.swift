import BPFClassifier
import Foundation
import QoSMapCore
import QoSMapTables
import Testing

@testable import QoSMapDaemon

#if canImport(Glibc)
    import Glibc
#endif

private func snapshot(_ text: String) throws -> PolicySnapshot {
    try PolicySnapshot(
        config: DaemonConfig.parse(text, file: "x.yaml"), generation: 0, systemDirectory: "/nonexistent")
}

@Test func datapathKeysParse() throws {
    let c = try DaemonConfig.parse("datapath: ebpf\nebpf: {detach-on-exit: false}\n", file: "x.yaml")
    #expect(c.datapath == .ebpf)
    #expect(!c.ebpfDetachOnExit)
    let d = try DaemonConfig.parse(DaemonConfig.embeddedDefault, file: "default")
    #expect(d.datapath == .nfqueue)
    #expect(d.ebpfDetachOnExit)
}

@Test(arguments: [
    ("datapath: xdp\n", "x.yaml:1:11: invalid datapath 'xdp'; allowed: nfqueue, ebpf"),
    (
        "ebpf: {detach: no}\n",
        "x.yaml:1:8: unknown key 'detach' in ebpf; allowed: detach-on-exit, pcp-carry-mask"
    ),
    (
        "interfaces:\n  a: {trust: 8021p}\n",
        "x.yaml:2:14: trust 8021p needs datapath: ebpf (nfqueue sees bare IP packets); allowed with nfqueue: none, dscp, ip-precedence"
    ),
    (
        "datapath: ebpf\ntrust: 8021p\n",
        "x.yaml:2:8: invalid trust mode '8021p'; allowed: none, dscp, ip-precedence (8021p: per interface, with datapath: ebpf)"
    ),
    (
        "datapath: ebpf\nebpf: {pcp-carry-mask: 0x1e}\n",
        "x.yaml:2:24: invalid pcp-carry-mask 0x1e; allowed: one run of 5 or more contiguous bits, e.g. 0xf8000000"
    ),
    (
        "datapath: ebpf\nebpf: {pcp-carry-mask: 0xf8}\nactions: {mark: {mask: 0xff}}\n",
        "x.yaml:2:24: pcp-carry-mask 0xf8 overlaps actions.mark mask 0xff; allowed: disjoint bits"
    ),
])
func datapathErrorsArePositioned(text: String, message: String) {
    do {
        _ = try DaemonConfig.parse(text, file: "x.yaml")
        Issue.record("accepted: \(text)")
    } catch {
        #expect(error.description == message)
    }
}

/// More policies than the maps hold: the error names the config file and
/// the `interfaces:` key, not a placeholder.
@Test func policyLimitNamesTheFile() throws {
    let dir = try temporaryDirectory("domains")
    defer { try? FileManager.default.removeItem(atPath: dir) }
    var text = "datapath: ebpf\nsystem-tables: false\ntables: [\(dir)]\ninterfaces:\n"
    for i in 1...EBPFLayout.maxEgress + 1 {
        try "domain: d\(i)\nimport: default\n".write(
            toFile: "\(dir)/d\(i).yaml", atomically: true, encoding: .utf8)
        text += "  e\(i): {outbound-domain: d\(i)}\n"
    }
    let s = try PolicySnapshot(
        config: DaemonConfig.parse(text, file: "/etc/qosmap/q.yaml"), generation: 0,
        systemDirectory: "/nonexistent")
    do {
        _ = try EBPFTables(s)
        Issue.record("\(EBPFLayout.maxEgress + 2) egress policies accepted")
    } catch {
        #expect(
            error.description
                == "/etc/qosmap/q.yaml:4:1: datapath ebpf: 1 ingress and \(EBPFLayout.maxEgress + 2) egress policies; allowed: at most \(EBPFLayout.maxIngress) and \(EBPFLayout.maxEgress) distinct (trust, domain) pairs and outbound domains"
        )
    }
}

/// Trust dscp with `default` both ways: each entry is the table's own answer.
@Test func tablesFollowTheDomain() throws {
    let s = try snapshot("datapath: ebpf\nactions: {mark: {mask: 0xff00}, priority: true}\n")
    let t = try EBPFTables(s)
    let domain = try #require(s.tables.domains["default"])
    #expect(t.ingressCount == 1 && t.egressCount == 1)
    // 64 by DSCP and 24 by class × color cell (a flow rule's treatment).
    #expect(t.entries.count == 64 + 24)
    for cell in Treatment.allCells {
        let e = try #require(t.entries[EBPFFlowLayout.ruleBase + cell.cellIndex])
        #expect(e.dscp == domain.dscp(for: cell).rawValue)
        #expect(e.cell == UInt8(cell.cellIndex))
    }
    for dscp in 0..<64 {
        let treatment = domain.classify(dscp: DSCP(truncating: UInt8(dscp)))
        let e = try #require(t.entries[dscp])
        #expect(e.dscp == domain.dscp(for: treatment).rawValue)
        #expect(e.cell == UInt8(treatment.cellIndex))
        #expect(e.flags == EBPFLayout.flagDSCP | EBPFLayout.flagMark | EBPFLayout.flagPriority)
        #expect(e.markMask == 0xff00)
        #expect(e.markValue == (try MarkEncoding(mask: 0xff00)).value(for: treatment))
        #expect(e.priority == UInt32(domain.pcp(for: treatment).rawValue))
    }
}

/// Interfaces with their own trust get their own ingress policy; trust none
/// gives every DSCP the best-effort value.
@Test func interfacesGetPolicyNumbers() throws {
    let s = try snapshot(
        """
        datapath: ebpf
        interfaces:
          a: {trust: none}
          b: {trust: dscp}
          c: {trust: none}
        """)
    let t = try EBPFTables(s)
    #expect(t.ingressCount == 2)
    #expect(t.ingress["a"] == 1 && t.ingress["c"] == 1 && t.ingress["b"] == nil)
    let domain = try #require(s.tables.domains["default"])
    let be = domain.dscp(for: Treatment.bestEffort).rawValue
    let base = (1 * EBPFLayout.maxEgress + 0) * EBPFLayout.entriesPerPair
    for dscp in 0..<64 {
        #expect(t.entries[base + dscp]?.dscp == be)
        #expect(t.entries[base + dscp]?.cell == UInt8(Treatment.bestEffort.cellIndex))
    }
    #expect(t.entries.count == 2 * (64 + 24))
}

/// The embedded object loads and its maps have the sizes the daemon writes.
@Test(.enabled(if: getuid() == 0, "loading BPF needs CAP_BPF"))
func embeddedObjectMatchesTheLayout() throws {
    let maps = try EBPFDatapath.loadObject()
    #expect(maps.table.maxEntries == 2 * EBPFLayout.slotEntries)
    #expect(maps.table.valueSize == MemoryLayout<EBPFEntry>.size)
    #expect(maps.ingress.valueSize == MemoryLayout<EBPFPolicySlots>.size)
    #expect(maps.egress.valueSize == MemoryLayout<EBPFPolicySlots>.size)
    #expect(maps.ingress.maxEntries == Int(EBPFLayout.ifindexArray))
    #expect(maps.egress.maxEntries == Int(EBPFLayout.ifindexArray))
    #expect(maps.ingressHash.valueSize == MemoryLayout<EBPFPolicySlots>.size)
    #expect(maps.egressHash.valueSize == MemoryLayout<EBPFPolicySlots>.size)
    #expect(maps.counters.maxEntries == EBPFLayout.counterEntries)
    #expect(maps.counters.isPerCPU)
    #expect(maps.gen.maxEntries == 1 && maps.gen.valueSize == 4)
    #expect(maps.config.maxEntries == 1 && maps.config.valueSize == MemoryLayout<EBPFCarry>.size)
    #expect(PacketOutcome.caseCount <= EBPFLayout.outcomesPerCell)
    #expect(PacketOutcome.rewritten.rawValue == 0 && PacketOutcome.unchanged.rawValue == 1)
    // A write and a read back through the wrapper.
    let e = EBPFEntry(dscp: 46, flags: 1, cell: 3, markValue: 7, markMask: 0xff, priority: 5)
    try maps.table.update(keys: [UInt32(5)], values: [e])
    #expect(try maps.table.lookup(UInt32(5), as: EBPFEntry.self) == e)
    #expect(try maps.counters.perCPUCounters(0).count == BPFMap.possibleCPUs)
    // The flow-rule maps (EBPFFlowTables.swift mirrors their C structs).
    #expect(MemoryLayout<EBPFFlowConfig>.size == 104)
    // dns: rules' learned masks: room for classify.dns.max-addresses at its limit.
    #expect(maps.fdns4.valueSize == 4 && maps.fdns6.valueSize == 4)
    #expect(maps.fdns4.maxEntries >= DNSLearningSettings.maxAddressesLimit)
    #expect(maps.fdns6.maxEntries >= DNSLearningSettings.maxAddressesLimit)
    #expect(maps.fslot.valueSize == EBPFLayoutSizes.fslot && maps.fslot.maxEntries == 2)
    #expect(maps.frcount.valueSize == MemoryLayout<EBPFRuleCount>.size && maps.frcount.isPerCPU)
    #expect(maps.flows.maxEntries == EBPFFlowLayout.flowSlots && maps.flows.valueSize == 44)
}

/// qosmapd warns before loading the classifier without CAP_PERFMON (bit 38
/// of CapEff), and only then: the unit's three capabilities, the two
/// without it, root's full set, and a status without the line.
@Test(arguments: [
    ("CapEff:\t000000c000001000\n", false),  // CAP_NET_ADMIN, CAP_BPF, CAP_PERFMON
    ("CapEff:\t0000008000001000\n", true),  // CAP_NET_ADMIN, CAP_BPF
    ("Name:\tqosmapd\nCapInh:\t0\nCapEff:\t000001ffffffffff\nCapBnd:\t0\n", false),
    ("CapEff:\t0000000000000000\n", true),
    ("Name:\tqosmapd\n", false),
])
func perfmonWarning(status: String, warns: Bool) {
    #expect((EBPFDatapath.perfmonWarning(status: status) != nil) == warns, "\(status)")
}

/// When the classifier does not load, qosmapd stops with one line: too old a
/// kernel says so (before the libbpf error); a verifier refusal names the
/// kernel, the program and the reason, and CAP_PERFMON only when the process
/// lacks it; EPERM names the capabilities.
@Test func loadFailureIsOneLine() {
    let refused = BPFError(
        operation: .load, errno: .permissionDenied, subject: "qosmap",
        verifier: "qosmap_egress: attempt to corrupt spilled pointer on stack")
    let unit = "CapEff:\t000000c000001000\n"
    let noPerfmon = "CapEff:\t0000008000001000\n"
    let old = EBPFDatapath.loadFailure(refused, release: "5.10.0-30-amd64", status: unit)
    #expect(
        old.hasPrefix(
            "cannot load the classifier: datapath ebpf needs Linux 5.11 or later, this is 5.10.0-30-amd64"))
    let with = EBPFDatapath.loadFailure(refused, release: "6.1.0-56-amd64", status: unit)
    #expect(
        with
            == "cannot load the classifier: the verifier of Linux 6.1.0-56-amd64 refused qosmap_egress: attempt to corrupt spilled pointer on stack (errno 13)"
    )
    let without = EBPFDatapath.loadFailure(refused, release: "6.1.0-56-amd64", status: noPerfmon)
    #expect(without.hasPrefix(with + "; without CAP_PERFMON"))
    let eperm = BPFError(operation: .load, errno: .notPermitted, subject: "qosmap")
    #expect(
        EBPFDatapath.loadFailure(eperm, release: "6.18.44", status: nil)
            == "cannot load the classifier: bpf_object__load qosmap: Operation not permitted (errno 1) (CAP_BPF and CAP_NET_ADMIN are needed)"
    )
    for line in [old, with, without] { #expect(!line.contains("\n")) }
    #expect(
        EBPFDatapath.loadFailure(refused, release: "5.11.0", status: unit).contains("refused qosmap_egress"))
}

/// A load the system refuses (too old a kernel, the verifier, EPERM) makes
/// qosmapd exit 77, which the unit does not restart; anything else (a map
/// that could not be created for want of memory) may pass on a retry.
@Test func deniedLoadsAreNotRetried() {
    let refused = BPFError(
        operation: .load, errno: .permissionDenied, subject: "qosmap", verifier: "qosmap_egress: x")
    let eperm = BPFError(operation: .load, errno: .notPermitted, subject: "qosmap")
    let nomem = BPFError(operation: .load, errno: .noMemory, subject: "qosmap")
    #expect(EBPFDatapath.loadDenied(refused, release: "6.1.0-56-amd64"))
    #expect(EBPFDatapath.loadDenied(eperm, release: "6.18.44"))
    #expect(EBPFDatapath.loadDenied(nomem, release: "5.10.0-30-amd64"))
    #expect(!EBPFDatapath.loadDenied(nomem, release: "6.1.0-56-amd64"))
}
