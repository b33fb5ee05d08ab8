import Foundation
import QoSMapCore
import QoSMapTables
import Testing

/// The package's Tables/ folder, found from this file's path.
let tablesDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Tables")

let builtIn = TableLoader.builtIn.domains
let defaultDomain = builtIn["default"]!
let fiveP3D = builtIn["5p3d"]!

func cls(_ s: String) -> ServiceClass { ServiceClass(name: s)! }
func col(_ s: String) -> Color { Color(name: s)! }

/// Table 1 of the reference, transcribed row by row: DSCP → class, color.
/// A blank color cell in the reference repeats the color above it.
let table1: [(ClosedRange<Int>, String, String)] = [
    (0...7, "BE", "green"), (8...8, "AF1", "green"), (9...9, "BE", "green"), (10...10, "AF1", "green"),
    (11...11, "BE", "green"), (12...12, "AF1", "yellow"), (13...13, "BE", "green"), (14...14, "AF1", "red"),
    (15...15, "BE", "green"), (16...16, "AF2", "green"), (17...17, "BE", "green"), (18...18, "AF2", "green"),
    (19...19, "BE", "green"), (20...20, "AF2", "yellow"), (21...21, "BE", "green"), (22...22, "AF2", "red"),
    (23...23, "BE", "green"), (24...24, "AF3", "green"), (25...25, "BE", "green"), (26...26, "AF3", "green"),
    (27...27, "BE", "green"), (28...28, "AF3", "yellow"), (29...29, "BE", "green"), (30...30, "AF3", "red"),
    (31...31, "BE", "green"), (32...32, "AF4", "green"), (33...33, "BE", "green"), (34...34, "AF4", "green"),
    (35...35, "BE", "green"), (36...36, "AF4", "yellow"), (37...37, "BE", "green"), (38...38, "AF4", "red"),
    (39...39, "BE", "green"), (40...40, "EF", "green"), (41...45, "BE", "green"), (46...46, "EF", "green"),
    (47...47, "BE", "green"), (48...48, "CS6", "green"), (49...55, "BE", "green"), (56...56, "CS7", "green"),
    (57...63, "BE", "green"),
]

/// Table 2 (class, color → DSCP) as stated, plus the documented choice for
/// the unstated cells: BE, EF, CS6 and CS7 keep their green code point.
let table2: [(String, String, Int)] = [
    ("BE", "green", 0), ("AF1", "green", 10), ("AF1", "yellow", 12), ("AF1", "red", 14), ("AF2", "green", 18),
    ("AF2", "yellow", 20), ("AF2", "red", 22), ("AF3", "green", 26), ("AF3", "yellow", 28),
    ("AF3", "red", 30),
    ("AF4", "green", 34), ("AF4", "yellow", 36), ("AF4", "red", 38), ("EF", "green", 46),
    ("CS6", "green", 48),
    ("CS7", "green", 56),
    // Unstated in the reference; the documented choice.
    ("BE", "yellow", 0), ("BE", "red", 0), ("EF", "yellow", 46), ("EF", "red", 46), ("CS6", "yellow", 48),
    ("CS6", "red", 48), ("CS7", "yellow", 56), ("CS7", "red", 56),
]

/// Table 3: value → class, all green; table 4: class (any color) → value.
let table3: [(Int, String)] = [
    (0, "BE"), (1, "AF1"), (2, "AF2"), (3, "AF3"), (4, "AF4"), (5, "EF"), (6, "CS6"), (7, "CS7"),
]

/// Table 6: 5p3d 802.1p → class, color.
let table6: [(Int, String, String)] = [
    (0, "BE", "yellow"), (1, "BE", "green"), (2, "AF2", "yellow"), (3, "AF2", "green"), (4, "AF4", "yellow"),
    (5, "AF4", "green"), (6, "CS6", "green"), (7, "CS7", "green"),
]

/// Table 7: 5p3d class, color → 802.1p (every cell stated).
let table7: [(String, String, Int)] = [
    ("BE", "green", 1), ("BE", "yellow", 0), ("BE", "red", 0), ("AF1", "green", 1), ("AF1", "yellow", 0),
    ("AF1", "red", 0), ("AF2", "green", 3), ("AF2", "yellow", 2), ("AF2", "red", 2), ("AF3", "green", 3),
    ("AF3", "yellow", 2), ("AF3", "red", 2), ("AF4", "green", 5), ("AF4", "yellow", 4), ("AF4", "red", 4),
    ("EF", "green", 5), ("EF", "yellow", 4), ("EF", "red", 4), ("CS6", "green", 6), ("CS6", "yellow", 6),
    ("CS6", "red", 6), ("CS7", "green", 7), ("CS7", "yellow", 7), ("CS7", "red", 7),
]

