#!/usr/bin/env bash
# Coverage-guided fuzzing of flowpath's parsers: seed each target's corpus, run each target
# for a bounded time, and stop with the reproduction steps if one crashes.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 20 s, every target)
#
# Targets (fuzz/fuzz_targets/, checks in fuzz/src/): packet_parse, flow_syntax, pcap_read,
# control_request, openflow_decode, ct_tcp, ct_nat. The engine is libFuzzer through cargo-fuzz, which needs a nightly
# toolchain (`rustup toolchain list`); cargo-fuzz is installed if missing. Without nightly
# the script falls back to AFL++ through cargo-afl when `cargo afl` is installed (or
# FLOWPATH_FUZZ_AFL=install lets it install cargo-afl from crates.io), and otherwise says
# it skipped and exits 0. Exits 1 when a target crashes.
#
# The working corpora (fuzz/corpus/<target>/) grow from run to run; they are seeded from
# fuzz/corpus-seed/ and fuzz/regressions/ (checked in), from `flowpath gen` and `randpkt`
# captures split into frames, and from the flows files under crates/*/tests/data.
# Environment: FLOWPATH_FUZZ_JOBS (parallel libFuzzer jobs per target, default 1),
# FLOWPATH_FUZZ_ENGINE=libfuzzer|afl to force one, FLOWPATH_FUZZ_SANITIZER (libFuzzer
# builds: default none, since the fuzzed code is safe Rust and ASan halves the speed;
# `address` for ASan). Debug assertions (overflow checks) are on either way.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

secs=${1:-20}
[ $# -gt 0 ] && shift
all=(packet_parse flow_syntax pcap_read control_request openflow_decode ct_tcp ct_nat)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
for t in "${targets[@]}"; do
    [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz: unknown target $t (have: ${all[*]})" >&2; exit 2; }
done
[[ "$secs" =~ ^[0-9]+$ ]] || { echo "fuzz: SECONDS_PER_TARGET must be a number, not $secs" >&2; exit 2; }

if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    . "$HOME/.cargo/env"
fi

# Which crate's stable test replays a target's checked-in inputs.
crate_of() {
    case $1 in
        packet_parse) echo flowpath-packet ;;
        flow_syntax) echo flowpath-flowsyntax ;;
        pcap_read) echo flowpath-base ;;
        control_request) echo flowpath-switch ;;
        openflow_decode) echo flowpath-openflow ;;
        ct_tcp | ct_nat) echo flowpath-conntrack ;;
    esac
}

# The stable test that replays them.
test_of() {
    case $1 in
        ct_tcp) echo tcp_fuzz_corpus ;;
        ct_nat) echo nat_fuzz_corpus ;;
        *) echo fuzz_corpus ;;
    esac
}

# ---------------------------------------------------------------------------------------
# The engine.

engine=${FLOWPATH_FUZZ_ENGINE:-}
if [ -z "$engine" ]; then
    if command -v rustup >/dev/null 2>&1 && rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
        engine=libfuzzer
    elif cargo afl --version >/dev/null 2>&1 || [ "${FLOWPATH_FUZZ_AFL:-}" = install ]; then
        engine=afl
    else
        echo "fuzz: skipped: no nightly toolchain (cargo-fuzz/libFuzzer needs one: rustup toolchain install nightly)"
        echo "fuzz: and no cargo-afl for the AFL++ fallback (cargo install cargo-afl && cargo afl config --build,"
        echo "fuzz: or run with FLOWPATH_FUZZ_AFL=install). The corpus replay tests still run in cargo test."
        exit 0
    fi
fi

if [ "$engine" = libfuzzer ] && ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi
if [ "$engine" = afl ] && ! cargo afl --version >/dev/null 2>&1; then
    echo "== installing cargo-afl (and building its AFL++)"
    # A machine that cannot build the fuzzer has not found a bug: say so and skip.
    cargo install cargo-afl --locked \
        || { echo "fuzz: skipped: cargo install cargo-afl failed (see above)"; exit 0; }
fi
if [ "$engine" = afl ]; then
    # cargo-afl builds its AFL++ when installed (`config --build` says so, or builds it if
    # it is missing); afl-fuzz's checks of the core pattern and CPU frequency are relaxed,
    # since CI cannot change either.
    cargo afl config --build >/dev/null 2>&1 || true
    export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
