#!/usr/bin/env bash
# Every test of rocketns, as CI runs them: formatting, lints, unit and wire tests (cargo test, benches built
# and run once in test mode), a few seconds of each fuzz target (tests/fuzz-smoke.sh), then real third-party
# RocketMQ software against rocketns (tests/interop/run.sh, which needs root). The first run installs
# cargo-fuzz and the rocketmq-rust broker and builds the interop client: about 15 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Test servers keep their KV files in temporary folders that outlive each test (restarts read them back):
# they all go under one folder, removed at the end.
scratch=$(mktemp -d -t rocketns-tests.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
export TMPDIR="$scratch"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --all-targets --quiet -- -D warnings
echo "== cargo test"
cargo test --all-targets
echo "== fuzz targets, a few seconds each"
bash tests/fuzz-smoke.sh
echo "== interop (rocketmq-rust broker and client)"
bash tests/interop/run.sh
