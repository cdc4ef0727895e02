#!/usr/bin/env python3
"""Send one OpenFlow 1.3 flow_mod that ovs-ofctl would never send (it normalises matches on
the client side) and print what the switch answers.

usage: raw_flow_mod.py HOST PORT CASE
  bad_prereq  match tcp_dst=80 with no eth_type/ip_proto (OpenFlow 1.3 7.2.3.6: the switch
              must refuse it with OFPET_BAD_MATCH / OFPBMC_BAD_PREREQ = type 4, code 9)
Prints one line per message received before the barrier reply:
  error xid=X type=T code=C
and finally "barrier" (the flow_mod was fully handled). Standard library only.
"""
import socket
import struct
import sys

OFP_VERSION = 4


def msg(mtype, xid, body=b""):
    return struct.pack("!BBHI", OFP_VERSION, mtype, 8 + len(body), xid) + body


def pad8(b):
    return b + b"\0" * (-len(b) % 8)


def oxm(field, value):
    return struct.pack("!HBB", 0x8000, field << 1, len(value)) + value


def match(*oxms):
    body = b"".join(oxms)
    return pad8(struct.pack("!HH", 1, 4 + len(body)) + body)


def flow_mod_bad_prereq():
    head = struct.pack("!QQBBHHHIIIH2x", 0, 0, 0, 0, 0, 0, 100, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    out = struct.pack("!HHIH6x", 0, 16, 1, 0xFFE5)  # output:1
    inst = struct.pack("!HH4x", 4, 8 + len(out)) + out  # apply_actions
    return head + match(oxm(14, struct.pack("!H", 80))) + inst  # tcp_dst=80 alone


def recv_msg(s):
    head = b""
    while len(head) < 8:
        chunk = s.recv(8 - len(head))
        if not chunk:
            raise SystemExit("connection closed by the switch")
        head += chunk
    _, mtype, length, xid = struct.unpack("!BBHI", head)
    body = b""
    while len(body) < length - 8:
        chunk = s.recv(length - 8 - len(body))
        if not chunk:
            raise SystemExit("connection closed by the switch")
        body += chunk
    return mtype, xid, body


def main():
    host, port, case = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if case != "bad_prereq":
        raise SystemExit("unknown case " + case)
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(msg(0, 1, struct.pack("!HHI", 1, 8, 1 << OFP_VERSION)))  # hello, bitmap {1.3}
    s.sendall(msg(14, 2, flow_mod_bad_prereq()) + msg(20, 3))  # flow_mod, barrier
    while True:
        mtype, xid, body = recv_msg(s)
        if mtype == 1:
            etype, code = struct.unpack("!HH", body[:4])
            print("error xid=%d type=%d code=%d" % (xid, etype, code), flush=True)
        elif mtype == 2:  # echo request
            s.sendall(msg(3, xid, body))
        elif mtype == 21:
            print("barrier", flush=True)
            return


if __name__ == "__main__":
    main()
