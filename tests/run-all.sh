#!/usr/bin/env bash
# Every test of rocketns, as CI runs them: formatting, lints, unit and wire tests (cargo test, benches built
# and run once in test mode), then real third-party RocketMQ software against rocketns (tests/interop/run.sh,
# which needs root; the first run installs the rocketmq-rust broker and builds the client, ~15 minutes).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --all-targets --quiet -- -D warnings
echo "== cargo test"
cargo test --all-targets
echo "== interop (rocketmq-rust broker and client)"
bash tests/interop/run.sh
