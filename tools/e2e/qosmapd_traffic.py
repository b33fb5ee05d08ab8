"""Traffic helpers for the qosmapd end-to-end scripts in tools/e2e (not a test by itself).

UDP, both families (20-qosmapd, 25-qosmapd-rules):
  recv PORT COUNT TIMEOUT OUT [RCVBUF]: receiver on v4 and v6, the TOS of each datagram
      (IP_RECVTOS / IPV6_RECVTCLASS); RCVBUF forces the socket buffer (SO_RCVBUFFORCE).
  send DST4 DST6 PORT TOS-LIST|all TAG: one datagram per (family, TOS), the TOS in the payload.
  burst DST4 DST6 PORT TOS N / tally OUT TOS: many datagrams of one TOS; count those received
      with a given TOS.  perfamily OUT DSCP-A DSCP-B: per family, received with A, with B, total.
  check / expect / pcp: what the tables (`qosmap show DOMAIN --json`) say a DSCP becomes.
  tcpsrv / tcpcli: bulk TCP transfer; both print a SHA-256 of the bytes.
Real clients (30-qosmapd-real-traffic):
  gsorecv FAMILY PORT EXPECT TIMEOUT OUT: UDP receiver; writes "count intact tos-histogram" as JSON.
  gsosend FAMILY DST PORT TOS N SIZE SEGMENT: N sends of SIZE bytes with UDP_SEGMENT=SEGMENT.
  httpsrv PORT TOS FILE: HTTP/1.1 server (v4 and v6) whose sockets send with TOS; serves FILE.
  tails DST4 DST6 TOS PORT: scapy: IPv4 and IPv6 packets whose fixed header is valid and whose
      tail (L4 header, extension headers) is malformed.
  tailcheck PCAP: the received tails as JSON (family, dscp, ecn).
  reset HOST PORT N: N metrics clients that reset before and after their request.
"""
import hashlib, json, os, select, socket, struct, sys, time

UDP_SEGMENT = 103  # linux/udp.h
SO_RCVBUFFORCE = 33  # asm-generic/socket.h; Python has no name for it


def family(fam):
    return socket.AF_INET if fam == "4" else socket.AF_INET6


def set_tos(s, fam, tos):
    """The TOS (IPv4) or traffic class (IPv6) every packet of s is sent with."""
    if fam == "4":
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    else:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tos)


def udp_receiver(fam, port, rcvbuf=0, force=False):
    """A UDP socket bound to PORT on every address of one family (IPv6 only for
    "6") that reports each datagram's TOS or traffic class; see received_tos."""
    s = socket.socket(family(fam), socket.SOCK_DGRAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE if force else socket.SO_RCVBUF, rcvbuf)
    if fam == "4":
        s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    else:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
    s.bind(("0.0.0.0" if fam == "4" else "::", port))
    return s


def received_tos(anc):
    """The TOS from recvmsg's ancillary data (IP_TOS is one byte, IPV6_TCLASS an int), or None."""
    for level, typ, val in anc:
        if (level, typ) in ((socket.IPPROTO_IP, socket.IP_TOS), (socket.IPPROTO_IPV6, socket.IPV6_TCLASS)):
            return val[0] if len(val) == 1 else int.from_bytes(val[:4], sys.byteorder)
    return None


def recv(port, count, timeout, out, rcvbuf=0):
    socks = [udp_receiver(fam, port, rcvbuf, force=True) for fam in "46"]
    open(out + ".ready", "w").close()
    got = []
    deadline = time.time() + timeout
    while len(got) < count and time.time() < deadline:
        r, _, _ = select.select(socks, [], [], max(0.0, deadline - time.time()))
        for s in r:
            data, anc, _, _ = s.recvmsg(2048, socket.CMSG_SPACE(4) * 2)
            fam, sent, _ = data.decode().split(",")
            got.append({"family": fam, "sent": int(sent), "received": received_tos(anc)})
    json.dump(got, open(out, "w"))


def send(dst4, dst6, port, tos_list, tag):
    for fam, dst in (("4", dst4), ("6", dst6)):
        s = socket.socket(family(fam), socket.SOCK_DGRAM)
        for tos in tos_list:
            set_tos(s, fam, tos)
            s.sendto(f"{fam},{tos},{tag}".encode(), (dst, port))
            time.sleep(0.0005)  # stay far below the queue length


def burst(dst4, dst6, port, tos, n):
    """n datagrams per family with one TOS, back to back (for a stopped daemon to find queued)."""
    for fam, dst in (("4", dst4), ("6", dst6)):
        s = socket.socket(family(fam), socket.SOCK_DGRAM)
        set_tos(s, fam, tos)
        for _ in range(n):
            s.sendto(f"{fam},{tos},burst".encode(), (dst, port))


def tally(results, tos):
    """How many received datagrams carry exactly this TOS, and how many do not."""
    got = json.load(open(results))
    same = sum(1 for g in got if g["received"] == tos)
    print(f"{same} {len(got) - same}")


def perfamily(results, dscp_a, dscp_b):
    """Per family: received with DSCP A, with DSCP B, and in all."""
    got = json.load(open(results))
    for fam in "46":
        mine = [g["received"] for g in got if g["family"] == fam]
        a = sum(1 for t in mine if t is not None and t >> 2 == dscp_a)
        b = sum(1 for t in mine if t is not None and t >> 2 == dscp_b)
        print(f"{fam} {a} {b} {len(mine)}")


def expect(show_json):
    d = json.load(open(show_json))
    inbound = {c["value"]: (c["serviceClass"], c["color"]) for c in d["inbound"]["dscp"]}
    outbound = {c["serviceClass"]: c for c in d["outbound"]["dscp"]}
    return {v: outbound[cls][color] for v, (cls, color) in inbound.items()}


