internal import CYAML

/// The deepest collection nesting accepted. libyaml 0.2.5 (Debian's) has no
/// limit of its own; later libyaml (and the copy Yams compiled in, which the
/// project used before) stops at 1000 with the same test, so a hostile file
/// gets the same error at the same place and nothing recurses without bound.
public let maximumNesting = 1000

/// Composes the single YAML document in `yaml` into a node tree, or nil when
/// the text holds no document (empty, or comments only).
///
/// Nothing is resolved: every scalar stays text, so `no`, `0x10` and `~` reach
/// the reader as written. Anchors and aliases work (an alias is the anchored
/// node); merge keys (`<<`) are not applied, so a reader sees `<<` as a key.
///
/// - Throws: ``YAMLError``: libyaml's scanner, parser and reader errors with its
///   wording and position; `duplicatedKeysInMapping` for a repeated key; a
///   composer error for an undefined alias or a second document.
public func compose(yaml: String) throws(YAMLError) -> Node? {
    var text = yaml
    let result: Result<Node?, YAMLError> = text.withUTF8 { bytes in
        let composer = Composer(yaml: yaml, bytes: bytes)
        do throws(YAMLError) {
            return .success(try composer.singleRoot())
        } catch {
            return .failure(error)
        }
    }
    return try result.get()
}

/// One libyaml event, freed with the object (`yaml_event_delete`).
private final class Event {
    var event = yaml_event_t()
    deinit { yaml_event_delete(&event) }

    var type: yaml_event_type_t { event.type }
    /// Where the event starts, 1-based.
    var startMark: Mark { Mark(line: event.start_mark.line + 1, column: event.start_mark.column + 1) }
}

/// A collection being filled: its start event's data and the nodes so far.
private struct Frame {
    var isMapping: Bool
    var anchor: String?
    var tag: String?
    var style: Node.CollectionStyle
    var mark: Mark
    var items: [Node] = []
}

/// Builds nodes from libyaml's events (`yaml_parser_parse`), in the order and
/// with the checks of the composer the project used before (Yams 6): the same
/// events are read, so the same error is met first.
private final class Composer {
    let yaml: String
    let parser: UnsafeMutablePointer<yaml_parser_t>
    /// A byte to point at for an empty text: libyaml asserts a non-null input.
    let emptyInput = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
    var anchors: [String: Node] = [:]
    /// The text as scalars, made only when the nesting limit is reached.
    lazy var scalars: [Unicode.Scalar] = Array(yaml.unicodeScalars)

    init(yaml: String, bytes: UnsafeBufferPointer<UInt8>) {
        self.yaml = yaml
        parser = .allocate(capacity: 1)
        yaml_parser_initialize(parser)
        yaml_parser_set_encoding(parser, YAML_UTF8_ENCODING)
        yaml_parser_set_input_string(parser, bytes.baseAddress ?? UnsafePointer(emptyInput), bytes.count)
    }

    deinit {
        yaml_parser_delete(parser)
        parser.deallocate()
        emptyInput.deallocate()
    }

    /// The one document: stream start, document start, its node, document
    /// end, then stream end (a second document is an error).
    func singleRoot() throws(YAMLError) -> Node? {
        try parse()  // YAML_STREAM_START_EVENT
        guard parser.pointee.stream_end_produced == 0, try parse().type != YAML_STREAM_END_EVENT else {
            return nil
        }
        let node = try loadNode(from: parse())
        try parse()  // YAML_DOCUMENT_END_EVENT
        let event = try parse()
        if event.type != YAML_STREAM_END_EVENT {
            throw .composer(
                context: YAMLError.Context(
                    text: "expected a single document in the stream", mark: Mark(line: 1, column: 1)),
                problem: "but found another document", event.startMark, yaml: yaml)
        }
        return node
    }

    @discardableResult
    func parse() throws(YAMLError) -> Event {
        let event = Event()
        guard yaml_parser_parse(parser, &event.event) == 1 else { throw error() }
        if event.type == YAML_SEQUENCE_START_EVENT || event.type == YAML_MAPPING_START_EVENT {
            try checkNesting(event)
        }
        return event
    }

