#!/usr/bin/python3
# Writes the DNS fuzz seeds (scapy 2.5 builds and compresses them): the first
# byte is the fuzz selector (0x00 UDP, 0x80 TCP framing), the rest the message.
import hashlib, os, struct
from scapy.all import DNS, DNSQR, DNSRR, DNSRROPT, dns_compress

def reply(qname, qtype, answers, **kw):
    an = None
    for a in answers:
        an = a if an is None else an / a
    return DNS(id=0x1234, qr=1, rd=1, ra=1, qd=DNSQR(qname=qname, qtype=qtype), an=an, **kw)

msgs = [
    reply("example.com", "A", [DNSRR(rrname="example.com", type="A", ttl=3600, rdata="93.184.216.34")]),
    reply("www.zoom.us", "A", [
        DNSRR(rrname="www.zoom.us", type="CNAME", ttl=60, rdata="zoom.cdn.example.net"),
        DNSRR(rrname="zoom.cdn.example.net", type="CNAME", ttl=60, rdata="edge7.cdn.example.net"),
        DNSRR(rrname="edge7.cdn.example.net", type="A", ttl=20, rdata="198.18.0.1"),
        DNSRR(rrname="edge7.cdn.example.net", type="A", ttl=30, rdata="198.18.0.2")]),
    reply("v6.example", "AAAA", [DNSRR(rrname="v6.example", type="AAAA", ttl=5, rdata="fd00::42")],
          ar=DNSRROPT(rclass=1232)),
]
here = os.path.dirname(os.path.abspath(__file__))
for m in msgs:
    b = bytes(dns_compress(m))
    print(b.hex())
    for sel, payload in ((b"\x00", b), (b"\x80", struct.pack(">H", len(b)) + b + struct.pack(">H", len(b)) + b)):
        data = sel + payload
        with open(os.path.join(here, hashlib.sha1(data).hexdigest()), "wb") as f:
            f.write(data)
