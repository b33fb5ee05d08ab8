import QoSMapCore
// `package`: YAMLContext, which takes QoSMapYAML's nodes, is shared with the
// daemon's config parser; nothing public exposes them.
package import QoSMapYAML

/// One problem found in a table file, reported as `file:line:column: message`.
public struct TableDiagnostic: Error, Equatable, Sendable, CustomStringConvertible {
    /// How serious a diagnostic is.
    public enum Severity: Sendable, Equatable {
        /// The file is rejected.
        case error
        /// The file loads, but something looks wrong.
        case warning
    }

    /// The file's path as given.
    public var file: String
    /// The 1-based line.
    public var line: Int
    /// The 1-based column.
    public var column: Int
    /// What is wrong, naming the bad token and what is allowed.
    public var message: String
    /// Error or warning.
    public var severity: Severity

    /// Creates a diagnostic.
    public init(file: String, line: Int, column: Int, message: String, severity: Severity = .error) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
        self.severity = severity
    }

    /// `file:line:column: message`, with `warning: ` before a warning's message.
    public var description: String {
        "\(file):\(line):\(column): " + (severity == .warning ? "warning: " : "") + message
    }
}

/// A table file that could not be loaded: every problem found in it.
public struct TableLoadError: Error, Sendable, CustomStringConvertible {
    /// The problems, errors and warnings, in file order.
    public var diagnostics: [TableDiagnostic]

    /// Creates the error.
    public init(_ diagnostics: [TableDiagnostic]) { self.diagnostics = diagnostics }

    /// One diagnostic per line.
    public var description: String { diagnostics.map(\.description).joined(separator: "\n") }
}

