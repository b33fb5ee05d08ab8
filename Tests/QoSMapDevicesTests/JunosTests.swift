import Foundation
import QoSMapCore
import QoSMapDevices
import QoSMapTables
import Testing

// The Junos statement shapes the exporter may write, each checked against
// Juniper's documentation (the page is named beside its shape):
//
// - comment lines, `#` first on the line:
//   https://juniper.net/documentation/en_US/junos13.2/topics/concept/junos-cli-comment-character-usage-overview.html
// - `set class-of-service tri-color` (needed on M320/MX/T with Enhanced II FPCs
//   before medium loss priorities are configurable):
//   https://juniper.net/documentation/en_US/junos13.2/topics/reference/configuration-statement/tri-color-edit-cos.html
// - `forwarding-classes class NAME queue-num N` (N 0-15):
//   https://www.juniper.net/documentation/us/en/software/junos/traffic-mgmt-nfx/cos/topics/ref/statement/class-edit-class-of-service.html
//   https://www.juniper.net/documentation/software/topics/reference/configuration-statement/class-edit-cos-forwarding-classes.html
// - `classifiers TYPE NAME forwarding-class FC loss-priority LP code-points [ BITS … ]`,
//   TYPE dscp | dscp-ipv6 | exp | ieee-802.1 | ieee-802.1ad | inet-precedence:
//   https://juniper.net/documentation/en_US/junos13.1/topics/usage-guidelines/cos-defining-classifiers.html
//   https://juniper.net/documentation/en_US/junos13.2/topics/reference/configuration-statement/code-points-edit-cos-classifiers.html
//   https://www.juniper.net/documentation/software/topics/reference/configuration-statement/loss-priority-edit-cos-classifiers.html
//   (802.1ad, 4-bit PCP+DEI code points)
//   https://www.juniper.net/documentation/us/en/software/junos/cos/topics/task/cos-configuring-and-applying-ieee-802-1ad-classifiers.html
//   https://juniper.net/documentation/en_US/junos13.2/topics/reference/general/default-802-1ad-table-cos-config-guide.html
// - `rewrite-rules TYPE NAME forwarding-class FC loss-priority LP code-point BITS`:
//   https://www.juniper.net/documentation/us/en/software/junos/cos/topics/ref/statement/rewrite-rules-edit-cos.html
//   https://juniper.net/documentation/us/en/software/junos/cli-reference/topics/ref/statement/class-of-service-edit-loss-priority-rewrite-rules.html
// - `interfaces IF unit 0 classifiers TYPE NAME`, `… rewrite-rules (dscp | dscp-ipv6) NAME`:
//   https://www.juniper.net/documentation/en_US/release-independent/downloads/juniper-dvd-junos94.tgz:/tmp/tarfile_extract_vl54e3kc/dvd-sw/techpubs/software/swconfig-cos/classifiers.html
//   https://www.juniper.net/documentation/us/en/software/junos/cos/topics/concept/cos-applying-rewrite-rules-to-output-logical-interfaces.html
// - `interfaces IF unit 0 forwarding-class FC` (fixed classifier):
//   https://juniper.net/documentation/us/en/software/junos/cli-reference/topics/ref/statement/forwarding-class-edit-class-of-service.html
// - default code-point aliases (import):
//   https://juniper.net/documentation/en_US/junos13.1/topics/reference/general/default-code-point-aliases-table-cos-config-guide.html

/// The grammar of the lines the exporter writes: one regular expression per
/// statement shape (the pages above), the whole line must match one.
private enum JunosGrammar {
    static let name = #"[A-Za-z][A-Za-z0-9_.-]*"#
    static let fc = #"(be|af1|af2|af3|af4|ef|cs6|cs7)"#
    static let lp = #"(low|medium-high|high)"#
    static let iface = #"[A-Za-z0-9_./:-]+"#

