import QoSMapCore
import QoSMapDaemon
import Testing

@Test func queuesAreReadIntoQueueConfig() throws {
    let c = try DaemonConfig.parse(
        """
        interfaces:
          wan0:
            queues:
              rate: 20mbit
              scheduling: {ef: pq, AF4: {wfq: 40}, BE: {wfq: 5}}
              pq-max: 40%
              replace: true
          lan0: {queues: {rate: 1gbit, discipline: cake}}
        """, file: "x.yaml")
    let wan = try #require(c.interfaceQueues["wan0"])
    #expect(wan.config.rate == Rate(bitsPerSecond: 20_000_000))
    #expect(wan.config.scheduling[.af4] == .wfq(weight: 40))
    #expect(wan.config.scheduling[.be] == .wfq(weight: 5))
    #expect(wan.config.scheduling[.cs7] == .pq)  // the default fills the rest
    #expect(wan.config.pqMaxPercent == 40)
    #expect(wan.config.replace)
    #expect(wan.config.discipline == .htb)
    #expect(wan.position == SourcePosition(file: "x.yaml", line: 3, column: 5))
    let lan = try #require(c.interfaceQueues["lan0"])
    #expect(lan.config.discipline == .cake(.diffserv8))
    #expect(!lan.config.replace)
    #expect(lan.config.pqMaxPercent == QueueConfig.defaultPQMaxPercent)
    // An interface without queues has none.
    #expect(try DaemonConfig.parse("interfaces: {eth0: {trust: dscp}}", file: "x").interfaceQueues.isEmpty)
}

@Test(arguments: [
    (
        "interfaces: {wan0: {queues: {rate: 20}}}",
        "x.yaml:1:36: rate '20' has no unit; allowed: \(Rate.allowedText)"
    ),
    (
        "interfaces: {wan0: {queues: {rate: 20mbits}}}",
        "x.yaml:1:36: invalid rate '20mbits'; allowed: \(Rate.allowedText)"
    ),
    (
        "interfaces: {wan0: {queues: {pq-max: 40%}}}",
        "x.yaml:1:29: queues of 'wan0' need a rate; allowed: \(Rate.allowedText)"
    ),
    (
        "interfaces: {wan0: {queues: {rate: 0mbit}}}",
        "x.yaml:1:36: rate must be more than 0bit; allowed: \(Rate.allowedText)"
    ),
    (
        "interfaces: {wan0: {queues: {rate: 20bit}}}",
        "x.yaml:1:36: rate 20bit is too low to give every class at least 64bit; allowed: 832bit or more"
    ),
    (
        "interfaces: {wan0: {queues: {rate: 1mbit, pq-max: 101%}}}",
        "x.yaml:1:51: pq-max '101%' is out of range; allowed: 1%-100%"
    ),
    (
        "interfaces: {wan0: {queues: {rate: 1mbit, scheduling: {AF4: {wfq: 0}}}}}",
        "x.yaml:1:67: invalid wfq weight '0' of AF4; allowed: 1-100"
    ),
    (
        "interfaces: {wan0: {queues: {rate: 1mbit, scheduling: {EF: pq, ef: {wfq: 3}}}}}",
        "x.yaml:1:64: EF is scheduled twice; allowed: one of pq or {wfq: WEIGHT} per class"
    ),
    (
        "interfaces: {wan0: {queues: {rate: 1mbit, scheduling: {XX: pq}}}}",
        "x.yaml:1:56: unknown service class 'XX'; allowed: BE, AF1, AF2, AF3, AF4, EF, CS6, CS7"
    ),
    (
        "interfaces: {wan0: {queues: {rate: 1mbit, scheduling: {EF: fifo}}}}",
        "x.yaml:1:60: invalid scheduling 'fifo' for EF; allowed: pq or {wfq: WEIGHT} (WEIGHT 1-100)"
    ),
    (
        "interfaces: {wan0: {queues: {rate: 1mbit, discipline: hfsc}}}",
        "x.yaml:1:55: invalid discipline 'hfsc'; allowed: htb, cake"
    ),
    (
        "interfaces: {wan0: {queues: {rate: 1mbit, burst: 10k}}}",
        "x.yaml:1:43: unknown key 'burst' in queues of 'wan0'; allowed: rate, ingress-rate, scheduling, pq-max, discipline, replace"
    ),
    (
        "interfaces: {wan0: {queues: {rate: 1mbit, ingress-rate: 100mbit, discipline: cake}}}",
        "x.yaml:1:21: ingress-rate of 'wan0' with discipline: cake needs datapath: ebpf (cake picks its tin from the skb priority, which only the ebpf classifier sets before the IFB); allowed with nfqueue: discipline: htb"
    ),
    (
        "datapath: ebpf\ninterfaces: {wan0: {queues: {rate: 1mbit, ingress-rate: 100}}}",
        "x.yaml:2:57: rate '100' has no unit"
    ),
    (
        "interfaces: {wan0: {queues: {rate: 1mbit, replace: maybe}}}",
        "x.yaml:1:52: invalid replace flag 'maybe'; allowed: true, false"
    ),
])
func badQueuesAreRefusedInPlace(text: String, message: String) {
    do {
        _ = try DaemonConfig.parse(text, file: "x.yaml")
        Issue.record("accepted: \(text)")
    } catch {
        // One line, naming the token and what is allowed.
        #expect(!error.description.contains("\n"))
        #expect(error.description.hasPrefix(message), "\(error.description)")
    }
}

