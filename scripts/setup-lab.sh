#!/usr/bin/env bash
# Set up this machine for `flowpath lab` (Debian/Ubuntu, as root), from nothing:
#   1. install every peer the lab drives and the tools around it: Open vSwitch, DPDK's
#      dpdk-testpmd and dpdk-test-acl with the AF_XDP, AF_PACKET and null PMDs,
#      netsniff-ng (trafgen), clang/llvm/libbpf-dev, bpftool, tshark, iproute2, ethtool;
#   2. reserve huge pages (HUGEPAGES, default 512 x 2 MiB) and mount hugetlbfs;
#   3. rebuild flowpath (release) so that its XDP programs are compiled in: a binary built
#      before clang was there has none (AF_XDP ports, the XDP tier, `flowpath gen --tx`
#      and the lab's sinks then fail or fall back), and cargo does not rebuild it by itself;
#   4. ask the binary (`flowpath lab --check`) whether every lab system can now run.
# Idempotent: what is already there is left alone. Then: ./target/release/flowpath lab
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
HUGEPAGES=${HUGEPAGES:-512}

say() { echo "setup-lab: $*"; }
die() {
    echo "setup-lab: $*" >&2
    exit 1
}

[ "$(id -u)" = 0 ] || die "needs root (it installs packages and reserves huge pages; the lab itself runs as root too): sudo $0"
command -v apt-get >/dev/null 2>&1 && command -v dpkg-query >/dev/null 2>&1 \
    || die "no apt-get: this script knows Debian and Ubuntu only. Install by hand: Open vSwitch, DPDK (dpdk-testpmd, dpdk-test-acl, net_af_xdp PMD), netsniff-ng, clang, llvm, libbpf headers, bpftool, tshark, iproute2, ethtool; then rebuild flowpath (cargo build --release -p flowpath)"

export DEBIAN_FRONTEND=noninteractive
# apt's own temporary files (and dpkg's) on disk, not in a small /tmp.
export TMPDIR=/var/tmp

updated=0
apt_update() {
    if [ "$updated" = 0 ]; then
        say "apt-get update"
        apt-get update -qq
        updated=1
    fi
}

# The first of the names that apt knows (a package's name may differ between releases).
first_known() {
    local p
    for p in "$@"; do
        if [ -n "$(apt-cache pkgnames "$p" 2>/dev/null | grep -x -- "$p")" ]; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# A DPDK driver package: its name carries DPDK's ABI version (librte-net-af-xdp23 in
# Debian 12, ...24 and later elsewhere); prefer the one matching the installed librte-eal.
dpdk_pmd() {
    local stem=$1 abi name
    abi=$(dpkg-query -W -f='${Package}\n' 'librte-eal*' 2>/dev/null | sed -n 's/^librte-eal\([0-9][0-9.]*\)$/\1/p' | head -n1)
    if [ -n "$abi" ]; then
        name=$(first_known "$stem$abi" "$stem-$abi") && { echo "$name"; return 0; }
    fi
    apt-cache pkgnames "$stem" 2>/dev/null | grep -E -- "^$stem-?[0-9][0-9.]*$" | sort -V | tail -n1
}

# Each line: a command or file that says the packages are there, then the packages. DPDK's
# test programs are in dpdk-dev in Debian 12 and in dpdk in some Ubuntu releases: both.
wanted=(
    "ip iproute2"
    "ethtool ethtool"
    "taskset util-linux"
    "sysctl procps"
    "ovs-vswitchd openvswitch-switch"
    "ovs-ofctl openvswitch-common"
    "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk openvswitch-switch-dpdk"
    "dpdk-testpmd dpdk dpdk-dev"
    "dpdk-test-acl dpdk dpdk-dev"
    "trafgen netsniff-ng"
    "clang clang"
    "llc llvm"
    "/usr/include/bpf/bpf_helpers.h libbpf-dev"
    "bpftool bpftool"
    "tshark tshark"
    "conntrack conntrack"
    "nft nftables"
    "cc build-essential"
)

need=()
add() { [[ " ${need[*]} " == *" $1 "* ]] || need+=("$1"); }
drop() {
    local kept=() p
    for p in "${need[@]}"; do [ "$p" != "$1" ] && kept+=("$p"); done
    need=("${kept[@]}")
}
for w in "${wanted[@]}"; do
    probe=${w%% *}
    case "$probe" in
    /*) [ -e "$probe" ] && continue ;;
    *) command -v "$probe" >/dev/null 2>&1 && continue ;;
    esac
    for p in ${w#* }; do add "$p"; done
done
# bpftool: its own package in Debian 12 and later; Ubuntu ships it in linux-tools.
if [[ " ${need[*]} " == *" bpftool "* ]]; then
    apt_update
    if ! first_known bpftool >/dev/null; then
        drop bpftool
        if alt=$(first_known "linux-tools-$(uname -r)" linux-tools-generic); then
            add linux-tools-common
            add "$alt"
        else
            say "WARNING: no bpftool package known to apt; going on without it (the lab does not need it)"
        fi
    fi
fi

# DPDK's poll-mode drivers: net_af_xdp (the lab's testpmd row), net_af_packet and net_null
# (testpmd by hand, on any interface or none), net_pcap and net_null (`flowpath rig`'s
# in-memory OVS-DPDK), and the ring mempool every testpmd run needs.
# They are plugins in their own packages: a testpmd without them starts and finds no port.
have_pmd() {
    local f
    for f in /usr/lib/*/dpdk/pmds-*/librte_"$1".so* /usr/lib64/dpdk/pmds-*/librte_"$1".so*; do
        [ -e "$f" ] && return 0
    done
    return 1
}
pmd_missing=()
for drv in net_af_xdp net_af_packet net_null net_pcap mempool_ring; do
    have_pmd "$drv" || pmd_missing+=("$drv")
