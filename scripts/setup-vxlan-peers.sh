#!/usr/bin/env bash
# Install the real VTEPs and tools that crates/flowpath/tests/vxlan_{interop,traffic}.rs drive
# (Debian/Ubuntu, as root), from nothing:
#   1. from the distribution: Open vSwitch (an OVS VTEP, and the reference in flowpath's
#      place with FLOWPATH_VXLAN_PEER=ovs), tshark + dumpcap (capture and dissect the
#      underlay), ping, iproute2 (ip, bridge: the Linux VTEP), ethtool (checksum offload off
#      on the test veths);
#   2. scapy for the python3 on PATH (the burst and the bad VXLAN packets): pip, else the
#      distribution's python3-scapy;
#   3. check the kernel makes vxlan devices and veths in a namespace, print the versions.
# Idempotent: what is already there is left alone. Then, as root:
#   FLOWPATH_VXLAN_REQUIRED=1 cargo test -p flowpath --test vxlan_interop --test vxlan_traffic
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/wanted.sh

need_root_and_apt "install Open vSwitch, tshark, ping, iproute2, ethtool and scapy (pip install scapy) by hand"

# Each line: a command that says the package is there, then the package.
wanted=(
    "ovs-vswitchd openvswitch-switch"
    "ovs-vsctl openvswitch-switch"
    "ovs-ofctl openvswitch-common"
    "ovs-appctl openvswitch-common"
    "tshark tshark"
    "dumpcap wireshark-common"
    "ping iputils-ping"
    "ip iproute2"
    "bridge iproute2"
    "ethtool ethtool"
)
# tshark asks, when installed, whether non-root users may capture; the tests capture as root.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
install_missing "${wanted[@]}"

if ! python3 -c 'import scapy.all' 2>/dev/null; then
    say "scapy for $(command -v python3)"
    t0=$(date +%s)
    python3 -m pip install -q --disable-pip-version-check scapy 2>/dev/null \
        || python3 -m pip install -q --disable-pip-version-check --break-system-packages scapy 2>/dev/null \
        || apt-get install -y -qq python3-scapy >/dev/null
    python3 -c 'import scapy.all' || die "python3 still cannot import scapy"
    say "scapy took $(($(date +%s) - t0)) s"
fi

# The kernel side of the Linux VTEP: a vxlan device (module vxlan) and a bridge in a
# namespace. A container without them cannot run the tests at all: say so here.
probe="fpvx-setup-$$"
ip netns add "$probe"
trap 'ip netns del "$probe" 2>/dev/null || true' EXIT
ip -n "$probe" link add name ul type veth peer name ul2 \
    || die "cannot make a veth pair in a network namespace"
ip -n "$probe" link add name vx type vxlan id 42 remote 10.9.0.2 local 10.9.0.1 dstport 4789 dev ul \
    || { modprobe vxlan 2>/dev/null && ip -n "$probe" link add name vx type vxlan id 42 remote 10.9.0.2 local 10.9.0.1 dstport 4789 dev ul; } \
    || die "the kernel makes no vxlan device (module vxlan): the Linux VTEP cannot run"
ip -n "$probe" link add name vxbr type bridge || die "the kernel makes no bridge (module bridge)"

say "versions:"
echo "  $(ovs-vswitchd --version | head -n1)"
echo "  $(tshark --version 2>/dev/null | head -n1)"
echo "  $(ping -V 2>&1 | head -n1)"
echo "  $(ip -V)"
echo "  $(ethtool --version)"
echo "  scapy $(python3 -c 'import scapy; print(scapy.__version__)') ($(python3 --version))"
say "done in $(($(date +%s) - start)) s"
