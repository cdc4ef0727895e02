"""The conntrack interop tests' client and server: real sockets in network namespaces.

serve ADDR...        TCP 8080 (answer "hi <peer address>", then close), TCP 8081 (hold
                     the connection open), UDP 5353 (echo), on each ADDR, until killed
get HOST PORT        connect, send, print the answer (exit 1 on failure)
hold HOST PORT SECS  connect and keep the connection open SECS seconds
udp HOST PORT        one datagram and its echo (exit 1 without one)
refused HOST PORT    a connection must be refused (exit 0 if it is)
blocked HOST PORT    a connection must time out (exit 0 if it does)
"""
import socket
import sys
import threading
import time


def tcp_server(addr, port, hold):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(64)
    held = []
    while True:
        c, peer = s.accept()
        if hold:
            held.append(c)
            continue
        c.settimeout(3)
        try:
            c.recv(100)
            c.sendall(("hi %s via %s" % (peer[0], c.getsockname()[0])).encode())
        finally:
            c.close()


def udp_server(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    while True:
        d, peer = s.recvfrom(2048)
        s.sendto(d, peer)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "serve":
        for a in args:
            for port, hold in ((8080, False), (8081, True)):
                threading.Thread(target=tcp_server, args=(a, port, hold), daemon=True).start()
            threading.Thread(target=udp_server, args=(a, 5353), daemon=True).start()
        print("ready", flush=True)
        while True:
            time.sleep(3600)
    host, port = args[0], int(args[1])
    if cmd == "get":
        s = socket.create_connection((host, port), timeout=3)
        s.sendall(b"x")
        print(s.recv(100).decode(), flush=True)
        s.close()
    elif cmd == "hold":
        s = socket.create_connection((host, port), timeout=3)
        print("open", flush=True)
        time.sleep(float(args[2]))
        s.close()
    elif cmd == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(3)
        s.sendto(b"ping", (host, port))
        s.recvfrom(2048)
        print("echo", flush=True)
    elif cmd == "refused":
        try:
            socket.create_connection((host, port), timeout=3)
        except ConnectionRefusedError:
            return
        sys.exit("connected")
    elif cmd == "blocked":
        try:
            socket.create_connection((host, port), timeout=2)
        except (socket.timeout, TimeoutError):
            return
        sys.exit("not blocked")


if __name__ == "__main__":
    main()
