"""Helpers for tools/e2e/35-datapath-matrix (not a test by itself).

oracle TRUST IN_JSON OUT_JSON: the 64 DSCPs written for DSCP 0..63, from
    `qosmap show DOMAIN --json` of the ingress and egress domains: trust dscp
    classifies with the ingress domain's inbound DSCP table, trust none makes
    every packet BE/green; the egress domain's outbound DSCP table writes.
udp RECV_JSON: qosmapd_traffic.py recv's output as sorted "family sent-TOS received-TOS" lines.
check ORACLE_JSON UDP_TXT: "ok bad" for all 256 TOS x 2 families against the oracle (ECN kept).
marks SET_JSON: the distinct "oifname mark priority" of `nft -j list set`, sorted.
markoracle SHOW_DIR: the "oifname mark priority" the config gives UDP from both clients.
pcapdscp PCAP MINLEN: "family:dscp" for every frame longer than MINLEN, distinct, sorted.
flows MODEL_JSON NAME C S CLIENT_ADDR SERVER_ADDR SPEC CLIENT_PCAP SERVER_PCAP SUMMARY
    (tools/e2e/55-flow-rules): checks every packet of one flow, captured on
    both ends (see flows()); prints "ok ..."/"FAIL ..." lines and
    "rule NAME PACKETS BYTES", and appends the flow's markings to SUMMARY.
flowdscp MODEL_JSON RULE|- WAY C S DSCP: the DSCP FlowModel gives one packet.
"""
import ipaddress, json, os, socket, struct, sys


def oracle(trust, in_json, out_json):
    ind = json.load(open(in_json))
    outd = json.load(open(out_json))
    outbound = {c["serviceClass"]: c for c in outd["outbound"]["dscp"]}
    if trust == "none":
        return [outbound["BE"]["green"]] * 64
    inbound = {c["value"]: (c["serviceClass"], c["color"]) for c in ind["inbound"]["dscp"]}
    return [outbound[inbound[d][0]][inbound[d][1]] for d in range(64)]


def udp(recv_json):
    got = json.load(open(recv_json))
    return sorted(f"{g['family']} {g['sent']} {g['received']}" for g in got)


def check(oracle_json, udp_txt):
    want = json.load(open(oracle_json))
    seen = {}
    for line in open(udp_txt):
        fam, sent, rec = line.split()
        seen[(fam, int(sent))] = None if rec == "None" else int(rec)
    ok = bad = 0
    for fam in ("4", "6"):
        for tos in range(256):
            r = seen.get((fam, tos))
            if r is not None and r >> 2 == want[tos >> 2] and r & 3 == tos & 3:
                ok += 1
            else:
                bad += 1
                if bad <= 5:
                    print(f"  IPv{fam} TOS {tos:#04x}: want DSCP {want[tos >> 2]} ECN {tos & 3}, got {r}", file=sys.stderr)
    print(ok, bad)


CLASSES = ["BE", "AF1", "AF2", "AF3", "AF4", "EF", "CS6", "CS7"]  # MarkEncoding's class numbers
COLORS = ["green", "yellow", "red"]


def marks(set_json):
    out = set()
    for item in json.load(open(set_json))["nftables"]:
        for e in item.get("set", {}).get("elem", []):
            key = e["elem"]["val"]["concat"] if isinstance(e, dict) and "elem" in e else e["concat"]
            oif, mark, prio = key
            if prio == "none":  # nft's name for priority 0
                prio = 0
            elif isinstance(prio, str) and ":" in prio:
                major, minor = prio.split(":")
                prio = int(major or "0", 16) << 16 | int(minor or "0", 16)
            out.add(f"{oif} {int(mark):#x} {int(prio)}")
    return sorted(out)


