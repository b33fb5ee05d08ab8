import Foundation
import QoSMapCore
import Testing

@testable import QoSMapCLI

/// `qosmap status`: the wire format both ends share, the text it prints,
/// and the client's errors (the daemon end is in tools/e2e/58-status).
@Suite struct StatusTests {
    static let report = StatusReport(
        datapath: "nfqueue", limit: 2,
        dns: .init(
            [
                .init(
                    name: "video.zoom.test", question: "video.zoom.test", address: "198.18.5.1",
                    expiresIn: 57, ttl: 1,
                    rules: ["zoom"])
            ], total: 3),
        flows: .init([], total: 0, note: "classify.flows is not configured"),
        connections: .init(
            [
                .init(
                    flow: .init(protocol: "udp", a: "198.18.1.1", aPort: 40001, b: "198.18.5.1", bPort: 9),
                    rule: "zoom"),
                .init(
                    flow: .init(protocol: "tcp", a: "fd00:1::1", aPort: 443, b: "fd00:2::2", bPort: 5000),
                    rule: "web"),
            ], total: 2),
        rules: [.init(name: "zoom", packets: 5, bytes: 640), .init(name: "web", packets: 0, bytes: 0)],
        classes: [.init(name: "EF/green/rewritten", packets: 5)])

    @Test func encodingRoundTrips() throws {
        let data = try JSONEncoder().encode(Self.report)
        let back = try StatusClient.decode(Array(data), path: "/s")
        #expect(back == Self.report)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["version"] as? Int == 1)
        let dns = try #require(object["dns"] as? [String: Any])
        #expect(dns["total"] as? Int == 3)
        let first = try #require((dns["items"] as? [[String: Any]])?.first)
        #expect(first["expiresIn"] as? Int == 57)
        #expect(first["address"] as? String == "198.18.5.1")
    }

    @Test func textSaysWhatWasLeftOut() {
        #expect(
            Self.report.text == """
                qosmapd status (datapath nfqueue)

                learned DNS addresses: 3 (showing 1; raise --limit for more)
                  ADDRESS     NAME             QUESTION         TTL  EXPIRES IN  RULES
                  198.18.5.1  video.zoom.test  video.zoom.test  1 s  57 s        zoom

                connections: 2
                  FLOW                                      RULE
                  udp 198.18.1.1:40001 <-> 198.18.5.1:9     zoom
                  tcp [fd00:1::1]:443 <-> [fd00:2::2]:5000  web

                tracked flows: 0 (classify.flows is not configured)

                rule counters: 2
                  RULE  PACKETS  BYTES
                  zoom  5        640
                  web   0        0

                class counters (class/color/action): 1
                  CLASS               PACKETS
                  EF/green/rewritten  5

                """)
    }

    @Test func refusalIsAPermissionError() throws {
        let data = try JSONEncoder().encode(StatusReply(error: "permission denied: uid 65534 is not root"))
        #expect(throws: PermissionError.self) { try StatusClient.decode(Array(data), path: "/s") }
        let other = try JSONEncoder().encode(StatusReply(error: "bad request"))
        #expect(throws: UnavailableError.self) { try StatusClient.decode(Array(other), path: "/s") }
        #expect(QoSMapCommand.report(for: PermissionError("x")).status == 77)
    }

    @Test func otherVersionsAndGarbageAreRefused() throws {
        var future = Self.report
        future.version = 2
        let data = try JSONEncoder().encode(future)
        #expect(throws: DataError.self) { try StatusClient.decode(Array(data), path: "/s") }
        #expect(throws: DataError.self) { try StatusClient.decode(Array("not json".utf8), path: "/s") }
    }

    @Test func missingSocketIsUnavailable() throws {
        do {
            _ = try StatusClient.fetch("/nonexistent/qosmap-status.sock", limit: 1)
            Issue.record("no error")
        } catch let e as UnavailableError {
            #expect(
                e.description.hasPrefix(
                    "status socket /nonexistent/qosmap-status.sock: cannot connect: No such file or directory (errno 2)"
                ))
        }
    }

    @Test func flowKeyEndpointsInvertTheKey() {
        let a = IPAddress(parsing: "fd00:2::2")!
        let b = IPAddress(parsing: "fd00:1::1")!
        let key = FlowKey(
            protocolNumber: 6, source: a, destination: b, sourcePort: 5000, destinationPort: 443)
        let e = key.endpoints
        #expect(e.protocolNumber == 6)
        #expect(e.a == b && e.aPort == 443 && e.b == a && e.bPort == 5000)
        #expect(FlowKey(words: key.w) == key)
        #expect(StatusReport.Endpoints(key).text == "tcp [fd00:1::1]:443 <-> [fd00:2::2]:5000")
    }
}
