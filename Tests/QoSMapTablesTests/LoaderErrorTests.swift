import QoSMapCore
import QoSMapTables
import Testing

func load(_ files: [(String, String)]) -> Result<TableSet, TableLoadError> {
    Result { () throws(TableLoadError) in
        try TableLoader.load(files.map { TableSource(path: $0.0, text: $0.1 + "\n") })
    }
}

@Suite("Table loader")
struct LoaderErrorTests {
    @Test(arguments: malformedDomainFiles)
    func malformedFileIsReportedAtItsPosition(file: String, yaml: String, diagnostic: String) {
        switch load([(file, yaml)]) {
        case .success:
            Issue.record("\(file) loaded but should not")
        case .failure(let error):
            #expect(error.diagnostics.map(\.description) == [diagnostic])
        }
    }

    /// Each malformed case exercises its own fault: a copied case (same file
    /// name, same text or same expected diagnostic) would test nothing new.
    @Test func malformedCasesAreDistinct() {
        for (name, values) in [
            ("file", malformedDomainFiles.map(\.file)), ("yaml", malformedDomainFiles.map(\.yaml)),
            ("diagnostic", malformedDomainFiles.map(\.diagnostic)),
        ] {
            let repeated = Dictionary(grouping: values, by: { $0 }).filter { $0.value.count > 1 }.keys
            #expect(repeated.isEmpty, "repeated \(name): \(repeated.sorted())")
        }
    }

    @Test func everyGapOfAnIncompleteDomainIsNamed() throws {
        let yaml = """
            domain: scratch
            inbound:
              dscp:
                0-62: [BE, green]
            """
        let error = try #require(load([("gaps.yaml", yaml)]).failure)
        let lines = error.diagnostics.map(\.description)
        #expect(
            lines.contains(
                "gaps.yaml:3:3: inbound dscp map of domain 'scratch' is not total; undefined values: 63"))
        #expect(
            lines.contains(
                "gaps.yaml:1:9: inbound exp map of domain 'scratch' is not total; undefined values: 0-7"))
        #expect(lines.count == 8)  // dscp inbound + 3 other inbound + 4 outbound
    }

    @Test func severalProblemsInOneFileAreAllReported() throws {
        let yaml = """
            domain: mine
            import: default
            inbound:
              dscp:
                46: [EF, purple]
                70: [EF, green]
            outbound:
              exp:
                EF: 9
            """
        let error = try #require(load([("many.yaml", yaml)]).failure)
        #expect(
            error.diagnostics.map(\.description) == [
                "many.yaml:5:14: unknown color 'purple'; allowed: green, yellow, red",
                "many.yaml:6:5: dscp value 70 is out of range; allowed: 0-63",
                "many.yaml:9:9: exp value 9 is out of range; allowed: 0-7",
            ])
    }

    @Test func overridingDefaultKeepsUnlistedCells() throws {
        let yaml = """
            domain: default
            inbound:
              dscp:
                40: [CS6, green]
            outbound:
              dscp:
                EF: {yellow: 44}
            """
        let set = try load([("override.yaml", yaml)]).get()
        let d = try #require(set.domains["default"])
        #expect(d.classify(dscp: .cs5) == Treatment(.cs6, .green))
        #expect(d.classify(dscp: .ef) == Treatment(.ef, .green))
        #expect(d.dscp(for: Treatment(.ef, .yellow)) == .va)
        #expect(d.dscp(for: Treatment(.ef, .green)) == .ef)
        #expect(d.origin == .file("override.yaml"))
        #expect(d.isEditable)
        // The built-in 5p3d imported default's cells as shipped, not as edited.
        #expect(set.domains["5p3d"]?.classify(dscp: .cs5) == Treatment(.ef, .green))
    }

    @Test func derivedDomainImportsAnotherDefinedLater() throws {
        let a = """
            domain: edge
            import: core
            inbound:
              dscp:
                0: [AF1, yellow]
            """
        let b = """
            domain: core
            import: 5p3d
            """
        let set = try load([("a.yaml", a), ("b.yaml", b)]).get()
        let edge = try #require(set.domains["edge"])
        #expect(edge.classify(dscp: .cs0) == Treatment(.af1, .yellow))
        #expect(edge.classify(pcp: PCP(truncating: 0)) == Treatment(.be, .yellow))  // from 5p3d via core
        #expect(edge.dropEligibility == .color)
        #expect(set.domains.names == ["default", "5p3d", "edge-cake", "core", "edge"])
    }

    @Test func sameDomainInTwoFilesIsRejected() throws {
        let yaml = "domain: twin\nimport: default"
        let error = try #require(load([("one.yaml", yaml), ("two.yaml", yaml)]).failure)
        #expect(
            error.diagnostics.map(\.description) == [
                "two.yaml:1:9: domain 'twin' is already defined in one.yaml"
            ])
    }

    @Test func importCycleIsReported() throws {
        let error = try #require(
            load([("a.yaml", "domain: a\nimport: b"), ("b.yaml", "domain: b\nimport: a")]).failure)
        #expect(
            error.diagnostics.map(\.description) == [
                "a.yaml:2:9: import cycle: a → b → a", "b.yaml:2:9: import cycle: b → a → b",
            ])
    }

    /// Issue 13 item 10: the messages name the mistake.
    @Test(arguments: [
        ("domain: s\nimport: s\n", "s.yaml:2:9: domain 's' imports itself; import another domain"),
        (
            "domain: t\nimport: default\ninbound:\n\tdscp:\n",
            "s.yaml:4:1: tabs are not allowed in YAML indentation; indent with spaces"
        ),
        (
            "domain: x\nsummary: " + String(repeating: "[", count: 2000)
                + String(repeating: "]", count: 2000),
            "s.yaml:2:"
        ),
    ])
    func item10_clearerMessages(text: String, message: String) throws {
        let error = try #require(load([("s.yaml", text)]).failure)
        let lines = error.diagnostics.map(\.description)
        #expect(lines.count == 1)
        #expect(lines.first?.hasPrefix(message) == true, "\(lines)")
        #expect(!lines.joined().contains("yaml_set_max_nest_level"))
    }

    @Test func aFailedBatchAppliesNothing() throws {
        let good = "domain: good\nimport: default"
        let bad = "domain: bad\nimport: nowhere"
        #expect(load([("good.yaml", good), ("bad.yaml", bad)]).failure != nil)
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
}