fi

# ---------------------------------------------------------------------------------------
# Seeds.

work=$(mktemp -d "${TMPDIR:-/tmp}/flowpath-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
corpus=fuzz/corpus
seed() { python3 fuzz/seed.py "$@" >/dev/null; }

echo "== seeding fuzz/corpus/ (flowpath gen, randpkt, flows files, checked-in seeds)"
for t in "${all[@]}"; do
    mkdir -p "$corpus/$t"
    for d in fuzz/corpus-seed/$t fuzz/regressions/$t; do
        [ -d "$d" ] && find "$d" -maxdepth 1 -type f ! -name expected.txt -exec cp {} "$corpus/$t/" \;
    done
done

# The generator's frames: every encapsulation and protocol, a few sizes.
cargo build --release -q -p flowpath
fp=target/release/flowpath
caps=()
i=0
for encap in ipv4 ipv6 vxlan4-ipv4 vxlan4-ipv6 vxlan6-ipv4 vxlan6-ipv6; do
    for proto in udp tcp icmp; do
        i=$((i + 1))
        "$fp" gen --flows 8 --packets 12 --encap "$encap" --proto "$proto" --size mix:64*3,200,1518 \
            --seed "$i" --out "$work/gen-$encap-$proto.pcap" >/dev/null
        caps+=("$work/gen-$encap-$proto.pcap")
    done
done
seed frames "$corpus/packet_parse" gen 400 "${caps[@]}" crates/packet/tests/data/*.pcap
cp "$work/gen-ipv4-udp.pcap" "$work/gen-vxlan6-ipv6-tcp.pcap" "$corpus/pcap_read/"

# randpkt: random packets behind real headers (Ethernet link types for the parser; the
# capture reader also gets the other link types, which it must refuse).
if command -v randpkt >/dev/null 2>&1; then
    eth_types=(arp bgp bvlc dns eth giop icmp ip ipv6 m2m megaco nbns sctp syslog tds udp)
    for t in "${eth_types[@]}"; do
        randpkt -b 400 -c 12 -t "$t" "$work/randpkt-$t.pcap"
    done
    seed frames "$corpus/packet_parse" randpkt 400 "$work"/randpkt-*.pcap
    for t in udp ipv6 tr fddi; do
        randpkt -b 200 -c 3 -t "$t" "$corpus/pcap_read/randpkt-$t.pcap"
    done
else
    echo "fuzz: randpkt not found (wireshark's tools): no randpkt seeds"
fi
if command -v editcap >/dev/null 2>&1; then
    editcap -F pcapng "$work/gen-vxlan4-ipv4-udp.pcap" "$corpus/pcap_read/gen-vxlan4-ipv4-udp.pcapng"
fi

# Flows: every line of the flows test files, ClassBench lines, and requests made of them.
flows=(crates/flowsyntax/tests/data/*.flows)
seed lines "$corpus/flow_syntax" flows 1000 "${flows[@]}"
for f in crates/bench/tests/data/acl2_1k crates/bench/tests/data/fw2_1k; do
    [ -f "$f" ] && head -n 20 "$f" >"$corpus/flow_syntax/classbench-$(basename "$f")"
done
seed requests "$corpus/control_request" requests 1000 "${flows[@]}"

for t in "${targets[@]}"; do
    printf '   %-16s %5d inputs\n' "$t" "$(find "$corpus/$t" -type f | wc -l)"
done

# ---------------------------------------------------------------------------------------
# Runs.

status=0
summary=()
if [ "$engine" = libfuzzer ]; then
    san=${FLOWPATH_FUZZ_SANITIZER:-none}
    echo "== building the targets (cargo +nightly fuzz build, sanitizer $san, debug assertions)"
    cargo +nightly fuzz build -s "$san" >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 1; }
    for t in "${targets[@]}"; do
        echo "== $t: ${secs}s (libFuzzer)"
        log="$work/$t.log"
        mkdir -p "fuzz/artifacts/$t"
        before=$(find "fuzz/artifacts/$t" -type f | wc -l)
        set +e
        cargo +nightly fuzz run -s "$san" "$t" "$corpus/$t" -j "${FLOWPATH_FUZZ_JOBS:-1}" -- \
            -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            >"$log" 2>&1
        rc=$?
        set -e
        # The last status line: "#N DONE cov: C ft: F corp: ..." or the line before a crash.
        last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
        eps=$(grep -E '^stat::average_exec_per_sec' "$log" | tail -n 1 | awk '{print $2}' || true)
        summary+=("$(printf '%-16s %s exec/s; %s' "$t" "${eps:-?}" "${last:-no stats}")")
        after=$(find "fuzz/artifacts/$t" -type f | wc -l)
        if [ "$rc" -ne 0 ] || [ "$after" -gt "$before" ]; then
            status=1
            grep -E -A30 '^==[0-9]+==|panicked at|^thread ' "$log" | head -n 40 || tail -n 40 "$log"
            art=$(ls -t "fuzz/artifacts/$t"/* 2>/dev/null | head -n 1 || true)
            echo "fuzz: $t FAILED (exit $rc); the input: ${art:-none written, see the log above}"
            if [ -n "$art" ]; then
                echo "  reproduce: cargo +nightly fuzz run -s $san $t $art"
                echo "  minimise:  cargo +nightly fuzz tmin -s $san $t $art"
                echo "  then keep it: cp <minimised> fuzz/regressions/$t/ && FLOWPATH_FUZZ_BLESS=1 cargo test -p $(crate_of "$t") --test $(test_of "$t")"
            fi
        fi
    done
else
    echo "== building the targets (cargo afl build, stable)"
    cargo afl build --release --manifest-path fuzz/Cargo.toml --no-default-features --features afl \
        --target-dir fuzz/target/afl -q \
        || { echo "fuzz: skipped: the AFL++ build of the targets failed (see above)"; exit 0; }
    for t in "${targets[@]}"; do
        echo "== $t: ${secs}s (AFL++)"
        out="fuzz/afl-out/$t"
        rm -rf "$out"
        mkdir -p "$out"
        # AFL++ wants small seeds: it refuses files over 1 MB, and slows down on big ones.
        in="$work/afl-in-$t"
        mkdir -p "$in"
        find "$corpus/$t" -type f -size -64k -exec cp {} "$in/" \;
        set +e
        cargo afl fuzz -i "$in" -o "$out" -V "$secs" -t 10000 -m none \
            "fuzz/target/afl/release/$t" >"$work/$t.log" 2>&1
        rc=$?
        set -e
        st="$out/default/fuzzer_stats"
        if [ -f "$st" ]; then
            eps=$(awk -F': ' '/^execs_per_sec/ {print $2}' "$st")
            edges=$(awk -F': ' '/^edges_found/ {print $2}' "$st")
            execs=$(awk -F': ' '/^execs_done/ {print $2}' "$st")
            summary+=("$(printf '%-16s %s exec/s; %s execs, %s edges' "$t" "$eps" "$execs" "$edges")")
        else
            summary+=("$(printf '%-16s no stats (exit %s)' "$t" "$rc")")
            tail -n 30 "$work/$t.log"
            status=1
        fi
        # Keep what it found for the next run.
        if [ -d "$out/default/queue" ]; then
            for f in "$out/default/queue"/id:*; do
                [ -f "$f" ] && cp "$f" "$corpus/$t/afl-$(sha1sum "$f" | cut -c1-16)"
            done
        fi
        crashes=$(find "$out/default/crashes" -type f -name 'id:*' 2>/dev/null | head -n 1 || true)
        if [ -n "$crashes" ]; then
            status=1
            echo "fuzz: $t FAILED; the input: $crashes"
            echo "  reproduce: fuzz/target/afl/release/$t < '$crashes'"
            echo "  then keep it: cp '$crashes' fuzz/regressions/$t/crash-x && FLOWPATH_FUZZ_BLESS=1 cargo test -p $(crate_of "$t") --test $(test_of "$t")"
        fi
    done
fi

echo "== fuzz summary ($engine, ${secs}s per target)"
for l in "${summary[@]}"; do echo "   $l"; done
if [ "$status" -ne 0 ]; then
    echo "fuzz: a target crashed (see above)"
fi
exit "$status"
