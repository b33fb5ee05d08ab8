import QoSMapCore
internal import QoSMapYAML

/// One table file's path and text.
public struct TableSource: Sendable, Equatable {
    /// The path shown in diagnostics.
    public var path: String
    /// The file's text.
    public var text: String

    /// Creates a source.
    public init(path: String, text: String) {
        self.path = path
        self.text = text
    }
}

/// What a set of table files defines.
public struct TableSet: Sendable {
    /// The domains, built-ins first.
    public var domains: DomainSet
    /// The standards profiles (`profile:` files), built-ins first.
    public var profiles: ProfileSet
    /// Warnings found while loading (errors throw instead).
    public var warnings: [TableDiagnostic] = []
    /// Where each domain's cells were written, by domain name.
    public var provenance: [String: DomainProvenance] = [:]

    /// Creates a table set.
    public init(
        domains: DomainSet, profiles: ProfileSet = ProfileSet(), warnings: [TableDiagnostic] = [],
        provenance: [String: DomainProvenance] = [:]
    ) {
        self.domains = domains
        self.profiles = profiles
        self.warnings = warnings
        self.provenance = provenance
    }
}

/// Loads domain and profile files: parses them with positions, resolves `import`, applies
/// overrides to editable domains and checks that every map is total.
public enum TableLoader {
    /// Loads user files on top of a base set (normally `TableLoader.builtIn`
    /// from QoSMapTables, which also offers an overload that defaults to it).
    ///
    /// All files are checked and every problem is reported; nothing from a
    /// failing batch is applied. Every domain loaded gets origin `.file(path)`.
    /// - Throws: ``TableLoadError`` with every error and warning, `file:line:column`.
    public static func load(_ sources: [TableSource], onto base: TableSet) throws(TableLoadError) -> TableSet
    {
        try load(sources, onto: base, builtIn: false)
    }

    /// Loads a batch; with `builtIn` its domains get origin `.builtIn` and its
    /// profiles are marked built in (only the compiled-in `Tables/` are).
    package static func load(
        _ sources: [TableSource], onto base: TableSet, builtIn builtInBatch: Bool
    ) throws(TableLoadError) -> TableSet {
        let origin: (String) -> DomainOrigin = { builtInBatch ? .builtIn : .file($0) }
        var diagnostics: [TableDiagnostic] = []
        var documents: [DomainDocument] = []
        var profiles: [(profile: Profile, nameNode: Node, file: String)] = []
        for source in sources {
            var ctx = YAMLContext(file: source.path)
            if let root = ctx.compose(source.text) {
                if let pairs = ctx.mapping(root, "a table file") {
                    let isDomain = pairs.contains(where: { $0.name == "domain" })
                    let isProfile = pairs.contains(where: { $0.name == "profile" })
                    if isDomain && isProfile {
                        ctx.error(root, "a table file has either a 'domain' or a 'profile' key, not both")
                    } else if isProfile {
                        if let p = ProfileParser.parse(root: root, pairs: pairs, ctx: &ctx), !ctx.hasErrors {
                            var profile = p.profile
                            profile.isBuiltIn = builtInBatch
                            profiles.append((profile, p.nameNode, source.path))
                        }
                    } else if isDomain {
                        // A file with syntax errors is not resolved, so that
                        // one bad cell is not reported again as a gap.
                        if let doc = DomainParser.parse(root: root, pairs: pairs, ctx: &ctx), !ctx.hasErrors {
                            documents.append(doc)
                        }
                    } else {
                        ctx.error(
                            root,
                            "a table file needs a top-level 'domain' key (or 'profile' for a standards profile)"
                        )
                    }
                }
            }
            diagnostics += ctx.diagnostics
        }
        var set = base
        var profileFiles: [String: String] = [:]
        for entry in profiles {
            var ctx = YAMLContext(file: entry.file)
            if let other = profileFiles[entry.profile.name] {
                ctx.error(entry.nameNode, "profile '\(entry.profile.name)' is already defined in \(other)")
            } else if let existing = set.profiles[entry.profile.name], existing.isBuiltIn {
                ctx.error(
                    entry.nameNode,
                    "profile '\(entry.profile.name)' is built in and cannot be redefined; choose another name"
                )
            } else {
                set.profiles.insert(entry.profile)
                profileFiles[entry.profile.name] = entry.file
            }
            diagnostics += ctx.diagnostics
        }
        var definedIn: [String: String] = [:]
        var pending = documents
        // Resolve imports across the batch in dependency order, whatever the
        // file order.
        while !pending.isEmpty {
            let batchNames = Set(pending.map(\.name))
            let ready = pending.filter { doc in
                guard let imp = doc.importName, imp != doc.name else { return true }
                return !batchNames.contains(imp)
            }
            let next = ready.isEmpty ? pending : ready  // a cycle: report it below
            for doc in next {
                var ctx = YAMLContext(file: doc.file)
                if doc.importName == doc.name, set.domains[doc.name] == nil {
                    ctx.error(doc.importNode, "domain '\(doc.name)' imports itself; import another domain")
                } else if ready.isEmpty {
                    ctx.error(doc.importNode, "import cycle: " + importCycle(from: doc, in: pending))
                } else if let (domain, provenance) = resolve(
                    doc, in: set, definedIn: definedIn, origin: origin, ctx: &ctx)
                {
                    set.domains.insert(domain)
                    set.provenance[domain.name] = provenance
                    definedIn[doc.name] = doc.file
                }
                diagnostics += ctx.diagnostics
            }
            pending.removeAll { d in next.contains { $0.file == d.file && $0.name == d.name } }
        }
        diagnostics.sort { ($0.file, $0.line, $0.column) < ($1.file, $1.line, $1.column) }
        if diagnostics.contains(where: { $0.severity == .error }) {
            throw TableLoadError(diagnostics)
        }
        set.warnings += diagnostics
        return set
    }