/// The skb priority of each class is its HTB leaf under qosmapd's major
/// 0x7173 (EF 7173:15), and only for interfaces with queues.
@Test func queuePrioritiesAreTheLeafClassIDs() throws {
    let c = try DaemonConfig.parse("interfaces: {wan0: {queues: {rate: 20mbit}}, lan0: {}}", file: "x")
    let p = try #require(c.queuePriorities(output: "wan0"))
    #expect(p[Int(ServiceClass.ef.rawValue)] == 0x7173_0015)
    #expect(p[Int(ServiceClass.be.rawValue)] == 0x7173_0010)
    #expect(p[Int(ServiceClass.cs7.rawValue)] == 0x7173_0017)
    #expect(c.queuePriorities(output: "lan0") == nil)
    #expect(c.queuePriorities(output: "eth9") == nil)
}

/// The ebpf tables: an interface with queues has an egress policy of its
/// own whose entries set skb->priority to the class id, and queues win over
/// `priority: true`'s PCP; one without keeps the PCP.
@Test func ebpfEntriesCarryTheQueuePriority() throws {
    let c = try DaemonConfig.parse(
        "datapath: ebpf\nactions: {priority: true}\ninterfaces: {wan0: {queues: {rate: 20mbit}}, lan0: {}}\n",
        file: "x")
    let s = try PolicySnapshot(config: c, generation: 0)
    let t = try EBPFTables(s)
    #expect(t.egressCount == 2)
    let wan = Int(try #require(t.egress["wan0"]))
    #expect(t.egress["lan0"] == nil)  // the default policy, 0
    let ef = 46  // DSCP EF, class EF under the default domain
    let queued = try #require(t.entries[wan * EBPFLayout.entriesPerPair + ef])
    #expect(queued.flags & EBPFLayout.flagPriority != 0)
    #expect(queued.priority == 0x7173_0015)
    let plain = try #require(t.entries[ef])
    #expect(plain.flags & EBPFLayout.flagPriority != 0)
    #expect(plain.priority == 5)  // EF's PCP in the default domain
}

/// `ingress-rate` on the ebpf datapath: read into the config, and its
/// download priorities are the HTB leaf ids at 0x7173, BE 7173:10 to CS7 7173:17.
@Test func ingressRateOnEBPFIsRead() throws {
    let config = try DaemonConfig.parse(
        "datapath: ebpf\ninterfaces: {wan0: {queues: {rate: 1mbit, ingress-rate: 100mbit}}}", file: "x.yaml")
    #expect(config.interfaceQueues["wan0"]?.config.ingressRate?.bitsPerSecond == 100_000_000)
    #expect(config.downloadPriorities(input: "wan0") == (0..<8).map { 0x7173_0010 + UInt32($0) })
    #expect(config.downloadPriorities(input: "lan0") == nil)
    #expect(EgressQueues.ifbName(for: "wan0") == "qmi-wan0")
    #expect(EgressQueues.ifbName(for: "enp0s31f6.100").utf8.count == 15)
    #expect(EgressQueues.ifbName(for: "enp0s31f6.100") != EgressQueues.ifbName(for: "enp0s31f6.101"))
}