    /// A node and everything under it, without recursion (a hostile file may
    /// nest up to the limit in every collection style).
    func loadNode(from first: Event) throws(YAMLError) -> Node {
        var stack: [Frame] = []
        var event = first
        while true {
            let node: Node
            switch event.type {
            case YAML_ALIAS_EVENT:
                let name = string(event.event.data.alias.anchor) ?? ""
                guard let target = anchors[name] else {
                    throw .composer(
                        context: nil, problem: "found undefined alias", event.startMark, yaml: yaml)
                }
                node = target
            case YAML_SCALAR_EVENT:
                let s = event.event.data.scalar
                var bytes = UnsafeBufferPointer(start: s.value, count: s.length)[...]
                // A byte-order mark opening a scalar was dropped by the decoding the
                // previous composer used (Foundation's); keys compare without it.
                if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
                let value = String(decoding: bytes, as: UTF8.self)
                node = .scalar(
                    Node.Scalar(value, tag: string(s.tag), style: style(s.style), mark: event.startMark))
                register(string(s.anchor), node)
            case YAML_SEQUENCE_START_EVENT:
                let s = event.event.data.sequence_start
                stack.append(
                    Frame(
                        isMapping: false, anchor: string(s.anchor),
                        tag: s.implicit != 0 ? nil : string(s.tag),
                        style: s.style == YAML_FLOW_SEQUENCE_STYLE ? .flow : .block, mark: event.startMark))
                event = try parse()
                continue
            case YAML_MAPPING_START_EVENT:
                let m = event.event.data.mapping_start
                stack.append(
                    Frame(
                        isMapping: true, anchor: string(m.anchor), tag: m.implicit != 0 ? nil : string(m.tag),
                        style: m.style == YAML_FLOW_MAPPING_STYLE ? .flow : .block, mark: event.startMark))
                event = try parse()
                continue
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                let frame = stack.removeLast()
                if frame.isMapping {
                    var pairs: [(key: Node, value: Node)] = []
                    pairs.reserveCapacity(frame.items.count / 2)
                    for i in stride(from: 0, to: frame.items.count - 1, by: 2) {
                        pairs.append((frame.items[i], frame.items[i + 1]))
                    }
                    try checkDuplicates(pairs.map(\.key))
                    node = .mapping(Node.Mapping(pairs, tag: frame.tag, style: frame.style, mark: frame.mark))
                } else {
                    node = .sequence(
                        Node.Sequence(frame.items, tag: frame.tag, style: frame.style, mark: frame.mark))
                }
                register(frame.anchor, node)
            default:
                // libyaml emits only the events above inside a document.
                throw .composer(
                    context: nil, problem: "unexpected event \(event.type.rawValue)", event.startMark,
                    yaml: yaml)
            }
            if stack.isEmpty { return node }
            stack[stack.count - 1].items.append(node)
            event = try parse()
        }
    }

    /// An anchor names the node completed last under it (a later one shadows it).
    func register(_ anchor: String?, _ node: Node) {
        if let anchor { anchors[anchor] = node }
    }

    /// libyaml's later nesting limit, with its test (`parser.c`,
    /// `yaml_parser_parse_node`): a flow or block collection may start only while
    /// the indentation stack holds fewer than `maximumNesting - flow_level`
    /// entries. The scanner state that test saw is the state after the event.
    /// An indentless sequence (`key:` then `- item` at the key's indentation)
    /// is not tested.
    func checkNesting(_ event: Event) throws(YAMLError) {
        let p = parser.pointee
        let depth = p.indents.top - p.indents.start
        guard depth >= maximumNesting - Int(p.flow_level) else { return }
        let flow: Bool
        if event.type == YAML_SEQUENCE_START_EVENT {
            flow = event.event.data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE
        } else {
            flow = event.event.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE
        }
        // The collection's token: `[` or `{` just before the event's end; a block
        // collection's token has no width and sits at the end. An indentless
        // sequence ends after its first `-` instead.
        let end = event.event.end_mark
        var problem = Mark(line: end.line + 1, column: end.column + 1)
        if flow {
            problem.column -= 1
        } else if event.type == YAML_SEQUENCE_START_EVENT, end.index >= 1, end.index - 1 < scalars.count,
            scalars[end.index - 1] == "-"
        {
            return
        }
        throw .parser(
            context: YAMLError.Context(text: "while parsing", mark: event.startMark),
            problem: "Maximum nesting level reached, set with yaml_set_max_nest_level())", problem, yaml: yaml
        )
    }

