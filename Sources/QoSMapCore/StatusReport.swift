// What qosmapd's status socket answers (`qosmap status`, issue 39). The
// types are here, in layer 1, because the daemon writes them and the static
// `qosmap` reads them, and QoSMapCLI may not import QoSMapDaemon (libmnl).
// Codable is the standard library's; the JSON coders are FoundationEssentials'
// in the two executables' modules, so this target stays free of Foundation.

/// A request on the status socket: one JSON object on one line, then the
/// daemon answers with one ``StatusReport`` and closes the connection.
public struct StatusRequest: Codable, Sendable, Equatable {
    /// The wire version the client speaks (``StatusReport/version``).
    public var version: Int
    /// The most entries of each list to send.
    public var limit: Int

    /// A request for at most `limit` entries per list.
    public init(version: Int = StatusReport.version, limit: Int) {
        self.version = version
        self.limit = limit
    }
}

/// The running daemon's state: learned DNS addresses, tracked flows,
/// connections and counters. Each list is bounded by the request's limit.
public struct StatusReport: Codable, Sendable, Equatable {
    /// The wire version this build writes; a client refuses another one.
    public static let version = 1

    /// A list cut at the request's limit.
    public struct List<Element: Codable & Sendable & Equatable>: Codable, Sendable, Equatable {
        /// The entries sent (at most the limit).
        public var items: [Element]
        /// Entries the daemon holds in all (more than `items.count` when truncated).
        public var total: Int
        /// Why the list is empty without being empty in the daemon (e.g. not
        /// kept by this datapath or config); nil when the list is complete.
        public var note: String?

        /// A list of `items` out of `total`.
        public init(_ items: [Element], total: Int, note: String? = nil) {
            self.items = items
            self.total = total
            self.note = note
        }

        /// Whether entries were left out.
        public var truncated: Bool { total > items.count }
    }

    /// One address a `dns:` list learned.
    public struct LearnedAddress: Codable, Sendable, Equatable {
        /// The name that matched the list (the question or a CNAME target).
        public var name: String
        /// The reply's question.
        public var question: String
        /// The address.
        public var address: String
        /// Seconds until it expires (0: expires at the next sweep).
        public var expiresIn: Int64
        /// The TTL the reply gave.
        public var ttl: UInt32
        /// The rules whose `dns:` list holds it.
        public var rules: [String]

        /// An entry.
        public init(
            name: String, question: String, address: String, expiresIn: Int64, ttl: UInt32, rules: [String]
        ) {
            self.name = name
            self.question = question
            self.address = address
            self.expiresIn = expiresIn
            self.ttl = ttl
            self.rules = rules
        }
    }

    /// The two ends of a flow as the daemon keys it (lower end first).
    public struct Endpoints: Codable, Sendable, Equatable {
        /// The protocol's name (`tcp`, `udp`, or its number).
        public var `protocol`: String
        /// The lower end's address.
        public var a: String
        /// Its port (0 for protocols without).
        public var aPort: UInt16
        /// The other end's address.
        public var b: String
        /// Its port.
        public var bPort: UInt16

        /// Ends from the fields.
        public init(protocol: String, a: String, aPort: UInt16, b: String, bPort: UInt16) {
            self.protocol = `protocol`
            self.a = a
            self.aPort = aPort
            self.b = b
            self.bPort = bPort
        }

        /// The ends of `key`.
        public init(_ key: FlowKey) {
            let e = key.endpoints
            self.init(
                protocol: TransportProtocol.name(e.protocolNumber), a: "\(e.a)", aPort: e.aPort, b: "\(e.b)",
                bPort: e.bPort)
        }

