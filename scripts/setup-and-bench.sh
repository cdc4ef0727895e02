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

echo "setup: building flowpath (release)..." >&2
cargo build --release --locked -p flowpath
exec ./target/release/flowpath bench "$@"
