import NFQueue
import QoSMapCore
import QoSMapDaemon
import QoSMapTables
import Testing

@Test func embeddedDefaultParses() throws {
    let c = try DaemonConfig.parse(DaemonConfig.embeddedDefault, file: "default")
    #expect(c.queues == [0])
    #expect(c.trust == .dscp)
    #expect(c.domain == "default")
    #expect(c.rewriteDSCP)
    #expect(c.mark == nil)
}

@Test(arguments: [
    ("queues: [70000]\n", "x.yaml:1:10: invalid queue number '70000'; allowed: 0-65535"),
    (
        "trust: 8021p\n",
        "x.yaml:1:8: invalid trust mode '8021p'; allowed: none, dscp, ip-precedence (8021p: per interface, with datapath: ebpf)"
    ),
    (
        "actions:\n  mark: {mask: 0x7}\n",
        "x.yaml:2:16: invalid mark mask 0x7; allowed: one run of 6 to 32 contiguous bits, e.g. 0x3f or 0xfc00"
    ),
    (
        "colour: red\n",
        "x.yaml:1:1: unknown key 'colour' in the config; allowed: queues, queue, tables, system-tables, trust, domain, interfaces, actions, metrics, rules, datapath, ebpf, classify, status"
    ),
])
func configErrorsArePositioned(text: String, message: String) {
    #expect(throws: (any Error).self) { try DaemonConfig.parse(text, file: "x.yaml") }
    do {
        _ = try DaemonConfig.parse(text, file: "x.yaml")
    } catch {
        #expect(error.description == message)
    }
}

@Test func unknownDomainIsReportedWhereWritten() throws {
    let c = try DaemonConfig.parse("interfaces:\n  eth0: {outbound-domain: nope}\n", file: "x.yaml")
    do {
        _ = try PolicySnapshot(config: c, generation: 0)
        Issue.record("unknown domain accepted")
    } catch {
        #expect(error.description.hasPrefix("x.yaml:2:27: unknown domain 'nope'"))
    }
}

@Test func markOnlyImpliesMarkAndNoRewrite() throws {
    let c = try DaemonConfig.parse("actions:\n  mark-only: true\n", file: "x")
    #expect(c.mark == .default)
    #expect(!c.rewriteDSCP)
}

/// A bare IPv4/UDP packet with a TOS and a valid UDP checksum of 0 (none).
func ipv4UDP(tos: UInt8) -> [UInt8] {
    var p: [UInt8] = [
        0x45, tos, 0, 32, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 1, 1, 198, 19, 2, 1,
        0x13, 0x88, 0x13, 0x89, 0, 12, 0, 0, 1, 2, 3, 4,
    ]
    var sum: UInt32 = 0
    for i in stride(from: 0, to: 20, by: 2) { sum += UInt32(p[i]) << 8 | UInt32(p[i + 1]) }
    while sum > 0xFFFF { sum = (sum & 0xFFFF) + (sum >> 16) }
    p[10] = UInt8(~sum >> 8 & 0xFF)
    p[11] = UInt8(~sum & 0xFF)
    return p
}

@Test(arguments: 0..<256)
func pipelineRemarksPerTablesAndKeepsECN(tos: Int) throws {
    let snapshot = try QueueService.load(nil, generation: 0)
    let domain = try snapshot.tables.domains.domain(named: "default")
    var pipeline = PacketPipeline(interfaceName: { index in "eth\(index)" })
    var bytes = ipv4UDP(tos: UInt8(tos))
    let want = domain.dscp(for: domain.classify(dscp: DSCP(tos: UInt8(tos))))
    bytes.withUnsafeMutableBytes { buf in
        var packet = QueuedPacket(id: 1, inputInterface: 1, outputInterface: 2, payload: buf)
        let verdict = pipeline.decide(&packet, snapshot: snapshot)
        #expect(verdict.decision == .accept)
        #expect((verdict.payload != nil) == (want.rawValue != UInt8(tos) >> 2))
    }
    #expect(bytes[1] >> 2 == want.rawValue)
    #expect(bytes[1] & 3 == UInt8(tos) & 3)
}

@Test func truncatedPacketIsNeverReturned() throws {
    let snapshot = try QueueService.load(nil, generation: 0)
    var pipeline = PacketPipeline(interfaceName: { _ in nil })
    var bytes = ipv4UDP(tos: 0x08)  // DSCP 2 would be rewritten
    bytes.withUnsafeMutableBytes { buf in
        var packet = QueuedPacket(id: 1, capturedLength: 1500, payload: buf)
        let verdict = pipeline.decide(&packet, snapshot: snapshot)
        #expect(verdict.payload == nil)
    }
    #expect(pipeline.counts.total(.truncated) == 1)
}

@Test func malformedAndNonIPAreAcceptedUnchanged() throws {
    let snapshot = try QueueService.load(nil, generation: 0)
    var pipeline = PacketPipeline(interfaceName: { _ in nil })
    var bytes: [UInt8] = [0x45, 0x08, 0, 200, 0, 0]  // IHL 5 but only 6 bytes
    let before = bytes
    bytes.withUnsafeMutableBytes { buf in
        var packet = QueuedPacket(id: 7, payload: buf)
        let verdict = pipeline.decide(&packet, snapshot: snapshot)
        #expect(verdict.decision == .accept && verdict.payload == nil && verdict.mark == nil)
    }
    #expect(bytes == before)
    #expect(pipeline.counts.total(.malformed) == 1)
}