    /// The import chain from `doc` back to a domain already in it,
    /// `a → b → a`, through the documents not yet resolved.
    static func importCycle(from doc: DomainDocument, in pending: [DomainDocument]) -> String {
        var chain = [doc.name]
        var current = doc
        while let imp = current.importName, let next = pending.first(where: { $0.name == imp }) {
            chain.append(imp)
            if chain.dropLast().contains(imp) || chain.count > pending.count + 1 { break }
            current = next
        }
        if let imp = current.importName, !chain.dropLast().contains(imp), chain.last != imp {
            chain.append(imp)
        }
        return chain.joined(separator: " → ")
    }

    static func resolve(
        _ doc: DomainDocument, in set: TableSet, definedIn: [String: String],
        origin: (String) -> DomainOrigin,
        ctx: inout YAMLContext
    ) -> (DSDomain, DomainProvenance)? {
        var builder: DomainBuilder
        var provenance = DomainProvenance()
        if let existing = set.domains[doc.name] {
            if let other = definedIn[doc.name] {
                ctx.error(doc.nameNode, "domain '\(doc.name)' is already defined in \(other)")
                return nil
            }
            guard existing.isEditable else {
                ctx.error(
                    doc.nameNode,
                    "domain '\(doc.name)' is built in and cannot be modified; derive a new domain with "
                        + "'import: \(doc.name)'")
                return nil
            }
            if doc.importNode != nil {
                ctx.error(
                    doc.importNode, "'import' is not allowed when overriding existing domain '\(doc.name)'")
                return nil
            }
            // Overriding an editable domain (Junos-style): unlisted cells keep their values.
            builder = existing.derive(name: doc.name)
            builder.isEditable = existing.isEditable
            provenance = set.provenance[doc.name] ?? DomainProvenance()
            provenance.derive(from: existing, named: doc.name, sources: set.provenance[doc.name])
        } else if let imp = doc.importName {
            guard let base = set.domains[imp] else {
                ctx.error(
                    doc.importNode,
                    "unknown domain '\(imp)' to import; known domains: "
                        + set.domains.names.joined(separator: ", "))
                return nil
            }
            builder = base.derive(name: doc.name)
            // A derived domain describes itself or says nothing: the parent's
            // description would name the wrong domain.
            builder.summary = ""
            provenance = set.provenance[imp] ?? DomainProvenance()
            provenance.derive(from: base, named: imp, sources: set.provenance[imp])
        } else {
            builder = DomainBuilder(name: doc.name)
        }
        if !doc.summary.isEmpty { builder.summary = doc.summary }
        if let e = doc.editable { builder.isEditable = e }
        if let d = doc.dropEligibility { builder.dropEligibility = d }
        builder.origin = origin(doc.file)
        for cell in doc.inbound {
            builder.setInbound(cell.field, cell.value, cell.treatment)
            provenance[.inbound(cell.field, cell.value)] = CellSource(file: doc.file, line: cell.line)
        }
        for cell in doc.outbound {
            builder.setOutbound(cell.field, cell.treatment, cell.value)
            provenance[.outbound(cell.field, cell.treatment)] = CellSource(file: doc.file, line: cell.line)
        }
        var complete = true
        for field in Field.allCases {
            let (ins, outs) = builder.missingCells(field)
            if !ins.isEmpty {
                complete = false
                ctx.error(
                    doc.inboundNodes[field] ?? doc.nameNode,
                    "inbound \(field.name) map of domain '\(doc.name)' is not total; undefined values: "
                        + rangeText(ins.map { Int($0.rawValue) }))
            }
            if !outs.isEmpty {
                complete = false
                ctx.error(
                    doc.outboundNodes[field] ?? doc.nameNode,
                    "outbound \(field.name) map of domain '\(doc.name)' is not total; undefined cells: "
                        + outs.map(\.description).joined(separator: ", "))
            }
        }
        guard complete, !ctx.hasErrors, let domain = try? builder.build() else { return nil }
        return (domain, provenance)
    }
}
