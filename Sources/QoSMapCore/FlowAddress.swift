// Addresses, prefixes and port ranges for flow rules: pure Swift (no
// inet_pton: this layer links no C), IPv4 and IPv6 alike.

/// An IPv4 or IPv6 address, held as 128 bits so that both families share one
/// ordering and one interval compiler (``FlowClassifier``).
public struct IPAddress: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// True for IPv6.
    public var isIPv6: Bool
    /// The upper 64 bits (IPv6), 0 for IPv4.
    public var high: UInt64
    /// The lower 64 bits (IPv6), or the IPv4 address in the lower 32 bits.
    public var low: UInt64

    /// Creates an address from its bits.
    public init(ipv6: Bool, high: UInt64, low: UInt64) {
        isIPv6 = ipv6
        self.high = ipv6 ? high : 0
        self.low = ipv6 ? low : low & 0xFFFF_FFFF
    }

    /// An IPv4 address from its 32 bits, network order read as a number
    /// (198.18.0.1 is 0xC612_0001).
    public init(ipv4 bits: UInt32) { self.init(ipv6: false, high: 0, low: UInt64(bits)) }

    /// The address's width in bits: 32 or 128.
    public var bitWidth: Int { isIPv6 ? 128 : 32 }

    /// IPv4 before IPv6, then by value.
    public static func < (a: IPAddress, b: IPAddress) -> Bool {
        (a.isIPv6 ? 1 : 0, a.high, a.low) < (b.isIPv6 ? 1 : 0, b.high, b.low)
    }

    /// Parses dotted-quad IPv4 or RFC 4291 IPv6 text (with `::` and an
    /// embedded IPv4 tail); nil for anything else.
    public init?(parsing text: some StringProtocol) {
        let s = Substring(text)
        if !s.contains(":") {
            guard let v4 = IPAddress.parseIPv4(s) else { return nil }
            self.init(ipv4: v4)
            return
        }
        guard let groups = IPAddress.parseIPv6(s) else { return nil }
        var hi: UInt64 = 0
        var lo: UInt64 = 0
        for i in 0..<4 { hi = hi << 16 | UInt64(groups[i]) }
        for i in 4..<8 { lo = lo << 16 | UInt64(groups[i]) }
        self.init(ipv6: true, high: hi, low: lo)
    }

    static func parseIPv4(_ s: Substring) -> UInt32? {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var v: UInt32 = 0
        for p in parts {
            // No leading zeros beyond "0" itself: 010 is octal to inet_aton.
            guard !p.isEmpty, p.count <= 3, p.allSatisfy({ $0.isASCII && $0.isNumber }),
                p.count == 1 || p.first != "0", let n = UInt32(p), n <= 255
            else { return nil }
            v = v << 8 | n
        }
        return v
    }

    static func parseIPv6(_ s: Substring) -> [UInt16]? {
        guard s.count <= 45 else { return nil }
        var head = Substring(s)
        var tail: Substring? = nil
        if let r = IPAddress.doubleColon(in: s) {
            head = s[s.startIndex..<r.lowerBound]
            tail = s[r.upperBound...]
            if IPAddress.doubleColon(in: tail!) != nil { return nil }
        }
        func groups(_ part: Substring, allowV4: Bool) -> [UInt16]? {
            if part.isEmpty { return [] }
            let fields = part.split(separator: ":", omittingEmptySubsequences: false)
            var out: [UInt16] = []
            for (i, f) in fields.enumerated() {
                if allowV4, i == fields.count - 1, f.contains(".") {
                    guard let v4 = parseIPv4(f) else { return nil }
                    out.append(UInt16(v4 >> 16))
                    out.append(UInt16(v4 & 0xFFFF))
                    continue
                }
                guard !f.isEmpty, f.count <= 4, f.allSatisfy({ $0.isHexDigit }), let g = UInt16(f, radix: 16)
                else { return nil }
                out.append(g)
            }
            return out
        }
        guard let h = groups(head, allowV4: tail == nil) else { return nil }
        if let tail {
            guard let t = groups(tail, allowV4: true), h.count + t.count <= 7 else { return nil }
            return h + Array(repeating: 0, count: 8 - h.count - t.count) + t
        }
        return h.count == 8 ? h : nil
    }

    static func doubleColon(in s: Substring) -> Range<Substring.Index>? {
        var i = s.startIndex
        while i < s.endIndex {
            let j = s.index(after: i)
            if j < s.endIndex, s[i] == ":", s[j] == ":" { return i..<s.index(after: j) }
            i = j
        }
        return nil
    }

    /// Dotted quad, or RFC 5952 IPv6 text (lower case, longest zero run as `::`).
    public var description: String {
        if !isIPv6 {
            let v = UInt32(truncatingIfNeeded: low)
            return "\(v >> 24).\(v >> 16 & 255).\(v >> 8 & 255).\(v & 255)"
        }
        var g = [UInt16](repeating: 0, count: 8)
        for i in 0..<4 {
            let shift = UInt64(48 - 16 * i)
            g[i] = UInt16(truncatingIfNeeded: high >> shift)
            g[i + 4] = UInt16(truncatingIfNeeded: low >> shift)
        }
        var bestStart = -1
        var bestLen = 0
        var i = 0
        while i < 8 {
            if g[i] == 0 {
                var j = i
                while j < 8, g[j] == 0 { j += 1 }
                if j - i > bestLen, j - i >= 2 {
                    bestStart = i
                    bestLen = j - i
                }
                i = j
            } else {
                i += 1
            }
        }
        func hex(_ r: Range<Int>) -> String { r.map { String(g[$0], radix: 16) }.joined(separator: ":") }
        if bestStart < 0 { return hex(0..<8) }
        return hex(0..<bestStart) + "::" + hex((bestStart + bestLen)..<8)
    }
}