def markoracle(show_dir):
    """in1 trusts DSCP (default), in2 nothing; out1 writes default, out2 site."""
    want = set()
    for c, trust in ((1, "dscp"), (2, "none")):
        ind = json.load(open(f"{show_dir}/default.json"))
        inbound = {x["value"]: (x["serviceClass"], x["color"]) for x in ind["inbound"]["dscp"]}
        for s, dom in ((1, "default"), (2, "site")):
            pcp = {x["serviceClass"]: x for x in json.load(open(f"{show_dir}/{dom}.json"))["outbound"]["8021p"]}
            for d in range(64):
                cls, color = inbound[d] if trust == "dscp" else ("BE", "green")
                mark = 0x20 | CLASSES.index(cls) << 2 | COLORS.index(color)
                want.add(f"out{s} {mark:#x} {pcp[cls][color]}")
    return sorted(want)


def pcapdscp(path, minlen):
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    end = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    off = 24
    seen = set()
    while off + 16 <= len(data):
        _, _, caplen, wirelen = struct.unpack(end + "IIII", data[off:off + 16])
        frame = data[off + 16:off + 16 + caplen]
        off += 16 + caplen
        if wirelen <= minlen or len(frame) < 16:
            continue
        etype = struct.unpack("!H", frame[12:14])[0]
        if etype == 0x0800:
            seen.add(f"4:{frame[15] >> 2}")
        elif etype == 0x86DD:
            seen.add(f"6:{((frame[14] & 0xF) << 4 | frame[15] >> 4) >> 2}")
    return sorted(seen)


def pcap_frames(path):
    """(wire length, captured bytes) of every frame of an Ethernet pcap."""
    data = open(path, "rb").read()
    if len(data) < 24:
        return
    magic = struct.unpack("<I", data[:4])[0]
    end = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    off = 24
    while off + 16 <= len(data):
        _, _, caplen, wirelen = struct.unpack(end + "IIII", data[off:off + 16])
        yield wirelen, data[off + 16:off + 16 + caplen]
        off += 16 + caplen


