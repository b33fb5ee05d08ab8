/// A position in a YAML text, 1-based; columns count Unicode scalars, as
/// libyaml's `yaml_mark_t` does.
public struct Mark: Sendable, Hashable, CustomStringConvertible {
    /// The 1-based line.
    public var line: Int
    /// The 1-based column, in Unicode scalars.
    public var column: Int

    /// Creates a mark.
    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    /// `line:column`.
    public var description: String { "\(line):\(column)" }
}

/// One node of a composed YAML document: what the table format and the
/// config readers walk. Aliases are resolved to the node their anchor names
/// (which keeps the anchor's position); no tag is interpreted, so every scalar
/// is text for the reader to parse.
public enum Node: Sendable {
    /// A scalar: its text, as written after YAML's quoting and folding.
    case scalar(Scalar)
    /// A mapping, its pairs in document order.
    case mapping(Mapping)
    /// A sequence.
    case sequence(Sequence)
}

extension Node {
    /// A scalar node (libyaml's `YAML_SCALAR_EVENT`).
    public struct Scalar: Sendable {
        /// How a scalar was written (libyaml's `yaml_scalar_style_t`).
        public enum Style: Sendable, Hashable {
            /// `text`
            case plain
            /// `'text'`
            case singleQuoted
            /// `"text"`
            case doubleQuoted
            /// `|`
            case literal
            /// `>`
            case folded
        }

        /// The text.
        public var string: String
        /// The explicit tag, expanded (`!!int` is `tag:yaml.org,2002:int`); nil when none.
        public var tag: String?
        /// How it was written.
        public var style: Style
        /// Where it starts (its anchor or tag, when it has one).
        public var mark: Mark

        /// Creates a scalar.
        public init(_ string: String, tag: String? = nil, style: Style = .plain, mark: Mark) {
            self.string = string
            self.tag = tag
            self.style = style
            self.mark = mark
        }
    }

    /// Whether a collection was written in block or flow style.
    public enum CollectionStyle: Sendable, Hashable {
        /// Indented lines.
        case block
        /// `[a, b]` or `{a: b}`.
        case flow
    }

    /// A mapping node: its pairs in document order, duplicates already refused.
    public struct Mapping: Sendable, RandomAccessCollection {
        /// The pairs, in document order.
        public var pairs: [(key: Node, value: Node)]
        /// The explicit tag, expanded; nil when none.
        public var tag: String?
        /// Block or flow.
        public var style: CollectionStyle
        /// Where it starts.
        public var mark: Mark

        /// Creates a mapping.
        public init(
            _ pairs: [(key: Node, value: Node)], tag: String? = nil, style: CollectionStyle = .block,
            mark: Mark
        ) {
            self.pairs = pairs
            self.tag = tag
            self.style = style
            self.mark = mark
        }

        /// The first pair's index.
        public var startIndex: Int { pairs.startIndex }
        /// Past the last pair.
        public var endIndex: Int { pairs.endIndex }
        /// The pair at an index.
        public subscript(position: Int) -> (key: Node, value: Node) { pairs[position] }
    }

    /// A sequence node.
    public struct Sequence: Sendable, RandomAccessCollection {
        /// The items, in document order.
        public var nodes: [Node]
        /// The explicit tag, expanded; nil when none.
        public var tag: String?
        /// Block or flow.
        public var style: CollectionStyle
        /// Where it starts.
        public var mark: Mark

        /// Creates a sequence.
        public init(_ nodes: [Node], tag: String? = nil, style: CollectionStyle = .block, mark: Mark) {
            self.nodes = nodes
            self.tag = tag
            self.style = style
            self.mark = mark
        }

        /// The first item's index.
        public var startIndex: Int { nodes.startIndex }
        /// Past the last item.
        public var endIndex: Int { nodes.endIndex }
        /// The item at an index.
        public subscript(position: Int) -> Node { nodes[position] }
    }

    /// Where the node starts in the text.
    public var mark: Mark {
        switch self {
        case .scalar(let s): s.mark
        case .mapping(let m): m.mark
        case .sequence(let s): s.mark
        }
    }

    /// A scalar's text; nil for a collection.
    public var string: String? {
        if case .scalar(let s) = self { return s.string }
        return nil
    }

    /// The explicit tag, expanded; nil when none.
    public var tag: String? {
        switch self {
        case .scalar(let s): s.tag
        case .mapping(let m): m.tag
        case .sequence(let s): s.tag
        }
    }
}
