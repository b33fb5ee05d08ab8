import NFQueue
import QoSMapCore
import QoSMapTables
import QoSMapYAML

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// qosmapd's configuration, parsed from YAML (see ``DaemonConfig/embeddedDefault``).
public struct DaemonConfig: Sendable, Equatable, MarkingSettings {
    /// One interface's settings; nil fields fall back to the top-level ones.
    public typealias Interface = InterfaceMarking

    /// The nfqueue numbers, one thread each (iptables `--queue-balance`).
    public var queues: [UInt16] = [0]
    /// `NFQA_CFG_QUEUE_MAXLEN`; 0 keeps the kernel default.
    public var maxLength: UInt32 = 4096
    /// `NFQA_CFG_F_FAIL_OPEN`: accept rather than drop when the queue is full.
    public var failOpen = true
    /// `NFQA_CFG_F_GSO`: take GSO packets unsegmented (checksums are
    /// completed). nil (`gso: auto`, the default) takes them where the
    /// running kernel still delivers them after a payload verdict
    /// (``gsoKeptAfterPayloadVerdicts(release:)``).
    public var gso: Bool?
    /// The netlink socket receive buffer (`SO_RCVBUFFORCE`).
    public var receiveBuffer = 8 << 20
    /// `NETLINK_NO_ENOBUFS`: true (the default) keeps the kernel from reporting
    /// receive overruns; false has them reported as ENOBUFS, which the daemon
    /// counts (`qosmapd_enobufs_total`) and goes on.
    public var noENOBUFS = true
    /// Consecutive verdicts with the same mark and priority and no payload go
    /// to the kernel as one `NFQNL_MSG_VERDICT_BATCH` (mark-only mode, and
    /// packets accepted unchanged).
    public var batchVerdicts = true
    /// Directories of user domain files.
    public var tables: [String] = []
    /// Load `/etc/qosmap/domains.d` first, as the CLI does (`system-tables`).
    public var systemTables = true
    /// The default trust mode.
    public var trust: TrustMode = .dscp
    /// The default domain for both directions.
    public var domain = "default"
    /// Per-interface settings by name.
    public var interfaces: [String: Interface] = [:]
    /// Rewrite the DSCP in the packet.
    public var rewriteDSCP = true
    /// Set the skb mark (``MarkEncoding``), or nil not to.
    public var mark: MarkEncoding?
    /// Set the skb priority to the outbound 802.1p value.
    public var priority = false
    /// Copy headers only and never return a payload; DSCP is set by nftables from the mark.
    public var markOnly = false
    /// The Prometheus port on 127.0.0.1; 0 disables the endpoint.
    public var metricsPort: UInt16 = 9464
    /// Who writes the NFQUEUE rules (`rules:`, see ``RulesConfig``).
    public var rules = RulesConfig()
    /// `status: {socket:}`: the Unix socket `qosmap status` reads; empty
    /// (the default) serves none. Read at start only.
    public var statusSocket = ""
    /// `status: {group:}`: the group (besides root and qosmapd's own user)
    /// that may read it; nil: root only.
    public var statusGroup: String?

    /// How packets reach the tables: `nfqueue` (user space) or `ebpf` (tc
    /// clsact egress; see ``EBPFDatapath``).
    public var datapath = Datapath.nfqueue
    /// `ebpf: {detach-on-exit:}`: false leaves the classifier attached with
    /// its last tables when qosmapd exits.
    public var ebpfDetachOnExit = true
    /// `ebpf: {pcp-carry-mask:}`: the skb mark bits (5 or more, contiguous)
    /// that carry a tag's PCP and DEI from the ingress classifier of a
    /// `trust: 8021p` interface to egress; cleared there.
    public var ebpfCarryMask: UInt32 = PCPCarry.default.mask

    /// `interfaces: NAME: queues:`: the egress queues per interface name
    /// (issue 38), with where each was written.
    public var interfaceQueues: [String: InterfaceQueues] = [:]

    /// Where each domain name was written, to report unknown ones in place.
    public var domainReferences: [TableDiagnostic] = []
    /// `classify:`: flow rules (sets and rules), first match wins, before
    /// trust; empty: every packet is classified by trust.
    public var classify = FlowRuleSet()
    /// `classify:` compiled when the file was read (so that limits are
    /// reported in place); nil for a config built in code.
    public var classifier: FlowClassifier?
    /// The file the config was read from (`<embedded default>` for the
    /// built-in text), so that errors found after parsing name it too.
    public var file = "<embedded default>"
    /// Where `interfaces:` was written (the file's start without one): the
    /// interfaces as a whole are what exceeds the ebpf datapath's policy limit.
    public var interfacesPosition = SourcePosition(file: "<embedded default>", line: 1, column: 1)

