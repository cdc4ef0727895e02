#!/usr/bin/env bash
# Resident memory of `flowpath run` with no flows, with N flows (default 100,000), and after
# `flows replace` with M flows (default 1,000): VmRSS and VmHWM from /proc, and the bytes
# per flow the N flows added. Two flow sets: `simple` (exact nw_dst and nw_src, one
# output, varied ports and priorities) and `classbench` (the ClassBench acl2_10k filters,
# prefixes and port ranges, repeated over varied tables/priorities up to N). `--markdown`
# prints a table (as `scripts/results.py` pastes into docs/flows.md).
#
#   scripts/flow-memory.sh [--flowpath BIN] [--flows N] [--after M] [--set simple|classbench] [--markdown]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${FLOWPATH:-target/release/flowpath}
N=100000
M=1000
SET=simple
MD=
while [ $# -gt 0 ]; do
    case "$1" in
        --flowpath) BIN=$2; shift 2 ;;
        --flows) N=$2; shift 2 ;;
        --after) M=$2; shift 2 ;;
        --set) SET=$2; shift 2 ;;
        --markdown) MD=1; shift ;;
        *) echo "usage: $0 [--flowpath BIN] [--flows N] [--after M] [--set simple|classbench] [--markdown]" >&2; exit 2 ;;
    esac
done
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release -p flowpath" >&2; exit 2; }
CB=${FLOWPATH_CLASSBENCH:-../shared/data/classbench/acl2_10k}
[ "$SET" != classbench ] || [ -f "$CB" ] || CB=crates/bench/tests/data/acl2_1k
dir=$(mktemp -d /tmp/fpmem.XXXXXX)
pid=
cleanup() { [ -z "$pid" ] || kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

# N flows of the chosen set into $1.
flows() {
    python3 - "$SET" "$1" "$2" "$CB" <<'PY'
import sys
kind, n, out, cb = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
lines = []
if kind == "simple":
    for i in range(n):
        a, b = i >> 16 & 0xff, i >> 8 & 0xff
        lines.append(f"priority={100 + i % 7},{'tcp' if i % 2 else 'udp'},"
                     f"nw_src=192.168.{i % 256}.{(i >> 8) % 256},nw_dst=10.{a}.{b}.{i & 0xff},"
                     f"tp_dst={1 + i % 1000},actions=output:{2 + i % 3}")
else:
    rules = []
    for l in open(cb):
        f = l.lstrip("@").split("\t")
        if len(f) < 5:
            continue
        sl, sh = (int(x) for x in f[2].split(":"))
        dl, dh = (int(x) for x in f[3].split(":"))
        proto, pm = (int(x, 16) for x in f[4].split("/"))
        m = [f"nw_src={f[0]}", f"nw_dst={f[1]}"]
        if pm == 0xff and proto in (6, 17):
            m.insert(0, "tcp" if proto == 6 else "udp")
            if (sl, sh) != (0, 65535):
                m.append(f"tp_src={sl}-{sh}" if sl != sh else f"tp_src={sl}")
            if (dl, dh) != (0, 65535):
                m.append(f"tp_dst={dl}-{dh}" if dl != dh else f"tp_dst={dl}")
        else:
            m.insert(0, "ip")
            if pm == 0xff:
                m.append(f"nw_proto={proto}")
        rules.append(",".join(m))
    for i in range(n):
        r = rules[i % len(rules)]
        lines.append(f"table={i // len(rules) % 200},priority={1 + i % 60000},{r},actions=output:2")
open(out, "w").write("\n".join(lines) + "\n")
PY
}

mb() { awk -v k="$1" '$1 == k ":" {printf "%.1f", $2 / 1024}' "/proc/$pid/status"; }
kb() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
# One row: what, VmRSS, VmHWM.
row() {
    if [ -n "$MD" ]; then
        echo "| $1 | $(mb VmRSS) MB | $(mb VmHWM) MB |"
    else
        printf "%-26s VmRSS %7s MB   VmHWM %7s MB\n" "$1:" "$(mb VmRSS)" "$(mb VmHWM)"
    fi
}
# `flows replace FILE`, its summary on stderr.
replace() {
    "$BIN" flows replace "$1" --control "$dir/ctl.sock" --timeout 300 2>&1 >/dev/null | sed 's/^/  /' >&2
    # The switch trims freed memory every 250 ms; give it a few rounds.
    sleep 1.5
}

flows "$N" "$dir/big.txt"
flows "$M" "$dir/small.txt"
"$BIN" run --no-state --control "$dir/ctl.sock" 2>"$dir/run.err" &
pid=$!
for _ in $(seq 100); do [ -S "$dir/ctl.sock" ] && break; sleep 0.1; done
sleep 0.5
if [ -n "$MD" ]; then
    echo "| \`flowpath run\`, $SET flows | VmRSS | VmHWM (peak) |"
    echo "|---|---:|---:|"
else
    echo "flowpath run, $SET flows ($BIN)"
fi
row "0 flows"; base=$(kb)
replace "$dir/big.txt"
row "$N flows"; big=$(kb)
replace "$dir/small.txt"
row "after replace with $M"; after=$(kb)
per=$(( (big - base) * 1024 / N ))
over=$(awk -v a="$after" -v b="$base" 'BEGIN {printf "%.1f", (a - b) / 1024}')
[ -z "$MD" ] || echo
echo "Bytes per flow (RSS with $N flows less RSS with none, over $N): $per. After the replace with $M: $over MB above no flows."
