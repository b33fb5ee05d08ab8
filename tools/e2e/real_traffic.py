"""Traffic helpers for tools/e2e/30-qosmapd-real-traffic (not a test by itself).

gsorecv FAMILY PORT EXPECT TIMEOUT OUT: UDP receiver; writes "count intact tos-histogram" as JSON.
gsosend FAMILY DST PORT TOS N SIZE SEGMENT: N sends of SIZE bytes with UDP_SEGMENT=SEGMENT.
httpsrv PORT TOS FILE: HTTP/1.1 server (v4 and v6) whose sockets send with TOS; serves FILE.
tails DST4 DST6 TOS PORT: scapy: IPv4 and IPv6 packets whose fixed header is valid and whose
    tail (L4 header, extension headers) is malformed.
tailcheck PCAP: the received tails as JSON (family, tag, dscp, ecn).
reset HOST PORT N: N metrics clients that reset before and after their request.
"""
import json, os, select, socket, struct, sys, threading, time

UDP_SEGMENT = 103


def gsorecv(fam, port, expect, timeout, out):
    af = socket.AF_INET if fam == "4" else socket.AF_INET6
    s = socket.socket(af, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    if fam == "4":
        s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    else:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
    s.bind(("0.0.0.0" if fam == "4" else "::", port))
    open(out + ".ready", "w").close()
    n = intact = 0
    tos = {}
    deadline = time.time() + timeout
    while n < expect and time.time() < deadline:
        r, _, _ = select.select([s], [], [], 0.5)
        if not r:
            continue
        data, anc, _, _ = s.recvmsg(65536, 64)
        n += 1
        # Each segment is 1200 bytes of one repeated byte: any corruption shows.
        if len(data) > 0 and data.count(data[:1]) == len(data):
            intact += 1
        for _, _, v in anc:
            t = v[0] if len(v) == 1 else int.from_bytes(v[:4], sys.byteorder)
            tos[t] = tos.get(t, 0) + 1
    json.dump({"count": n, "intact": intact, "tos": tos}, open(out, "w"))


def gsosend(fam, dst, port, tos, n, size, seg):
    af = socket.AF_INET if fam == "4" else socket.AF_INET6
    s = socket.socket(af, socket.SOCK_DGRAM)
    if fam == "4":
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    else:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tos)
    s.setsockopt(socket.SOL_UDP, UDP_SEGMENT, seg)
    for i in range(n):
        s.sendto(bytes([65 + i % 26]) * size, (dst, port))
        time.sleep(0.002)  # far below the queue's length: this tests checksums, not overruns


def httpsrv(port, tos, path):
    import http.server, socketserver

    class Handler(http.server.SimpleHTTPRequestHandler):
        def setup(self):
            fam = self.request.family
            if fam == socket.AF_INET:
                self.request.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
            else:
                self.request.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tos)
            super().setup()

        def log_message(self, *a):
            pass

    class V6(socketserver.ThreadingMixIn, http.server.HTTPServer):
        address_family = socket.AF_INET6
        daemon_threads = True

        def server_bind(self):
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            super().server_bind()

    os.chdir(os.path.dirname(path))
    srv = V6(("::", port), Handler)
    open(path + ".ready", "w").close()
    srv.serve_forever()


def tails(dst4, dst6, tos, port):
    from scapy.all import IP, IPv6, UDP, TCP, Raw, IPv6ExtHdrDestOpt, AH, send, conf
    conf.verb = 0
    pkts = []
    # IPv4: the kernel forwards an IPv4 packet whose L4 header is cut short or
    # lies about its length; the fixed header (with the DSCP) is fine.
    pkts.append(IP(dst=dst4, tos=tos, proto=6) / Raw(b"v4-tcp-cut"[:3]))
    pkts.append(IP(dst=dst4, tos=tos) / UDP(dport=port, len=4000) / Raw(b"v4-udp-len"))
    # IPv6 destination options whose length runs past the packet.
    p = IPv6(dst=dst6, tc=tos, nh=60) / Raw(bytes([17, 30]) + b"v6-dstopt-overrun")
    pkts.append(p)
    # AH with a bogus length.
    pkts.append(IPv6(dst=dst6, tc=tos, nh=51) / Raw(bytes([17, 200, 0, 0]) + b"v6-ah-bogus-len!"))
    # nh=60 with nothing after the fixed header.
    pkts.append(IPv6(dst=dst6, tc=tos, nh=60, plen=0) / Raw(b""))
    for pkt in pkts:
        send(pkt)
        time.sleep(0.01)
    print(len(pkts))


def tailcheck(pcap):
    from scapy.all import rdpcap, IP, IPv6
    out = []
    for p in rdpcap(pcap):
        if IP in p:
            out.append({"family": 4, "dscp": p[IP].tos >> 2, "ecn": p[IP].tos & 3})
        elif IPv6 in p:
            if p[IPv6].nh in (58,):  # neighbour discovery and ICMPv6 are not ours
                continue
            out.append({"family": 6, "dscp": p[IPv6].tc >> 2, "ecn": p[IPv6].tc & 3})
    print(json.dumps(out))


def reset(host, port, n):
    linger = struct.pack("ii", 1, 0)
    done = 0
    for i in range(n):
        for whole in (False, True):
            s = socket.create_connection((host, port), timeout=2)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
            s.sendall(req if whole else req[:9])
            if whole:
                time.sleep(0.001)  # the server is writing its answer when the reset lands
            s.close()  # SO_LINGER 0: RST instead of FIN
            done += 1
    print(done)


if __name__ == "__main__":
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "gsorecv":
        gsorecv(a[0], int(a[1]), int(a[2]), float(a[3]), a[4])
    elif cmd == "gsosend":
        gsosend(a[0], a[1], int(a[2]), int(a[3], 0), int(a[4]), int(a[5]), int(a[6]))
    elif cmd == "httpsrv":
        httpsrv(int(a[0]), int(a[1], 0), a[2])
    elif cmd == "tails":
        tails(a[0], a[1], int(a[2], 0), int(a[3]))
    elif cmd == "tailcheck":
        tailcheck(a[0])
    elif cmd == "reset":
        reset(a[0], int(a[1]), int(a[2]))
    else:
        sys.exit(f"unknown command {cmd}")
