@_exported import QoSMapCore
@_exported import QoSMapTableFormat

extension TableLoader {
    /// The built-in domains, compiled at build time from `Tables/domains/`.
    ///
    /// The build plugin runs the same loader over the files and writes the
    /// resulting cells as Swift arrays, so no YAML is parsed at start-up.
    public static let builtInDomains = TableSet(
        domains: DomainSet(EmbeddedTables.domains), provenance: EmbeddedTables.provenance)

    /// The built-in domains and profiles. Profiles are parsed from the embedded
    /// `Tables/profiles/` files on first use, so commands that need none do not
    /// pay for them.
    public static let builtIn: TableSet = {
        let sources = EmbeddedTables.files.filter { $0.path.hasPrefix("profiles/") }
            .map { TableSource(path: "Tables/" + $0.path, text: $0.text) }
        do {
            return try load(sources, onto: builtInDomains, builtIn: true)
        } catch {
            // Only a broken build gets here: the build plugin and the test
            // suite load these same files.
            fatalError("built-in profiles do not load:\n\(error)")
        }
    }()

    /// Loads user files on top of ``builtIn``.
    ///
    /// All files are checked and every problem is reported; nothing from a
    /// failing batch is applied.
    /// - Throws: ``TableLoadError`` with every diagnostic, `file:line:column`.
    public static func load(_ sources: [TableSource]) throws(TableLoadError) -> TableSet {
        try load(sources, onto: builtIn)
    }

    /// Loads the built-ins plus table directories: the system directory first
    /// (skipped when absent), then `directories` in order; see
    /// ``TableLoader/load(directories:systemDirectory:onto:)``.
    ///
    /// - Parameters:
    ///   - systemDirectory: normally ``TableLoader/systemDirectory``; nil to skip it.
    ///   - profiles: whether the built-in profiles are included; without them
    ///     only the compiled-in domains are used, and start-up parses no YAML.
    /// - Throws: ``TableLoadError`` with every diagnostic, `file:line:column`.
    public static func load(
        directories: [String], systemDirectory: String? = TableLoader.systemDirectory, profiles: Bool = true
    ) throws(TableLoadError) -> TableSet {
        try load(
            directories: directories, systemDirectory: systemDirectory,
            onto: profiles ? builtIn : builtInDomains)
    }
}

extension EmbeddedTables {
    /// The compiled-in cell positions as ``DomainProvenance`` by domain name;
    /// each base is the compiled-in domain it imports.
    static var provenance: [String: DomainProvenance] {
        var result: [String: DomainProvenance] = [:]
        for entry in positions {
            var p = DomainProvenance()
            for (cell, pos) in zip(DomainCell.allInbound, entry.inbound) where pos.0 >= 0 {
                p[cell] = CellSource(file: entry.sources[pos.0], line: pos.1)
            }
            for (cell, pos) in zip(DomainCell.allOutbound, entry.outbound) where pos.0 >= 0 {
                p[cell] = CellSource(file: entry.sources[pos.0], line: pos.1)
            }
            result[entry.domain] = p
        }
        // Bases are compiled-in domains, with their own positions.
        for entry in positions {
            if let imports = entry.imports, let base = domains.first(where: { $0.name == imports }) {
                let sources = result[imports]
                result[entry.domain]?.derive(from: base, named: imports, sources: sources)
            }
        }
        return result
    }

    /// Builds one compiled-in domain. The cells come from the loader at build
    /// time, so they are total; a failure here is a bug in the generator.
    static func domain(
        name: String, summary: String, isEditable: Bool, dropEligibility: DropEligibility,
        inbound: [Field: [Treatment]], outbound: [Field: [UInt8]]
    ) -> DSDomain {
        do {
            return try DSDomain(
                name: name, summary: summary, origin: .builtIn, isEditable: isEditable,
                dropEligibility: dropEligibility, inbound: inbound, outbound: outbound)
        } catch {
            fatalError("compiled-in domain '\(name)' is not total: \(error)")
        }
    }
}
