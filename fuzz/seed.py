#!/usr/bin/env python3
"""Seed inputs for flowpath's fuzz targets, from captures, flows files and requests.

Used by scripts/fuzz.sh (and once to make corpus-seed/):
  seed.py frames  OUT PREFIX MAX FILE...   each Ethernet frame of pcap/pcapng FILEs -> OUT/PREFIX-N
  seed.py lines   OUT PREFIX MAX FILE...   each flow line (not blank, not '#') -> OUT/PREFIX-N
  seed.py requests OUT PREFIX MAX FILE...  control requests (JSON) made of those flow lines
MAX bounds the files written per call; identical inputs are written once.
"""
import hashlib
import json
import os
import struct
import sys


def frames(path):
    """Yield the frames of a classic pcap (either byte order) or pcapng file of Ethernet."""
    data = open(path, "rb").read()
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        yield from pcapng_frames(data)
        return
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        e = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = ">"
    else:
        return
    if struct.unpack(e + "I", data[20:24])[0] != 1:
        return  # not Ethernet
    off = 24
    while off + 16 <= len(data):
        caplen = struct.unpack(e + "I", data[off + 8:off + 12])[0]
        yield data[off + 16:off + 16 + caplen]
        off += 16 + caplen


def pcapng_frames(data):
    off, e, links = 0, "<", []
    while off + 12 <= len(data):
        btype = struct.unpack(e + "I", data[off:off + 4])[0]
        if btype == 0x0A0D0D0A:
            e = "<" if data[off + 8:off + 12] == b"\x4d\x3c\x2b\x1a" else ">"
            btype = 0x0A0D0D0A
            links = []
        blen = struct.unpack(e + "I", data[off + 4:off + 8])[0]
        if blen < 12:
            return
        body = data[off + 8:off + blen - 4]
        if btype == 1:
            links.append(struct.unpack(e + "H", body[:2])[0])
        elif btype == 6:
            iface, _, _, caplen = struct.unpack(e + "IIII", body[:16])
            if iface < len(links) and links[iface] == 1:
                yield body[20:20 + caplen]
        off += blen


def flow_lines(path):
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        t = line.strip()
        if t and not t.startswith("#") and not t.startswith("!"):
            yield line.encode()


def requests(path):
    """Requests as `flowpath flows` sends them: each op with a flow, and a few batches."""
    lines = [l.decode() for l in flow_lines(path)]
    ops = ["add", "mod", "mod-strict", "del", "del-strict", "replace", "dump", "stats"]
    for i, line in enumerate(lines):
        yield json.dumps({"op": ops[i % len(ops)], "text": line}).encode()
    for i in range(0, len(lines), 5):
        batch = "\n".join(lines[i:i + 5])
        yield (json.dumps({"op": "add", "text": batch}) + json.dumps({"op": "dump", "text": ""})
               + json.dumps({"op": "del", "text": lines[i]})).encode()


def main():
    kind, out, prefix, most = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    gen = {"frames": frames, "lines": flow_lines, "requests": requests}[kind]
    os.makedirs(out, exist_ok=True)
    seen, n = set(), 0
    for path in sys.argv[5:]:
        for item in gen(path):
            h = hashlib.sha1(item).hexdigest()
            if h in seen:
                continue
            seen.add(h)
            with open(os.path.join(out, f"{prefix}-{n:03d}"), "wb") as f:
                f.write(item)
            n += 1
            if n >= most:
                print(f"{out}: {n} inputs from {prefix}")
                return
    print(f"{out}: {n} inputs from {prefix}")


if __name__ == "__main__":
    main()