/// Walks a composed YAML document and collects positioned diagnostics; shared
/// by the table loader and the daemon's config parser so that every YAML file
/// the project reads reports problems the same way.
package struct YAMLContext {
    /// The file's path, as shown in diagnostics.
    package let file: String
    /// The problems found so far, in the order found.
    package var diagnostics: [TableDiagnostic] = []

    /// Starts a context for one file.
    package init(file: String) { self.file = file }

    /// Whether any error (not just a warning) was recorded.
    package var hasErrors: Bool { diagnostics.contains { $0.severity == .error } }

    /// Records an error at a node's position (1:1 when it has none).
    package mutating func error(_ node: Node?, _ message: String) {
        let mark = node?.mark
        diagnostics.append(
            TableDiagnostic(file: file, line: mark?.line ?? 1, column: mark?.column ?? 1, message: message))
    }

    /// Records a warning at a node's position.
    package mutating func warning(_ node: Node?, _ message: String) {
        let mark = node?.mark
        diagnostics.append(
            TableDiagnostic(
                file: file, line: mark?.line ?? 1, column: mark?.column ?? 1, message: message,
                severity: .warning))
    }

    /// Composes the text, turning a YAML syntax error into a diagnostic. An
    /// empty document is an error unless `allowEmpty`, when it yields nil alone.
    package mutating func compose(_ text: String, allowEmpty: Bool = false) -> Node? {
        do throws(YAMLError) {
            // Every scalar is read as text by this loader: nothing is resolved.
            guard let node = try QoSMapYAML.compose(yaml: text) else {
                if allowEmpty { return nil }
                diagnostics.append(
                    TableDiagnostic(file: file, line: 1, column: 1, message: "empty table file"))
                return nil
            }
            return node
        } catch {
            diagnostics.append(YAMLContext.diagnostic(for: error, file: file))
            return nil
        }
    }

    static func diagnostic(for error: YAMLError, file: String) -> TableDiagnostic {
        switch error {
        case .scanner(let context, let problem, let mark, let yaml),
            .parser(let context, let problem, let mark, let yaml),
            .composer(let context, let problem, let mark, let yaml):
            // libyaml's wording for two common mistakes names neither.
            let lines = yaml.split(separator: "\n", omittingEmptySubsequences: false)
            if mark.line >= 1, mark.line <= lines.count,
                lines[mark.line - 1].prefix(mark.column).contains("\t")
            {
                return TableDiagnostic(
                    file: file, line: mark.line, column: mark.column,
                    message: "tabs are not allowed in YAML indentation; indent with spaces")
            }
            if problem.contains("nesting level") {
                return TableDiagnostic(
                    file: file, line: mark.line, column: mark.column,
                    message: "YAML nesting is too deep; a table file needs only a few levels")
            }
            let ctx = context.map { " (\($0.text) at line \($0.mark.line), column \($0.mark.column))" } ?? ""
            return TableDiagnostic(
                file: file, line: mark.line, column: mark.column, message: "YAML syntax: \(problem)\(ctx)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            // The composer reports the first occurrence; point at the repeat, which is
            // the line to fix.
            let key = duplicates.first ?? ""
            let first = context.mark
            var line = first.line
            var column = first.column
            let lines = context.text.split(separator: "\n", omittingEmptySubsequences: false)
            for (i, text) in lines.enumerated() where i + 1 > first.line {
                let indent = text.prefix { $0 == " " }.count
                if indent == first.column - 1, text.dropFirst(indent).hasPrefix(key + ":") {
                    line = i + 1
                    column = indent + 1
                    break
                }
            }
            return TableDiagnostic(
                file: file, line: line, column: column,
                message: "duplicate key '\(key)' (first at line \(first.line), column \(first.column))")
        default:
            return TableDiagnostic(file: file, line: 1, column: 1, message: "YAML: \(error)")
        }
    }

    /// A scalar's text, or a diagnostic naming what was expected.
    package mutating func scalar(_ node: Node, _ what: String) -> String? {
        guard case .scalar(let s) = node else {
            error(node, "expected \(what), found a \(node.kindName)")
            return nil
        }
        return s.string
    }

    /// A mapping's pairs, with duplicate keys reported.
    package mutating func mapping(_ node: Node, _ what: String) -> [(key: Node, value: Node, name: String)]? {
        guard case .mapping(let m) = node else {
            error(node, "expected \(what) (a mapping), found a \(node.kindName)")
            return nil
        }
        var seen: [String: Node] = [:]
        var pairs: [(key: Node, value: Node, name: String)] = []
        for (k, v) in m {
            guard case .scalar(let ks) = k else {
                error(k, "expected a plain key in \(what), found a \(k.kindName)")
                continue
            }
            if let first = seen[ks.string] {
                let at = " (first at line \(first.mark.line), column \(first.mark.column))"
                error(k, "duplicate key '\(ks.string)' in \(what)\(at)")
                continue
            }
            seen[ks.string] = k
            pairs.append((k, v, ks.string))
        }
        return pairs
    }

    /// Checks a mapping's keys against an allowed list.
    package mutating func checkKeys(
        _ pairs: [(key: Node, value: Node, name: String)], allowed: [String], in what: String
    ) {
        for p in pairs where !allowed.contains(p.name) {
            error(p.key, "unknown key '\(p.name)' in \(what); allowed: \(allowed.joined(separator: ", "))")
        }
    }

    /// A `true`/`false` scalar (also `yes`/`no`, `on`/`off`).
    package mutating func bool(_ node: Node, _ what: String) -> Bool? {
        guard let s = scalar(node, what) else { return nil }
        switch s.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default:
            error(node, "invalid \(what) '\(s)'; allowed: true, false")
            return nil
        }
    }

    /// An integer scalar (decimal, `0x`, `0b`) within a range.
    package mutating func integer(_ node: Node, _ what: String, _ range: ClosedRange<Int>) -> Int? {
        guard let s = scalar(node, what) else { return nil }
        guard let v = parseInteger(Substring(s)), range.contains(v) else {
            error(node, "invalid \(what) '\(s)'; allowed: \(range.lowerBound)-\(range.upperBound)")
            return nil
        }
        return v
    }
}

extension Node {
    var kindName: String {
        switch self {
        case .scalar: "scalar"
        case .mapping: "mapping"
        case .sequence: "sequence"
        }
    }
}
