#!/bin/bash
# Generates real kernel traffic in throwaway network namespaces and captures it.
set -u
OUT=${OUT:-/tmp/fpparse-captures}
mkdir -p "$OUT"
A=fpparse-a; B=fpparse-b
cleanup() { ip netns del $A 2>/dev/null; ip netns del $B 2>/dev/null; }
cleanup
ip netns add $A; ip netns add $B
ip link add va netns $A type veth peer name vb netns $B
ina() { ip netns exec $A "$@"; }
inb() { ip netns exec $B "$@"; }
for ns in $A $B; do for c in all default; do ip netns exec $ns sysctl -qw net.ipv6.conf.$c.disable_ipv6=0 net.ipv6.conf.$c.router_solicitations=0; done; done
ina ip link set lo up; inb ip link set lo up
ina ip link set va address 02:00:00:00:00:0a; inb ip link set vb address 02:00:00:00:00:0b
ina ethtool -K va rxvlan off txvlan off tso off gso off gro off tx off rx off >/dev/null 2>&1
inb ethtool -K vb rxvlan off txvlan off tso off gso off gro off tx off rx off >/dev/null 2>&1
ina ip addr add 10.1.0.1/24 dev va; inb ip addr add 10.1.0.2/24 dev vb
ina ip addr add fd00:1::1/64 dev va nodad; inb ip addr add fd00:1::2/64 dev vb nodad
ina ip link set va up; inb ip link set vb up
# VLAN 100 on top of the veth pair
# VXLAN over IPv4 (VNI 42) and over IPv6 (VNI 4242)
ina ip link add vx0 type vxlan id 42 dstport 4789 remote 10.1.0.2 local 10.1.0.1 dev va
inb ip link add vx0 type vxlan id 42 dstport 4789 remote 10.1.0.1 local 10.1.0.2 dev vb
ina ip link set vx0 address 02:00:00:00:01:0a; inb ip link set vx0 address 02:00:00:00:01:0b
ina ip addr add 10.42.0.1/24 dev vx0; inb ip addr add 10.42.0.2/24 dev vx0
ina ip link set vx0 up; inb ip link set vx0 up
ina ip link add vx6 type vxlan id 4242 dstport 4789 remote fd00:1::2 local fd00:1::1 dev va
inb ip link add vx6 type vxlan id 4242 dstport 4789 remote fd00:1::1 local fd00:1::2 dev vb
ina ip link set vx6 address 02:00:00:00:02:0a; inb ip link set vx6 address 02:00:00:00:02:0b
ina ip addr add fd00:42::1/64 dev vx6 nodad; inb ip addr add fd00:42::2/64 dev vx6 nodad
ina ip link set vx6 up; inb ip link set vx6 up
sleep 1

cap() { # name filter command...
  local name=$1 filter=$2; shift 2
  ip netns exec $A tcpdump -i va -U -s 0 -w "$OUT/$name.pcap" $filter >/dev/null 2>&1 &
  local pid=$!
  sleep 1
  "$@"
  sleep 1
  kill $pid; wait $pid 2>/dev/null
  echo "$name: $(tcpdump -r $OUT/$name.pcap 2>/dev/null | wc -l) packets"
}
flush() { ina ip neigh flush all; inb ip neigh flush all; }

flush; cap arp "arp" ina ping -c 1 -W 1 10.1.0.2
cap icmp "icmp" ina ping -c 3 -i 0.2 10.1.0.2
flush; cap icmp6 "icmp6" ina ping -6 -c 3 -i 0.2 fd00:1::2
inb python3 -c '
import socket,time
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(("10.1.0.2",5000));s.settimeout(3)
print(s.recvfrom(100))' >/dev/null &
sleep 0.5
cap udp "udp" ina python3 -c '
import socket
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(("10.1.0.1",4000))
s.sendto(b"hello",("10.1.0.2",5000)); s.sendto(b"x"*3,("10.1.0.2",5001))
s6=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM);s6.sendto(b"hi6",("fd00:1::2",5002))'
wait
inb python3 -c '
import socket
s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(("10.1.0.2",8080));s.listen(1);s.settimeout(5)
c,_=s.accept();c.sendall(c.recv(100));c.close()' &
sleep 0.5
cap tcp "tcp" ina python3 -c '
import socket,time
c=socket.create_connection(("10.1.0.2",8080),timeout=3);c.sendall(b"ping");c.recv(100);c.close();time.sleep(0.3)'
wait
cap vlan "" ina python3 "$(dirname "$0")/vlan_send.py"
cap frag4 "ip" ina ping -c 1 -s 3000 10.1.0.2
cap frag6 "ip6 and not icmp6[0] >= 133" ina ping -6 -c 1 -s 3000 fd00:1::2
flush; cap vxlan "udp port 4789" ina ping -c 2 -i 0.2 10.42.0.2
flush; cap vxlan6 "udp port 4789" ina ping -6 -c 2 -i 0.2 fd00:42::2
cleanup
