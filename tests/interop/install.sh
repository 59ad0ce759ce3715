#!/usr/bin/env bash
# Builds what tests/interop/run.sh runs: the rocketmq-rust broker (crates.io rocketmq-broker 1.0.0, `cargo
# install`ed, skipped when that version is installed) and the client program (tests/interop/client), both in
# ROCKETNS_INTEROP_CACHE (default ~/.cache/rocketns-interop). Debug builds without debug info: 7.4 minutes
# on 2 cores with it, against 12.7 for a release build (2026-12-02), and the broker carries only a few
# thousand messages here (every check passed with it in 43 s). tests/run-all.sh starts this at its
# beginning at the lowest CPU priority (SCHED_IDLE), so that on a fresh machine the build takes the cores
# only when the other stages leave them idle, and the interop stage (its last) waits for it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${ROCKETNS_INTEROP_CACHE:-$HOME/.cache/rocketns-interop}
mkdir -p "$CACHE"
export CARGO_TARGET_DIR="$CACHE/target" CARGO_PROFILE_DEV_DEBUG=0
if ! cargo install --list | grep -q '^rocketmq-broker v1\.0\.0:'; then
    echo "interop: installing rocketmq-broker 1.0.0 from crates.io, a debug build (minutes on 2 cores)"
    cargo install rocketmq-broker@1.0.0 --locked --debug
fi
echo "interop: building the client program"
cargo build --locked --quiet --manifest-path "$ROOT/tests/interop/client/Cargo.toml"
