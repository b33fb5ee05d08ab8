#!/usr/bin/python3
# Writes the seeds of tools/fuzz-dns-snoop (record format: see
# tools/fuzz-src/DNSSnoopFuzz.swift): query/reply exchanges over UDP v4 and
# v6 and TCP (handshake, segmented), with scapy 2.5's DNS encoder.
import hashlib, os, struct
from scapy.all import DNS, DNSQR, DNSRR

def rec(kind, payload=b"", flags=0, seq=0, dt=0):
    return bytes([kind, flags, seq & 0xFF, dt]) + struct.pack(">H", len(payload)) + payload

V6, TCP, TOCLIENT = 1, 2, 4
q = bytes(DNS(id=0x1234, rd=1, qd=DNSQR(qname="www.example.com")))
a = bytes(DNS(id=0x1234, qr=1, qd=DNSQR(qname="www.example.com"),
              an=DNSRR(rrname="www.example.com", type="CNAME", rdata="edge.example.net")
              / DNSRR(rrname="edge.example.net", rdata="198.18.0.7")))
q6 = bytes(DNS(id=0x77, rd=1, qd=DNSQR(qname="v6.example", qtype="AAAA")))
a6 = bytes(DNS(id=0x77, qr=1, qd=DNSQR(qname="v6.example", qtype="AAAA"),
               an=DNSRR(rrname="v6.example", type="AAAA", rdata="fd00::9")))
fr = lambda m: struct.pack(">H", len(m)) + m
seeds = {
    "udp4": rec(0, q) + rec(TOCLIENT, a),
    "udp6": rec(V6, q6) + rec(V6 | TOCLIENT, a6),
    "udp-spoof-then-real": rec(0x20, q) + rec(0x20 | TOCLIENT, a[:-3]) + rec(0x40 | TOCLIENT, a) + rec(0x20 | TOCLIENT, a),
    "tcp4": rec(TCP, flags=0x02) + rec(TCP | TOCLIENT, flags=0x12) + rec(TCP, fr(q)[:3], 0x18)
            + rec(TCP, fr(q)[3:], 0x18) + rec(TCP | TOCLIENT, fr(a) + fr(a), 0x18) + rec(TCP, flags=0x11),
    "tcp6-gap": rec(V6 | TCP, flags=0x02) + rec(V6 | TCP | TOCLIENT, flags=0x12) + rec(V6 | TCP, fr(q6), 0x18)
                + rec(V6 | TCP | TOCLIENT, fr(a6)[5:], 0x18, seq=5),
    "timeout": rec(0, q) + rec(TOCLIENT, a, dt=120),
}
here = os.path.dirname(os.path.abspath(__file__))
for name, data in seeds.items():
    with open(os.path.join(here, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)
    print(name, len(data))
