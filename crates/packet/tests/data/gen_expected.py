#!/usr/bin/env python3
"""Writes <name>.expected for each <name>.pcap given, from tshark's dissection (PDML), in
the line format that tests/golden.rs renders the parser's output in. Independent of the
parser under test: run it after adding a capture, e.g.

    python3 crates/packet/tests/data/gen_expected.py crates/packet/tests/data/*.pcap

Needs tshark. Reassembly is disabled so each fragment is dissected on its own.
"""
import ipaddress
import subprocess
import sys
import xml.etree.ElementTree as ET

VXLAN_PORT = 4789


def fields(proto):
    """name -> list of 'show' values, over the proto and its nested sub-protocols (IPv6
    extension headers are nested protos), but not nested IP/ICMP packets (ICMP errors)."""
    out = {}
    stack = [proto]
    while stack:
        node = stack.pop()
        for child in node:
            if child.tag == "field":
                out.setdefault(child.get("name"), []).append(child.get("show"))
                stack.append(child)
            elif child.tag == "proto" and child.get("name", "").startswith(proto.get("name") + "."):
                stack.append(child)
    return out


def one(f, name, default=None):
    v = f.get(name)
    return v[0] if v else default


def num(s):
    return int(s, 0)


def ip_text(s, v6):
    return str(ipaddress.IPv6Address(s)) if v6 else str(ipaddress.IPv4Address(s))


