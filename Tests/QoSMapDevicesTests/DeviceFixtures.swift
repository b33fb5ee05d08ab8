import Foundation
import QoSMapCore
import QoSMapDevices
import QoSMapTables
import Testing

/// What every format's tests share: the Data directory, the domains
/// (built-ins plus `site`), the request `--config Data/config/qosmapd.yaml`
/// gives, and golden files.
enum DeviceFixtures {
    /// Tests/QoSMapDevicesTests/Data.
    static let dataDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Data")

    /// The built-ins plus `site` (Data/tables/site.yaml).
    static func tables() throws -> TableSet {
        let path = dataDirectory.appendingPathComponent("tables/site.yaml").path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        return try TableLoader.load([TableSource(path: path, text: text)], onto: TableLoader.builtIn)
    }

    /// One of ``tables()``'s domains.
    static func domain(_ name: String) throws -> DSDomain {
        try #require(try tables().domains[name])
    }

    /// What `qosmap export FORMAT --config Data/config/qosmapd.yaml` requests:
    /// domains in the CLI's order (the config's domain, then each interface's
    /// in name order) and the three interfaces.
    static func configRequest(_ format: String) throws -> ExportRequest {
        ExportRequest(
            domains: [try domain("default"), try domain("site"), try domain("5p3d")],
            bindings: [
                DeviceBinding(
                    interface: "Ethernet0", trust: .dscp, inboundDomain: "site", outboundDomain: "default"),
                DeviceBinding(
                    interface: "Ethernet4", trust: .dscp, inboundDomain: "default", outboundDomain: "5p3d"),
                DeviceBinding(
                    interface: "Ethernet8", trust: .none, inboundDomain: "default", outboundDomain: "default"),
            ],
            command: "qosmap export \(format) --config qosmapd.yaml")
    }

    /// Compares with Data/golden/NAME; `QOSMAP_UPDATE_GOLDEN=1` rewrites it.
    static func expectGolden(
        _ actual: String, _ name: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let url = dataDirectory.appendingPathComponent("golden").appendingPathComponent(name)
        if ProcessInfo.processInfo.environment["QOSMAP_UPDATE_GOLDEN"] == "1" {
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try actual.write(to: url, atomically: true, encoding: .utf8)
            return
        }
        let expected = try String(contentsOf: url, encoding: .utf8)
        #expect(actual == expected, "golden \(name) differs", sourceLocation: sourceLocation)
    }
}
