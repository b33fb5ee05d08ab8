import QoSMapCore
import QoSMapDevices
import QoSMapTables
import Testing

@Suite("Domain file writer and import completion")
struct DomainFileWriterTests {
    /// The writer's text loads back into a domain with the same maps, for the
    /// built-ins and for random domains.
    @Test(arguments: [0] + RandomDomain.seeds.prefix(40))
    func writtenFileLoadsBackEqual(seed: UInt64) throws {
        let domain =
            seed == 0
            ? try #require(TableLoader.builtIn.domains["5p3d"])
            : RandomDomain.make(name: "r\(seed)", seed: seed)
        let name = seed == 0 ? "copy5p3d" : domain.name
        let text = DomainFileWriter.text(for: rename(domain, name), header: ["written by a test"])
        let set = try TableLoader.load([TableSource(path: "w.yaml", text: text)], onto: TableLoader.builtIn)
        let back = try #require(set.domains[name])
        #expect(back.hasSameMaps(as: domain))
        #expect(back.dropEligibility == domain.dropEligibility)
    }

    /// Completion takes exactly the cells the import lacks from the base, and says so.
    @Test func completionFillsOnlyMissingCells() throws {
        let base = try #require(TableLoader.builtIn.domains["default"])
        var imported = ImportedDomain(name: "dev")
        imported.setInbound(.dscp, 12, .init(.af2, nil))  // class held, color not
        imported.setInbound(.dscp, 46, .init(.cs6, .red))
        imported.setOutbound(.exp, Treatment(.ef, .green), 3)
        let (d, notes) = imported.completed(base: base)
        #expect(d.classify(.dscp, 12) == Treatment(.af2, .yellow))  // color from default's AF12
        #expect(d.classify(.dscp, 46) == Treatment(.cs6, .red))
        #expect(d.classify(.dscp, 10) == base.classify(.dscp, 10))
        #expect(d.mark(.exp, for: Treatment(.ef, .green)).rawValue == 3)
        #expect(d.mark(.exp, for: Treatment(.ef, .yellow)) == base.mark(.exp, for: Treatment(.ef, .yellow)))
        #expect(notes.contains("inbound dscp: 62 of 64 values not in the file; taken from default"))
        #expect(notes.contains("inbound dscp: the file holds no color; 1 colors taken from default"))
        #expect(notes.contains { $0.hasPrefix("outbound exp: 23 of 24") })
    }

    func rename(_ d: DSDomain, _ name: String) -> DSDomain {
        var b = d.derive(name: name)
        b.dropEligibility = d.dropEligibility
        return (try? b.build()) ?? d
    }
}
