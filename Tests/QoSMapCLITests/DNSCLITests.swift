import Foundation
import Testing

/// `dns:` rules in `qosmap classify`, `explain`, `lint` and `export nft`.
@Suite("dns: rules in the CLI")
struct DNSCLITests {
    static let config = """
        system-tables: false
        interfaces:
          in1: {}
          out1: {}
        classify:
          dns:
            snoop: [in1]
            min-ttl: 60
          rules:
            - name: zoom-udp
              match: {protocol: udp, dns: ["*.zoom.us"]}
              set: {class: EF}
            - name: video
              match: {dns: ["*.zoom.us", teams.microsoft.com]}
              set: {class: AF4}
            - name: zoom-again
              match: {protocol: udp, dns: [eu01.zoom.us]}
              set: {class: AF1}
            - name: tcp
              match: {protocol: tcp}
              set: {class: AF2}
        """

    static func packet(_ proto: String, _ dst: String) -> [String] {
        [
            "--protocol", proto, "--source", dst.contains(":") ? "fd00:1::2" : "198.18.1.2", "--destination",
            dst,
            "--destination-port", "443", "--ingress", "in1", "--egress", "out1", "--no-system-tables",
        ]
    }

    @Test(arguments: ["198.18.5.1", "fd00:5::1"])
    func classifyShowsTheLearnedName(_ addr: String) throws {
        try ClassifyCLITests.withConfig(Self.config) { path in
            let learned = [
                "--learned", "eu01.zoom.us=\(addr),10", "--learned", "teams.microsoft.com=198.18.5.9",
            ]
            let r = try qosmap(["classify", "--config", path] + learned + Self.packet("udp", addr))
            #expect(r.status == 0, "\(r.err)")
            #expect(
                r.out.contains(
                    "classified: EF/green by rule zoom-udp (\(path):10); \(addr) learned for eu01.zoom.us (question eu01.zoom.us, TTL 10 s, --learned); expires in 60 s"
                ), "\(r.out)")
            // TCP to the same address: the wider list.
            let t = try qosmap(["classify", "--config", path] + learned + Self.packet("tcp", addr))
            #expect(t.out.contains("by rule video (\(path):13)"), "\(t.out)")
            // Not learned: the TCP rule.
            let other = addr.contains(":") ? "fd00:5::7" : "198.18.5.7"
            let n = try qosmap(["classify", "--config", path] + learned + Self.packet("tcp", other))
            #expect(n.out.contains("by rule tcp (\(path):19)"), "\(n.out)")
            // JSON names the reply.
            let j = try ClassifyCLITests.json(
                ["classify", "--config", path] + learned + Self.packet("udp", addr))
            let l = try #require(j["learned"] as? [String: Any])
            #expect(l["name"] as? String == "eu01.zoom.us")
            #expect(l["ttl"] as? Int == 10)
            #expect(l["expiresIn"] as? Int == 60)
        }
    }

    @Test func explainShowsTheLearnedName() throws {
        try ClassifyCLITests.withConfig(Self.config) { path in
            let r = try qosmap(
                ["explain", "0", "--config", path, "--learned", "x.teams.microsoft.com=198.18.5.1"]
                    + Self.packet("tcp", "198.18.5.1"))
            // x.teams.microsoft.com matches no list: refused, naming the lists.
            #expect(r.status == 64)
            #expect(r.err.contains("x.teams.microsoft.com matches no dns: list of the config"), "\(r.err)")
            let ok = try qosmap(
                ["explain", "0", "--config", path, "--learned", "teams.microsoft.com=198.18.5.1,3600"]
                    + Self.packet("tcp", "198.18.5.1"))
            #expect(ok.status == 0, "\(ok.err)")
            #expect(
                ok.out.contains("by rule video (\(path):13); 198.18.5.1 learned for teams.microsoft.com"),
                "\(ok.out)")
            #expect(ok.out.contains("expires in 3600 s"), "\(ok.out)")
        }
    }

    @Test(arguments: [
        ("a.zoom.us", "invalid --learned 'a.zoom.us'"), ("a.zoom.us=1.2.3", "invalid --learned"),
        ("a.zoom.us=198.18.5.1,x", "invalid --learned"), ("*.zoom.us=198.18.5.1", "a name, not a pattern"),
    ])
    func badLearnedExits64(_ value: String, _ message: String) throws {
        try ClassifyCLITests.withConfig(Self.config) { path in
            let r = try qosmap(
                ["classify", "--config", path, "--learned", value] + Self.packet("tcp", "198.18.5.1"))
            #expect(r.status == 64)
            #expect(r.err.contains(message), "\(r.err)")
        }
    }

    /// Only a list inside an earlier one (with no other key narrower) is shadowed.
    @Test func lintShadowsOnlyCoveredLists() throws {
        try ClassifyCLITests.withConfig(Self.config) { path in
            let r = try qosmap(["lint", "--config", path, "--no-system-tables"])
            #expect(
                r.out.contains(
                    "\(path):16: warning: rule 'zoom-again' can never match: rule 'zoom-udp' (\(path):10) matches every packet it does, first [shadowed]"
                ), "\(r.out)")
            #expect(!r.out.contains("rule 'video' can never match"), "\(r.out)")
            #expect(!r.out.contains("rule 'tcp' can never match"), "\(r.out)")
        }
    }

    @Test func nftExportRefusesDNSRules() throws {
        try ClassifyCLITests.withConfig(Self.config) { path in
            let r = try qosmap(["export", "nft", "--config", path, "--no-system-tables"])
            #expect(r.status == 65)
            #expect(
                r.err.contains(
                    "\(path):10:7: rule 'zoom-udp' matches dns: [*.zoom.us], whose addresses qosmapd learns from DNS replies at run time"
                ), "\(r.err)")
        }
    }
}
