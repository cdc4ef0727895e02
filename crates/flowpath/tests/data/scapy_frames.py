#!/usr/bin/env python3
"""Frames built by scapy (a tool no one here wrote) for the explain-vs-tshark test.

Usage: scapy_frames.py OUT.pcap [SEED]. Well-formed frames of every kind flowpath parses
(VLAN, QinQ, IPv4 options and fragments, IPv6 extension headers and fragments, ICMP and
ICMPv6, ARP, TCP options, VXLAN over IPv4 and IPv6), a few kinds it does not (802.3/LLC,
three VLAN tags, SCTP), and scapy's fuzz() of each layer for malformed ones.
"""
import random
import sys

from scapy.all import (ARP, ICMP, IP, TCP, UDP, VXLAN, Dot1AD, Dot1Q, Dot3, Ether,
                       ICMPv6EchoRequest, ICMPv6ND_NS, IPv6, IPv6ExtHdrDestOpt,
                       IPv6ExtHdrFragment, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, LLC,
                       SNAP, Raw, SCTP, fragment, fuzz, wrpcap)

out = sys.argv[1]
random.seed(int(sys.argv[2]) if len(sys.argv) > 2 else 1)


def ip4():
    return "10.%d.%d.%d" % (random.randrange(256), random.randrange(256), random.randrange(1, 255))


def ip6():
    return "2001:db8::%x:%x" % (random.randrange(65536), random.randrange(1, 65536))


def port():
    return random.randrange(1, 65536)


def l4():
    k = random.randrange(4)
    if k == 0:
        return TCP(sport=port(), dport=port(), flags=random.choice(["S", "SA", "A", "FA", "R", "PA"]),
                   options=random.choice([[], [("MSS", 1460)], [("MSS", 1460), ("WScale", 7), ("SAckOK", b"")]]))
    if k == 1:
        return UDP(sport=port(), dport=random.choice([53, 123, port()]))
    if k == 2:
        return ICMP(type=random.choice([0, 8, 3, 11]), code=random.randrange(4))
    return UDP(sport=port(), dport=port()) / Raw(b"x" * random.randrange(0, 64))


def eth():
    return Ether(src="02:00:00:%02x:%02x:%02x" % tuple(random.randrange(256) for _ in range(3)),
                 dst="02:00:01:%02x:%02x:%02x" % tuple(random.randrange(256) for _ in range(3)))


frames = []
for _ in range(60):
    frames.append(eth() / IP(src=ip4(), dst=ip4(), ttl=random.randrange(1, 256),
                             tos=random.randrange(256)) / l4())
    frames.append(eth() / Dot1Q(vlan=random.randrange(4096), prio=random.randrange(8)) /
                  IP(src=ip4(), dst=ip4()) / l4())
    frames.append(eth() / Dot1AD(vlan=random.randrange(4096)) / Dot1Q(vlan=random.randrange(4096)) /
                  IP(src=ip4(), dst=ip4()) / l4())
    frames.append(eth() / IP(src=ip4(), dst=ip4(), options=[b"\x01\x01\x01\x00"]) / l4())
    frames.append(eth() / IPv6(src=ip6(), dst=ip6(), hlim=random.randrange(256),
                               tc=random.randrange(256)) /
                  random.choice([TCP(sport=port(), dport=port(), flags="S"),
                                 UDP(sport=port(), dport=port()),
                                 ICMPv6EchoRequest(), ICMPv6ND_NS(tgt=ip6())]))
    frames.append(eth() / IPv6(src=ip6(), dst=ip6()) /
                  random.choice([IPv6ExtHdrHopByHop(), IPv6ExtHdrDestOpt(),
                                 IPv6ExtHdrRouting(addresses=[ip6()]),
                                 IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt()]) /
                  UDP(sport=port(), dport=port()))
    frames.append(eth() / ARP(op=random.choice([1, 2]), psrc=ip4(), pdst=ip4(),
                              hwsrc="02:00:00:00:00:%02x" % random.randrange(256)))
    frames.append(eth() / IP(src="172.16.0.1", dst="172.16.0.2") /
                  UDP(sport=port(), dport=4789) / VXLAN(vni=random.randrange(1 << 24)) /
                  eth() / IP(src=ip4(), dst=ip4()) / l4())
    frames.append(eth() / IPv6(src=ip6(), dst=ip6()) /
                  UDP(sport=port(), dport=4789) / VXLAN(vni=random.randrange(1 << 24)) /
                  eth() / IPv6(src=ip6(), dst=ip6()) / UDP(sport=port(), dport=port()))
    frames.append(eth() / IP(src=ip4(), dst=ip4()) / SCTP(sport=port(), dport=port()))
for _ in range(15):
    big = eth() / IP(src=ip4(), dst=ip4()) / UDP(sport=port(), dport=port()) / Raw(b"y" * 1400)
    for f in fragment(big[IP], fragsize=480):
        frames.append(eth() / f)
    pkt = IPv6(src=ip6(), dst=ip6())
    frames.append(eth() / pkt / IPv6ExtHdrFragment(offset=0, m=1, id=7) / UDP(sport=port(), dport=port()) / Raw(b"z" * 64))
    frames.append(eth() / pkt / IPv6ExtHdrFragment(offset=100, m=0, id=7) / Raw(b"z" * 64))
    frames.append(Dot3(src="02:00:00:00:00:01", dst="01:80:c2:00:00:00") / LLC() / SNAP() / Raw(b"q" * 40))
    frames.append(eth() / Dot1Q(vlan=1) / Dot1Q(vlan=2) / Dot1Q(vlan=3) / IP(src=ip4(), dst=ip4()) / l4())
for _ in range(150):
    frames.append(random.choice([
        lambda: eth() / fuzz(IP(src=ip4(), dst=ip4())) / l4(),
        lambda: eth() / IP(src=ip4(), dst=ip4()) / fuzz(TCP()),
        lambda: eth() / IP(src=ip4(), dst=ip4()) / fuzz(UDP()),
        lambda: eth() / fuzz(IPv6()) / UDP(sport=port(), dport=port()),
        lambda: eth() / fuzz(ARP()),
        lambda: eth() / fuzz(Dot1Q()) / IP(src=ip4(), dst=ip4()) / l4(),
    ])())
wrpcap(out, frames)
print(len(frames))
