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
"""
import json, struct, sys


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
    elif cmd == "pcapdscp":
        print(" ".join(pcapdscp(a[0], int(a[1]))))
