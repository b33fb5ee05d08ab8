import ArgumentParser
import Foundation
import QoSMapCore
import QoSMapTables
import Testing

@testable import QoSMapCLI

/// The package root, found from this file's path.
let packageRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// The small user domains of the explain and diff tests: `edge` and `core`.
let policyTables = packageRoot + "/Tests/QoSMapCLITests/Golden/policy"

/// Runs a policy command in-process: its text, with the package root removed
/// from paths so that goldens do not depend on the checkout, and its status.
func policyRun(_ args: [String]) -> (status: Int32, out: String, err: String) {
    let strip = { (s: String) in s.replacingOccurrences(of: packageRoot + "/", with: "") }
    do {
        let command = try QoSMapCommand.parseAsRoot(args)
        if let c = command as? any StatusTextCommand {
            let (text, status) = try c.result()
            return (status, strip(text), "")
        }
        if let c = command as? any TextCommand { return (0, strip(try c.standardOutput()), "") }
        return (-1, "", "not a text command")
    } catch {
        let report = QoSMapCommand.report(for: error)
        return (report.status, "", strip(report.text) + "\n")
    }
}

/// Folds every run of two or more spaces into two.
func foldSpaces(_ s: String) -> String {
    var out = ""
    var spaces = 0
    for c in s {
        if c == " " {
            spaces += 1
            continue
        }
        if spaces > 0 { out += String(repeating: " ", count: min(spaces, 2)) }
        spaces = 0
        out.append(c)
    }
    return out + String(repeating: " ", count: min(spaces, 2))
}

let withPolicyTables = ["--no-system-tables", "--tables", policyTables]
let examplePath = ["--hop", "PE=dscp@edge:exp,8021p@core", "--hop", "P=exp@core:dscp@default"]
let threeHops = examplePath + ["--hop", "S=dscp:8021p@5p3d"]

/// The lines of a file that a `file:line` citation names (relative to the root).
func citedLine(_ citation: String) throws -> String {
    let colon = try #require(citation.lastIndex(of: ":"))
    let file = String(citation[..<colon])
    let line = try #require(Int(citation[citation.index(after: colon)...]))
    let path = file.hasPrefix("/") ? file : packageRoot + "/" + file
    let lines = try String(contentsOfFile: path, encoding: .utf8)
        .split(separator: "\n", omittingEmptySubsequences: false)
    try #require(line >= 1 && line <= lines.count, "\(citation) is past the end of the file")
    return lines[line - 1].trimmingCharacters(in: .whitespaces)
}

@Suite("qosmap diff, explain, show --overrides, lint")
struct PolicyToolsTests {
    @Test(arguments: [
        ("diff-default-edge.txt", ["diff", "default", "edge"], Int32(1)),
        ("diff-default-edge.json", ["diff", "default", "edge", "--json"], 1),
        ("diff-default-5p3d.txt", ["diff", "default", "5p3d"], 1),
        ("diff-default-default.txt", ["diff", "default", "default"], 0),
        ("diff-core-file.txt", ["diff", policyTables + "/core.yaml", "default", "--field", "exp"], 1),
    ])
    func diffGolden(file: String, args: [String], status: Int32) throws {
        let r = policyRun(args + withPolicyTables)
        #expect(r.status == status, "\(args)")
        #expect(r.err == "")
        try expectGolden(r.out, file)
    }

    @Test func diffExitCodes() {
        #expect(policyRun(["diff", "default", "default"] + withPolicyTables).status == 0)
        #expect(policyRun(["diff", "edge", "edge"] + withPolicyTables).status == 0)
        #expect(policyRun(["diff", "edge", "core"] + withPolicyTables).status == 1)
        // An unknown domain is a usage error; a broken file is bad data.
        let unknown = policyRun(["diff", "default", "gold"] + withPolicyTables)
        #expect(unknown.status == 64)
        #expect(unknown.err.contains("unknown domain 'gold'"))
        #expect(policyRun(["diff", "default", "/nonexistent/x.yaml"] + withPolicyTables).status == 65)
    }

