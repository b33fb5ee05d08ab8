import Foundation
import Logging
import QoSMapCore
import QoSMapPacket
import Synchronization
import Testing

@testable import QoSMapDaemon

// DNSSnoopService in network namespaces: a client namespace and a server
// namespace joined by a veth pair, dnsmasq answering dig in the server
// namespace, scapy sending spoofed and malformed replies; the service's
// thread enters the client namespace and snoops the client's veth.

/// Runs a program; returns its exit status and standard output. (runChild,
/// not Foundation's Process, whose waitUntilExit hung here with a reaped-late child.)
@discardableResult
func run(_ path: String, _ args: [String]) throws -> (Int32, String) {
    let r = try runChild(path, args, input: nil).get()
    return (r.exited ? r.status : 128 + r.status, String(decoding: r.stdout, as: UTF8.self))
}

func inNamespace(_ ns: String, _ args: String...) throws -> (Int32, String) {
    try run("/usr/sbin/ip", ["netns", "exec", ns] + args)
}

/// A closure that moves the calling thread into namespace `ns` (setns).
func enter(_ ns: String) -> @Sendable () -> Void {
    {
        let fd = open("/run/netns/\(ns)", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        guard let sym = dlsym(nil, "setns") else { return }
        let setns = unsafeBitCast(sym, to: (@convention(c) (Int32, Int32) -> Int32).self)
        _ = setns(fd, 0x4000_0000)  // CLONE_NEWNET
    }
}

/// The scapy script run in a namespace: sends `packets` (Python expressions).
func scapy(_ ns: String, _ packets: [String]) throws {
    let script =
        "from scapy.all import *\nconf.verb = 0\n"
        + packets.map { "send(\($0))\n" }.joined()
    let (status, _) = try inNamespace(ns, "/usr/bin/python3", "-c", script)
    #expect(status == 0, "scapy failed")
}

@Suite(
    .enabled(
        if: getuid() == 0 && FileManager.default.fileExists(atPath: "/usr/sbin/dnsmasq"),
        "needs root and dnsmasq"))
struct DNSSnoopServiceTests {
    @Test func snoopsRealRepliesAndRefusesSpoofedOnes() async throws {
        let tag = "qmdns\(getpid() % 100000)"
        let (client, server) = ("\(tag)c", "\(tag)s")
        try #require(try ip("netns", "add", client) == 0)
        defer { _ = try? ip("netns", "del", client) }
        try #require(try ip("netns", "add", server) == 0)
        defer { _ = try? ip("netns", "del", server) }
        try #require(
            try ip("-n", client, "link", "add", "dc0", "type", "veth", "peer", "name", "ds0", "netns", server)
                == 0)
        for (ns, dev, v4, v6) in [
            (client, "dc0", "198.18.53.2/24", "fd00:53::2/64"),
            (server, "ds0", "198.18.53.1/24", "fd00:53::1/64"),
        ] {
            try #require(try ip("-n", ns, "addr", "add", v4, "dev", dev) == 0)
            try #require(try ip("-n", ns, "addr", "add", v6, "dev", dev, "nodad") == 0)
            try #require(try ip("-n", ns, "link", "set", dev, "up") == 0)
            try #require(try ip("-n", ns, "link", "set", "lo", "up") == 0)
        }
        // 198.18.53.9 answers nothing: queries to it wait for the spoofer.
        let (_, serverMAC) = try inNamespace(server, "/usr/bin/cat", "/sys/class/net/ds0/address")
        try #require(
            try ip(
                "-n", client, "neigh", "add", "198.18.53.9", "lladdr",
                serverMAC.trimmingCharacters(in: .whitespacesAndNewlines), "dev", "dc0") == 0)
        try #require(
            try ip(
                "-n", client, "neigh", "add", "fd00:53::9", "lladdr",
                serverMAC.trimmingCharacters(in: .whitespacesAndNewlines), "dev", "dc0") == 0)

        let pidFile = "/tmp/\(tag).dnsmasq.pid"
        let (started, _) = try inNamespace(
            server, "/usr/sbin/dnsmasq", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
            "--bind-interfaces",
            "--listen-address=198.18.53.1", "--listen-address=fd00:53::1", "--pid-file=\(pidFile)",
            "--user=root",
            "--local-ttl=30", "--host-record=www.example.test,198.18.60.1,fd00:60::1",
            "--cname=alias.example.test,www.example.test", "--address=/other.example.test/198.18.60.2")
        try #require(started == 0, "dnsmasq did not start")
        defer {
            if let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
                let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
            {
                kill(pid, SIGTERM)
            }
            unlink(pidFile)
        }

        let seen = Mutex<[DNSObservedReply]>([])
        let service = DNSSnoopService(
            interfaces: ["dc0", "absent0"], limits: DNSSnoopLimits(), logger: Logger(label: "test"),
            threadSetup: enter(client)
        ) { reply in seen.withLock { $0.append(reply) } }
        let task = Task { try await service.run() }
        #expect(await eventually { service.openInterfaces == ["dc0"] })

        func dig(_ args: String...) throws -> String {
            let (status, out) = try run(
                "/usr/sbin/ip",
                ["netns", "exec", client, "/usr/bin/dig", "+short", "+tries=3", "+time=1"] + args)
            #expect(status == 0)
            return out
        }
        #expect(try dig("@198.18.53.1", "www.example.test", "A").contains("198.18.60.1"))
        #expect(await eventually { seen.withLock { $0.count } == 1 })
        #expect(try dig("@fd00:53::1", "WWW.example.test", "AAAA").contains("fd00:60::1"))
        #expect(try dig("@198.18.53.1", "+tcp", "alias.example.test", "A").contains("198.18.60.1"))
        // dig may retry (a lost first packet while the neighbour is resolved):
        // each lookup is delivered at least once, and nothing else is.
        struct Seen: Hashable {
            var question: String
            var chain: [String]
            var addresses: [String]
            var server: String
            var client: String
            var transport: UInt8
            var interface: String
        }
        let expected: Set<Seen> = [
            Seen(
                question: "www.example.test", chain: [], addresses: ["198.18.60.1"], server: "198.18.53.1",
                client: "198.18.53.2", transport: 17, interface: "dc0"),
            Seen(
                question: "www.example.test", chain: [], addresses: ["fd00:60::1"], server: "fd00:53::1",
                client: "fd00:53::2", transport: 17, interface: "dc0"),
            Seen(
                question: "alias.example.test", chain: ["www.example.test"], addresses: ["198.18.60.1"],
                server: "198.18.53.1", client: "198.18.53.2", transport: 6, interface: "dc0"),
        ]
        func observed() -> Set<Seen> {
            Set(
                seen.withLock { $0 }.map {
                    Seen(
                        question: $0.reply.question.description, chain: $0.reply.chain.map(\.description),
                        addresses: $0.reply.addresses.map(\.address.description),
                        server: $0.server.description,
                        client: $0.client.description, transport: $0.transport, interface: $0.interface)
                })
        }
        #expect(await eventually { observed() == expected }, "\(observed())")
        // Let the TCP connection's last segments (FIN, ACK) arrive before counting.
        try await Task.sleep(for: .milliseconds(500))
        let before = service.counters
        let deliveredBefore = seen.withLock { $0.count }
        #expect(before.repliesDelivered == UInt64(deliveredBefore) && before.queriesSeen >= 3)
        #expect(before.tcpStreamsDropped == 0 && before.repliesUnsolicited == 0)

        // Not DNS: the socket filter keeps it away from the daemon.
        try scapy(
            client,
            [
                "IP(dst='198.18.53.1')/UDP(sport=5353,dport=5353)/Raw(b'x'*20)",
                "IP(dst='198.18.53.1')/ICMP()", "IPv6(dst='fd00:53::1')/UDP(sport=1000,dport=1001)",
                "IP(dst='198.18.53.1')/TCP(sport=1000,dport=80,flags='S')",
                // As an MLD report: hop-by-hop, then ICMPv6 (the filter walks one header).
                "IPv6(dst='fd00:53::1')/IPv6ExtHdrHopByHop()/ICMPv6EchoRequest()",
                "IPv6(dst='fd00:53::1')/IPv6ExtHdrHopByHop()/UDP(sport=1000,dport=1001)",
            ])
        try await Task.sleep(for: .milliseconds(300))
        #expect(service.counters.frames == before.frames)

        // Spoofed: replies to queries nobody sent, a wrong ID, a wrong port.
        let q =
            "IP(dst='198.18.53.9')/UDP(sport=40000,dport=53)/DNS(id=0x4242,rd=1,qd=DNSQR(qname='spoof.example.test'))"
        // The same over IPv6 behind a hop-by-hop header (the filter walks one).
        let q6 =
            "IPv6(dst='fd00:53::9')/IPv6ExtHdrHopByHop()/UDP(sport=40002,dport=53)/DNS(id=0x4244,rd=1,qd=DNSQR(qname='spoof.example.test'))"
        try scapy(client, [q, q6])
        let answer = "DNSRR(rrname='spoof.example.test',type='A',ttl=60,rdata='198.18.66.6')"
        try scapy(
            server,
            [
                "IP(src='198.18.53.9',dst='198.18.53.2')/UDP(sport=53,dport=40001)/DNS(id=0x4242,qr=1,qd=DNSQR(qname='spoof.example.test'),an=\(answer))",
                "IP(src='198.18.53.9',dst='198.18.53.2')/UDP(sport=53,dport=40000)/DNS(id=0x4243,qr=1,qd=DNSQR(qname='spoof.example.test'),an=\(answer))",
                "IP(src='198.18.53.1',dst='198.18.53.2')/UDP(sport=53,dport=40000)/DNS(id=0x4242,qr=1,qd=DNSQR(qname='spoof.example.test'),an=\(answer))",
                "IPv6(src='fd00:53::9',dst='fd00:53::2')/UDP(sport=53,dport=40000)/DNS(id=0x4242,qr=1,qd=DNSQR(qname='spoof.example.test'),an=\(answer))",
                // Right port and ID, another question.
                "IP(src='198.18.53.9',dst='198.18.53.2')/UDP(sport=53,dport=40000)/DNS(id=0x4242,qr=1,qd=DNSQR(qname='bank.example.test'),an=DNSRR(rrname='bank.example.test',rdata='198.18.66.7'))",
                // Right port and ID, malformed: a compression loop, truncated, a huge answer count.
                // (the answer's owner is "abl" then a pointer to itself, at offset 36).
                "IP(src='198.18.53.9',dst='198.18.53.2')/UDP(sport=53,dport=40000)/Raw(bytes.fromhex('424281800001000100000000') + bytes(DNSQR(qname='spoof.example.test')) + b'\\x03abl\\xc0\\x24' + bytes.fromhex('00010001000000 3c0004c6124206'))",
                "IP(src='198.18.53.9',dst='198.18.53.2')/UDP(sport=53,dport=40000)/Raw(bytes(DNS(id=0x4242,qr=1,qd=DNSQR(qname='spoof.example.test'),an=\(answer)))[:-3])",
                "IP(src='198.18.53.9',dst='198.18.53.2')/UDP(sport=53,dport=40000)/Raw(bytes.fromhex('42428180' '0001ffff00000000') + bytes(DNSQR(qname='spoof.example.test')))",
            ])
        try await Task.sleep(for: .milliseconds(300))
        var c = service.counters
        #expect(c.queriesSeen == before.queriesSeen + 2)
        #expect(c.repliesUnsolicited == before.repliesUnsolicited + 4)
        #expect(c.repliesMismatched == before.repliesMismatched + 1)
        #expect(c.malformed(.pointerLoop) == 1)
        #expect(c.malformed(.truncated) == 2)
        #expect(seen.withLock { $0.count } == deliveredBefore)
        // The query is still live: the right reply is taken.
        try scapy(
            server,
            [
                "IP(src='198.18.53.9',dst='198.18.53.2')/UDP(sport=53,dport=40000)/DNS(id=0x4242,qr=1,qd=DNSQR(qname='spoof.example.test'),an=\(answer))"
            ])
        #expect(await eventually { seen.withLock { $0.count } == deliveredBefore + 1 })
        #expect(seen.withLock { $0.last?.reply.addresses.map(\.address.description) } == ["198.18.66.6"])
        c = service.counters
        #expect(c.repliesDelivered == UInt64(deliveredBefore + 1))

        // An interface that goes away and comes back is reopened.
        try #require(try ip("-n", client, "link", "del", "dc0") == 0)
        #expect(await eventually { service.openInterfaces.isEmpty })
        try #require(
            try ip("-n", client, "link", "add", "dc0", "type", "veth", "peer", "name", "ds0", "netns", server)
                == 0)
        #expect(await eventually { service.openInterfaces == ["dc0"] })

        task.cancel()
        try await task.value
        #expect(service.openInterfaces.isEmpty)
    }
}