def render(protos):
    k = dict(l2=0, l3=0, l4=0, vlans=0, eth_dst="", eth_src="", eth_type=0, vlan_tci=0,
             vlan_inner_tci=0, nw_proto=0, nw_tos=0, nw_ttl=0, nw_frag=0,
             ip_src="0.0.0.0", ip_dst="0.0.0.0", tp_src=0, tp_dst=0, tcp_flags=0,
             tun_id=0, tun_flags=0, tun_src="0.0.0.0", tun_dst="0.0.0.0")
    names = [p.get("name") for p in protos]
    # VXLAN: everything before the inner Ethernet header becomes the tunnel fields.
    if "vxlan" in names:
        i = names.index("vxlan")
        outer = next(p for p in protos[:i] if p.get("name") in ("ip", "ipv6"))
        v6 = outer.get("name") == "ipv6"
        f = fields(outer)
        pre = "ipv6" if v6 else "ip"
        k["tun_src"] = ip_text(one(f, pre + ".src"), v6)
        k["tun_dst"] = ip_text(one(f, pre + ".dst"), v6)
        k["tun_flags"] = 3 if v6 else 1
        k["tun_id"] = num(one(fields(protos[i]), "vxlan.vni"))
        protos = protos[i + 1:]
        k["l2"] = num(protos[0].get("pos"))
    ip_v6 = False
    for p in protos:
        name, pos, f = p.get("name"), num(p.get("pos", "0")), fields(p)
        if name == "eth":
            k["eth_dst"], k["eth_src"] = one(f, "eth.dst"), one(f, "eth.src")
            k["eth_type"] = num(one(f, "eth.type", one(f, "eth.len", "0")))
        elif name in ("vlan", "ieee8021ad"):
            tci = (num(one(f, name + ".priority")) << 13) | 0x1000 | num(one(f, name + ".id"))
            k["vlan_inner_tci" if k["vlans"] else "vlan_tci"] = tci
            k["vlans"] += 1
            # tshark gives 802.1ad tags no etype of their own; the next tag or
            # ethertype dissector does.
            if name + ".etype" in f:
                k["eth_type"] = num(one(f, name + ".etype"))
        elif name == "arp":
            k["l3"] = pos
            k["nw_proto"] = num(one(f, "arp.opcode")) & 0xff
            k["ip_src"] = one(f, "arp.src.proto_ipv4")
            k["ip_dst"] = one(f, "arp.dst.proto_ipv4")
        elif name == "ip":
            k["l3"] = pos
            k["nw_tos"] = num(one(f, "ip.dsfield"))
            k["nw_ttl"] = num(one(f, "ip.ttl"))
            k["nw_proto"] = num(one(f, "ip.proto"))
            k["ip_src"], k["ip_dst"] = one(f, "ip.src"), one(f, "ip.dst")
            mf, off = num(one(f, "ip.flags.mf")), num(one(f, "ip.frag_offset"))
            k["nw_frag"] = (1 if mf or off else 0) | (2 if off else 0)
        elif name == "ipv6":
            ip_v6 = True
            k["l3"] = pos
            k["nw_tos"] = num(one(f, "ipv6.tclass")) & 0xff
            k["nw_ttl"] = num(one(f, "ipv6.hlim"))
            k["ip_src"] = ip_text(one(f, "ipv6.src"), True)
            k["ip_dst"] = ip_text(one(f, "ipv6.dst"), True)
            # The upper-layer protocol is the last "next header" in the chain.
            chain = sorted(
                (num(c.get("pos")), num(c.get("show")))
                for c in p.iter("field") if c.get("name", "").endswith(".nxt"))
            k["nw_proto"] = chain[-1][1]
            if "ipv6.fraghdr.offset" in f:
                off, more = num(one(f, "ipv6.fraghdr.offset")), num(one(f, "ipv6.fraghdr.more"))
                k["nw_frag"] = (1 if off or more else 0) | (2 if off else 0)
        elif name == "tcp":
            k["l4"] = pos
            k["tp_src"], k["tp_dst"] = num(one(f, "tcp.srcport")), num(one(f, "tcp.dstport"))
            k["tcp_flags"] = num(one(f, "tcp.flags")) & 0x0fff
        elif name == "udp":
            k["l4"] = pos
            k["tp_src"], k["tp_dst"] = num(one(f, "udp.srcport")), num(one(f, "udp.dstport"))
        elif name == "icmp" and not ip_v6:
            k["l4"] = pos
            k["tp_src"], k["tp_dst"] = num(one(f, "icmp.type")), num(one(f, "icmp.code"))
        elif name == "icmpv6" and ip_v6:
            k["l4"] = pos
            k["tp_src"], k["tp_dst"] = num(one(f, "icmpv6.type")), num(one(f, "icmpv6.code"))
    if k["eth_type"] == 0x86dd:
        zero6 = "::"
        k["ip_src"] = k["ip_src"] if k["ip_src"] != "0.0.0.0" else zero6
        k["ip_dst"] = k["ip_dst"] if k["ip_dst"] != "0.0.0.0" else zero6
    if k["tun_flags"] == 0:
        k["tun_src"] = k["tun_dst"] = "0.0.0.0"
    return (
        "l2={l2} l3={l3} l4={l4} vlans={vlans} eth_dst={eth_dst} eth_src={eth_src} "
        "eth_type=0x{eth_type:04x} vlan_tci=0x{vlan_tci:04x} vlan_inner_tci=0x{vlan_inner_tci:04x} "
        "nw_proto={nw_proto} nw_tos={nw_tos} nw_ttl={nw_ttl} nw_frag={nw_frag} "
        "ip_src={ip_src} ip_dst={ip_dst} tp_src={tp_src} tp_dst={tp_dst} tcp_flags=0x{tcp_flags:03x} "
        "tun_id={tun_id} tun_flags={tun_flags} tun_src={tun_src} tun_dst={tun_dst}"
    ).format(**k)


def main(paths):
    for path in paths:
        pdml = subprocess.run(
            ["tshark", "-r", path, "-T", "pdml", "-o", "ip.defragment:FALSE",
             "-o", "ipv6.defragment:FALSE", "-d", "udp.port==%d,vxlan" % VXLAN_PORT],
            check=True, capture_output=True, text=True).stdout
        lines = []
        for pkt in ET.fromstring(pdml).iter("packet"):
            protos = [p for p in pkt if p.tag == "proto"
                      and p.get("name") not in ("geninfo", "frame", "fake-field-wrapper")]
            lines.append(render(protos))
        with open(path[: -len(".pcap")] + ".expected", "w") as out:
            out.write("\n".join(lines) + "\n")
        print(path, len(lines), "packets")


if __name__ == "__main__":
    main(sys.argv[1:])
