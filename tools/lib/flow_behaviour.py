#!/usr/bin/python3
"""Traffic and pcap checks for tools/e2e/65-flow-behaviour (classify.flows).
Run by that script with python3; it lives in tools/lib because tools/test runs
every executable in tools/e2e/ as a test.

  echoserver FAM PORT TOS READY      TCP: accept one connection, echo every byte
                                     back with TOS on the socket
  fastslow FAM ADDR PORT TOS FAST SLOW [MS]  TCP client: 1000-byte messages every
                                     MS (1) ms for FAST s, then a 400-byte message every
                                     0.25 s for SLOW s (the server echoes each)
  udp FAM ADDR PORT TOS SIZE COUNT   COUNT UDP datagrams of SIZE payload bytes, 20 a second
  dscps PCAP to|from PORT            one line per packet carrying a payload to
                                     (from) PORT: time payload-length dscp first-byte
"""
import socket
import struct
import sys
import time


def family(f):
    return socket.AF_INET if f == "4" else socket.AF_INET6


def set_tos(s, fam, tos):
    if fam == "4":
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    else:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tos)


def echoserver(fam, port, tos, ready):
    ls = socket.socket(family(fam), socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    set_tos(ls, fam, int(tos))
    ls.bind(("", int(port)))
    ls.listen(1)
    ls.settimeout(20)
    open(ready, "w").close()
    c, _ = ls.accept()
    set_tos(c, fam, int(tos))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.settimeout(20)
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)
    c.close()


def fastslow(fam, addr, port, tos, fast, slow, ms="1"):
    s = socket.socket(family(fam), socket.SOCK_STREAM)
    set_tos(s, fam, int(tos))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(10)
    s.connect((addr, int(port)))
    s.setblocking(False)
    end = time.monotonic() + float(fast)
    nxt = time.monotonic()
    while time.monotonic() < end:
        try:
            s.send(b"f" * 1000)
        except BlockingIOError:
            pass
        try:
            while s.recv(65536):
                pass
        except BlockingIOError:
            pass
        nxt += float(ms) / 1000
        time.sleep(max(0, nxt - time.monotonic()))
    s.setblocking(True)
    s.settimeout(5)
    time.sleep(0.3)
    end = time.monotonic() + float(slow)
    while time.monotonic() < end:
        s.sendall(b"s" * 400)
        time.sleep(0.25)
    s.shutdown(socket.SHUT_WR)
    try:
        while s.recv(65536):
            pass
    except OSError:
        pass
    s.close()


def udp(fam, addr, port, tos, size, count):
    s = socket.socket(family(fam), socket.SOCK_DGRAM)
    set_tos(s, fam, int(tos))
    s.bind(("", 0))
    for _ in range(int(count)):
        s.sendto(b"u" * int(size), (addr, int(port)))
        time.sleep(0.05)


def dscps(path, direction, port):
    port = int(port)
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    e = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    nano = magic in (0xA1B23C4D, 0x4D3CB2A1)
    link = struct.unpack(e + "I", data[20:24])[0]
    off = 24
    while off + 16 <= len(data):
        sec, frac, caplen, _ = struct.unpack(e + "IIII", data[off:off + 16])
        pkt = data[off + 16:off + 16 + caplen]
        off += 16 + caplen
        t = sec + frac / (1e9 if nano else 1e6)
        l3 = 14 if link == 1 else 16  # Ethernet, or Linux cooked
        et = struct.unpack(">H", pkt[l3 - 2:l3])[0]
        ip = pkt[l3:]
        if et == 0x0800:
            dscp, proto, hl, total = ip[1] >> 2, ip[9], (ip[0] & 15) * 4, struct.unpack(">H", ip[2:4])[0]
        elif et == 0x86DD:
            dscp = ((ip[0] & 15) << 4 | ip[1] >> 4) >> 2
            proto, hl, total = ip[6], 40, 40 + struct.unpack(">H", ip[4:6])[0]
        else:
            continue
        l4 = ip[hl:]
        if proto == 6:
            l4len = (l4[12] >> 4) * 4
        elif proto == 17:
            l4len = 8
        else:
            continue
        plen = total - hl - l4len
        sp, dp = struct.unpack(">HH", l4[:4])
        # The payload's first byte tells fastslow's messages apart ("f" or
        # "s") however TCP cut or coalesced them; "?" beyond the snap length.
        first = chr(l4[l4len]) if len(l4) > l4len and 33 <= l4[l4len] < 127 else "?"
        if (dp if direction == "to" else sp) == port and plen > 0:
            print("%.6f %d %d %s" % (t, plen, dscp, first))


if __name__ == "__main__":
    {"echoserver": echoserver, "fastslow": fastslow, "udp": udp, "dscps": dscps}[sys.argv[1]](*sys.argv[2:])
