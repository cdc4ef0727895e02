#!/usr/bin/env bash
# Soak: `flowpath switch` on AF_XDP ports under traffic for a while (default 600 s), its
# resident memory, megaflows and masks sampled every 30 s; then one of its veths is deleted
# under it, and it must log the lost port and keep running, and stop cleanly on SIGTERM.
# With MISS_RATE 100% it is a new-flow flood: memory must stay flat once the caches are
# full (no more than 16 MiB of growth after the first 60 s) and the megaflows and masks
# within their limits, or the script fails. Needs root.
#   scripts/soak.sh [SECONDS] [RATE_PPS] [PORT_TYPE] [MISS_RATE]
#   e.g. scripts/soak.sh 600 200000 afxdp            # established flows
#        scripts/soak.sh 600 1000000 afxdp 100%      # a 10-minute new-flow flood
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
rate=${2:-200000}
kind=${3:-afxdp}
miss=${4:-0}
[ "$(id -u)" = 0 ] || { echo "soak: needs root (network namespaces, XDP)" >&2; exit 1; }
bin=${FLOWPATH_BIN:-./target/release/flowpath}
[ -x "$bin" ] || cargo build --release --locked -q -p flowpath
ns=fps$$
dir=$(mktemp -d /tmp/flowpath-soak.XXXXXX)
cleanup() {
    [ -n "${swpid:-}" ] && kill "$swpid" 2>/dev/null || true
    # The switch itself (found with pgrep under `ip netns exec`): killing the wrapper alone
    # left it running after an interrupted soak.
    [ -n "${sw:-}" ] && kill "$sw" 2>/dev/null || true
    [ -n "${genpid:-}" ] && kill "$genpid" 2>/dev/null || true
    for n in gen sw sink; do ip netns del "$ns-$n" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM

for n in gen sw sink; do
    ip netns add "$ns-$n"
    ip netns exec "$ns-$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip link add gen0 netns "$ns-gen" type veth peer name swin netns "$ns-sw"
ip link add swout netns "$ns-sw" type veth peer name sink0 netns "$ns-sink"
ip -n "$ns-gen" link set gen0 up
ip -n "$ns-sw" link set swin up
ip -n "$ns-sw" link set swout up
ip -n "$ns-sink" link set sink0 up

echo "priority=100,in_port=1,ip actions=mod_dl_dst:02:00:00:00:00:02,output:2" > "$dir/flows.txt"
# With new flows: never-hit rules on the source address and port (the generator's new flows
# vary those), so that each new flow is a new megaflow and the flood really is a miss storm.
if [ "$miss" != 0 ]; then
    echo "priority=200,ip,in_port=1,nw_src=10.10.1.254 actions=drop" >> "$dir/flows.txt"
    echo "priority=200,udp,in_port=1,tp_src=1 actions=drop" >> "$dir/flows.txt"
fi
cat > "$dir/switch.toml" <<EOF
[switch]
state = "$dir/state"
control = "$dir/ctl.sock"
flows = "$dir/flows.txt"
[[worker]]
core = 1
[[port]]
name = "swin"
number = 1
type = "$kind"
interface = "swin"
[[port]]
name = "swout"
number = 2
type = "$kind"
interface = "swout"
EOF
ip netns exec "$ns-sw" "$bin" switch --config "$dir/switch.toml" > "$dir/out" 2> "$dir/err" &
swpid=$!
for _ in $(seq 100); do grep -q ready "$dir/out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$dir/out" || { cat "$dir/err"; exit 1; }
# The switch runs under `ip netns exec`: find its own pid.
sw=$(pgrep -f "flowpath switch --config $dir/switch.toml" | head -1)
rss() { awk '/VmRSS/ {print $2}' "/proc/$sw/status"; }

ip netns exec "$ns-gen" taskset -c 0 "$bin" gen --tx gen0 --flows 1000 --miss-rate "$miss" --rate "$rate" --duration "$secs" --json \
    > "$dir/gen.json" 2> "$dir/gen.err" &
genpid=$!
start=$(rss)
echo "soak: $kind ports, $rate pps ($miss new flows) for $secs s; switch pid $sw RSS at start: $start KiB"
t=0
warm=
limits_ok=1
while kill -0 "$genpid" 2>/dev/null; do
    sleep 30; t=$((t + 30))
    [ "$t" -ge 60 ] && [ -z "$warm" ] && warm=$(rss)
    line=$(ip netns exec "$ns-sw" "$bin" stats --control "$dir/ctl.sock" --json | python3 -c '
import json, sys
w = json.load(sys.stdin)
g = [x.get("guard", {"megaflows": 0, "flow_limit": 0, "subtables": 0, "max_masks": 0, "miss_budget_drops": 0}) for x in w]
ok = all(x["megaflows"] <= x["flow_limit"] and x["subtables"] <= x["max_masks"] for x in g)
print("rx", sum(x["packets"] for x in w), "tx", sum(x["tx_packets"] for x in w),
      "megaflows", sum(x["megaflows"] for x in g), "masks", max(x["subtables"] for x in g),
      "budget drops", sum(x["miss_budget_drops"] for x in g), "" if ok else "LIMIT EXCEEDED")')
    case "$line" in *"LIMIT EXCEEDED"*) limits_ok=0 ;; esac
    echo "soak: t=${t}s RSS $(rss) KiB; $line"
done
genpid=
end=$(rss)
echo "soak: RSS at start $start KiB, after 60 s ${warm:-$start} KiB, at end $end KiB (growth $((end - start)) KiB)"
[ "$limits_ok" = 1 ] || { echo "soak: megaflows or masks over their limit" >&2; exit 1; }
if [ -n "$warm" ] && [ $((end - warm)) -gt 16384 ]; then
    echo "soak: memory grew $((end - warm)) KiB after the caches filled" >&2
    exit 1
fi
cat "$dir/gen.json"

echo "soak: deleting swout's veth under the running switch"
ip -n "$ns-sink" link del sink0
sleep 1
kill -0 "$sw" && echo "soak: switch still running after losing a port"
kill -TERM "$sw"
for _ in $(seq 100); do kill -0 "$sw" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$sw" 2>/dev/null; then echo "soak: switch did not stop on SIGTERM" >&2; exit 1; fi
wait "$swpid" && echo "soak: switch exited cleanly" || { echo "soak: switch exit status $?" >&2; exit 1; }
grep -i "swout" "$dir/err" | head -3
ip -n "$ns-sw" -d link show swin | grep -q prog/xdp && { echo "soak: XDP program left on swin" >&2; exit 1; }
echo "soak: no XDP program left behind"