    static func list(_ bits: Int) -> String { #"\[( [01]{\#(bits)})+ \]"# }

    static let patterns: [(String, String)] = [
        ("comment", #"# .*"#),
        ("tri-color", #"set class-of-service tri-color"#),
        ("forwarding class", #"set class-of-service forwarding-classes class \#(fc) queue-num [0-7]"#),
        (
            "6-bit classifier",
            #"set class-of-service classifiers (dscp|dscp-ipv6) \#(name) forwarding-class \#(fc) loss-priority \#(lp) code-points \#(list(6))"#
        ),
        (
            "3-bit classifier",
            #"set class-of-service classifiers (ieee-802\.1|exp|inet-precedence) \#(name) forwarding-class \#(fc) loss-priority \#(lp) code-points \#(list(3))"#
        ),
        (
            "802.1ad classifier",
            #"set class-of-service classifiers ieee-802\.1ad \#(name) forwarding-class \#(fc) loss-priority \#(lp) code-points \#(list(4))"#
        ),
        (
            "6-bit rewrite",
            #"set class-of-service rewrite-rules (dscp|dscp-ipv6) \#(name) forwarding-class \#(fc) loss-priority \#(lp) code-point [01]{6}"#
        ),
        (
            "3-bit rewrite",
            #"set class-of-service rewrite-rules (ieee-802\.1|exp|inet-precedence) \#(name) forwarding-class \#(fc) loss-priority \#(lp) code-point [01]{3}"#
        ),
        (
            "802.1ad rewrite",
            #"set class-of-service rewrite-rules ieee-802\.1ad \#(name) forwarding-class \#(fc) loss-priority \#(lp) code-point [01]{4}"#
        ),
        (
            "interface classifier",
            #"set class-of-service interfaces \#(iface) unit 0 classifiers (dscp|dscp-ipv6|ieee-802\.1|ieee-802\.1ad|exp|inet-precedence) \#(name)"#
        ),
        (
            "interface rewrite",
            #"set class-of-service interfaces \#(iface) unit 0 rewrite-rules (dscp|dscp-ipv6) \#(name)"#
        ),
        ("fixed classifier", #"set class-of-service interfaces \#(iface) unit 0 forwarding-class \#(fc)"#),
    ]

    /// A matcher giving the shape a line has, or nil (regexes compiled once).
    static func matcher() throws -> (String) -> String? {
        let compiled = try patterns.map { ($0.0, try Regex($0.1)) }
        return { line in compiled.first { (try? $0.1.wholeMatch(in: line)) != nil }?.0 }
    }
}

/// Paths and loaders shared by the Junos tests.
private enum JunosData {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path
    static let data = root + "/Data"
    static let pe1 = data + "/junos/pe1.conf"

    static func text(_ path: String) throws -> String { try String(contentsOfFile: path, encoding: .utf8) }

    /// The built-ins with `site` loaded onto them.
    static func tables() throws -> TableSet { try DeviceFixtures.tables() }

    static func domain(_ name: String) throws -> DSDomain { try DeviceFixtures.domain(name) }

    /// The request `--config Data/config/qosmapd.yaml` gives (the CLI test
    /// `JunosDeviceDiffTests.exportConfigMatchesGolden` checks that it does).
    static func configRequest() throws -> ExportRequest { try DeviceFixtures.configRequest("junos") }

    /// Compares with Data/golden/NAME, or writes it with QOSMAP_UPDATE_GOLDEN=1.
    static func golden(_ actual: String, _ name: String, sourceLocation: SourceLocation = #_sourceLocation)
        throws
    {
        let path = data + "/golden/" + name
        if ProcessInfo.processInfo.environment["QOSMAP_UPDATE_GOLDEN"] == "1" {
            try FileManager.default.createDirectory(
                atPath: data + "/golden", withIntermediateDirectories: true)
            try actual.write(toFile: path, atomically: true, encoding: .utf8)
            return
        }
        #expect(actual == (try text(path)), "golden \(name) differs", sourceLocation: sourceLocation)
    }

    static let goldens = ["junos-default.txt", "junos-5p3d.txt", "junos-site.txt", "junos-config.txt"]
}

@Suite("Junos format")
struct JunosTests {
    // MARK: Export

    @Test(arguments: ["default", "5p3d", "site"])
    func domainGolden(name: String) throws {
        let export = try JunosFormat.export(
            ExportRequest(
                domains: [try JunosData.domain(name)], command: "qosmap export junos --domain \(name)"))
        #expect(export.losses.isEmpty)
        try JunosData.golden(export.text, "junos-\(name).txt")
    }

    @Test func configGolden() throws {
        let export = try JunosFormat.export(try JunosData.configRequest())
        #expect(export.losses.isEmpty)
        try JunosData.golden(export.text, "junos-config.txt")
        let lines = export.text.split(separator: "\n").map(String.init)
        #expect(
            lines.contains("set class-of-service interfaces Ethernet0 unit 0 classifiers dscp qosmap-site"))
        #expect(
            lines.contains(
                "set class-of-service interfaces Ethernet4 unit 0 rewrite-rules dscp-ipv6 qosmap-5p3d"))
        #expect(lines.contains("set class-of-service interfaces Ethernet8 unit 0 forwarding-class be"))
        #expect(!lines.contains { $0.contains("Ethernet8 unit 0 classifiers") })
    }

    /// Every golden line has one documented statement shape, and the golden
    /// is coherent: forwarding classes defined before use, medium-high only
    /// with tri-color, each code point once per classifier, each rewrite cell
    /// once, bound maps defined.
    @Test(arguments: JunosData.goldens)
    func goldenLinesMatchDocumentedSyntax(file: String) throws {
        let lines = try JunosData.text(JunosData.data + "/golden/" + file).split(separator: "\n").map(
            String.init)
        try #require(!lines.isEmpty)
        let shapeOf = try JunosGrammar.matcher()
        var definedClasses: Set<String> = []
        var triColor = false
        var seenPoints: Set<String> = []
        var seenRewrites: Set<String> = []
        var maps: Set<String> = []
        for (i, line) in lines.enumerated() {
            let shape = shapeOf(line)
            #expect(shape != nil, "\(file):\(i + 1): no documented shape: \(line)")
            let w = line.split(separator: " ").map(String.init)
            switch shape {
            case "tri-color": triColor = true
            case "forwarding class": definedClasses.insert(w[4])
            case let s? where s.hasSuffix("classifier") && w[2] == "classifiers":
                #expect(definedClasses.contains(w[6]), "\(file):\(i + 1): class \(w[6]) not defined")
                #expect(w[8] != "medium-high" || triColor, "\(file):\(i + 1): medium-high before tri-color")
                maps.insert("classifiers \(w[3]) \(w[4])")
                for point in w[11..<(w.count - 1)] {
                    #expect(
                        seenPoints.insert("\(w[3]) \(w[4]) \(point)").inserted,
                        "\(file):\(i + 1): \(w[3]) \(point) classified twice")
                }
            case let s? where s.hasSuffix("rewrite") && w[2] == "rewrite-rules":
                #expect(definedClasses.contains(w[6]))
                #expect(w[8] != "medium-high" || triColor)
                maps.insert("rewrite-rules \(w[3]) \(w[4])")
                #expect(seenRewrites.insert("\(w[3]) \(w[4]) \(w[6]) \(w[8])").inserted)
            case "interface classifier", "interface rewrite":
                #expect(maps.contains("\(w[6]) \(w[7]) \(w[8])"), "\(file):\(i + 1): binds an undefined map")
            default: break
            }
        }
        // Every classifier covers all its code points; every rewrite rule all 24 cells.
        for map in maps {
            let parts = map.split(separator: " ")
            let type = try #require(JunosCodeType(rawValue: String(parts[1])))
            if parts[0] == "classifiers" {
                #expect(
                    seenPoints.filter { $0.hasPrefix("\(parts[1]) \(parts[2]) ") }.count == 1 << type.bitCount
                )
            } else {
                #expect(seenRewrites.filter { $0.hasPrefix("\(parts[1]) \(parts[2]) ") }.count == 24)
            }
        }
    }

    /// The grammar check can fail: lines the exporter must never write are refused.
    @Test(arguments: [
        "set class-of-service classifiers dscp qosmap-x forwarding-class be loss-priority low code-points [ 00000 ]",
        "set class-of-service classifiers dscp qosmap-x forwarding-class be loss-priority medium-low code-points [ 000000 ]",
        "set class-of-service rewrite-rules exp qosmap-x forwarding-class be loss-priority low code-point 0000",
        "set class-of-service classifiers ieee-802.1ad qosmap-x forwarding-class xx loss-priority low code-points [ 0000 ]",
        "set class-of-service interfaces ge-0/0/0 unit 0 rewrite-rules exp-push-push-push qosmap-x",
        "set class-of-service forwarding-classes class be queue-num 8",
    ])
    func grammarRefusesBadLines(line: String) throws {
        #expect(try JunosGrammar.matcher()(line) == nil)
    }

    @Test func ipPrecedenceTrustIsReportedAsLoss() throws {
        let d = try JunosData.domain("default")
        let export = try JunosFormat.export(
            ExportRequest(
                domains: [d],
                bindings: [
                    DeviceBinding(
                        interface: "ge-0/0/1", trust: .ipPrecedence, inboundDomain: "default",
                        outboundDomain: "default", rewrite: false)
                ]
            ))
        #expect(export.losses.count == 1)
        #expect(export.losses.first?.what == "trust ip-precedence on ge-0/0/1")
        #expect(
            export.text.contains(
                "set class-of-service interfaces ge-0/0/1 unit 0 classifiers inet-precedence qosmap-default\n"
            ))
        #expect(!export.text.contains("rewrite-rules dscp qosmap-default\n"))
    }

    @Test func dot1pTrustUses8021adForColorDomains() throws {
        let site = try JunosData.domain("site")
        let def = try JunosData.domain("default")
        try #require(site.dropEligibility == .color && def.dropEligibility == .ignore)
        let export = try JunosFormat.export(
            ExportRequest(
                domains: [site, def],
                bindings: [
                    DeviceBinding(
                        interface: "xe-0/0/0", trust: .dot1p, inboundDomain: "site", outboundDomain: "site"),
                    DeviceBinding(
                        interface: "xe-0/0/1", trust: .dot1p, inboundDomain: "default",
                        outboundDomain: "default"),
                ]))
        #expect(export.text.contains("xe-0/0/0 unit 0 classifiers ieee-802.1ad qosmap-site\n"))
        #expect(export.text.contains("xe-0/0/1 unit 0 classifiers ieee-802.1 qosmap-default\n"))
        #expect(!export.text.contains("classifiers ieee-802.1ad qosmap-default "))
    }

    @Test func unknownBindingDomainIsAnError() throws {
        let d = try JunosData.domain("default")
        #expect(throws: DeviceFormatError.self) {
            try JunosFormat.export(
                ExportRequest(
                    domains: [d],
                    bindings: [
                        DeviceBinding(
                            interface: "ge-0/0/1", trust: .dscp, inboundDomain: "nope",
                            outboundDomain: "default")
                    ]))
        }
    }