/// An address prefix (CIDR): the addresses whose first ``length`` bits equal
/// ``address``'s.
public struct IPPrefix: Hashable, Sendable, CustomStringConvertible {
    /// The network address, host bits zero.
    public var address: IPAddress
    /// The prefix length, 0–32 or 0–128.
    public var length: Int

    /// Creates a prefix; the host bits of `address` are cleared.
    public init(_ address: IPAddress, length: Int) {
        let l = max(0, min(length, address.bitWidth))
        self.length = l
        self.address = IPPrefix.range(address, l).lowerBound
    }

    /// Parses `ADDR/LEN` or a bare address (a host prefix). Throws a message
    /// naming the token and what is allowed; host bits set are an error
    /// (`198.18.2.1/24`), as nft refuses them.
    public init(parsing text: some StringProtocol) throws(FlowRuleError) {
        let s = Substring(text)
        let parts = s.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let addr = IPAddress(parsing: parts[0]) else {
            throw FlowRuleError(
                "invalid address '\(s)'; allowed: an IPv4 or IPv6 address or prefix (198.18.2.0/24, fd00:2::/64)"
            )
        }
        var len = addr.bitWidth
        if parts.count == 2 {
            guard parts[1].count <= 3, parts[1].allSatisfy({ $0.isASCII && $0.isNumber }),
                let l = Int(parts[1]),
                l <= addr.bitWidth
            else {
                throw FlowRuleError(
                    "invalid prefix length in '\(s)'; allowed: 0-\(addr.bitWidth) for an \(addr.isIPv6 ? "IPv6" : "IPv4") address"
                )
            }
            len = l
        }
        let p = IPPrefix(addr, length: len)
        guard p.address == addr else {
            throw FlowRuleError("prefix '\(s)' has host bits set; allowed: \(p)")
        }
        self = p
    }

    /// The first and last address covered.
    public var range: ClosedRange<IPAddress> { IPPrefix.range(address, length) }

    static func range(_ a: IPAddress, _ length: Int) -> ClosedRange<IPAddress> {
        let hostBits = a.bitWidth - length
        if !a.isIPv6 {
            let mask: UInt64 = hostBits >= 32 ? 0xFFFF_FFFF : (UInt64(1) << UInt64(hostBits)) - 1
            return IPAddress(
                ipv4: UInt32(a.low & ~mask & 0xFFFF_FFFF))...IPAddress(
                    ipv4: UInt32((a.low | mask) & 0xFFFF_FFFF))
        }
        let loMask: UInt64 = hostBits >= 64 ? ~0 : (hostBits == 0 ? 0 : (UInt64(1) << UInt64(hostBits)) - 1)
        let hiBits = hostBits - 64
        let hiMask: UInt64 = hiBits <= 0 ? 0 : (hiBits >= 64 ? ~0 : (UInt64(1) << UInt64(hiBits)) - 1)
        return IPAddress(
            ipv6: true, high: a.high & ~hiMask, low: a.low & ~loMask)...IPAddress(
                ipv6: true, high: a.high | hiMask, low: a.low | loMask)
    }

    /// Whether `a` is in the prefix (always false across families).
    public func contains(_ a: IPAddress) -> Bool {
        a.isIPv6 == address.isIPv6 && range.contains(a)
    }

    /// Whether every address of `other` is in this prefix.
    public func covers(_ other: IPPrefix) -> Bool {
        other.address.isIPv6 == address.isIPv6 && other.length >= length && contains(other.address)
    }

    /// `ADDR/LEN`.
    public var description: String { "\(address)/\(length)" }
}

/// An inclusive range of transport ports.
public struct PortRange: Hashable, Sendable, CustomStringConvertible {
    /// The first port.
    public var lower: UInt16
    /// The last port.
    public var upper: UInt16

    /// Creates a range; `lower` must not exceed `upper`.
    public init(_ lower: UInt16, _ upper: UInt16) {
        self.lower = min(lower, upper)
        self.upper = max(lower, upper)
    }

    /// Parses `N` or `N-M` (0–65535, N ≤ M).
    public init(parsing text: some StringProtocol) throws(FlowRuleError) {
        let s = Substring(text)
        let parts = s.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        let allowed = "allowed: a port 0-65535 or a range N-M with N <= M"
        guard let a = parts.first.flatMap({ parseInteger($0) }), (0...65535).contains(a) else {
            throw FlowRuleError("invalid port '\(s)'; \(allowed)")
        }
        var b = a
        if parts.count == 2 {
            guard let v = parseInteger(parts[1]), (0...65535).contains(v), v >= a else {
                throw FlowRuleError("invalid port range '\(s)'; \(allowed)")
            }
            b = v
        }
        self.init(UInt16(a), UInt16(b))
    }

    /// Whether `port` is in the range.
    public func contains(_ port: UInt16) -> Bool { lower <= port && port <= upper }

    /// `N` or `N-M`.
    public var description: String { lower == upper ? "\(lower)" : "\(lower)-\(upper)" }
}

/// A flow rule or address that cannot be used: one line naming the bad token
/// and what is allowed (the reader adds `file:line:column`).
public struct FlowRuleError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The message.
    public var description: String
    /// Creates an error.
    public init(_ message: String) { description = message }
}