def ip_packet(wirelen, frame):
    """The fields of an Ethernet frame's IPv4/IPv6 TCP or UDP packet that the
    datapaths may touch or must keep, or None for anything else. `length` is
    the bytes from the IP header on (what the rule counters count); a GSO
    packet is one frame here, with its whole length."""
    etype = struct.unpack("!H", frame[12:14])[0]
    ip = frame[14:]
    if etype == 0x0800 and len(ip) >= 20:
        ihl = (ip[0] & 0xF) * 4
        fam, tc, ttl, proto = 4, ip[1], ip[8], ip[9]
        src, dst = socket.inet_ntop(socket.AF_INET, ip[12:16]), socket.inet_ntop(socket.AF_INET, ip[16:20])
        words = sum(struct.unpack("!%dH" % (ihl // 2), ip[:ihl]))
        while words >> 16:
            words = (words & 0xFFFF) + (words >> 16)
        csum_ok = words == 0xFFFF
    elif etype == 0x86DD and len(ip) >= 40:
        ihl = 40
        fam, tc, ttl, proto = 6, (ip[0] & 0xF) << 4 | ip[1] >> 4, ip[7], ip[6]
        src, dst = socket.inet_ntop(socket.AF_INET6, ip[8:24]), socket.inet_ntop(socket.AF_INET6, ip[24:40])
        csum_ok = True  # IPv6 has no header checksum
    else:
        return None
    if proto not in (6, 17) or len(ip) < ihl + (20 if proto == 6 else 8):
        return None
    sport, dport = struct.unpack("!HH", ip[ihl:ihl + 4])
    l4 = (ip[ihl + 12] >> 4) * 4 if proto == 6 else 8
    length = wirelen - 14
    # The same packet before and after the router: its L4 header and first
    # payload bytes, without the L4 checksum (a partial one on the sender's
    # side may be completed on the way).
    seg = ip[ihl:ihl + 48]
    same = seg[:16] + seg[18:] if proto == 6 else seg[:6] + seg[8:]
    return {"fam": fam, "proto": "tcp" if proto == 6 else "udp", "src": src, "dst": dst, "sport": sport,
            "dport": dport, "dscp": tc >> 2, "ecn": tc & 3, "ttl": ttl, "csum_ok": csum_ok,
            "data": length - ihl - l4 > 0, "payload": length - ihl - l4, "length": length, "hdr": ihl + l4, "rst": proto == 6 and bool(ip[ihl + 13] & 4), "same": same}


class FlowModel:
    """What the 55-flow-rules config and topology give a packet: client c
    arrives on in<c> (in1 trusts DSCP, in2 nothing), server s behind out<s>
    (out1 writes `default`, out2 `site`); replies arrive on out<s> (trust
    DSCP) and leave through in<c> (`default`). Every inbound domain is
    `default`. MODEL_JSON: {"default": SHOW_JSON, "site": SHOW_JSON,
    "rules": {NAME: {"class": C, "color": K} | {"dscp": D}}}."""

    def __init__(self, path):
        m = json.load(open(path))
        d = json.load(open(m["default"]))
        self.inbound = {x["value"]: (x["serviceClass"], x["color"]) for x in d["inbound"]["dscp"]}
        self.outbound = {dom: {x["serviceClass"]: x for x in json.load(open(m[dom]))["outbound"]["dscp"]}
                         for dom in ("default", "site")}
        self.rules = m["rules"]

    def dscp(self, rule, way, c, s, sent):
        """The DSCP a packet sent with DSCP `sent` leaves the router with, in
        direction `way` (req: client to server, rep: back), classified by
        `rule` (a name) or by trust (None)."""
        if rule is not None:
            r = self.rules[rule]
            cls, color = (r["class"], r.get("color", "green")) if "class" in r else self.inbound[r["dscp"]]
        else:
            trust = ("dscp" if c == 1 else "none") if way == "req" else "dscp"
            cls, color = self.inbound[sent] if trust == "dscp" else ("BE", "green")
        egress = ("default" if s == 1 else "site") if way == "req" else "default"
        return self.outbound[egress][cls][color]


def runs(values):
    """The values in order, each run of equal ones once: "0,40"."""
    out = []
    for v in values:
        if not out or out[-1] != v:
            out.append(v)
    return ",".join(map(str, out))


def segments(p):
    """How many packets the datapath sees for the captured packet p. One,
    unless SEGMENTS ("MTU UDP_GSO_SIZE") says that the kernel segments GSO
    packets before the datapath (nfqueue without NFQA_CFG_F_GSO): then a
    packet longer than MTU is cut into segments of UDP_GSO_SIZE payload bytes
    (UDP; what the sender's UDP_SEGMENT asked) or of MTU minus its headers
    (TCP: the MSS of a path whose MTU every veth shares), each with the
    packet's headers."""
    seg = os.environ.get("SEGMENTS", "").split()
    if not seg or p["length"] <= int(seg[0]):
        return 1
    size = int(seg[1]) if p["proto"] == "udp" else int(seg[0]) - p["hdr"]
    return -(-p["payload"] // size)


def flows(model_json, name, c, s, client, server, spec, client_pcap, server_pcap, summary):
    """One flow between client c (address `client`) and server s, captured
    on the client's and the server's veth. SPEC: "PROTO=RULE[/ALT] ...": the
    connections of PROTO belong to RULE ("-": trust) in both directions (a
    matched connection's replies take its rule); ALT is what an error would
    give instead (another rule, or "-"), which must mark differently, so that
    the flow tells them apart. Checks, per connection and direction: every
    packet received (after the router) has the DSCP the model gives the DSCP
    it was sent with (before the router; the packet found by its L4 bytes,
    or for one the egress segmented, any DSCP sent in that direction); ECN
    kept (per packet, and the (has data, ECN) pairs received are those
    sent); TTL/hop limit one less; IPv4 header checksums valid. Counts each rule's packets and bytes as they were sent into the router."""
    model = FlowModel(model_json)
    c, s = int(c), int(s)
    client, server = ipaddress.ip_address(client).compressed, ipaddress.ip_address(server).compressed
    want = {}
    for item in spec.split():
        proto, _, rules = item.partition("=")
        rule, _, alt = rules.partition("/")
        want[proto] = (None if rule == "-" else rule, alt or None)
    conns, order = {}, []
    for where, path in (("client", client_pcap), ("server", server_pcap)):
        for wirelen, frame in pcap_frames(path):
            p = ip_packet(wirelen, frame)
            if p is None or {p["src"], p["dst"]} != {client, server}:
                continue
            way = "req" if p["src"] == client else "rep"
            end = (client, server) if way == "req" else (server, client)
            cport, sport = (p["sport"], p["dport"]) if way == "req" else (p["dport"], p["sport"])
            key = (p["proto"], cport, sport)
            if key not in conns:
                conns[key] = {"req": {"sent": [], "recv": []}, "rep": {"sent": [], "recv": []}}
                order.append(key)
            sent = (way == "req") == (where == "client")
            conns[key][way]["sent" if sent else "recv"].append(p)
    ok, bad, counts, lines = [], [], {}, []
    seen = {}
    for key in sorted(order, key=lambda k: (k[0], order.index(k))):
        proto = key[0]
        seen[proto] = seen.get(proto, 0) + 1
        conn = f"{proto}{seen[proto]}"
        if proto not in want:
            bad.append(f"{name} {conn}: a {proto} connection the flow does not expect")
            continue
        rule, alt = want[proto]
        for way in ("req", "rep"):
            sent, recv = conns[key][way]["sent"], conns[key][way]["recv"]
            if not sent and not recv:
                continue
            if not recv or not sent:
                bad.append(f"{name} {conn} {way}: {len(sent)} packets sent, {len(recv)} received")
                continue
            sent_dscp = sorted({p["dscp"] for p in sent})
            # A socket's TOS can change after its first packets (a server's
            # SYN-ACK has its listener's): trust gives each DSCP sent its own.
            w = sorted({model.dscp(rule, way, c, s, d) for d in sent_dscp})
            if way == "req" and alt is not None:
                a = sorted({model.dscp(None if alt == "-" else alt, way, c, s, d) for d in sent_dscp})
                if set(a) & set(w):
                    bad.append(f"{name} {conn}: {rule or 'trust'} and {alt} both give DSCP {a}: pick another DSCP")
            # Each received packet against the packet it was sent as, found by
            # its L4 bytes; one the router's egress segmented (or a sender's
            # capture missed) against every DSCP sent in its direction.
            pending = {}
            for p in sent:
                pending.setdefault(p["same"], []).append(p)
            wrong, paired = [], 0
            ecn_wrong = []
            for p in recv:
                q = pending.get(p["same"])
                if q:
                    o = q.pop(0)
                    paired += 1
                    if p["dscp"] != model.dscp(rule, way, c, s, o["dscp"]):
                        wrong.append(f"{o['dscp']}->{p['dscp']}")
                    if p["ecn"] != o["ecn"]:
                        ecn_wrong.append(f"{o['ecn']}->{p['ecn']}")
                elif p["dscp"] not in w:
                    wrong.append(f"?->{p['dscp']}")
            if len(w) > 1 and sorted({p["dscp"] for p in recv}) != w:
                wrong.append(f"{sent_dscp}->{sorted({p['dscp'] for p in recv})}")
            w = w[0] if len(w) == 1 else w
            sent_dscp = sent_dscp[0] if len(sent_dscp) == 1 else sent_dscp
            ecn_sent = sorted({(p["data"], p["ecn"]) for p in sent})
            ecn_recv = sorted({(p["data"], p["ecn"]) for p in recv})
            ttl_sent = sorted({p["ttl"] - 1 for p in sent})
            ttl_recv = sorted({p["ttl"] for p in recv})
            csum = sum(1 for p in recv if not p["csum_ok"])
            what = f"{name} {conn} {way} ({rule or 'trust'}): {len(recv)} packets ({paired} paired with the packet sent)"
            if wrong:
                bad.append(f"{what}: {len(wrong)} not DSCP {w} (sent->received: {sorted(set(wrong))[:6]})")
            if ecn_recv != ecn_sent or ecn_wrong:
                bad.append(f"{what}: ECN changed: (data, ECN) received {ecn_recv}, sent {ecn_sent}; sent->received {sorted(set(ecn_wrong))}")
            if ttl_recv != ttl_sent:
                bad.append(f"{what}: TTL/hop limit received {ttl_recv}, want {ttl_sent}")
            if csum:
                bad.append(f"{what}: {csum} with a bad IPv4 header checksum")
            if not wrong and not ecn_wrong and ecn_recv == ecn_sent and ttl_recv == ttl_sent and not csum:
                ok.append(f"{what}, every one DSCP {w} (sent {sent_dscp}), ECN {sorted({e for _, e in ecn_recv})} kept")
            # For the datapaths' comparison, what does not depend on timing:
            # the received DSCPs in order with repeats collapsed (a socket's
            # TOS changes once, after its first packets); for UDP also the
            # ECN likewise, and the payload bytes (not the packets: the
            # router's egress segments a UDP GSO packet that nfqueue
            # reinjected, not one that nft or tc passed). A TCP stack's ECN
            # (none on a retransmission), segment count and resets (sent when
            # a socket closes with unread data, with the TOS of the segment
            # they answer) vary from run to run. So do a trusted TCP
            # direction's packets without data: iperf3's server sets its
            # TOS after accepting (iperf_init_stream), so the ACKs it sends
            # before that have DSCP 0, and a fast upload may end first. Each
            # datapath still checks those packets against the model above.
            cmp_recv = [p for p in recv if not p["rst"] and (rule is not None or proto != "tcp" or p["data"])]
            line = f"{name} {conn} {way} dscp={runs(p['dscp'] for p in cmp_recv)} ttl={ttl_recv}"
            if proto == "udp":
                line += f" ecn={runs(p['ecn'] for p in recv)} bytes={sum(p['payload'] for p in recv)}"
            lines.append(line)
            # The counters count what enters the router: what the sender's
            # veth sent (a GSO packet that the router's egress segments is
            # one packet to the datapath, several to the receiver).
            # With SEGMENTS set, the datapath sees the segments instead.
            if rule is not None:
                pk, by = counts.get(rule, (0, 0))
                for p in sent:
                    n = segments(p)
                    pk, by = pk + n, by + p["length"] + (n - 1) * p["hdr"]
                counts[rule] = (pk, by)
    for proto in want:
        if proto not in seen and want[proto][0] is not None:
            bad.append(f"{name}: no {proto} connection captured")
    with open(summary, "a") as f:
        f.writelines(line + "\n" for line in lines)
    for line in ok:
        print("ok", line)
    for line in bad:
        print("FAIL", line)
    for rule, (pk, by) in sorted(counts.items()):
        print("rule", rule, pk, by)


if __name__ == "__main__":
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "oracle":
        print(json.dumps(oracle(*a)))
    elif cmd == "udp":
        print("\n".join(udp(a[0])))
    elif cmd == "check":
        check(a[0], a[1])
    elif cmd == "marks":
        print("\n".join(marks(a[0])))
    elif cmd == "markoracle":
        print("\n".join(markoracle(a[0])))
    elif cmd == "flowdscp":
        print(FlowModel(a[0]).dscp(None if a[1] == "-" else a[1], a[2], int(a[3]), int(a[4]), int(a[5])))
    elif cmd == "flows":
        flows(*a)
    elif cmd == "pcapdscp":
        print(" ".join(pcapdscp(a[0], int(a[1]))))