    /// Creates the embedded default configuration.
    public init() {}

    /// Whether queues take GSO packets unsegmented on the kernel `release`:
    /// `gso` when the config sets it, else what that kernel allows.
    public func effectiveGSO(release: String = KernelRelease.running()) -> Bool {
        gso ?? Self.gsoKeptAfterPayloadVerdicts(release: release)
    }

    /// Whether kernel `release` delivers a UDP GSO packet that a payload
    /// verdict returned. A payload verdict leaves the packet
    /// `CHECKSUM_NONE`; on Debian 12's 6.1 (6.1.0-56-amd64) every UDP GSO
    /// packet so returned was then dropped when segmented (1000 of 1000
    /// segments counted in the receiver's `UdpInErrors`, v4 and v6, while
    /// TCP and single packets arrived), so there the kernel must segment
    /// before the queue. Debian 13's 6.12 and 6.18 delivered them all. The
    /// releases between were not measured and are treated as 6.1.
    public static func gsoKeptAfterPayloadVerdicts(release: String) -> Bool {
        guard let (major, minor) = KernelRelease.version(release) else { return false }
        return major > 6 || (major == 6 && minor >= 12)
    }

    /// The queue settings for queue `number` (what SIGHUP applies to a bound
    /// queue, and what a new queue is opened with) on kernel `release`.
    public func queueConfiguration(
        _ number: UInt16, release: String = KernelRelease.running()
    ) -> NetfilterQueue.Configuration {
        NetfilterQueue.Configuration(
            queueNumber: number,
            // Mark-only needs the IP header alone; 128 bytes covers IPv6 with room.
            copyMode: .packet(range: markOnly ? 128 : 0xFFFF),
            flags: NetfilterQueue.Flags(rawValue: 0).union(failOpen ? .failOpen : [])
                .union(effectiveGSO(release: release) ? .gso : []),
            maximumLength: maxLength, receiveBufferSize: receiveBuffer, noENOBUFS: noENOBUFS,
            batchVerdicts: batchVerdicts)
    }

