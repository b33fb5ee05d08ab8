import Foundation
import QoSMapCore
import QoSMapDevices
import QoSMapTables
import Testing

// Statement shapes, from the iproute2 6.1 man pages installed here:
// [IPLINK] ip-link(8), "VLAN Type Support": ip link set ... type vlan
//          [ ingress-qos-map QOS-MAP ] [ egress-qos-map QOS-MAP ], QOS-MAP is FROM:TO
//          pairs separated by spaces (ingress: VLAN prio -> Linux priority; egress:
//          Linux priority -> VLAN prio). https://man7.org/linux/man-pages/man8/ip-link.8.html
// [DCBAPP] dcb-app(8), SYNOPSIS and "dscp-prio DSCP-MAP": dcb app { add | del |
//          replace } dev DEV [ dscp-prio DSCP-MAP ], DSCP-MAPPING := { DSCP | all }:PRIO,
//          DSCP 0..63, PRIO 0..7. https://man7.org/linux/man-pages/man8/dcb-app.8.html

/// One generated command, parsed against the man-page shapes.
enum LinuxLine: Equatable {
    case dscpPrio(dev: String, [Int: Int])
    case ingress(dev: String, [Int: Int])
    case egress(dev: String, [Int: Int])

    static func pairs(_ s: Substring, fromMax: Int, toMax: Int) -> [Int: Int]? {
        var m: [Int: Int] = [:]
        for p in s.split(separator: " ") {
            let ft = p.split(separator: ":", omittingEmptySubsequences: false)
            guard ft.count == 2, let f = Int(ft[0]), let t = Int(ft[1]), (0...fromMax).contains(f),
                (0...toMax).contains(t), m[f] == nil
            else { return nil }
            m[f] = t
        }
        return m.isEmpty ? nil : m
    }

    /// The parsed command, or nil when the line is not one of the shapes.
    static func parse(_ line: Substring) -> LinuxLine? {
        if let m = line.wholeMatch(of: #/dcb app replace dev (?<d>\S+) dscp-prio (?<p>.+)/#) {
            // [DCBAPP] DSCP-MAPPING := DSCP:PRIO, DSCP 0..63, PRIO 0..7
            return pairs(m.p, fromMax: 63, toMax: 7).map { .dscpPrio(dev: String(m.d), $0) }
        }
        if let m = line.wholeMatch(
            of: #/ip link set dev (?<d>\S+) type vlan (?<w>ingress|egress)-qos-map (?<p>.+)/#)
        {
            // [IPLINK] QOS-MAPPING := FROM:TO; VLAN prio 0..7; the kernel keys
            // egress on skb priority & 0xf, and qosmap writes 0..7 only.
            guard let p = pairs(m.p, fromMax: 7, toMax: 7) else { return nil }
            return m.w == "ingress" ? .ingress(dev: String(m.d), p) : .egress(dev: String(m.d), p)
        }
        return nil
    }

    /// Checks every line of a script; problems as `line N: …`.
    static func check(_ text: String) -> (
        commands: [LinuxLine], problems: [String], alternatives: [LinuxLine]
    ) {
        var commands: [LinuxLine] = []
        var alternatives: [LinuxLine] = []
        var problems: [String] = []
        for (i, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.isEmpty || line == "#!/bin/sh" { continue }
            if line.hasPrefix("# dcb ") || line.hasPrefix("# ip ") {
                // A commented alternative must be a valid command too.
                if let c = parse(line.dropFirst(2)) {
                    alternatives.append(c)
                } else {
                    problems.append("line \(i + 1): \(line)")
                }
                continue
            }
            if line.hasPrefix("#") { continue }
            if line.wholeMatch(of: #/: "\$\{(PORT|VLAN):\?[^"}]+\}"/#) != nil { continue }
            guard let c = parse(line) else {
                problems.append("line \(i + 1): \(line)")
                continue
            }
            commands.append(c)
        }
        return (commands, problems, alternatives)
    }
}

/// Runs a program and returns its status and standard error.
func runTool(_ path: String, _ args: [String]) throws -> (Int32, String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    let err = Pipe()
    p.standardError = err
    p.standardOutput = FileHandle.nullDevice
    try p.run()
    let data = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: data, as: UTF8.self))
}