def check(show_json, results, tos_list, mode):
    """mode: 'mapped' (DSCP per tables) or 'original' (unmarked). Prints failures and counts."""
    exp = expect(show_json)
    got = json.load(open(results))
    seen = {(g["family"], g["sent"]): g["received"] for g in got}
    ok = bad = 0
    for fam in ("4", "6"):
        for tos in tos_list:
            want_dscp = exp[tos >> 2] if mode == "mapped" else tos >> 2
            r = seen.get((fam, tos))
            if r is not None and r >> 2 == want_dscp and r & 3 == tos & 3:
                ok += 1
            else:
                bad += 1
                if bad <= 10:
                    print(f"  IPv{fam} sent tos {tos:#04x} (dscp {tos >> 2}, ecn {tos & 3}): "
                          f"want dscp {want_dscp} ecn {tos & 3}, got {r if r is None else f'dscp {r >> 2} ecn {r & 3}'}")
    print(f"{ok} {bad}")


def tcpsrv(port, out, timeout):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(1); s.settimeout(timeout)
    open(out + ".ready", "w").close()
    c, _ = s.accept(); c.settimeout(timeout)
    h = hashlib.sha256(); n = 0
    while True:
        b = c.recv(1 << 20)
        if not b: break
        h.update(b); n += len(b)
    open(out, "w").write(f"{h.hexdigest()} {n}\n")


def tcpcli(dst, port, size, tos):
    s = socket.create_connection((dst, port), timeout=60)
    set_tos(s, "4", tos)
    h = hashlib.sha256(); left = size
    block = os.urandom(1 << 20)
    while left > 0:
        b = block[: min(left, len(block))]
        s.sendall(b); h.update(b); left -= len(b)
        block = hashlib.sha256(block[:64]).digest() * (len(block) // 32)
    s.shutdown(socket.SHUT_WR); s.recv(1); s.close()
    print(f"{h.hexdigest()} {size}")


def gsorecv(fam, port, expect, timeout, out):
    # Forced: rmem_max caps SO_RCVBUF at 208 KiB, which a slow receiver (under
    # emulation) overran.
    s = udp_receiver(fam, port, rcvbuf=8 << 20, force=True)
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
        t = received_tos(anc)
        if t is not None:
            tos[t] = tos.get(t, 0) + 1
    json.dump({"count": n, "intact": intact, "tos": tos}, open(out, "w"))


def gsosend(fam, dst, port, tos, n, size, seg):
    s = socket.socket(family(fam), socket.SOCK_DGRAM)
    set_tos(s, fam, tos)
    s.setsockopt(socket.SOL_UDP, UDP_SEGMENT, seg)
    for i in range(n):
        s.sendto(bytes([65 + i % 26]) * size, (dst, port))
        time.sleep(0.002)  # far below the queue's length: this tests checksums, not overruns


def httpsrv(port, tos, path):
    import http.server, socketserver

    class Handler(http.server.SimpleHTTPRequestHandler):
        def setup(self):
            set_tos(self.request, "4" if self.request.family == socket.AF_INET else "6", tos)
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
    from scapy.all import IP, IPv6, UDP, Raw, conf
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
    # Raw IPPROTO_RAW sockets, not scapy's send(): scapy resolves the next hop
    # itself (its own neighbour solicitation, 2 s), and on a loaded machine it
    # fell back to the broadcast MAC, which the router does not forward (CI:
    # all three IPv6 packets lost). The kernel's own neighbour table is used here.
    s4 = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    s6 = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    for pkt in pkts:
        if IP in pkt:
            s4.sendto(bytes(pkt), (dst4, 0))
        else:
            s6.sendto(bytes(pkt), (dst6, 0))
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
    tos_all = list(range(256))
    if cmd == "recv": recv(int(a[0]), int(a[1]), float(a[2]), a[3], int(a[4]) if len(a) > 4 else 0)
    elif cmd == "send": send(a[0], a[1], int(a[2]), [int(x, 0) for x in a[3].split(",")] if len(a) > 3 and a[3] != "all" else tos_all, a[4] if len(a) > 4 else "x")
    elif cmd == "check": check(a[0], a[1], [int(x, 0) for x in a[2].split(",")] if a[2] != "all" else tos_all, a[3])
    elif cmd == "pcp":  # JSON CLASS COLOR -> the outbound 802.1p value
        cells = json.load(open(a[0]))["outbound"]["8021p"]
        print([c for c in cells if c["serviceClass"] == a[1]][0][a[2]])
    elif cmd == "burst": burst(a[0], a[1], int(a[2]), int(a[3], 0), int(a[4]))
    elif cmd == "tally": tally(a[0], int(a[1], 0))
    elif cmd == "perfamily": perfamily(a[0], int(a[1]), int(a[2]))
    elif cmd == "tcpsrv": tcpsrv(int(a[0]), a[1], float(a[2]))
    elif cmd == "tcpcli": tcpcli(a[0], int(a[1]), int(a[2]), int(a[3], 0))
    elif cmd == "gsorecv": gsorecv(a[0], int(a[1]), int(a[2]), float(a[3]), a[4])
    elif cmd == "gsosend": gsosend(a[0], a[1], int(a[2]), int(a[3], 0), int(a[4]), int(a[5]), int(a[6]))
    elif cmd == "httpsrv": httpsrv(int(a[0]), int(a[1], 0), a[2])
    elif cmd == "tails": tails(a[0], a[1], int(a[2], 0), int(a[3]))
    elif cmd == "tailcheck": tailcheck(a[0])
    elif cmd == "reset": reset(a[0], int(a[1]), int(a[2]))
    else: sys.exit(f"unknown command {cmd}")
