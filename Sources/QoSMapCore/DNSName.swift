// DNS names and the `dns:` rule patterns: part of the flow-rule model (a
// rule's `dns:` key holds patterns), so they live in the pure core; the
// reply parser in QoSMapPacket builds names through `init(uncheckedWire:)`.

/// A domain name as sent on the wire: length-prefixed labels ending with the
/// root label, ASCII letters folded to lower case (RFC 4343). IDNA names are
/// compared as their `xn--` labels; no other byte is changed, so a label that
/// holds a `.` stays one label.
public struct DNSName: Hashable, Sendable, CustomStringConvertible {
    /// The uncompressed wire form, lower-cased, root label included (at most 255 bytes).
    public let wire: [UInt8]

    /// Wraps wire bytes already checked and folded by the parser or the pattern reader.
    package init(uncheckedWire: [UInt8]) { wire = uncheckedWire }

    /// The number of labels, the root excluded.
    public var labelCount: Int {
        var n = 0
        var i = 0
        while i < wire.count, wire[i] != 0 {
            n += 1
            i += Int(wire[i]) + 1
        }
        return n
    }

    /// Dotted text without the trailing dot (`.` for the root); a `.`, `\`,
    /// or a byte outside printable ASCII inside a label is escaped as `\DDD`,
    /// as dig prints it, so the text is never ambiguous.
    public var description: String {
        var out = ""
        var i = 0
        while i < wire.count, wire[i] != 0 {
            if !out.isEmpty { out += "." }
            let len = Int(wire[i])
            for b in wire[(i + 1)..<min(i + 1 + len, wire.count)] {
                if b == UInt8(ascii: ".") || b == UInt8(ascii: "\\") || b <= 0x20 || b >= 0x7F {
                    let d = String(b)
                    out += "\\" + String(repeating: "0", count: 3 - d.count) + d
                } else {
                    out.unicodeScalars.append(Unicode.Scalar(b))
                }
            }
            i += len + 1
        }
        return out.isEmpty ? "." : out
    }
}

/// A `dns:` rule pattern: an exact name (`teams.microsoft.com`) or a suffix
/// (`*.zoom.us`), compared label by label and case-insensitively.
///
/// `*.zoom.us` matches every name with at least one label before `zoom.us`
/// (`a.zoom.us`, `a.b.zoom.us`) but not `zoom.us` itself; list both to get
/// both. These are qosify's semantics: it matches `fnmatch(pattern, name, 0)`,
/// where `*` crosses dots and the literal `.` before the suffix must be there.
/// Unlike qosify, the pattern is folded too, so `*.Zoom.US` works, and labels
/// are compared as labels, so a label that itself holds a `.` byte cannot pose
/// as two. IDNA names are written in their `xn--` form, as sent on the wire.
public struct DNSNamePattern: Hashable, Sendable, CustomStringConvertible {
    /// The name (for a suffix pattern, the part after `*.`) in folded wire form.
    public let name: DNSName
    /// Whether this is a `*.` suffix pattern.
    public let isSuffix: Bool

    /// Reads a pattern; one trailing dot is allowed. Throws a one-line message
    /// naming the bad pattern and what is allowed.
    public init(parsing text: String) throws(DNSPatternError) {
        var body = Substring(text)
        let suffix = body.hasPrefix("*.")
        if suffix { body = body.dropFirst(2) }
        if body.hasSuffix(".") { body = body.dropLast() }
        func fail(_ why: String) -> DNSPatternError {
            DNSPatternError(
                "bad dns pattern '\(text)': \(why); allowed: a name such as 'teams.microsoft.com' or '*.zoom.us' (ASCII, IDNA names in xn-- form)"
            )
        }
        guard !body.isEmpty else { throw fail("no name") }
        var wire: [UInt8] = []
        for label in body.split(separator: ".", omittingEmptySubsequences: false) {
            guard !label.isEmpty else { throw fail("empty label") }
            guard label.utf8.count <= 63 else { throw fail("label longer than 63 bytes") }
            wire.append(UInt8(label.utf8.count))
            for b in label.utf8 {
                guard b > 0x20, b < 0x7F else { throw fail("space, control or non-ASCII character") }
                guard b != UInt8(ascii: "*") else { throw fail("'*' only as the whole first label, '*.'") }
                // Escapes (`\046`) would make the text ambiguous; rule names are plain.
                guard b != UInt8(ascii: "\\") else { throw fail("'\\' (escapes are not read)") }
                wire.append(foldCase(b))
            }
        }
        wire.append(0)
        guard wire.count <= 255 else { throw fail("name longer than 255 bytes") }
        name = DNSName(uncheckedWire: wire)
        isSuffix = suffix
    }

    /// Whether `candidate` matches: equal to the name, or for a suffix pattern
    /// ending in it after at least one more label.
    public func matches(_ candidate: DNSName) -> Bool {
        let c = candidate.wire
        let p = name.wire
        guard isSuffix else { return c == p }
        // Walk the candidate's label boundaries after the first; the suffix
        // must start at one of them.
        guard !c.isEmpty, c[0] != 0 else { return false }
        var i = Int(c[0]) + 1
        while i < c.count {
            if c.count - i == p.count { return c[i...].elementsEqual(p) }
            if c.count - i < p.count || c[i] == 0 { return false }
            i += Int(c[i]) + 1
        }
        return false
    }

    /// The pattern as written in a rule, folded: `*.zoom.us`, `teams.microsoft.com`.
    public var description: String { isSuffix ? "*." + name.description : name.description }
}

/// A pattern that is not a valid `dns:` pattern; the message names it and what is allowed.
public struct DNSPatternError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The one-line message.
    public var description: String
    /// An error with this message.
    public init(_ message: String) { description = message }
}

/// ASCII upper case to lower case (RFC 4343); every other byte unchanged.
@inline(__always)
func foldCase(_ b: UInt8) -> UInt8 {
    b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z") ? b | 0x20 : b
}