@Suite("Built-in domains match the reference")
struct DomainTableTests {
    @Test(arguments: table1)
    func table1Row(range: ClosedRange<Int>, serviceClass: String, color: String) throws {
        for v in range {
            #expect(
                defaultDomain.classify(dscp: try DSCP(v)) == Treatment(cls(serviceClass), col(color)),
                "DSCP \(v)")
        }
    }

    @Test(arguments: table2)
    func table2Row(serviceClass: String, color: String, dscp: Int) {
        #expect(Int(defaultDomain.dscp(for: Treatment(cls(serviceClass), col(color))).rawValue) == dscp)
    }

    @Test(arguments: table3)
    func table3Row(value: Int, serviceClass: String) throws {
        let expected = Treatment(cls(serviceClass), .green)
        #expect(defaultDomain.classify(precedence: try IPPrecedence(value)) == expected)
        #expect(defaultDomain.classify(exp: try MPLSEXP(value)) == expected)
        #expect(defaultDomain.classify(pcp: try PCP(value)) == expected)
        #expect(defaultDomain.classify(pcp: try PCP(value), dei: true) == expected, "default ignores DEI")
    }

    @Test(arguments: table3)
    func table4Row(value: Int, serviceClass: String) {
        for c in Color.allCases {
            let t = Treatment(cls(serviceClass), c)
            #expect(Int(defaultDomain.precedence(for: t).rawValue) == value)
            #expect(Int(defaultDomain.exp(for: t).rawValue) == value)
            #expect(Int(defaultDomain.pcp(for: t).rawValue) == value)
            #expect(defaultDomain.dei(for: t) == false)
        }
    }

    /// Table 5: drop_eligible false ↔ green, true ↔ yellow; yellow and red → true.
    @Test func table5DropEligibility() throws {
        #expect(fiveP3D.dropEligibility == .color)
        #expect(fiveP3D.classify(pcp: try PCP(1), dei: false).color == .green)
        #expect(fiveP3D.classify(pcp: try PCP(1), dei: true).color == .yellow)
        #expect(fiveP3D.classify(pcp: try PCP(7), dei: true).color == .yellow)
        #expect(fiveP3D.classify(pcp: try PCP(0), dei: true).color == .yellow)
        for sc in ServiceClass.allCases {
            #expect(fiveP3D.dei(for: Treatment(sc, .green)) == false)
            #expect(fiveP3D.dei(for: Treatment(sc, .yellow)) == true)
            #expect(fiveP3D.dei(for: Treatment(sc, .red)) == true)
        }
    }

    @Test(arguments: table6)
    func table6Row(pcp: Int, serviceClass: String, color: String) throws {
        #expect(fiveP3D.classify(pcp: try PCP(pcp)) == Treatment(cls(serviceClass), col(color)))
    }

    @Test(arguments: table7)
    func table7Row(serviceClass: String, color: String, pcp: Int) {
        #expect(Int(fiveP3D.pcp(for: Treatment(cls(serviceClass), col(color))).rawValue) == pcp)
    }

    /// The reference defines 5p3d for 802.1p only; the other fields are the
    /// default domain's (documented in Tables/domains/5p3d.yaml).
    @Test(arguments: [Field.dscp, .ipPrecedence, .exp])
    func fiveP3DOtherFieldsFollowDefault(field: Field) {
        for v in 0..<field.valueCount {
            #expect(fiveP3D.classify(field, UInt8(v)) == defaultDomain.classify(field, UInt8(v)))
        }
        for t in Treatment.allCells {
            #expect(fiveP3D.mark(field, for: t) == defaultDomain.mark(field, for: t))
        }
    }

    @Test func editability() {
        #expect(defaultDomain.isEditable)
        #expect(!fiveP3D.isEditable)
        #expect(builtIn.names == ["default", "5p3d", "edge-cake"])
        #expect(builtIn["edge-cake"]?.isEditable == false)
    }

    /// Standard PHB code points survive inbound → outbound in the default
    /// domain; class selectors CS1–CS5 land on their class's green code point.
    @Test(arguments: [
        DSCP.df, .af11, .af12, .af13, .af21, .af22, .af23, .af31, .af32, .af33, .af41, .af42, .af43, .ef,
        .cs6, .cs7,
    ])
    func roundTrip(dscp: DSCP) {
        #expect(defaultDomain.dscp(for: defaultDomain.classify(dscp: dscp)) == dscp)
    }

    @Test(arguments: [
        (DSCP.cs1, DSCP.af11), (.cs2, .af21), (.cs3, .af31), (.cs4, .af41), (.cs5, .ef), (.le, .df),
        (.va, .df),
    ])
    func classSelectorsFold(dscp: DSCP, to expected: DSCP) {
        #expect(defaultDomain.dscp(for: defaultDomain.classify(dscp: dscp)) == expected)
    }

    /// The compiled-in tables are exactly the files in Tables/.
    @Test func embeddedTablesEqualFiles() throws {
        var onDisk: [String: String] = [:]
        let walker = FileManager.default.enumerator(at: tablesDirectory, includingPropertiesForKeys: nil)
        while let url = walker?.nextObject() as? URL {
            guard url.pathExtension == "yaml" else { continue }
            let relative = String(
                url.standardizedFileURL.path.dropFirst(tablesDirectory.standardizedFileURL.path.count + 1))
            onDisk[relative] = try String(contentsOf: url, encoding: .utf8)
        }
        let embedded = Dictionary(uniqueKeysWithValues: EmbeddedTables.files.map { ($0.path, $0.text) })
        #expect(Set(onDisk.keys) == Set(embedded.keys))
        #expect(onDisk.keys.contains("domains/default.yaml"))
        for (path, text) in onDisk {
            #expect(embedded[path] == text, "Tables/\(path) differs from the binary")
        }

        // And parsing the files from disk gives the same domains as the binary.
        let sources = onDisk.sorted { $0.key < $1.key }.map { TableSource(path: $0.key, text: $0.value) }
        let fromDisk = try TableLoader.load(sources, onto: TableSet(domains: DomainSet()), builtIn: true)
        // The domains are compiled to Swift arrays at build time: they must be
        // exactly what the loader makes of the files today.
        #expect(fromDisk.domains.names == EmbeddedTables.domains.map(\.name))
        #expect(fromDisk.domains.names == ["default", "5p3d", "edge-cake"])
        for d in EmbeddedTables.domains {
            let file = try #require(fromDisk.domains[d.name])
            #expect(file == d, "compiled-in domain '\(d.name)' differs from Tables/")
            #expect(file.hasSameMaps(as: d))
            #expect(builtIn[d.name] == d)
        }

        // The compiled-in cell positions are the loader's, file and line.
        let withPrefix = onDisk.filter { $0.key.hasPrefix("domains/") }.sorted { $0.key < $1.key }
            .map { TableSource(path: "Tables/" + $0.key, text: $0.value) }
        let positioned = try TableLoader.load(withPrefix, onto: TableSet(domains: DomainSet()), builtIn: true)
        for d in EmbeddedTables.domains {
            let fromFiles = try #require(positioned.provenance[d.name])
            let compiled = try #require(TableLoader.builtInDomains.provenance[d.name])
            #expect(compiled == fromFiles, "compiled-in positions of '\(d.name)' differ from Tables/")
            for cell in DomainCell.allInbound + DomainCell.allOutbound {
                #expect(compiled[cell] != nil, "\(d.name) \(cell) has no position")
            }
        }
        #expect(TableLoader.builtInDomains.provenance["5p3d"]?.imports == "default")
    }

    /// Every cited line of a built-in cell really holds that cell's key.
    @Test func builtInPositionsPointAtTheirKeys() throws {
        let provenance = try #require(TableLoader.builtInDomains.provenance["default"])
        let text = try String(
            contentsOf: tablesDirectory.appendingPathComponent("domains/default.yaml"), encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        for v in 0..<64 {
            let source = try #require(provenance[.inbound(.dscp, UInt8(v))])
            #expect(source.file == "Tables/domains/default.yaml")
            #expect(lines[source.line - 1].trimmingCharacters(in: .whitespaces).hasPrefix("\(v):"))
        }
        let p3 = try #require(TableLoader.builtInDomains.provenance["5p3d"])
        #expect(p3[.inbound(.dscp, 46)]?.file == "Tables/domains/default.yaml")
        #expect(p3[.inbound(.dot1p, 5)]?.file == "Tables/domains/5p3d.yaml")
        let p3text = try String(
            contentsOf: tablesDirectory.appendingPathComponent("domains/5p3d.yaml"), encoding: .utf8)
        let p3lines = p3text.split(separator: "\n", omittingEmptySubsequences: false)
        let af4 = try #require(p3[.outbound(.dot1p, Treatment(.af4, .yellow))])
        #expect(p3lines[af4.line - 1].trimmingCharacters(in: .whitespaces).hasPrefix("AF4:"))
    }
}
