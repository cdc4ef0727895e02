# Sends VLAN-tagged frames through the kernel's AF_PACKET path on veth "va" (the
# container kernel has no 8021q module, so no VLAN device can originate them).
import socket, struct
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b)//2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return (~s) & 0xffff
def ipv4(src, dst, proto, payload, tos=0, ttl=64, ident=1):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20+len(payload), ident, 0x4000, ttl, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + payload
def icmp_echo(seq):
    p = struct.pack("!BBHHH", 8, 0, 0, 0x1234, seq) + b"flowpath" * 4
    return p[:2] + struct.pack("!H", csum(p)) + p[4:]
def udp(sp, dp, data):
    return struct.pack("!HHHH", sp, dp, 8+len(data), 0) + data
dst = bytes.fromhex("02000000000b"); src = bytes.fromhex("02000000000a")
def tag(tpid, pcp, vid): return struct.pack("!HH", tpid, (pcp << 13) | vid)
frames = [
    dst + src + tag(0x8100, 0, 100) + b"\x08\x00" + ipv4("10.100.0.1", "10.100.0.2", 1, icmp_echo(1)),
    dst + src + tag(0x8100, 5, 100) + b"\x08\x00" + ipv4("10.100.0.1", "10.100.0.2", 17, udp(1111, 2222, b"vlan"), tos=0xb8),
    dst + src + tag(0x88a8, 3, 200) + tag(0x8100, 0, 100) + b"\x08\x00" + ipv4("10.100.0.1", "10.100.0.2", 1, icmp_echo(2)),
    b"\xff" * 6 + src + tag(0x8100, 0, 100) + b"\x08\x06" + struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, src,
        socket.inet_aton("10.100.0.1"), b"\0" * 6, socket.inet_aton("10.100.0.2")),
]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("va", 0))
for f in frames:
    s.send(f + b"\0" * max(0, 60 - len(f)))