        /// `udp 198.18.0.1:5000 <-> 198.18.1.1:53` (IPv6 addresses in brackets).
        public var text: String {
            func end(_ address: String, _ port: UInt16) -> String {
                address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)"
            }
            return "\(`protocol`) \(end(a, aPort)) <-> \(end(b, bPort))"
        }
    }

    /// A flow in the `classify.flows` table.
    public struct TrackedFlow: Codable, Sendable, Equatable {
        /// Its ends.
        public var flow: Endpoints
        /// The last verdict: `none`, `bulk` or `interactive`.
        public var state: String
        /// Packets counted in its current second.
        public var packets: UInt32
        /// Bytes counted (since the flow entered the table).
        public var bytes: UInt64
        /// The running average packet size, in bytes.
        public var averageSize: UInt32

        /// An entry.
        public init(flow: Endpoints, state: String, packets: UInt32, bytes: UInt64, averageSize: UInt32) {
            self.flow = flow
            self.state = state
            self.packets = packets
            self.bytes = bytes
            self.averageSize = averageSize
        }

        /// An entry from a table's state.
        public init(_ key: FlowKey, _ s: FlowBehaviourState) {
            let state =
                switch s.last {
                case .none: "none"
                case .bulk: "bulk"
                case .interactive: "interactive"
                }
            self.init(
                flow: Endpoints(key), state: state, packets: s.packets, bytes: s.bytes,
                averageSize: s.averageSize)
        }
    }

    /// A connection and the rule it recorded.
    public struct Connection: Codable, Sendable, Equatable {
        /// Its ends.
        public var flow: Endpoints
        /// The rule's name.
        public var rule: String

        /// An entry.
        public init(flow: Endpoints, rule: String) {
            self.flow = flow
            self.rule = rule
        }
    }

    /// A counter with a name: a rule, or a class and color.
    public struct Counter: Codable, Sendable, Equatable {
        /// The rule, or `CLASS/COLOR` (with `/ACTION` for packet counts by action).
        public var name: String
        /// Packets.
        public var packets: UInt64
        /// Bytes, when counted (rules).
        public var bytes: UInt64?

        /// A counter.
        public init(name: String, packets: UInt64, bytes: UInt64? = nil) {
            self.name = name
            self.packets = packets
            self.bytes = bytes
        }
    }

    /// The wire version (``version``).
    public var version: Int
    /// `nfqueue` or `ebpf`.
    public var datapath: String
    /// The per-list limit the report was cut at.
    public var limit: Int
    /// Learned `dns:` addresses, soonest expiry first.
    public var dns: List<LearnedAddress>
    /// The `classify.flows` table.
    public var flows: List<TrackedFlow>
    /// The connection table.
    public var connections: List<Connection>
    /// Packets and bytes per flow rule, in rule order.
    public var rules: [Counter]
    /// Packets per class and color (nonzero ones), as `qosmapd_packets_total`.
    public var classes: [Counter]

    /// A report.
    public init(
        datapath: String, limit: Int, dns: List<LearnedAddress>, flows: List<TrackedFlow>,
        connections: List<Connection>, rules: [Counter], classes: [Counter]
    ) {
        version = StatusReport.version
        self.datapath = datapath
        self.limit = limit
        self.dns = dns
        self.flows = flows
        self.connections = connections
        self.rules = rules
        self.classes = classes
    }
}

extension FlowKey {
    /// The protocol and the two ends the key holds (lower end first), the
    /// inverse of ``init(protocolNumber:source:destination:sourcePort:destinationPort:)``.
    public var endpoints: (protocolNumber: UInt8, a: IPAddress, aPort: UInt16, b: IPAddress, bPort: UInt16) {
        let v6 = w.9 & 0x100 != 0
        let a = IPAddress(
            ipv6: v6, high: UInt64(w.0) << 32 | UInt64(w.1), low: UInt64(w.2) << 32 | UInt64(w.3))
        let b = IPAddress(
            ipv6: v6, high: UInt64(w.4) << 32 | UInt64(w.5), low: UInt64(w.6) << 32 | UInt64(w.7))
        return (UInt8(truncatingIfNeeded: w.9), a, UInt16(w.8 >> 16), b, UInt16(truncatingIfNeeded: w.8))
    }
}

/// The first fields of every answer on the status socket: a client reads
/// these first, so that an error (a refused peer, a bad request) is one
/// line and not a decoding failure.
public struct StatusReply: Codable, Sendable, Equatable {
    /// The wire version of the answer.
    public var version: Int
    /// Why there is no report; nil in a ``StatusReport``.
    public var error: String?

    /// An error answer.
    public init(error: String) {
        version = StatusReport.version
        self.error = error
    }
}

extension FlowKey {
    /// A key from its ten words as the ebpf classifier stores them (`qm_flows`, `qm_behave`).
    public init(words: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)) {
        self.init(
            protocolNumber: 0, source: IPAddress(ipv4: 0), destination: IPAddress(ipv4: 0), sourcePort: 0,
            destinationPort: 0)
        w = words
    }
}