done
if [ ${#pmd_missing[@]} -gt 0 ]; then
    apt_update
    # librte-eal comes with dpdk-dev: install that first so that the drivers match its ABI.
    if [[ " ${need[*]} " == *" dpdk-dev "* ]]; then
        say "installing dpdk and dpdk-dev first (the drivers' packages must match their ABI)"
        apt-get install -y -qq --no-install-recommends dpdk dpdk-dev >/dev/null
        drop dpdk
        drop dpdk-dev
    fi
    for drv in "${pmd_missing[@]}"; do
        stem="librte-$(echo "$drv" | tr _ -)"
        pkg=$(dpdk_pmd "$stem") || true
        [ -n "$pkg" ] || die "no package for DPDK's $drv driver ($stem<ABI>) in apt's lists"
        add "$pkg"
    done
fi

if [ ${#need[@]} -gt 0 ]; then
    apt_update
    if [[ " ${need[*]} " == *" tshark "* ]]; then
        # wireshark-common asks whether non-root users may capture: answer no, unasked.
        echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    fi
    say "installing ${need[*]}"
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
    say "packages: all there (Open vSwitch and its DPDK build, DPDK testpmd/test-acl and PMDs, netsniff-ng, clang/llvm/libbpf-dev, bpftool, tshark, iproute2, ethtool)"
fi

# Open vSwitch's package starts its system daemons; the lab runs its own, in its own
# directories, and does not need them (they are left as the package set them up).

# --- huge pages -------------------------------------------------------------------------
nr=/proc/sys/vm/nr_hugepages
have=$(cat "$nr")
if [ "$have" -lt "$HUGEPAGES" ]; then
    say "reserving $HUGEPAGES huge pages of 2 MiB (had $have)"
    echo "$HUGEPAGES" >"$nr"
    have=$(cat "$nr")
    [ "$have" -ge "$HUGEPAGES" ] || say "WARNING: the kernel gave only $have of $HUGEPAGES huge pages (memory fragmented?); the testpmd row reserves what it needs itself"
else
    say "huge pages: $have reserved (>= $HUGEPAGES)"
fi
if ! grep -qs " /dev/hugepages hugetlbfs " /proc/mounts; then
    say "mounting hugetlbfs at /dev/hugepages"
    mkdir -p /dev/hugepages
    mount -t hugetlbfs -o pagesize=2M nodev /dev/hugepages
fi
say "(not kept across a reboot: run this script again after one)"

# --- flowpath, with its XDP programs ----------------------------------------------------
# Build as the user who called sudo (their toolchain, and a target/ they still own).
as_user=()
if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
    as_user=(sudo -u "$SUDO_USER" -H --preserve-env=CARGO_TARGET_DIR)
fi
build() {
    "${as_user[@]}" bash -c '
        if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then . "$HOME/.cargo/env"; fi
        command -v cargo >/dev/null 2>&1 || { echo "setup-lab: cargo not found: flowpath needs a Rust toolchain >= 1.85 (rustup: https://rustup.rs)" >&2; exit 1; }
        cd "$1" && cargo build --release --locked -p flowpath' _ "$ROOT"
}
exe=${CARGO_TARGET_DIR:-$ROOT/target}/release/flowpath
say "building flowpath (cargo build --release --locked -p flowpath)"
build
report=$TMPDIR/flowpath-setup-lab.check
check() { "$exe" lab --check >"$report" 2>&1; }
if ! check && grep -q "XDP programs: MISSING" "$report"; then
    # The objects are compiled by build scripts that cargo reruns only when the C sources
    # change: a binary built without clang stays without its programs. Touch the sources.
    say "this binary was built without its XDP programs (no clang then): rebuilding them"
    touch crates/ports/bpf/* crates/xdptier/bpf/* crates/lab/bpf/*
    build
    check || true
fi
cat "$report"
if check; then
    say "ready: every lab system can run. Next: $exe lab"
else
    die "some lab systems still cannot run (above). $exe lab runs the others and says why"
fi
