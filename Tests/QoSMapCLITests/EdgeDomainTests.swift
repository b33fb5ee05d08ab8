import Foundation
import Testing

/// Issue 39 item 7: the built-in `edge-cake` domain keeps LE (1), CS1 (8) and VA
/// (44), which `default` remarks to 0, AF11 and 0; every other code point is
/// remarked as `default` remarks it.
@Suite("edge domain")
struct EdgeDomainTests {
    @Test func showEdge() throws {
        let r = try qosmap(["show", "edge-cake", "--direction", "inbound", "--field", "dscp"])
        #expect(r.status == 0, "\(r.err)")
        let rows = r.out.split(separator: "\n").map { $0.split(separator: " ").joined(separator: " ") }
        #expect(rows.contains("1 LE BE red"), "\(r.out)")
        #expect(rows.contains("8 CS1 BE yellow"))
        #expect(rows.contains("44 VA EF yellow"))
        #expect(rows.contains("46 EF EF green"))
        #expect(try qosmap(["domains"]).out.contains("edge-cake"))
    }

    /// `remark` over one packet per DSCP 0-63: with `edge-cake` 1, 8 and 44 leave
    /// as they came, with `default` they do not; the other 61 leave alike.
    @Test func remarkKeepsLECS1AndVA() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-edge-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("in.pcap")
        let tos = (0..<64).map { UInt8($0 << 2) }
        try Data(craftedPcap(tos: tos)).write(to: input)
        var out: [String: [UInt8]] = [:]
        for domain in ["default", "edge-cake"] {
            let path = dir.appendingPathComponent("\(domain).pcap").path
            let r = try qosmap(["remark", "--in", input.path, "--out", path, "--domain", domain])
            #expect(r.status == 0, "\(domain): \(r.err)")
            out[domain] = craftedPcapTOS(Array(try Data(contentsOf: URL(fileURLWithPath: path)))).tos.map {
                $0 >> 2
            }
        }
        let edge = try #require(out["edge-cake"]), standard = try #require(out["default"])
        try #require(edge.count == 64 && standard.count == 64)
        #expect(edge[1] == 1 && edge[8] == 8 && edge[44] == 44)
        #expect(standard[1] == 0 && standard[8] == 10 && standard[44] == 0)
        for dscp in 0..<64 where ![1, 8, 44].contains(dscp) {
            #expect(edge[dscp] == standard[dscp], "DSCP \(dscp)")
        }
    }
}
