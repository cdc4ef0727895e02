#!/usr/bin/env python3
"""Traffic for crates/flowpath/tests/vxlan_traffic.rs (run inside a test namespace).

  vxtool.py listen IFACE SECONDS [UNTIL COUNT]
                                        count frames carrying our markers (b"fpvx-...")
                                        received on IFACE; prints "ready", then one
                                        "MARKER COUNT" line per marker seen; ends after
                                        SECONDS, or 0.3 s after marker UNTIL was seen
                                        COUNT times
  vxtool.py burst IFACE N PPS SRCMAC DSTMAC SRC4 DST4 SRC6 DST6
                                        N inner frames (half UDP/IPv4, half UDP/IPv6, 1,000
                                        flows, to UDP port 9), paced at about PPS
  vxtool.py inject IFACE N SRCMAC DSTMAC OUTER_SRC OUTER_DST VNI MARKER INNER_SRCMAC
                   INNER_DSTMAC INNER_SRC4 INNER_DST4
                                        N VXLAN frames built by hand (scapy), as a remote
                                        VTEP would send them (or a bad one)
"""
import socket
import sys
import time

ETH_P_ALL = 0x0003


def listen(iface, seconds, until=None, count=0):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    s.settimeout(0.1)
    print("ready", flush=True)
    counts = {}
    end = time.time() + seconds
    while time.time() < end:
        if until is not None and counts.get(until, 0) >= count:
            end = min(end, time.time() + 0.3)
            until = None
        try:
            f, addr = s.recvfrom(65535)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        i = f.find(b"fpvx-")
        if i >= 0:
            m = f[i:i + 24].split(b"\0")[0].split(b"#")[0].decode(errors="replace")
            counts[m] = counts.get(m, 0) + 1
    for m, n in sorted(counts.items()):
        print(m, n, flush=True)


def burst(iface, n, pps, smac, dmac, s4, d4, s6, d6):
    from scapy.all import Ether, IP, IPv6, UDP, Raw

    frames = []
    for i in range(1000):
        pay = Raw(b"fpvx-burst#%04d" % i + b"\0" * 10)
        if i % 2 == 0:
            p = Ether(src=smac, dst=dmac) / IP(src=s4, dst=d4) / UDP(sport=10000 + i, dport=9) / pay
        else:
            p = Ether(src=smac, dst=dmac) / IPv6(src=s6, dst=d6) / UDP(sport=10000 + i, dport=9) / pay
        frames.append(bytes(p))
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    t0 = time.perf_counter()
    chunk = max(1, pps // 1000)
    sent = 0
    while sent < n:
        for _ in range(min(chunk, n - sent)):
            while True:
                try:
                    s.send(frames[sent % 1000])
                    break
                except BlockingIOError:
                    time.sleep(0.0001)
                except OSError as e:  # ENOBUFS: the queue is full for a moment
                    if e.errno != 105:
                        raise
                    time.sleep(0.0005)
            sent += 1
        ahead = t0 + sent / pps - time.perf_counter()
        if ahead > 0:
            time.sleep(ahead)
    print("sent", sent, "in %.2f s" % (time.perf_counter() - t0), flush=True)


def inject(iface, n, smac, dmac, osrc, odst, vni, marker, ismac, idmac, is4, id4):
    from scapy.all import Ether, IP, IPv6, UDP, VXLAN, Raw, sendp

    outer = IPv6(src=osrc, dst=odst) if ":" in osrc else IP(src=osrc, dst=odst)
    p = (Ether(src=smac, dst=dmac) / outer / UDP(sport=49152 + vni % 1000, dport=4789)
         / VXLAN(flags=0x08, vni=vni)
         / Ether(src=ismac, dst=idmac) / IP(src=is4, dst=id4) / UDP(sport=7, dport=7777)
         / Raw(marker.encode() + b"\0" * 8))
    sendp(p, iface=iface, count=n, inter=0.01, verbose=False)
    print("injected", n, flush=True)


def main():
    a = sys.argv[1:]
    if a[0] == "listen":
        if len(a) > 4:
            listen(a[1], float(a[2]), a[3], int(a[4]))
        else:
            listen(a[1], float(a[2]))
    elif a[0] == "burst":
        burst(a[1], int(a[2]), int(a[3]), *a[4:10])
    elif a[0] == "inject":
        inject(a[1], int(a[2]), a[3], a[4], a[5], a[6], int(a[7]), a[8], *a[9:13])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