    /// The configuration used without `--config`: queue 0, trust dscp on every
    /// interface, domain `default`, rewrite DSCP.
    public static let embeddedDefault = """
        # qosmapd configuration (this is the embedded default).
        queues: [0]              # nfqueue numbers, one thread each (--queue-balance 0:3 -> [0,1,2,3])
        queue:
          max-length: 4096       # NFQA_CFG_QUEUE_MAXLEN; 0 = kernel default
          fail-open: true        # accept instead of drop when the queue is full
          gso: auto              # unsegmented GSO packets (partial L4 checksums are completed); auto: on kernels 6.12 and later
          receive-buffer: 8388608
          no-enobufs: true       # false: receive overruns are reported (ENOBUFS), counted, and survived
          batch-verdicts: true   # equal verdicts without payload share one NFQNL_MSG_VERDICT_BATCH
        tables: []               # directories of user domain files (*.yaml), as qosmap --tables;
                                 # a relative one is read from this file's directory
        system-tables: true      # also load /etc/qosmap/domains.d first, as qosmap does (false: --no-system-tables)
        trust: dscp              # default trust: none, dscp, ip-precedence
        domain: default          # default inbound and outbound domain; default remarks LE (1) and VA (44)
                                 # to 0 and CS1 (8) to AF11: on an edge router's WAN (CAKE diffserv tins)
                                 # use edge-cake, which keeps them (README, "The edge-cake domain")
        interfaces: {}           # NAME: {trust: T, domain: D, inbound-domain: D, outbound-domain: D}
        actions:
          rewrite-dscp: true     # rewrite DSCP in the packet (ECN kept)
          mark: false            # true or {mask: 0x3f}: class and color in the skb mark
          priority: false        # skb priority = outbound 802.1p (for VLAN egress-qos-map)
          mark-only: false       # copy headers only, no payload back; see qosmap export nft
        metrics:
          port: 9464             # Prometheus /metrics on 127.0.0.1; 0 disables
        status:
          socket: ""             # "" none; /run/qosmapd/status.sock under the packaged unit (its RuntimeDirectory): what qosmap status reads
                                 # group: NAME  may read it too (the unit then needs SupplementaryGroups=NAME)
        datapath: nfqueue        # nfqueue, or ebpf: tc clsact egress on the interfaces: names (no queues, no rules)
        ebpf:
          detach-on-exit: true   # false: the classifier keeps marking with its last tables after qosmapd exits
          pcp-carry-mask: 0xf8000000  # skb mark bits carrying PCP/DEI from trust-8021p interfaces to egress
        classify:                # flow rules for unmarked traffic: first match wins, before trust (docs/CLASSIFY.md)
          sets: {}               # NAME: [198.18.2.0/24, fd00:2::/64, ...]: address sets that rules name
          rules: []              # - name: N                 (counters: qosmapd_rule_packets_total{rule="N"})
                                 #   match: {protocol: udp, source: [CIDR|SET], destination: [CIDR|SET],
                                 #           source-port: [N, N-M], destination-port: [N, N-M],
                                 #           ingress: [IF], dscp: [D],
                                 #           dns: ["*.zoom.us", name]}  (all keys AND, list items OR)
                                 #   set: {class: EF, color: green} or {dscp: AF41} (as if it arrived so)
                                 #   connection: true        (replies of a matched flow get the same class)
          connection-mark-mask: 0x0fff0000  # ct mark bits holding a connection's rule (export nft --config)
          dns:                   # learning addresses for dns: rules from DNS replies (docs/DNS.md)
            snoop: []            # interfaces whose DNS replies (UDP/TCP 53) are read; dns: rules need one
            max-addresses: 100000  # learned addresses kept at most; when full the soonest to expire is evicted
            min-ttl: 60          # seconds an address is kept at least after a reply, whatever its TTL
            max-ttl: 86400       # seconds an address is kept at most after a reply, whatever its TTL
          flows: {}              # flow behaviour, after rules and trust (docs/CLASSIFY.md; not with export nft):
                                 #   bulk: {packets-per-second: 100, bytes: 10000000, hold: 5,
                                 #          set: {class: BE, color: yellow}}  (above either: demoted until
                                 #          hold s after; packets = GSO segments per 1 s bucket, bytes since idle > hold)
                                 #   interactive: {max-average-size: 200, set: {class: AF4}}  (EWMA avg=(7avg+len)/8 <= max;
                                 #          bulk wins when both hold)
                                 #   apply-to: [EF, AF4, AF3]  (classes rules/trust give that are checked; default all but BE)
        rules:
          mode: external         # external: your own iptables -j NFQUEUE rules (fail-open cannot be counted);
                                 # install: qosmapd adds, replaces (SIGHUP) and removes its own v4+v6 rules
                                 # and counts fail-open (qosmapd_failopen_packets_total)
          pending-mark: 0x80000000  # skb mark bit set before queueing, cleared by the verdict; one bit,
                                 # outside the actions.mark mask
          hooks: [forward]       # forward (routed traffic), output (host-originated traffic)
          # interfaces: [eth0]   # egress (-o) interfaces to queue; default: the names under interfaces:,
                                 # or every interface but lo when there are none
          table: security        # the queue rule's table: security (after the firewall), mangle, filter
          interval: 5            # seconds between rule counter readings (iptables-save -c)
        """
}

extension DaemonConfig {
    /// The config's `datapath:`.
    public enum Datapath: String, Sendable, Equatable {
        /// Packets are queued to qosmapd (iptables `-j NFQUEUE`).
        case nfqueue
        /// qosmapd compiles its tables into a tc classifier and attaches it.
        case ebpf
    }
}

/// A config file that cannot be used: `file:line:column: message` lines.
public struct ConfigError: Error, Sendable, CustomStringConvertible {
    /// The problems, each positioned.
    public var diagnostics: [TableDiagnostic]

    /// Creates an error.
    public init(_ diagnostics: [TableDiagnostic]) { self.diagnostics = diagnostics }

    /// Creates an error with one diagnostic at the start of a file.
    public init(file: String, _ message: String) {
        diagnostics = [TableDiagnostic(file: file, line: 1, column: 1, message: message)]
    }

    /// Creates an error with one diagnostic at `position`.
    public init(at position: SourcePosition, _ message: String) {
        diagnostics = [
            TableDiagnostic(
                file: position.file, line: position.line, column: position.column, message: message)
        ]
    }

    /// One diagnostic per line.
    public var description: String { diagnostics.map(\.description).joined(separator: "\n") }
}