    /// A mapping's repeated keys, as the composer the project used reported them:
    /// keys equal in text and resolved tag (a plain or quoted scalar without
    /// a tag is a string), the first occurrences sorted, the first one's place.
    func checkDuplicates(_ keys: [Node]) throws(YAMLError) {
        var seen: [KeyIdentity: (node: Node, count: Int)] = [:]
        var order: [KeyIdentity] = []
        for key in keys {
            let id = KeyIdentity(key)
            if let entry = seen[id] {
                seen[id] = (entry.node, entry.count + 1)
            } else {
                seen[id] = (key, 1)
                order.append(id)
            }
        }
        let repeated = order.compactMap { seen[$0]!.count > 1 ? seen[$0]!.node : nil }
        guard !repeated.isEmpty else { return }
        let sorted = repeated.sorted(by: yamsOrder)
        throw .duplicatedKeysInMapping(
            duplicates: sorted.map { $0.string ?? "<uncovertable>" },
            context: YAMLError.Context(text: yaml, mark: sorted[0].mark))
    }

    /// The error libyaml recorded, in `YAMLError`'s terms.
    func error() -> YAMLError {
        let p = parser.pointee
        let problem = p.problem.map { String(cString: $0) } ?? ""
        let mark = Mark(line: p.problem_mark.line + 1, column: p.problem_mark.column + 1)
        let context = p.context.map {
            YAMLError.Context(
                text: String(cString: $0),
                mark: Mark(line: p.context_mark.line + 1, column: p.context_mark.column + 1))
        }
        switch p.error {
        case YAML_MEMORY_ERROR:
            return .memory
        case YAML_READER_ERROR:
            // problem_offset counts bytes; the report counts characters.
            let offset = yaml.utf8.index(
                yaml.utf8.startIndex, offsetBy: p.problem_offset, limitedBy: yaml.utf8.endIndex)?
                .samePosition(in: yaml).map { yaml.distance(from: yaml.startIndex, to: $0) }
            return .reader(problem: problem, offset: offset, value: p.problem_value, yaml: yaml)
        case YAML_SCANNER_ERROR:
            return .scanner(context: context, problem: problem, mark, yaml: yaml)
        case YAML_COMPOSER_ERROR:
            return .composer(context: context, problem: problem, mark, yaml: yaml)
        default:
            return .parser(context: context, problem: problem, mark, yaml: yaml)
        }
    }

    func style(_ s: yaml_scalar_style_t) -> Node.Scalar.Style {
        switch s {
        case YAML_SINGLE_QUOTED_SCALAR_STYLE: .singleQuoted
        case YAML_DOUBLE_QUOTED_SCALAR_STYLE: .doubleQuoted
        case YAML_LITERAL_SCALAR_STYLE: .literal
        case YAML_FOLDED_SCALAR_STYLE: .folded
        default: .plain
        }
    }
}

/// A C string from libyaml, nil when absent.
private func string(_ pointer: UnsafeMutablePointer<UInt8>?) -> String? {
    pointer.map { String(cString: $0) }
}

/// What makes two mapping keys the same key: their text (or items) and their
/// resolved tag. An untagged scalar is a string whatever its quoting, as no
/// tag is resolved from the text.
private indirect enum KeyIdentity: Hashable {
    case scalar(String, tag: String)
    case sequence([KeyIdentity], tag: String)
    case mapping([KeyIdentity], tag: String)

    init(_ node: Node) {
        // No tag, or the non-specific `!`, resolves to the kind's own tag.
        func resolved(_ tag: String?, _ kind: String) -> String {
            tag == nil || tag == "!" ? "tag:yaml.org,2002:" + kind : tag!
        }
        switch node {
        case .scalar(let s): self = .scalar(s.string, tag: resolved(s.tag, "str"))
        case .sequence(let s): self = .sequence(s.nodes.map(KeyIdentity.init), tag: resolved(s.tag, "seq"))
        case .mapping(let m):
            self = .mapping(
                m.pairs.flatMap { [KeyIdentity($0.key), KeyIdentity($0.value)] }, tag: resolved(m.tag, "map"))
        }
    }
}

/// The order the previous composer sorted repeated keys in: scalars by text,
/// collections item by item (mappings by key), different kinds unordered.
private func yamsOrder(_ a: Node, _ b: Node) -> Bool {
    func less(_ l: [Node], _ r: [Node]) -> Bool {
        for (x, y) in zip(l, r) {
            if yamsOrder(x, y) { return true }
            if yamsOrder(y, x) { return false }
        }
        return l.count < r.count
    }
    switch (a, b) {
    case (.scalar(let l), .scalar(let r)): return l.string < r.string
    case (.sequence(let l), .sequence(let r)): return less(l.nodes, r.nodes)
    case (.mapping(let l), .mapping(let r)): return less(l.pairs.map(\.key), r.pairs.map(\.key))
    default: return false
    }
}
