"""Python peer for the qosmapd benchmark (tools/bench/run), pip netfilterqueue.

Same work as nfq-ref.c: map each IPv4/IPv6 packet's DSCP through a 64-entry
table (ECN kept), incremental IPv4 header checksum (RFC 1624), return the
payload with `set_payload` only when it changed, accept.

usage: nfq-ref.py QUEUE MAXLEN DSCP0,...,DSCP63
Runs until SIGTERM, then prints "handled rewritten unchanged".
"""
import signal, sys
from netfilterqueue import NetfilterQueue

queue, maxlen = int(sys.argv[1]), int(sys.argv[2])
dscp_map = [int(v) for v in sys.argv[3].split(",")]
assert len(dscp_map) == 64 and all(0 <= v <= 63 for v in dscp_map), "64 values 0-63"
tos_map = [dscp_map[t >> 2] << 2 | (t & 3) for t in range(256)]
counts = [0, 0, 0]

def remark(pkt):
    counts[0] += 1
    p = pkt.get_payload()
    v = p[0] >> 4
    if v == 4 and len(p) >= 20:
        tos = p[1]
        ntos = tos_map[tos]
        if ntos != tos:
            s = (~((p[10] << 8) | p[11]) & 0xFFFF) + (~((p[0] << 8) | tos) & 0xFFFF) + ((p[0] << 8) | ntos)
            s = (s & 0xFFFF) + (s >> 16)
            s = (s & 0xFFFF) + (s >> 16)
            hc = ~s & 0xFFFF
            b = bytearray(p)
            b[1] = ntos
            b[10] = hc >> 8
            b[11] = hc & 0xFF
            pkt.set_payload(bytes(b))
            counts[1] += 1
            pkt.accept()
            return
    elif v == 6 and len(p) >= 40:
        tc = (p[0] & 0x0F) << 4 | p[1] >> 4
        ntc = tos_map[tc]
        if ntc != tc:
            b = bytearray(p)
            b[0] = (b[0] & 0xF0) | ntc >> 4
            b[1] = (b[1] & 0x0F) | (ntc & 0x0F) << 4
            pkt.set_payload(bytes(b))
            counts[1] += 1
            pkt.accept()
            return
    counts[2] += 1
    pkt.accept()

def stop(*_):
    raise KeyboardInterrupt

signal.signal(signal.SIGTERM, stop)
nfq = NetfilterQueue()
nfq.bind(queue, remark, max_len=maxlen, sock_len=8 << 20)
print("nfq-ref.py ready", flush=True)
try:
    nfq.run()
except KeyboardInterrupt:
    pass
finally:
    nfq.unbind()
print(*counts, flush=True)
