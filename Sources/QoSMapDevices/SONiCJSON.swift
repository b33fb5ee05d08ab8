/// A JSON value with the place it starts in its file, for `import sonic`
/// errors that name `file:line:column` (Foundation's parser gives no places).
struct SONiCJSONValue: Sendable {
    /// What the value is.
    enum Kind: Sendable {
        /// An object: its members in file order, each key with the offset where it starts.
        case object([(key: String, keyOffset: Int, value: SONiCJSONValue)])
        /// An array.
        case array([SONiCJSONValue])
        /// A string, unescaped.
        case string(String)
        /// A number, as written.
        case number(String)
        /// `true` or `false`.
        case bool(Bool)
        /// `null`.
        case null
    }

    /// The value.
    var kind: Kind
    /// The byte offset where it starts.
    var offset: Int

    /// What the value is, for messages: "an object", "a string", ….
    var typeName: String {
        switch kind {
        case .object: "an object"
        case .array: "an array"
        case .string: "a string"
        case .number: "a number"
        case .bool: "a boolean"
        case .null: "null"
        }
    }
}

/// A small RFC 8259 parser over UTF-8 bytes that keeps offsets and turns them
/// into 1-based lines and columns (columns count characters, not bytes).
struct SONiCJSONParser {
    /// Why the text is not JSON, and where.
    struct Failure: Error {
        /// The byte offset.
        var offset: Int
        /// What was wrong.
        var message: String
    }

    private let bytes: [UInt8]
    private var at = 0
    private var depth = 0
    /// Deeper nesting is refused rather than risk the stack (config_db is 3 levels deep).
    private static let maxDepth = 64

    /// A parser over `text`.
    init(_ text: String) { bytes = Array(text.utf8) }

    /// The line and column (both from 1) of a byte offset in `text`.
    static func position(of offset: Int, in text: String) -> (line: Int, column: Int) {
        var line = 1
        var column = 1
        var i = 0
        for b in text.utf8 {
            if i >= offset { break }
            i += 1
            if b == 0x0A {
                line += 1
                column = 1
            } else if b & 0xC0 != 0x80 {
                column += 1  // continuation bytes do not start a character
            }
        }
        return (line, column)
    }

    /// Parses the whole text: one value, then only white space.
    mutating func parseDocument() throws(Failure) -> SONiCJSONValue {
        skipSpace()
        let value = try parseValue()
        skipSpace()
        guard at == bytes.count else {
            throw Failure(offset: at, message: "unexpected text after the JSON value")
        }
        return value
    }

