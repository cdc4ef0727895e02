#!/usr/bin/env bash
# Set everything up from nothing and run the main job: the default bench on generated
# in-memory traffic (no root, no network). Extra arguments go to `flowpath bench`,
# e.g. `scripts/setup-and-bench.sh --json` or `--case miss --runs 9`.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found. flowpath needs a Rust toolchain >= 1.85 (rustup: https://rustup.rs)." >&2
    exit 1
fi
for comp in rustfmt clippy; do
    if command -v rustup >/dev/null 2>&1 && ! rustup component list --installed 2>/dev/null | grep -q "^$comp"; then
        rustup component add "$comp" || echo "setup: could not add $comp (only needed for CI checks)" >&2
    fi
done

# The XDP programs (AF_XDP ports, the fast generator) are C compiled by clang at build
# time; without clang + libbpf-dev flowpath still builds, and those parts say what is missing.
if ! command -v clang >/dev/null 2>&1 || [ ! -e /usr/include/bpf/bpf_helpers.h ]; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        echo "setup: installing clang, llvm, libbpf-dev, iproute2 (for the XDP programs)..." >&2
        (apt-get update -qq && TMPDIR=/var/tmp DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq clang llvm libbpf-dev iproute2 >/dev/null) \
            || echo "setup: could not install them; AF_XDP ports will be unavailable" >&2
    else
        echo "setup: clang/libbpf-dev missing and not root: AF_XDP ports will be unavailable" >&2
    fi
fi

echo "setup: building flowpath (release)..." >&2
cargo build --release --locked -p flowpath
exec ./target/release/flowpath bench "$@"