@Test func queueKeysBecomeTheQueueConfiguration() throws {
    // What a SIGHUP applies to a bound queue comes from these keys alone.
    let c = try DaemonConfig.parse(
        """
        queues: [3]
        queue: {max-length: 512, fail-open: false, gso: true, no-enobufs: false, batch-verdicts: false}
        actions: {mark-only: true}
        """, file: "x")
    let q = c.queueConfiguration(3)
    #expect(q.queueNumber == 3)
    #expect(q.copyMode == .packet(range: 128))
    #expect(q.flags == .gso)
    #expect(q.maximumLength == 512)
    #expect(!q.noENOBUFS)
    #expect(!q.batchVerdicts)
    let defaults = try DaemonConfig.parse(DaemonConfig.embeddedDefault, file: "default")
    let d = defaults.queueConfiguration(0, release: "6.18.44-fc-v857")
    #expect(d.copyMode == .packet(range: 0xFFFF))
    #expect(d.flags == [.failOpen, .gso])
    #expect(d.noENOBUFS && d.batchVerdicts)
    // gso: auto (the default) leaves segmentation to Debian 12's kernel,
    // which drops UDP GSO packets returned with a payload; an explicit
    // `gso: true` is obeyed there too.
    #expect(defaults.gso == nil)
    #expect(defaults.queueConfiguration(0, release: "6.1.0-56-amd64").flags == [.failOpen])
    #expect(c.queueConfiguration(3, release: "6.1.0-56-amd64").flags == .gso)
}

@Test(arguments: [
    ("6.1.0-56-amd64", false), ("6.11.9", false), ("6.12.117+deb13-amd64", true), ("6.18.44-fc-v857", true),
    ("7.0.1", true), ("5.15.0-91-generic", false), ("", false), ("unknown", false),
])
func gsoAutoFollowsTheKernel(release: String, kept: Bool) {
    #expect(DaemonConfig.gsoKeptAfterPayloadVerdicts(release: release) == kept)
}

@Test func gsoTakesAutoAndRefusesOtherWords() throws {
    #expect(try DaemonConfig.parse("queue: {gso: auto}", file: "x").gso == nil)
    #expect(try DaemonConfig.parse("queue: {gso: false}", file: "x").gso == false)
    #expect(try DaemonConfig.parse("queue: {gso: on}", file: "x").gso == true)
    #expect {
        try DaemonConfig.parse("queue: {gso: sometimes}", file: "x")
    } throws: { "\($0)".contains("x:1:14: invalid gso flag 'sometimes'; allowed: true, false, auto") }
}

/// A rewritten packet's returned checksum, by `NFQA_SKB_INFO` and hook: a
/// GSO packet still to be segmented keeps the pseudo-header sum in its UDP
/// checksum field (what `__udp_gso_segment` builds each segment's from); a
/// single CHECKSUM_PARTIAL packet gets the full sum; UDP GSO at LOCAL_IN is
/// not returned at all.
@Test(
    arguments: [
        // (skb info bits, hook, payload returned, checksum field completed, outcome)
        (UInt32(0), UInt8(2), true, false, "rewritten"),  // CHECKSUM_NONE: the sender's sum stands
        (1, 2, true, true, "rewritten"),  // CSUMNOTREADY, one packet: completed
        (3, 2, true, false, "rewritten"),  // GSO forwarded: partial sum kept for segmentation
        (3, 3, true, false, "rewritten"),  // GSO from a local socket (LOCAL_OUT): the same
        (3, 1, false, false, "gso_local_unmarked"),  // UDP GSO delivered locally: not returned
        (1, 1, true, true, "rewritten"),  // one CSUMNOTREADY packet delivered locally: completed
    ] as [(UInt32, UInt8, Bool, Bool, String)])
func gsoAndPartialChecksums(info: UInt32, hook: UInt8, returned: Bool, completed: Bool, outcome: String)
    throws
{
    let snapshot = try QueueService.load(nil, generation: 0)
    var pipeline = PacketPipeline(interfaceName: { _ in nil })
    var bytes = ipv4UDP(tos: 0x2C)  // DSCP 11: rewritten by `default`
    let partial: [UInt8] = [0x12, 0x34]  // what the stack left: not a finished sum
    bytes[26] = partial[0]
    bytes[27] = partial[1]
    bytes.withUnsafeMutableBytes { buf in
        var packet = QueuedPacket(
            id: 1, hook: hook, skbInfo: QueuedPacket.SKBInfo(rawValue: info), payload: buf)
        let verdict = pipeline.decide(&packet, snapshot: snapshot)
        #expect((verdict.payload != nil) == returned)
    }
    #expect((Array(bytes[26...27]) != partial) == completed)
    let label = PacketOutcome.allCases.first { pipeline.counts.total($0) == 1 }?.label
    #expect(label == outcome)
}
