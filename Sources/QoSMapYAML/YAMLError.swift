/// Why a YAML text could not be composed: libyaml's error kinds
/// (`yaml_error_type_e`) with its own wording, plus the composer's checks.
/// The cases and their texts are those the project's diagnostics were written
/// against (Yams's `YamlError`), so that messages did not change with the parser.
public enum YAMLError: Error, Sendable, CustomStringConvertible {
    /// libyaml ran out of memory (`YAML_MEMORY_ERROR`).
    case memory
    /// The input is not readable text (`YAML_READER_ERROR`, e.g. a control
    /// character): the problem, its offset in characters, the offending value.
    case reader(problem: String, offset: Int?, value: Int32, yaml: String)
    /// A token could not be scanned (`YAML_SCANNER_ERROR`).
    case scanner(context: Context?, problem: String, Mark, yaml: String)
    /// The tokens do not form YAML (`YAML_PARSER_ERROR`), including nesting
    /// deeper than ``maximumNesting``.
    case parser(context: Context?, problem: String, Mark, yaml: String)
    /// The events do not form one document: an undefined alias, a second document.
    case composer(context: Context?, problem: String, Mark, yaml: String)
    /// A mapping repeats a key: the repeated keys' texts, sorted, and the
    /// first occurrence of the first one.
    case duplicatedKeysInMapping(duplicates: [String], context: Context)

    /// What libyaml was doing when it found the problem, and where.
    public struct Context: Sendable, CustomStringConvertible {
        /// libyaml's words, e.g. `while parsing a flow sequence`.
        public let text: String
        /// Where that started.
        public let mark: Mark

        /// Creates a context.
        public init(text: String, mark: Mark) {
            self.text = text
            self.mark = mark
        }

        /// `text in line L, column C` and a newline.
        public var description: String { text + " in line \(mark.line), column \(mark.column)\n" }
    }

    /// A multi-line report with the offending line and a caret under the place.
    public var description: String {
        switch self {
        case .memory:
            return "Memory error"
        case .reader(let problem, let offset, let value, let yaml):
            guard let (line, column, contents) = offset.flatMap({ lineColumnAndContents(yaml, at: $0) })
            else {
                return "\(problem) at offset: \(String(describing: offset)), value: \(value)"
            }
            let mark = Mark(line: line + 1, column: column + 1)
            return "\(mark): error: reader: \(problem):\n" + endingWithNewline(contents)
                + String(repeating: " ", count: column) + "^"
        case .scanner(let context, let problem, let mark, let yaml):
            return "\(mark): error: scanner: \(context?.description ?? "")\(problem):\n" + snippet(mark, yaml)
        case .parser(let context, let problem, let mark, let yaml):
            return "\(mark): error: parser: \(context?.description ?? "")\(problem):\n" + snippet(mark, yaml)
        case .composer(let context, let problem, let mark, let yaml):
            return "\(mark): error: composer: \(context?.description ?? "")\(problem):\n"
                + snippet(mark, yaml)
        case .duplicatedKeysInMapping(let duplicates, let context):
            let keys = duplicates.sorted().map { "'\($0)'" }.joined(separator: ", ")
            return """
                Parser: expected all keys to be unique but found the following duplicated key(s): \(keys).
                Context:
                \(context.description)
                """
        }
    }
}

// The helpers below reproduce Foundation's line handling (NSString
// `getLineStart`: LF, CR, CRLF, NEL, LS, PS end a line; columns in UTF-16)
// without Foundation, for the two reports that quote a line.

/// The line breaks Foundation's `getLineStart` knows (CRLF is handled apart).
private func isLineBreak(_ s: Unicode.Scalar) -> Bool {
    switch s.value {
    case 0x0A, 0x0D, 0x85, 0x2028, 0x2029: true
    default: false
    }
}

/// The text's lines, each with its line break.
private func lines(_ text: String) -> [Substring] {
    var result: [Substring] = []
    let scalars = text.unicodeScalars
    var start = scalars.startIndex
    var i = start
    while i < scalars.endIndex {
        let s = scalars[i]
        i = scalars.index(after: i)
        guard isLineBreak(s) else { continue }
        if s == "\r", i < scalars.endIndex, scalars[i] == "\n" { i = scalars.index(after: i) }
        result.append(text[start..<i])
        start = i
    }
    if start < scalars.endIndex || result.isEmpty { result.append(text[start..<scalars.endIndex]) }
    return result
}

/// The 0-based line, the UTF-16 column and the line's text at an offset in characters.
private func lineColumnAndContents(_ text: String, at offset: Int) -> (Int, Int, String)? {
    guard let index = text.index(text.startIndex, offsetBy: offset, limitedBy: text.endIndex) else {
        return nil
    }
    let all = lines(text)
    var number = 0
    while number + 1 < all.count, all[number].endIndex <= index { number += 1 }
    let line = all[number]
    return (number, text.utf16.distance(from: line.startIndex, to: index), String(line))
}

/// The line with a newline at its end (Foundation's `CharacterSet.newlines` also has VT and FF).
private func endingWithNewline(_ line: String) -> String {
    guard let last = line.unicodeScalars.last else { return line + "\n" }
    return (isLineBreak(last) || last == "\u{0B}" || last == "\u{0C}") ? line : line + "\n"
}

/// The mark's line and a caret under its column.
private func snippet(_ mark: Mark, _ yaml: String) -> String {
    let all = lines(yaml)
    let contents = mark.line - 1 < all.count ? String(all[max(mark.line - 1, 0)]) : String(all.last ?? "")
    let scalars = contents.unicodeScalars
    let at =
        scalars.index(scalars.startIndex, offsetBy: mark.column - 1, limitedBy: scalars.endIndex)
        ?? scalars.endIndex
    return endingWithNewline(contents)
        + String(
            repeating: " ",
            count: contents.utf16.distance(
                from: contents.utf16.startIndex, to: at)) + "^"
}
