"""Traffic helpers for tools/e2e/20-qosmapd (not a test by itself).

recv:   UDP receiver on v4 and v6, reading IP_RECVTOS / IPV6_RECVTCLASS per datagram.
send:   UDP sender, one datagram per (family, TOS) with the TOS in the payload.
burst / tally: many datagrams of one TOS; count those received with a given TOS.
expect: expected DSCP per sent DSCP from `qosmap show DOMAIN --json` (the tables).
tcpsrv / tcpcli: bulk TCP transfer; both print a SHA-256 of the bytes.
"""
import hashlib, json, os, select, socket, sys, time

def recv(port, count, timeout, out):
    s4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s4.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    s4.bind(("0.0.0.0", port))
    s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
    s6.bind(("::", port))
    open(out + ".ready", "w").close()
    got = []
    deadline = time.time() + timeout
    while len(got) < count and time.time() < deadline:
        r, _, _ = select.select([s4, s6], [], [], max(0.0, deadline - time.time()))
        for s in r:
            data, anc, _, _ = s.recvmsg(2048, socket.CMSG_SPACE(4) * 2)
            tos = None
            for level, typ, val in anc:
                if (level, typ) in ((socket.IPPROTO_IP, socket.IP_TOS), (socket.IPPROTO_IPV6, socket.IPV6_TCLASS)):
                    tos = val[0] if len(val) == 1 else int.from_bytes(val[:4], sys.byteorder)
            fam, sent, _ = data.decode().split(",")
            got.append({"family": fam, "sent": int(sent), "received": tos})
    json.dump(got, open(out, "w"))

def send(dst4, dst6, port, tos_list, tag):
    for fam, dst in (("4", dst4), ("6", dst6)):
        af = socket.AF_INET if fam == "4" else socket.AF_INET6
        s = socket.socket(af, socket.SOCK_DGRAM)
        for tos in tos_list:
            if fam == "4":
                s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
            else:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tos)
            s.sendto(f"{fam},{tos},{tag}".encode(), (dst, port))
            time.sleep(0.0005)  # stay far below the queue length

def burst(dst4, dst6, port, tos, n):
    """n datagrams per family with one TOS, back to back (for a stopped daemon to find queued)."""
    for fam, dst in (("4", dst4), ("6", dst6)):
        af = socket.AF_INET if fam == "4" else socket.AF_INET6
        s = socket.socket(af, socket.SOCK_DGRAM)
        if fam == "4":
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
        else:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tos)
        for _ in range(n):
            s.sendto(f"{fam},{tos},burst".encode(), (dst, port))

def tally(results, tos):
    """How many received datagrams carry exactly this TOS, and how many do not."""
    got = json.load(open(results))
    same = sum(1 for g in got if g["received"] == tos)
    print(f"{same} {len(got) - same}")

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
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    h = hashlib.sha256(); left = size
    block = os.urandom(1 << 20)
    while left > 0:
        b = block[: min(left, len(block))]
        s.sendall(b); h.update(b); left -= len(b)
        block = hashlib.sha256(block[:64]).digest() * (len(block) // 32)
    s.shutdown(socket.SHUT_WR); s.recv(1); s.close()
    print(f"{h.hexdigest()} {size}")

if __name__ == "__main__":
    cmd, a = sys.argv[1], sys.argv[2:]
    tos_all = list(range(256))
    if cmd == "recv": recv(int(a[0]), int(a[1]), float(a[2]), a[3])
    elif cmd == "send": send(a[0], a[1], int(a[2]), [int(x, 0) for x in a[3].split(",")] if len(a) > 3 and a[3] != "all" else tos_all, a[4] if len(a) > 4 else "x")
    elif cmd == "check": check(a[0], a[1], [int(x, 0) for x in a[2].split(",")] if a[2] != "all" else tos_all, a[3])
    elif cmd == "pcp":  # JSON CLASS COLOR -> the outbound 802.1p value
        cells = json.load(open(a[0]))["outbound"]["8021p"]
        print([c for c in cells if c["serviceClass"] == a[1]][0][a[2]])
    elif cmd == "burst": burst(a[0], a[1], int(a[2]), int(a[3], 0), int(a[4]))
    elif cmd == "tally": tally(a[0], int(a[1], 0))
    elif cmd == "tcpsrv": tcpsrv(int(a[0]), a[1], float(a[2]))
    elif cmd == "tcpcli": tcpcli(a[0], int(a[1]), int(a[2]), int(a[3], 0))