    /// The diff lists exactly the cells whose values differ, each once.
    @Test func diffCountsEveryDifferentCell() throws {
        let set = try TableLoader.load(directories: [policyTables], systemDirectory: nil, profiles: false)
        let core = try #require(set.domains["core"])
        let base = try #require(set.domains["default"])
        let diff = DomainDiff(base, core)
        var expected = 0
        for cell in DomainCell.allInbound + DomainCell.allOutbound
        where base.value(of: cell) != core.value(of: cell) {
            expected += 1
        }
        // exp 7 inbound, and AF2's three colors outbound.
        #expect(expected == 4)
        #expect(diff.changes.count == expected)
        #expect(
            diff.changes.map(\.cell)
                == [
                    .inbound(.exp, 7), .outbound(.exp, Treatment(.af2, .green)),
                    .outbound(.exp, Treatment(.af2, .yellow)), .outbound(.exp, Treatment(.af2, .red)),
                ])
    }

    @Test(arguments: [
        ("explain-ef.txt", ["explain", "EF"] + examplePath),
        ("explain-ef.json", ["explain", "46", "--json"] + examplePath),
        ("explain-all-3hops.txt", ["explain", "--all"] + threeHops),
        ("explain-all-3hops.json", ["explain", "--all", "--json"] + threeHops),
        ("explain-pcp-5p3d-dei.txt", ["explain", "5", "--dei", "--hop", "8021p@5p3d:dscp,8021p@default"]),
    ])
    func explainGolden(file: String, args: [String]) throws {
        let r = policyRun(args + withPolicyTables)
        #expect(r.status == 0, "\(r.err)")
        try expectGolden(r.out, file)
    }

    @Test(arguments: [
        (
            ["explain", "46", "--hop", "tos@edge"],
            "qosmap: error: invalid hop 'tos@edge': unknown trusted field 'tos'; allowed: dscp, ip-precedence (prec), 8021p (pcp, dot1p), exp (mpls-exp)\n"
        ),
        (
            ["explain", "46", "--hop", "dscp@edge:vlan"],
            "qosmap: error: invalid hop 'dscp@edge:vlan': unknown written field 'vlan'; allowed: dscp, ip-precedence (prec), 8021p (pcp, dot1p), exp (mpls-exp), none\n"
        ),
        (
            ["explain", "46", "--hop", "dscp@edge:exp", "--hop", "8021p@core"],
            "qosmap: error: hop 2 trusts 8021p, which no earlier hop writes; carried: dscp, ip-precedence, exp\n"
        ),
        (
            ["explain", "46", "--hop", "dscp@gold"],
            "qosmap: error: unknown domain 'gold'; known domains: default, 5p3d, edge-cake, core, edge\n"
        ),
        (["explain", "--all", "46", "--hop", "dscp"], "qosmap: error: give VALUE or --all, not both\n"),
        (
            ["explain", "64", "--hop", "dscp"],
            "qosmap: error: dscp value 64 is out of range; allowed: 0-63\n"
        ),
    ])
    func explainUsageErrors(args: [String], message: String) {
        let r = policyRun(args + withPolicyTables)
        #expect(r.status == 64)
        #expect(r.err == message)
    }

    /// A hop from a qosmapd config and two interface names, then a `--hop`.
    @Test func explainFromDaemonConfig() throws {
        let config = packageRoot + "/Tests/QoSMapCLITests/Golden/policy-config/qosmapd.yaml"
        let base = ["explain", "VA", "--config", config] + withPolicyTables
        let r = policyRun(base + ["--ingress", "cust0", "--egress", "eth9", "--hop", "S=dscp:8021p@5p3d"])
        #expect(r.status == 0, "\(r.err)")
        try expectGolden(r.out, "explain-config-va.txt")
        // The customer port classifies in edge (VA as EF); an unlisted egress writes in default.
        #expect(r.out.contains("classified  EF/green      by Tests/QoSMapCLITests/Golden/policy/edge.yaml:7"))
        // qosmapd writes only DSCP, so a next hop cannot trust EXP.
        let exp = policyRun(base + ["--ingress", "cust0", "--egress", "core0", "--hop", "exp@core"])
        #expect(exp.status == 64)
        #expect(
            exp.err
                == "qosmap: error: hop 2 trusts exp, which no earlier hop writes; carried: dscp, ip-precedence\n"
        )
        let none = policyRun(base + ["--ingress", "mgmt0", "--egress", "core0"])
        #expect(none.status == 64)
        #expect(
            none.err
                == "qosmap: error: interface 'mgmt0' trusts none in the config and it has no flow rules: every packet is BE/green; nothing to trace\n"
        )
        #expect(policyRun(base + ["--ingress", "cust0"]).status == 64)
        #expect(
            policyRun(["explain", "1", "--config", "/nonexistent/q.yaml", "--ingress", "a", "--egress", "b"])
                .status == 65)
    }

    /// The three-hop path, with its merges and lost colors worked out
    /// by hand from edge.yaml, core.yaml and the built-in tables.
    @Test func threeHopAnalysisByHand() throws {
        let set = try TableLoader.load(directories: [policyTables], systemDirectory: nil, profiles: false)
        let d = set.domains
        let path = try PolicyPath([
            PolicyHop(
                label: "PE", trust: .dscp, inbound: d["edge"]!, outbound: d["core"]!, writes: [.exp, .dot1p]),
            PolicyHop(label: "P", trust: .exp, inbound: d["core"]!, outbound: d["default"]!, writes: [.dscp]),
            PolicyHop(
                label: "S", trust: .dscp, inbound: d["default"]!, outbound: d["5p3d"]!, writes: [.dot1p]),
        ])
        let a = path.analyze()
        // Hop 1 classifies in edge (default + VA as EF) and writes EXP in core
        // (AF2 folded into EXP 1): every class with more than one code point merges.
        let af1 = [8, 10, 12, 14]
        let af2 = [16, 18, 20, 22]
        let af3 = [24, 26, 28, 30]
        let af4 = [32, 34, 36, 38]
        let ef = [40, 44, 46]
        let named = Set(af1 + af2 + af3 + af4 + ef + [48, 56])
        let be = (0..<64).filter { !named.contains($0) }
        func merge(_ hop: Int, _ inputs: [Int], _ from: Int, _ to: String) -> String {
            "hop \(hop): \(inputs) from \(from) -> \(to)"
        }
        let merges = a.merges.map { merge($0.hop, $0.inputs.map(Int.init), $0.from, $0.to) }
        #expect(
            merges.filter { $0.hasPrefix("hop 1:") }
                == [
                    merge(1, be, be.count, "exp 0"), merge(1, (af1 + af2).sorted(), 8, "exp 1"),
                    merge(1, af3, 4, "exp 3"), merge(1, af4, 4, "exp 4"), merge(1, ef, 3, "exp 5"),
                ])
        // Hop 2: core reads EXP 7 as BE, so CS7 joins BE at DSCP 0.
        #expect(merges.filter { $0.hasPrefix("hop 2:") } == [merge(2, (be + [56]).sorted(), 2, "dscp 0")])
        // Hop 3: 5p3d folds AF1 into BE's PCP 1 and EF into AF4's PCP 5.
        #expect(
            merges.filter { $0.hasPrefix("hop 3:") }
                == [
                    merge(3, (be + af1 + af2 + [56]).sorted(), 2, "8021p 1"),
                    merge(3, (af4 + ef).sorted(), 2, "8021p 5"),
                ])
        // EXP carries no color: every yellow and red AF code point is green at hop 2.
        let colored = [12, 14, 20, 22, 28, 30, 36, 38]
        #expect(a.colorsLost.map { Int($0.input) } == colored)
        #expect(a.colorsLost.allSatisfy { $0.hop == 2 && $0.to.color == .green })
        #expect(a.bleached.map { [Int($0.input), $0.hop] } == [[56, 2]])
        #expect(a.classChanges.map { Int($0.input) } == af2 + [56])
        #expect(a.classChanges.allSatisfy { !$0.rises && $0.hop == 2 })
    }

    /// Every `file:line` that explain cites holds the cell's key.
    @Test func explainCitationsPointAtTheCell() throws {
        var checked = 0
        for v in 0..<64 {
            let r = policyRun(["explain", "\(v)", "--json"] + threeHops + withPolicyTables)
            #expect(r.status == 0)
            let json = try #require(
                try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any])
            let hops = try #require(json["hops"] as? [[String: Any]])
            for hop in hops {
                let arriving = try #require(hop["arriving"] as? [String: Any])
                let value = try #require(arriving["value"] as? Int)
                let line = try citedLine(try #require(hop["classifiedBy"] as? String))
                // A single-value key, or a `lo-hi` range holding the value.
                let key = line.split(separator: ":")[0]
                let bounds = key.split(separator: "-").compactMap { Int($0) }
                #expect(
                    bounds.count >= 1 && bounds.first! <= value && value <= bounds.last!,
                    "\(line) for \(value)")
                let treatment = try #require(hop["treatment"] as? [String: String])
                let written = try #require(hop["written"] as? [[String: Any]])
                for w in written {
                    let wline = try citedLine(try #require(w["source"] as? String))
                    #expect(wline.hasPrefix(treatment["serviceClass"]! + ":"), "\(wline)")
                    checked += 1
                }
                checked += 1
            }
        }
        #expect(checked == 64 * 3 + 64 * 4)
    }

    @Test(arguments: [
        ("show-5p3d-overrides.txt", ["show", "5p3d", "--overrides"]),
        ("show-5p3d-overrides.json", ["show", "5p3d", "--overrides", "--json"]),
        ("show-core-overrides.txt", ["show", "core", "--overrides"]),
        ("domains-policy.txt", ["domains"]),
        ("domains-policy.json", ["domains", "--json"]),
        (
            "lookup-egress-domain.txt",
            ["lookup", "dscp", "VA", "--domain", "edge", "--egress-domain", "5p3d"]
        ),
        (
            "lookup-egress-domain.json",
            ["lookup", "dscp", "VA", "--domain", "edge", "--egress-domain", "5p3d", "--json"]
        ),
    ])
    func showGolden(file: String, args: [String]) throws {
        let r = qosmapInProcessShow(args + withPolicyTables)
        #expect(r.status == 0, "\(r.err)")
        // The `domains` table is laid out before the checkout's path is cut
        // from its ORIGIN column, so its padding depends on where the package
        // is: compare it with runs of spaces folded.
        let out = file.hasPrefix("domains-") && file.hasSuffix(".txt") ? foldSpaces(r.out) : r.out
        try expectGolden(out, file)
    }

    /// A derived domain without a description of its own has none: the
    /// parent's would name the wrong domain.
    @Test func derivedDomainDoesNotInheritTheDescription() throws {
        let dir = try lintFixture(["domain: quiet\nimport: default\n"])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let set = try TableLoader.load(directories: [dir], systemDirectory: nil, profiles: false)
        #expect(set.domains["quiet"]?.summary == "")
        #expect(set.provenance["quiet"]?.imports == "default")
        let r = qosmapInProcessShow(["show", "default", "--overrides", "--no-system-tables"])
        #expect(r.status == 64)
        #expect(r.err.contains("domain 'default' imports nothing"))
    }

    /// A file that overrides the editable `default` lists its cells against
    /// the built-in, and lint then fails on what it changed.
    @Test func overrideOfDefault() throws {
        let dir = try lintFixture(["domain: default\ninbound:\n  dscp:\n    44: [EF, green]\n"])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let show = qosmapInProcessShow(["show", "default", "--overrides", "--tables", dir])
        #expect(show.status == 0, "\(show.err)")
        #expect(
            show.out
                == "domain default (\(dir)/faulty.yaml) imports default: 1 cell(s) overridden\n"
                + "  inbound dscp 44: EF/green (was BE/green)  [\(dir)/faulty.yaml:4]\n")
        // The overridden cell's old value cites the built-in file, not the override.
        let json = qosmapInProcessShow(["show", "default", "--overrides", "--json", "--tables", dir])
        // The line of DSCP 44's cell in the built-in file, found by reading it.
        let text = try String(contentsOfFile: packageRoot + "/Tables/domains/default.yaml", encoding: .utf8)
        let line44 =
            try #require(
                text.split(separator: "\n", omittingEmptySubsequences: false).firstIndex {
                    $0.trimmingCharacters(in: .whitespaces).hasPrefix("44:")
                }) + 1
        #expect(json.out.contains("\"sourceA\" : \"Tables/domains/default.yaml:\(line44)\""))
        #expect(json.out.contains("\"sourceB\" : \"\(dir)/faulty.yaml:4\""))
        #expect(try citedLine("Tables/domains/default.yaml:\(line44)").hasPrefix("44:"))
        let lint = policyRun(["lint", "default", "--no-system-tables", "--tables", dir])
        #expect(lint.status == 1)
        #expect(!lint.out.contains("va-with-ef"))
        #expect(lint.out.contains("\(dir)/faulty.yaml:4: info: inbound dscp 44 is EF/green"))
    }

    @Test(arguments: [
        ("lint-default.txt", ["lint", "default"], Int32(0)),
        ("lint-default.json", ["lint", "default", "--json"], 0),
        ("lint-5p3d.txt", ["lint", "5p3d"], 1),
        ("lint-edge.txt", ["lint", "edge"], 1),
    ])
    func lintGolden(file: String, args: [String], status: Int32) throws {
        let r = policyRun(args + withPolicyTables)
        #expect(r.status == status)
        #expect(r.err == "")
        try expectGolden(r.out, file)
    }

    /// One hand-made faulty domain per rule: the rule fires, cites the
    /// standard, and points at the line holding the faulty cell.
    @Test(arguments: [
        ("ef-highest", "RFC 3246 §2", "  dscp:\n    46: [AF4, green]\n", "46:"),
        ("af-drop-order", "RFC 2597 §2", "  dscp:\n    10: [AF1, yellow]\n    12: [AF1, green]\n", "12:"),
        ("le-below-be", "RFC 8622 §4", "  dscp:\n    1: [AF1, green]\n", "1:"),
        ("cs6-cs7-kept", "RFC 2474 §4.2.2.2", "  dscp:\n    48: [BE, green]\n", "48:"),
        ("va-with-ef", "RFC 5865 §4", "  dscp:\n    44: [AF4, green]\n", "44:"),
        ("round-trip", "RFC 2474 §3", "outbound:\n  exp:\n    AF3: 2\n", "AF3:"),
    ])
    func lintRule(rule: String, reference: String, cells: String, key: String) throws {
        let body = cells.hasPrefix("outbound") ? cells : "inbound:\n" + cells
        let dir = try lintFixture(["# faulty: \(rule)\ndomain: faulty\nimport: default\n" + body])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = policyRun(["lint", "faulty", "--json", "--no-system-tables", "--tables", dir])
        #expect(r.status == 1)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any])
        #expect(json["clean"] as? Bool == false)
        let findings = try #require(json["findings"] as? [[String: Any]])
        let hit = try #require(findings.first { $0["rule"] as? String == rule }, "\(rule) did not fire")
        #expect(hit["reference"] as? String == reference)
        #expect(hit["referenceChoice"] as? Bool == false)
        let source = try #require(hit["source"] as? String)
        #expect(source.hasPrefix(dir + "/faulty.yaml:"))
        #expect(try citedLine(source).hasPrefix(key), "\(source)")
        // The changed cell also differs from the reference's default domain.
        #expect(
            findings.contains {
                $0["rule"] as? String == "reference-default" && $0["source"] as? String == source
            })
        // And the built-in default does not fire this rule outside its documented choices.
        #expect(
            DomainLint.lint(
                TableLoader.builtIn.domains["default"]!, reference: TableLoader.builtIn.domains["default"]!
            )
            .allSatisfy { $0.isReferenceChoice })
    }
}

