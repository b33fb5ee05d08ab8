import QoSMapCore

// DNS snooping (issue 24): the frames of UDP and TCP port 53 seen on the
// interfaces qosmapd snoops go through a query tracker, and a reply is handed
// to the learner only when it answers a query seen there (same 5-tuple
// reversed, same ID, same question). See docs/DNS.md, "Snooping".

/// A DNS reply seen on a snooped interface that answers a query seen there.
public struct DNSObservedReply: Sendable {
    /// The reply, from ``DNSReplyParser``.
    public var reply: DNSReply
    /// The snooped interface it was read on.
    public var interface: String
    /// The reply's source address (the DNS server).
    public var server: IPAddress
    /// The reply's destination address (the client that asked).
    public var client: IPAddress
    /// The transport: 17 UDP, 6 TCP.
    public var transport: UInt8

    /// A reply as the snooper delivers it.
    public init(reply: DNSReply, interface: String, server: IPAddress, client: IPAddress, transport: UInt8) {
        self.reply = reply
        self.interface = interface
        self.server = server
        self.client = client
        self.transport = transport
    }
}

/// What the snooper saw and refused, for the daemon's metrics. Plain values:
/// the reading thread owns one and publishes copies.
public struct DNSSnoopCounters: Sendable, Equatable {
    /// Frames read from the snooped interfaces' sockets.
    public var frames: UInt64 = 0
    /// Frames that were not IPv4/IPv6 UDP or TCP on port 53 with a whole
    /// header (the socket filter passes few of them), or later IPv4/IPv6 fragments.
    public var framesIgnored: UInt64 = 0
    /// Frames the socket cut because they were longer than the read buffer.
    public var framesTruncated: UInt64 = 0
    /// DNS queries (QR = 0) seen and remembered.
    public var queriesSeen: UInt64 = 0
    /// Queries dropped from the tracker, oldest first, because it was full.
    public var queriesEvicted: UInt64 = 0
    /// Queries that timed out without a reply.
    public var queriesExpired: UInt64 = 0
    /// Replies read in full by ``DNSReplyParser`` (answering a query or not).
    public var repliesParsed: UInt64 = 0
    /// Replies delivered: parsed, and answering a remembered query.
    public var repliesDelivered: UInt64 = 0
    /// Replies whose 5-tuple and ID answer no remembered query (spoofed,
    /// late, or whose query was not seen): dropped before parsing.
    public var repliesUnsolicited: UInt64 = 0
    /// Replies with a remembered 5-tuple and ID whose question differs from the query's.
    public var repliesMismatched: UInt64 = 0
    /// Messages refused by the parser, indexed like `DNSReplyError.allCases`
    /// (use ``malformed(_:)``); `not-a-reply` and `unsupported` are counted
    /// here too though they are not malformed.
    public var refused: [UInt64] = Array(repeating: 0, count: DNSReplyError.allCases.count)
    /// TCP streams being reassembled now.
    public var tcpStreams: UInt64 = 0
    /// TCP streams dropped: a gap or out-of-order segment, a message longer
    /// than the buffer, the stream table full, or idle past the timeout.
    public var tcpStreamsDropped: UInt64 = 0
    /// TCP segments carrying data for no stream whose start (SYN) was seen.
    public var tcpSegmentsUntracked: UInt64 = 0

    /// Counters at zero.
    public init() {}

    /// The count of messages the parser refused with `error`.
    public func malformed(_ error: DNSReplyError) -> UInt64 {
        refused[DNSReplyError.allCases.firstIndex(of: error)!]
    }

    /// Adds one message refused with `error`.
    public mutating func countRefused(_ error: DNSReplyError) {
        refused[DNSReplyError.allCases.firstIndex(of: error)!] &+= 1
    }
}