extension DaemonConfig {
    /// Reads a config file, refusing one that others may write. A file that
    /// cannot be read is reported with its errno (`cannot read config:
    /// Permission denied (errno 13)`), at start and on reload alike.
    public static func load(path: String) throws(ConfigError) -> DaemonConfig {
        var st = stat()
        guard stat(path, &st) == 0 else {
            throw ConfigError([TableLoader.failure(path, "cannot read config", errno: errno)])
        }
        // A world-writable file would let any local user change marking.
        guard st.st_mode & S_IWOTH == 0 else {
            throw ConfigError(
                file: path,
                "config is world-writable (mode \(String(st.st_mode & 0o777, radix: 8))); allowed: not writable by others, e.g. chmod 644"
            )
        }
        let text: String
        do {
            text = try TableLoader.text(atPath: path, what: "config")
        } catch {
            throw ConfigError(error.diagnostics)
        }
        return try parse(text, file: path)
    }

    /// Parses config text; every problem is reported with its position.
    public static func parse(_ text: String, file: String) throws(ConfigError) -> DaemonConfig {
        var p = ConfigParser(file: file)
        let config = p.parse(text)
        guard p.diagnostics.isEmpty, let config else { throw ConfigError(p.diagnostics) }
        return config
    }
}

/// One interface's `queues:` as qosmapd read it.
public struct InterfaceQueues: Sendable, Equatable {
    /// The validated queue config.
    public var config: QueueConfig
    /// Where `queues:` was written, for messages about it at start.
    public var position: SourcePosition

    /// Creates one.
    public init(config: QueueConfig, position: SourcePosition) {
        self.config = config
        self.position = position
    }
}

/// Walks the composed YAML and records positioned errors, with the same
/// reader (and so the same messages) as the table files; the marking keys
/// through ``MarkingConfigReader``, as `qosmap export --config` reads them.
struct ConfigParser {
    var marking: MarkingConfigReader
    /// Where `pcp-carry-mask` was written.
    var carryMaskNode: Node?
    /// Where `classify:` was written.
    var classifyNode: Node?
    var yaml: YAMLContext {
        get { marking.yaml }
        set { marking.yaml = newValue }
    }
    var file: String { yaml.file }
    var diagnostics: [TableDiagnostic] { yaml.diagnostics }

    init(file: String) { marking = MarkingConfigReader(file: file) }

    mutating func error(_ node: Node?, _ message: String) { yaml.error(node, message) }

    /// A mapping's pairs; with a non-empty `allowed`, unknown keys are reported and dropped.
    mutating func mapping(_ node: Node, _ what: String, allowed: [String]) -> [(Node, Node, String)]? {
        marking.mapping(node, what, allowed: allowed)
    }

    mutating func scalar(_ node: Node, _ what: String) -> String? { yaml.scalar(node, what) }

    mutating func bool(_ node: Node, _ what: String) -> Bool? { yaml.bool(node, what) }

    mutating func integer(_ node: Node, _ what: String, _ range: ClosedRange<Int>) -> Int? {
        yaml.integer(node, what, range)
    }

    mutating func strings(_ node: Node, _ what: String) -> [String] { marking.strings(node, what) }

