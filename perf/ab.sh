#!/usr/bin/env bash
# Before/after: two rocketns binaries under the same lookup load, alternating, on this machine in one go
# (ratios, not absolute figures: shared machines are noisy). Prints one JSON line per run.
#
#   perf/ab.sh OLD_BINARY NEW_BINARY          # 3 rounds of the reference scenario, 5 s each
#   ROUNDS=5 DURATION=10 perf/ab.sh old new
#
# Build an older rocketns with: git worktree add /tmp/old REV && (cd /tmp/old && cargo build --release).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
old=$1 new=$2
ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-5}
GEN_CPUS=${GEN_CPUS:-0} SERVER_CPUS=${SERVER_CPUS:-1}
loadgen="$ROOT/target/release/rocketns-loadgen"
[ -x "$loadgen" ] || cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" --bin rocketns-loadgen
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=23000
for round in $(seq "$ROUNDS"); do
    for which in old new; do
        port=$((port + 1))
        bin=$([ "$which" = old ] && echo "$old" || echo "$new")
        printf 'bindAddress=127.0.0.1\nlistenPort=%s\nkvConfigPath=%s/kv-%s.json\nwarmRestart=false\n' \
            "$port" "$work" "$port" > "$work/ns-$port.properties"
        RUST_LOG=warn taskset -c "$SERVER_CPUS" "$bin" -c "$work/ns-$port.properties" > "$work/ns-$port.log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
        taskset -c "$GEN_CPUS" "$loadgen" run --addr "127.0.0.1:$port" --brokers 4 --topics 1000 --connections 4 \
            --in-flight 16 --churn off --duration "$DURATION" --warmup 1 --label "round$round/$which" | tail -n 1
        kill "$pid"; wait "$pid" 2>/dev/null || true
    done
done