    // MARK: Round trip

    /// export → parse → completed over a different random base gives the
    /// original back: Junos holds every cell and the DEI policy.
    @Test(arguments: RandomDomain.seeds)
    func roundTrip(seed: UInt64) throws {
        let original = RandomDomain.make(name: "r\(seed)", seed: seed)
        let base = RandomDomain.make(name: "base", seed: seed &+ 0x5555)
        let text = try JunosFormat.export(ExportRequest(domains: [original])).text
        let imported = try JunosFormat.parse(text, file: "r.conf")
        try #require(imported.count == 1)
        let one = imported[0]
        #expect(one.name == original.name)
        #expect(one.unmapped.isEmpty, "\(one.unmapped)")
        let (back, notes) = one.completed(base: base)
        #expect(notes.isEmpty, "cells not held: \(notes)")
        #expect(back.hasSameMaps(as: original))
        #expect(back.dropEligibility == original.dropEligibility)
    }

    @Test(arguments: ["default", "5p3d", "site"])
    func builtInRoundTrip(name: String) throws {
        let d = try JunosData.domain(name)
        let text = try JunosFormat.export(ExportRequest(domains: [d])).text
        let (back, notes) = try #require(try JunosFormat.parse(text, file: "x").first).completed(
            base: RandomDomain.make(seed: 7))
        #expect(notes.isEmpty)
        #expect(back.hasSameMaps(as: d))
    }

    /// Several domains in one file come back as one family each, by name.
    @Test func familiesByName() throws {
        let request = try JunosData.configRequest()
        let imported = try JunosFormat.parse(try JunosFormat.export(request).text, file: "c.conf")
        #expect(imported.map(\.name) == ["default", "site", "5p3d"])
        for d in request.domains {
            let one = try #require(imported.first { $0.name == d.name })
            #expect(one.completed(base: RandomDomain.make(seed: 3)).domain.hasSameMaps(as: d))
        }
    }

    // MARK: Import of a hand-written configuration

    /// pe1.conf: one family `PE1`, aliases and custom aliases resolved, the
    /// deliberate mismatch (DSCP 46 → af4) and nothing else against `site`.
    @Test func handWrittenPE1() throws {
        let site = try JunosData.domain("site")
        let imported = try JunosFormat.parse(try JunosData.text(JunosData.pe1), file: "pe1.conf")
        try #require(imported.count == 1)
        let pe1 = imported[0]
        #expect(pe1.name == "PE1")
        #expect(pe1.unmapped.isEmpty, "\(pe1.unmapped)")
        #expect(pe1.dropEligibility == .color)
        #expect(pe1.inbound[.dscp]?.count == 64)
        #expect(pe1.inbound[.dscp]?[46] == .init(.af4, .green))
        #expect(pe1.inbound[.dscp]?[44] == .init(.ef, .green))  // custom alias voice-admit
        #expect(pe1.inbound[.dscp]?[1] == .init(.be, .yellow))  // custom alias le
        #expect(pe1.inbound[.dot1p]?[1] == .init(.be, .yellow))  // 802.1ad be1 (0010)
        #expect(pe1.inbound[.ipPrecedence] == nil)
        let (d, _) = pe1.completed(base: site)
        var differing: [String] = []
        for field in Field.allCases {
            for v in 0..<field.valueCount where d.classify(field, UInt8(v)) != site.classify(field, UInt8(v))
            {
                differing.append("in \(field) \(v)")
            }
            for t in Treatment.allCells where d.mark(field, for: t) != site.mark(field, for: t) {
                differing.append("out \(field) \(t)")
            }
        }
        #expect(differing == ["in dscp 46"])
        #expect(d.dropEligibility == site.dropEligibility)
    }

    @Test func handWrittenGrouping() {
        #expect(JunosNames.family("qosmap-site") == "site")
        #expect(JunosNames.family("qosmap-x-dscp") == "x-dscp")
        #expect(JunosNames.family("PE1-DSCP") == "PE1")
        #expect(JunosNames.family("PE1-DSCP-IPV6") == "PE1")
        #expect(JunosNames.family("pe1-8021ad-rw") == "pe1")
        #expect(JunosNames.family("core-exp-rewrite") == "core")
        #expect(JunosNames.family("plain") == "plain")
        #expect(JunosNames.family("-dscp") == "-dscp")
    }

    @Test func unknownClassesAndMediumLowAreReported() throws {
        let text = """
            set class-of-service classifiers dscp cust-dscp forwarding-class voice loss-priority low code-points ef
            set class-of-service classifiers dscp cust-dscp forwarding-class best-effort loss-priority medium-low code-points be
            set class-of-service classifiers dscp cust-dscp forwarding-class network-control loss-priority low code-points [ nc1 nc2 ]
            set class-of-service rewrite-rules dscp cust-rw forwarding-class expedited-forwarding loss-priority low code-point ef
            set class-of-service rewrite-rules dscp cust-rw forwarding-class expedited-forwarding loss-priority medium-low code-point af41
            """
        let imported = try JunosFormat.parse(text, file: "c.conf")
        try #require(imported.count == 1)
        let c = imported[0]
        #expect(c.name == "cust")
        #expect(c.inbound[.dscp]?[46] == nil)
        #expect(c.inbound[.dscp]?[0] == .init(.be, .yellow))
        #expect(c.inbound[.dscp]?[48] == .init(.cs6, .green))
        #expect(c.outbound[.dscp]?[Treatment(.ef, .green)] == 46)
        #expect(c.outbound[.dscp]?.count == 1)
        #expect(c.unmapped.count == 3)
        #expect(c.unmapped[0].hasPrefix("c.conf:1: forwarding class 'voice' has no qosmap class"))
        #expect(c.unmapped[1] == "c.conf:2: loss-priority medium-low has no qosmap color; read as yellow")
        #expect(c.unmapped[2].hasPrefix("c.conf:5: rewrite for loss-priority medium-low"))
        #expect(c.dropEligibility == nil)
    }

    @Test func differingIPv6ClassifierIsReported() throws {
        let text = """
            set class-of-service classifiers dscp A forwarding-class ef loss-priority low code-points ef
            set class-of-service classifiers dscp-ipv6 A forwarding-class af4 loss-priority low code-points ef
            """
        let a = try #require(try JunosFormat.parse(text, file: "a.conf").first)
        #expect(a.inbound[.dscp]?[46] == .init(.ef, .green))
        #expect(
            a.unmapped == [
                "a.conf:2: dscp-ipv6 classifier A differs from dscp classifier A at 1 code points; qosmap has one dscp map: the dscp one is imported"
            ])
    }

    @Test func deiPolicyFromPlain8021AndInconsistentAd() throws {
        let plain = try #require(
            try JunosFormat.parse(
                "set class-of-service classifiers ieee-802.1 P forwarding-class be loss-priority low code-points 000",
                file: "p"
            ).first)
        #expect(plain.dropEligibility == .ignore)
        let odd = try #require(
            try JunosFormat.parse(
                """
                set class-of-service classifiers ieee-802.1ad Q forwarding-class be loss-priority low code-points 0000
                set class-of-service classifiers ieee-802.1ad Q forwarding-class af1 loss-priority low code-points 0001
                """, file: "q"
            ).first)
        #expect(odd.dropEligibility == nil)
        #expect(odd.unmapped.first?.hasPrefix("q:2: ieee-802.1ad maps use DEI neither") == true)
    }

    // MARK: Import errors

    @Test(arguments: [
        (
            "set class-of-service classifiers dscpp X forwarding-class be loss-priority low code-points ef",
            "f.conf:1:34: unknown classifier type 'dscpp'; allowed: dscp, dscp-ipv6, ieee-802.1, ieee-802.1ad, exp, inet-precedence"
        ),
        (
            "set class-of-service classifiers dscp X forwarding-class be loss-priority lowish code-points ef",
            "f.conf:1:75: unknown loss priority 'lowish'; allowed: low, medium-low, medium-high, high"
        ),
        (
            "set class-of-service classifiers exp X forwarding-class be loss-priority low code-points [ 000 0100 ]",
            "f.conf:1:96: invalid exp code point '0100'; allowed: 3 binary digits or an alias (af11, af12, be, be1, cs6, cs7, ef, ef1, nc1, nc2)"
        ),
        (
            "set class-of-service classifiers dscp X forwarding-class be loss-priority low code-points [ 000000",
            "f.conf:1:99: missing ']' after '000000'"
        ),
        (
            "set class-of-service classifiers dscp X forwarding-class be loss-priority low codepoints ef",
            "f.conf:1:79: unexpected 'codepoints'; allowed: code-points"
        ),
        (
            "set class-of-service rewrite-rules dscp X forwarding-class be loss-priority low code-point ef extra",
            "f.conf:1:95: unexpected 'extra' after the code point; allowed: end of line"
        ),
        (
            "delete class-of-service",
            "f.conf:1:1: unexpected 'delete'; allowed: set and deactivate statements and # comments"
        ),
        (
            "set interfaces ge-0/0/0 description \"open",
            "f.conf:1:37: unterminated quoted name; allowed: \"…\" on one line"
        ),
    ])
    func importErrors(text: String, message: String) {
        #expect(throws: DeviceFormatError(message)) { try JunosFormat.parse(text, file: "f.conf") }
    }

    @Test func duplicateCodePointIsAnErrorNamingTheFirstLine() {
        let text = """
            # two lines classify ef
            set class-of-service classifiers dscp X forwarding-class ef loss-priority low code-points ef
            set class-of-service classifiers dscp X forwarding-class af4 loss-priority low code-points [ 101110 ]
            """
        #expect(
            throws: DeviceFormatError(
                "f.conf:3:94: dscp code point '101110' is already classified at line 2; allowed: each code point once"
            )
        ) { try JunosFormat.parse(text, file: "f.conf") }
    }

    /// CRLF line ends count as one line each; statements under a
    /// `deactivate` are not read (as `display set` shows inactive parts).
    @Test func crlfAndDeactivatedStatements() throws {
        let text = [
            "# pe3",
            "set class-of-service classifiers dscp A forwarding-class ef loss-priority low code-points ef",
            "set class-of-service classifiers dscp B forwarding-class af4 loss-priority low code-points ef",
            "set class-of-service classifiers dscp A forwarding-class af1 loss-priority low code-points af11",
            "deactivate class-of-service classifiers dscp B",
            "deactivate class-of-service classifiers dscp A forwarding-class af1",
            "set class-of-service classifiers dscp A forwarding-class bogus loss-priority low code-points [ 000000 ]",
        ].joined(separator: "\r\n")
        let all = try JunosFormat.parse(text, file: "pe3.conf")
        #expect(all.map(\.name) == ["A"])
        #expect(all.first?.inbound[.dscp] == [46: .init(.ef, .green)])
        #expect(all.first?.unmapped.first?.hasPrefix("pe3.conf:7: forwarding class 'bogus'") == true)
    }

    @Test func quotedNamesAndOtherStatementsAreRead() throws {
        let text = """
            set system host-name "pe 2"
            set class-of-service classifiers dscp "my map" forwarding-class af1 loss-priority high code-points [af12 af13]
            set class-of-service schedulers s1 priority strict-high
            set class-of-service classifiers dscp "my map" import default
            """
        let m = try #require(try JunosFormat.parse(text, file: "m").first)
        #expect(m.name == "my map")
        #expect(m.inbound[.dscp]?[12] == .init(.af1, .red))
        #expect(m.inbound[.dscp]?[14] == .init(.af1, .red))
        #expect(m.unmapped == ["m:4: dscp classifier my map imports 'default'; its code points are not read"])
    }
}