    mutating func parse(_ text: String) -> DaemonConfig? {
        var config = DaemonConfig()
        config.file = file
        config.interfacesPosition = SourcePosition(file: file, line: 1, column: 1)
        let root = yaml.compose(text, allowEmpty: true)
        if yaml.hasErrors { return nil }
        guard let root else { return config }  // an empty file keeps every default
        guard let pairs = mapping(root, "the config", allowed: MarkingConfigReader.topKeys) else {
            return nil
        }
        classifyNode = pairs.first { $0.2 == "classify" }?.1
        if let key = pairs.first(where: { $0.2 == "interfaces" })?.0 {
            config.interfacesPosition = SourcePosition(
                file: file, line: key.mark.line, column: key.mark.column)
        }
        for (_, value, key) in pairs where !marking.read(key, value, into: &config) {
            switch key {
            case "queues":
                var qs: [UInt16] = []
                let items: [Node] =
                    if case .sequence(let s) = value { Array(s) } else { [value] }
                for item in items {
                    if let q = integer(item, "queue number", 0...65535) { qs.append(UInt16(q)) }
                }
                if items.isEmpty { error(value, "expected at least one queue number (0-65535)") }
                if Set(qs).count != qs.count { error(value, "queue numbers must be distinct") }
                config.queues = qs
            case "queue":
                for (_, v, k) in mapping(
                    value, "queue",
                    allowed: [
                        "max-length", "fail-open", "gso", "receive-buffer", "no-enobufs", "batch-verdicts",
                    ])
                    ?? []
                {
                    switch k {
                    case "max-length":
                        config.maxLength = integer(v, "max-length", 0...1_048_576).map(UInt32.init) ?? 0
                    case "fail-open": config.failOpen = bool(v, "fail-open flag") ?? true
                    case "gso":
                        switch scalar(v, "gso flag")?.lowercased() {
                        case "auto": config.gso = nil
                        case "true", "yes", "on": config.gso = true
                        case "false", "no", "off": config.gso = false
                        case let other?: error(v, "invalid gso flag '\(other)'; allowed: true, false, auto")
                        case nil: break
                        }
                    case "no-enobufs": config.noENOBUFS = bool(v, "no-enobufs flag") ?? true
                    case "batch-verdicts": config.batchVerdicts = bool(v, "batch-verdicts flag") ?? true
                    default: config.receiveBuffer = integer(v, "receive-buffer", 0...1 << 30) ?? 0
                    }
                }
            case "rules":
                rules(value, into: &config)
            case "datapath":
                if let s = scalar(value, "a datapath") {
                    if let d = DaemonConfig.Datapath(rawValue: s) {
                        config.datapath = d
                    } else {
                        error(value, "invalid datapath '\(s)'; allowed: nfqueue, ebpf")
                    }
                }
            case "ebpf":
                for (_, v, k) in mapping(value, "ebpf", allowed: ["detach-on-exit", "pcp-carry-mask"]) ?? [] {
                    if k == "pcp-carry-mask" {
                        carryMaskNode = v
                        if let carry = marking.carry(v) { config.ebpfCarryMask = carry.mask }
                    } else {
                        config.ebpfDetachOnExit = bool(v, "detach-on-exit flag") ?? true
                    }
                }
            case "status":
                for (_, v, k) in mapping(value, "status", allowed: ["socket", "group"]) ?? [] {
                    guard let text = scalar(v, k == "socket" ? "a socket path" : "a group name") else {
                        continue
                    }
                    if k == "group" {
                        config.statusGroup = text
                    } else if text.isEmpty || text.hasPrefix("/") {
                        config.statusSocket = text
                    } else {
                        error(
                            v, "invalid status socket '\(text)'; allowed: an absolute path, or \"\" for none")
                    }
                }
            default:  // metrics
                for (_, v, _) in mapping(value, "metrics", allowed: ["port"]) ?? [] {
                    config.metricsPort = integer(v, "metrics port", 0...65535).map(UInt16.init) ?? 0
                }
            }
        }
        if config.markOnly {
            // No payload comes back in mark-only mode, so the mark carries the marking.
            if config.mark == nil { config.mark = .default }
            config.rewriteDSCP = false
        }
        if config.datapath != .ebpf {
            for node in marking.dot1pTrust {
                error(
                    node,
                    "trust 8021p needs datapath: ebpf (nfqueue sees bare IP packets); allowed with nfqueue: none, dscp, ip-precedence"
                )
            }
        } else if let mark = config.mark, mark.mask & config.ebpfCarryMask != 0 {
            error(
                carryMaskNode ?? root,
                "pcp-carry-mask \(hex(config.ebpfCarryMask)) overlaps actions.mark mask \(hex(mark.mask)); allowed: disjoint bits"
            )
        }
        if !config.classify.isEmpty {
            do {
                config.classifier = try FlowClassifier(config.classify)
            } catch let e {
                self.error(classifyNode ?? root, "classify: \(e.description)")
            }
        }
        for (name, key, value) in marking.queueNodes {
            if let queues = marking.queueConfig(value, interface: name) {
                config.interfaceQueues[name] = InterfaceQueues(
                    config: queues,
                    position: SourcePosition(file: file, line: key.mark.line, column: key.mark.column))
            }
        }
        // Without the ebpf classifier, downloads are classified by u32 filters
        // on the IFB's HTB root (DownloadClassifierPlan); CAKE picks its tin
        // from the skb priority alone, which nothing sets before the IFB here.
        if config.datapath != .ebpf {
            for (name, key, _) in marking.queueNodes {
                guard let queues = config.interfaceQueues[name]?.config, queues.ingressRate != nil,
                    case .cake = queues.discipline
                else { continue }
                error(
                    key,
                    "ingress-rate of '\(name)' with discipline: cake needs datapath: ebpf (cake picks its tin from the skb priority, which only the ebpf classifier sets before the IFB); allowed with nfqueue: discipline: htb"
                )
            }
        }
        checkRules(config)
        return config
    }

    func hex(_ v: UInt32) -> String { "0x" + String(v, radix: 16) }
}