    private mutating func skipSpace() {
        while at < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[at]) { at += 1 }
    }

    private func describeHere() -> String {
        guard at < bytes.count else { return "end of file" }
        let b = bytes[at]
        return b >= 0x20 && b < 0x7F ? "'\(Character(Unicode.Scalar(b)))'" : "byte 0x\(String(b, radix: 16))"
    }

    private mutating func parseValue() throws(Failure) -> SONiCJSONValue {
        guard at < bytes.count else {
            throw Failure(offset: at, message: "expected a JSON value, found end of file")
        }
        let start = at
        switch bytes[at] {
        case UInt8(ascii: "{"): return SONiCJSONValue(kind: try parseObject(), offset: start)
        case UInt8(ascii: "["): return SONiCJSONValue(kind: try parseArray(), offset: start)
        case UInt8(ascii: "\""): return SONiCJSONValue(kind: .string(try parseString()), offset: start)
        case UInt8(ascii: "t"):
            try literal("true")
            return SONiCJSONValue(kind: .bool(true), offset: start)
        case UInt8(ascii: "f"):
            try literal("false")
            return SONiCJSONValue(kind: .bool(false), offset: start)
        case UInt8(ascii: "n"):
            try literal("null")
            return SONiCJSONValue(kind: .null, offset: start)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return SONiCJSONValue(kind: .number(try parseNumber()), offset: start)
        default:
            throw Failure(offset: at, message: "expected a JSON value, found \(describeHere())")
        }
    }

    private mutating func literal(_ word: String) throws(Failure) {
        let w = Array(word.utf8)
        guard at + w.count <= bytes.count, Array(bytes[at..<at + w.count]) == w else {
            throw Failure(offset: at, message: "expected a JSON value, found \(describeHere())")
        }
        at += w.count
    }

    private mutating func parseNumber() throws(Failure) -> String {
        let start = at
        if bytes[at] == UInt8(ascii: "-") { at += 1 }
        let digits = { (p: inout SONiCJSONParser) -> Int in
            let s = p.at
            while p.at < p.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(p.bytes[p.at]) {
                p.at += 1
            }
            return p.at - s
        }
        guard digits(&self) > 0 else {
            throw Failure(offset: at, message: "invalid number: expected a digit")
        }
        if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
            at += 1
            guard digits(&self) > 0 else {
                throw Failure(offset: at, message: "invalid number: expected a digit")
            }
        }
        if at < bytes.count, bytes[at] | 0x20 == UInt8(ascii: "e") {
            at += 1
            if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") { at += 1 }
            guard digits(&self) > 0 else {
                throw Failure(offset: at, message: "invalid number: expected a digit")
            }
        }
        return String(decoding: bytes[start..<at], as: UTF8.self)
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard at + 4 <= bytes.count else { throw Failure(offset: at, message: "\\u needs 4 hex digits") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard let d = Character(Unicode.Scalar(bytes[at])).hexDigitValue else {
                throw Failure(offset: at, message: "\\u needs 4 hex digits, found \(describeHere())")
            }
            v = v << 4 | UInt32(d)
            at += 1
        }
        return v
    }

    private mutating func parseString() throws(Failure) -> String {
        let open = at
        at += 1
        var out: [UInt8] = []
        while true {
            guard at < bytes.count else { throw Failure(offset: open, message: "unterminated string") }
            let b = bytes[at]
            switch b {
            case UInt8(ascii: "\""):
                at += 1
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                at += 1
                guard at < bytes.count else { throw Failure(offset: open, message: "unterminated string") }
                let e = bytes[at]
                at += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar), at + 1 < bytes.count,
                        bytes[at] == UInt8(ascii: "\\"),
                        bytes[at + 1] == UInt8(ascii: "u")
                    {
                        at += 2
                        let low = try hex4()
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low &- 0xDC00 & 0x3FF)
                    }
                    out.append(contentsOf: Array(String(Unicode.Scalar(scalar) ?? "\u{FFFD}").utf8))
                default:
                    throw Failure(
                        offset: at - 2, message: "invalid escape '\\\(Character(Unicode.Scalar(e)))'")
                }
            default:
                guard b >= 0x20 else { throw Failure(offset: at, message: "control character in a string") }
                out.append(b)
                at += 1
            }
        }
    }

    private mutating func parseArray() throws(Failure) -> SONiCJSONValue.Kind {
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maxDepth else { throw Failure(offset: at, message: "nested more than 64 levels") }
        at += 1
        var items: [SONiCJSONValue] = []
        skipSpace()
        if at < bytes.count, bytes[at] == UInt8(ascii: "]") {
            at += 1
            return .array(items)
        }
        while true {
            skipSpace()
            items.append(try parseValue())
            skipSpace()
            guard at < bytes.count else {
                throw Failure(offset: at, message: "expected ',' or ']', found end of file")
            }
            if bytes[at] == UInt8(ascii: ",") {
                at += 1
            } else if bytes[at] == UInt8(ascii: "]") {
                at += 1
                return .array(items)
            } else {
                throw Failure(offset: at, message: "expected ',' or ']', found \(describeHere())")
            }
        }
    }

    private mutating func parseObject() throws(Failure) -> SONiCJSONValue.Kind {
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maxDepth else { throw Failure(offset: at, message: "nested more than 64 levels") }
        at += 1
        var members: [(key: String, keyOffset: Int, value: SONiCJSONValue)] = []
        var seen: Set<String> = []
        skipSpace()
        if at < bytes.count, bytes[at] == UInt8(ascii: "}") {
            at += 1
            return .object(members)
        }
        while true {
            skipSpace()
            guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else {
                throw Failure(offset: at, message: "expected a string key, found \(describeHere())")
            }
            let keyOffset = at
            let key = try parseString()
            guard seen.insert(key).inserted else {
                throw Failure(offset: keyOffset, message: "duplicate key \"\(key)\"")
            }
            skipSpace()
            guard at < bytes.count, bytes[at] == UInt8(ascii: ":") else {
                throw Failure(
                    offset: at, message: "expected ':' after key \"\(key)\", found \(describeHere())")
            }
            at += 1
            skipSpace()
            members.append((key, keyOffset, try parseValue()))
            skipSpace()
            guard at < bytes.count else {
                throw Failure(offset: at, message: "expected ',' or '}', found end of file")
            }
            if bytes[at] == UInt8(ascii: ",") {
                at += 1
            } else if bytes[at] == UInt8(ascii: "}") {
                at += 1
                return .object(members)
            } else {
                throw Failure(offset: at, message: "expected ',' or '}', found \(describeHere())")
            }
        }
    }
}

/// Writes config_db JSON as SONiC's `config save` does (Python's
/// `json.dump(indent=4, sort_keys=True)`): four spaces, keys in code-point order.
enum SONiCJSONWriter {
    /// A config_db object: a tree of objects whose leaves are strings.
    indirect enum Node {
        /// A string leaf.
        case string(String)
        /// An object; written with its keys sorted.
        case object([String: Node])
    }

    /// The text of `node`, ending in a newline.
    static func text(_ node: Node) -> String {
        var out = ""
        write(node, indent: 0, into: &out)
        out += "\n"
        return out
    }

    /// Code-point order, as Python's `sort_keys` (Swift's `<` on String is not byte order for all text).
    static func ordered(_ a: String, _ b: String) -> Bool {
        a.unicodeScalars.lexicographicallyPrecedes(b.unicodeScalars)
    }

    private static func write(_ node: Node, indent: Int, into out: inout String) {
        switch node {
        case .string(let s): out += quote(s)
        case .object(let members):
            if members.isEmpty {
                out += "{}"
                return
            }
            out += "{\n"
            let pad = String(repeating: " ", count: (indent + 1) * 4)
            for (i, member) in members.sorted(by: { ordered($0.key, $1.key) }).enumerated() {
                out += pad + quote(member.key) + ": "
                write(member.value, indent: indent + 1, into: &out)
                out += i == members.count - 1 ? "\n" : ",\n"
            }
            out += String(repeating: " ", count: indent * 4) + "}"
        }
    }

    /// A JSON string literal; non-ASCII kept as is (config_db names are ASCII).
    static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 {
                    let hex = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        return out + "\""
    }
}