let iproute2Usable =
    getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip")
    && FileManager.default.isExecutableFile(atPath: "/usr/sbin/dcb")

@Suite("Linux export")
struct LinuxExportTests {
    static let goldens: [(String, String)] = [
        ("default", "linux-default.txt"), ("5p3d", "linux-5p3d.txt"), ("site", "linux-site.txt"),
    ]

    @Test(arguments: goldens)
    func domainGolden(domain: String, file: String) throws {
        let d = try XRFixtures.domain(domain)
        let e = try LinuxFormat.export(
            ExportRequest(domains: [d], command: "qosmap export linux --domain \(domain)"))
        try XRFixtures.expectGolden(e.text, file)
    }

    @Test func configGolden() throws {
        let e = try LinuxFormat.export(try XRFixtures.configRequest("linux"))
        try XRFixtures.expectGolden(e.text, "linux-config.txt")
        let (commands, problems, _) = LinuxLine.check(e.text)
        #expect(problems == [])
        let site = try XRFixtures.domain("site")
        let fiveP = try XRFixtures.domain("5p3d")
        // Ethernet0 trusts DSCP in site: DSCP 44 is EF there (5), AF12 is AF1 (1).
        guard case .dscpPrio("Ethernet0", let m0)? = commands.first else {
            Issue.record("first command is not Ethernet0's dscp-prio")
            return
        }
        #expect(m0[44] == Int(site.classify(.dscp, 44).serviceClass.rawValue))
        #expect(m0[44] == 5 && m0[12] == 1)
        #expect(
            commands.contains(
                .egress(
                    dev: "Ethernet4",
                    Dictionary(
                        uniqueKeysWithValues: ServiceClass.allCases.map {
                            (Int($0.rawValue), Int(fiveP.pcp(for: Treatment($0, .green)).rawValue))
                        }))))
        #expect(
            commands.contains(
                .ingress(dev: "Ethernet8", Dictionary(uniqueKeysWithValues: (0..<8).map { ($0, 0) }))))
    }

    @Test(arguments: goldens.map(\.1) + ["linux-config.txt"])
    func goldenSyntax(file: String) throws {
        let text = try String(
            contentsOf: XRFixtures.dataDirectory.appendingPathComponent("golden/\(file)"), encoding: .utf8)
        let (commands, problems, _) = LinuxLine.check(text)
        #expect(problems == [])
        #expect(commands.count >= 3)
    }

    /// The scripts are valid POSIX shell (`sh -n` parses without running).
    @Test(arguments: goldens.map(\.1) + ["linux-config.txt"])
    func shellSyntax(file: String) throws {
        let path = XRFixtures.dataDirectory.appendingPathComponent("golden/\(file)").path
        let (status, err) = try runTool("/bin/sh", ["-n", path])
        #expect(status == 0 && err == "", "\(err)")
    }

    @Test(arguments: [
        "dcb app replace dev eth0 dscp-prio 64:1", "dcb app replace dev eth0 dscp-prio 1:8",
        "ip link set dev eth0 type vlan egress-qos-map 0-1",
        "ip link set dev eth0 type vlan egress-qos-map 1:1 1:2",
        "ip link set eth0 type vlan egress-qos-map 1:1",
    ])
    func syntaxCheckRejects(line: String) {
        #expect(!LinuxLine.check(line).problems.isEmpty)
    }

    /// The installed iproute2 parses every command of the goldens: run in a
    /// throwaway namespace against `lo`, each must get past the parser and be
    /// refused by the kernel only (lo is no VLAN device and has no DCB ops).
    /// `dcb app replace` reads the table before it parses, so its mappings are
    /// parsed through `dcb app add`, which parses first.
    @Test(.enabled(if: iproute2Usable, "needs root and iproute2's ip and dcb"))
    func iproute2ParsesGoldens() throws {
        let ns = "qmxrlinux\(getpid())"
        #expect(try runTool("/usr/sbin/ip", ["netns", "add", ns]).0 == 0)
        defer { _ = try? runTool("/usr/sbin/ip", ["netns", "del", ns]) }
        var checked = 0
        for file in Self.goldens.map(\.1) + ["linux-config.txt"] {
            let text = try String(
                contentsOf: XRFixtures.dataDirectory.appendingPathComponent("golden/\(file)"), encoding: .utf8
            )
            for raw in text.split(separator: "\n")
            where raw.hasPrefix("dcb ") || raw.hasPrefix("ip ") || raw.hasPrefix("# dcb ") {
                var words =
                    raw.hasPrefix("# ")
                    ? Array(raw.dropFirst(2).split(separator: " ")) : raw.split(separator: " ")
                let devAt = try #require(words.firstIndex(of: "dev")) + 1
                words[devAt] = "lo"
                let isDCB = words[0] == "dcb"
                if isDCB { words[2] = "add" }
                let args =
                    ["netns", "exec", ns, isDCB ? "/usr/sbin/dcb" : "/usr/sbin/ip"]
                    + words.dropFirst().map(String.init)
                let (status, err) = try runTool("/usr/sbin/ip", args)
                let refused =
                    isDCB
                    ? "Attribute write: Operation not supported\n"
                    : "RTNETLINK answers: Operation not supported\n"
                #expect(err == refused, "\(file): \(raw)")
                #expect(status != 0)
                checked += 1
            }
        }
        #expect(checked == 4 + 4 + 4 + 6)
        // The same harness tells a parse error from a kernel refusal.
        let (_, bad) = try runTool(
            "/usr/sbin/ip",
            ["netns", "exec", ns, "/usr/sbin/dcb", "app", "add", "dev", "lo", "dscp-prio", "1:8"])
        #expect(bad != "Attribute write: Operation not supported\n")
    }

    /// The losses, exactly, for the built-ins and site.
    @Test(arguments: ["default", "5p3d", "site"])
    func lossSummaries(name: String) throws {
        let d = try XRFixtures.domain(name)
        let e = try LinuxFormat.export(ExportRequest(domains: [d]))
        #expect(e.losses == expectedLosses(d, fields: Field.allCases, rewrite: true))
    }

    /// An independent statement of what the format loses, counted from the domain.
    func expectedLosses(_ d: DSDomain, fields: [Field], rewrite: Bool) -> [ExportLoss] {
        var l: [ExportLoss] = []
        for f in fields {
            if f == .exp {
                l.append(
                    .init(
                        domain: d.name, what: "inbound exp",
                        detail: "8 of 8 values: iproute2 has no MPLS TC classification; use qosmapd or nft"))
                continue
            }
            let n = (0..<f.valueCount).filter { d.classify(f, UInt8($0)).color != .green }.count
            if n > 0 {
                l.append(
                    .init(
                        domain: d.name, what: "color of inbound \(f.name)",
                        detail:
                            "\(n) of \(f.valueCount) values are yellow or red; the Linux priority carries the class only"
                    ))
            }
            if f == .dot1p, d.dropEligibility == .color {
                l.append(
                    .init(
                        domain: d.name, what: "inbound DEI",
                        detail: "the domain reads DEI=1 as yellow; ingress-qos-map keys on the PCP only"))
            }
        }
        let nft = "Linux has no egress map for it outside nft and qosmapd: use qosmap export nft --config"
        if rewrite {
            l.append(.init(domain: d.name, what: "outbound dscp", detail: "24 of 24 cells: \(nft)"))
            l.append(.init(domain: d.name, what: "outbound ip-precedence", detail: "24 of 24 cells: \(nft)"))
        }
        l.append(
            .init(
                domain: d.name, what: "outbound exp",
                detail:
                    "24 of 24 cells: iproute2 sets no MPLS TC (ip route encap mpls takes labels and ttl only)"
            ))
        var differ: [Treatment] = []
        for sc in ServiceClass.allCases {
            for c in [Color.yellow, .red]
            where d.pcp(for: Treatment(sc, c)) != d.pcp(for: Treatment(sc, .green)) {
                differ.append(Treatment(sc, c))
            }
        }
        if let first = differ.first {
            l.append(
                .init(
                    domain: d.name, what: "color of outbound 8021p",
                    detail:
                        "\(differ.count) of 16 yellow/red cells differ from their class's green PCP (first \(first)); egress-qos-map keys on the class, so they are sent as green"
                ))
        }
        if d.dropEligibility == .color {
            l.append(
                .init(
                    domain: d.name, what: "outbound DEI",
                    detail: "16 yellow/red cells should be sent with DEI=1; egress-qos-map sets the PCP only")
            )
        }
        return l
    }

    /// With bindings, only what they use is reported: site trusted on DSCP,
    /// default trusted on DSCP, default and 5p3d on egress (all rewriting).
    @Test func configLosses() throws {
        let e = try LinuxFormat.export(try XRFixtures.configRequest("linux"))
        let site = try XRFixtures.domain("site")
        let def = try XRFixtures.domain("default")
        let fiveP = try XRFixtures.domain("5p3d")
        let ingress =
            expectedLosses(site, fields: [.dscp], rewrite: true).filter { $0.what.hasSuffix("inbound dscp") }
            + expectedLosses(def, fields: [.dscp], rewrite: true).filter { $0.what.hasSuffix("inbound dscp") }
        let egress =
            expectedLosses(def, fields: [], rewrite: true) + expectedLosses(fiveP, fields: [], rewrite: true)
        #expect(e.losses == ingress + egress)
    }

    /// Not silently lossy, over random domains: the egress map holds every
    /// class's green PCP and the loss counts exactly the cells it cannot; the
    /// ingress maps give every value's class.
    @Test(arguments: RandomDomain.seeds)
    func everyCellAccounted(seed: UInt64) throws {
        let d = RandomDomain.make(name: "r\(seed)", seed: seed)
        let e = try LinuxFormat.export(ExportRequest(domains: [d]))
        let (commands, problems, alternatives) = LinuxLine.check(e.text)
        #expect(problems == [])
        // The commented trust-precedence table: every DSCP takes its precedence's class.
        guard case .dscpPrio(_, let prec)? = alternatives.first, alternatives.count == 1 else {
            Issue.record("no single trust-precedence alternative")
            return
        }
        #expect(
            (0..<64).allSatisfy {
                prec[$0] == Int(d.classify(.ipPrecedence, UInt8($0 >> 3)).serviceClass.rawValue)
            })
        var wrongPCP = 0
        for c in commands {
            switch c {
            case .egress(_, let m):
                for t in Treatment.allCells
                where m[Int(t.serviceClass.rawValue)] != Int(d.pcp(for: t).rawValue) {
                    wrongPCP += 1
                    #expect(t.color != .green, "green \(t) must be exact")
                }
            case .ingress(_, let m):
                #expect(
                    (0..<8).allSatisfy { m[$0] == Int(d.classify(.dot1p, UInt8($0)).serviceClass.rawValue) })
            case .dscpPrio(_, let m):
                #expect(
                    (0..<64).allSatisfy { m[$0] == Int(d.classify(.dscp, UInt8($0)).serviceClass.rawValue) })
            }
        }
        let loss = e.losses.first { $0.what == "color of outbound 8021p" }
        #expect(loss?.detail.hasPrefix("\(wrongPCP) of 16 ") ?? (wrongPCP == 0))
        #expect(e.losses == expectedLosses(d, fields: Field.allCases, rewrite: true))
    }

    @Test func badInterface() throws {
        let d = try XRFixtures.domain("default")
        for name in ["eth0; reboot", "a-very-long-interface-name", ""] {
            #expect(throws: DeviceFormatError.self) {
                try LinuxFormat.export(
                    ExportRequest(
                        domains: [d],
                        bindings: [
                            DeviceBinding(
                                interface: name, trust: .dscp, inboundDomain: "default",
                                outboundDomain: "default")
                        ]))
            }
        }
    }
}