/// Writes table files into a fresh directory and returns its path.
func lintFixture(_ files: [String]) throws -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-pol15-\(UUID())").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    for (i, text) in files.enumerated() {
        let name = i == 0 ? "faulty.yaml" : "f\(i).yaml"
        try text.write(toFile: dir + "/" + name, atomically: true, encoding: .utf8)
    }
    return dir
}

/// `show` and `domains` print directly, so they run as the built `qosmap`.
func qosmapInProcessShow(_ args: [String]) -> (status: Int32, out: String, err: String) {
    let strip = { (s: String) in s.replacingOccurrences(of: packageRoot + "/", with: "") }
    guard let r = try? qosmap(args) else { return (-1, "", "qosmap did not run") }
    return (r.status, strip(r.out), strip(r.err))
}

/// Issue 25 item 2: `explain VALUE` with no --hop and no --config traces one
/// hop that trusts DSCP in the default domain (or --domain) and writes it
/// back, as `lookup` does; the help's first example shows it.
@Suite("qosmap explain: the default hop")
struct ExplainDefaultHopTests {
    @Test(arguments: [
        (["explain", "46"], ["explain", "46", "--hop", "dscp@default:dscp@default"]),
        (["explain", "AF11", "--json"], ["explain", "AF11", "--json", "--hop", "dscp:dscp"]),
        (["explain", "46", "--domain", "edge"], ["explain", "46", "--hop", "dscp@edge:dscp@edge"]),
        (["explain", "--all", "--domain", "5p3d"], ["explain", "--all", "--hop", "dscp@5p3d:dscp"]),
    ])
    func noHopIsOneDSCPHop(args: [String], same: [String]) throws {
        let r = policyRun(args + withPolicyTables)
        #expect(r.status == 0, "\(r.err)")
        let expected = policyRun(same + withPolicyTables)
        #expect(expected.status == 0, "\(expected.err)")
        #expect(r.out == expected.out)
        let name = args.contains("edge") ? "edge" : args.contains("5p3d") ? "5p3d" : "default"
        #expect(r.out.contains(args.contains("--json") ? "\"\(name)\"" : "in \(name)"), "\(r.out)")
    }

    @Test func domainAppliesOnlyWithoutHops() {
        let r = policyRun(["explain", "46", "--domain", "edge", "--hop", "dscp"] + withPolicyTables)
        #expect(r.status == 64)
        #expect(
            r.err
                == "qosmap: error: --domain applies only without --hop and --config (a hop names its domains: dscp@DOMAIN)\n"
        )
    }

    @Test func helpShowsTheDefaultFirst() throws {
        let help = QoSMapCommand.Explain.helpMessage()
        let examples = try #require(help.range(of: "Examples:"))
        let first = help[examples.upperBound...].split(separator: "\n").first {
            !$0.allSatisfy(\.isWhitespace)
        }
        #expect(first?.trimmingCharacters(in: .whitespaces) == "qosmap explain 46")
    }
}
