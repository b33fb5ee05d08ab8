import Prometheus
import QoSMapCore
import QoSMapPacket
import Testing

@testable import QoSMapDaemon

/// What `qosmap status` is built from on the nfqueue datapath: the registry's
/// counters, the learned addresses, the connection and flow tables.
@Suite struct StatusCollectorTests {
    static let config = """
        system-tables: false
        status: {socket: /run/qosmapd/status.sock, group: qosmap}
        classify:
          dns: {snoop: [in1], min-ttl: 30}
          rules:
            - name: "zoom-video.1"
              match: {dns: ["*.zoom.test"]}
              set: {class: EF}
              connection: true
            - name: backup
              match: {protocol: tcp, destination-port: 873}
              set: {class: AF1}
        """

    @Test func reportsLearnedAddressesConnectionsAndCounters() throws {
        let parsed = try DaemonConfig.parse(Self.config, file: "t.yaml")
        #expect(parsed.statusSocket == "/run/qosmapd/status.sock")
        #expect(parsed.statusGroup == "qosmap")
        let learning = DNSLearning()
        let snapshot = try PolicySnapshot(config: parsed, generation: 1, dns: learning)
        let server = IPAddress(parsing: "198.18.5.1")!
        learning.observe(
            try DNSLearningTests.reply("video.zoom.test", ["198.18.5.1"], ttl: 5), server: nil, client: nil,
            interface: "in1")
        let client = IPAddress(parsing: "198.18.1.1")!
        let key = FlowKey(
            protocolNumber: 17, source: client, destination: server, sourcePort: 40001, destinationPort: 9)
        snapshot.flows?.connections?.record(key, rule: 0, epoch: 0)

        let registry = PrometheusCollectorRegistry()
        func counter(_ metric: String, _ labels: [(String, String)]) -> Counter {
            registry.makeCounter(
                descriptor: MetricNameDescriptor(
                    namespace: "qosmapd", metricName: metric, unitName: "total", helpText: ""),
                labels: labels)
        }
        counter("rule_packets", [("rule", "zoom-video.1")]).increment(by: Int64(5))
        counter("rule_bytes", [("rule", "zoom-video.1")]).increment(by: Int64(640))
        counter("packets", [("class", "EF"), ("color", "green"), ("action", "rewritten")]).increment(
            by: Int64(5))
        _ = counter("packets", [("class", "BE"), ("color", "green"), ("action", "unchanged")])

        let report = StatusCollector(store: PolicyStore(snapshot), registry: registry, dns: learning).report(
            limit: 10)
        #expect(report.datapath == "nfqueue")
        #expect(report.dns.total == 1)
        let entry = try #require(report.dns.items.first)
        #expect(entry.address == "198.18.5.1" && entry.name == "video.zoom.test" && entry.ttl == 5)
        #expect(entry.expiresIn >= 29 && entry.expiresIn <= 30, "min-ttl 30 over TTL 5")
        #expect(entry.rules == ["zoom-video.1"])
        #expect(report.connections.items == [.init(flow: .init(key), rule: "zoom-video.1")])
        #expect(report.flows.note == "classify.flows is not configured")
        #expect(
            report.rules == [
                .init(name: "zoom-video.1", packets: 5, bytes: 640),
                .init(name: "backup", packets: 0, bytes: 0),
            ])
        #expect(report.classes == [.init(name: "EF/green/rewritten", packets: 5)], "zero counts are left out")
        let cut = StatusCollector(store: PolicyStore(snapshot), registry: registry, dns: learning).report(
            limit: 0)
        #expect(cut.dns.total == 1 && cut.dns.items.isEmpty && cut.dns.truncated)
    }

    @Test func labelsKeepQuotedCommasAndEscapes() {
        let l = StatusCollector.labels(#"rule="a, b \"c\" \\d",x="y""#)
        #expect(l["rule"] == #"a, b "c" \d"#)
        #expect(l["x"] == "y")
    }

    @Test func aRelativeSocketIsAConfigError() {
        #expect(throws: ConfigError.self) {
            try DaemonConfig.parse("status: {socket: rel.sock}", file: "t.yaml")
        }
        do {
            _ = try DaemonConfig.parse("status: {socket: rel.sock}", file: "t.yaml")
        } catch {
            #expect(
                error.description
                    == "t.yaml:1:18: invalid status socket 'rel.sock'; allowed: an absolute path, or \"\" for none"
            )
        }
        #expect((try? DaemonConfig.parse("", file: "t.yaml"))?.statusSocket == "", "no socket by default")
    }
}
