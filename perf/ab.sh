#!/usr/bin/env bash
# Before/after: two rocketns binaries under the same lookup load, alternating, on this machine in one go
# (ratios, not absolute figures: shared machines are noisy). Prints one JSON line per run.
#
#   perf/ab.sh OLD_BINARY NEW_BINARY          # 3 rounds of the reference scenario, 5 s each
#   ROUNDS=5 DURATION=10 perf/ab.sh old new
#   WARMUP=3 perf/ab.sh old new               # seconds of load before the measured ones (default 1)
#   TOPICS=100000 perf/ab.sh old new          # 4 brokers x 100k topics, each registered in one frame
#   CONNECTIONS=1000 IN_FLIGHT=1 perf/ab.sh old new   # many clients polling (default 4 x 16)
#   OLD_PROPERTIES='frameMaxLength=16777216' perf/ab.sh old new   # extra lines for one binary's -c file
#   LOADGEN_ARGS='--header go --opaque-start 2147000000' perf/ab.sh old new   # more load generator options
#
# Each JSON line ends with the server's peak RSS (VmHWM) and its RSS once the run is over, in kB.
# Build an older rocketns with: git worktree add /tmp/old REV && (cd /tmp/old && cargo build --release).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
old=$1 new=$2
ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-5} WARMUP=${WARMUP:-1} TOPICS=${TOPICS:-1000} CONNECTIONS=${CONNECTIONS:-4} IN_FLIGHT=${IN_FLIGHT:-16}
OLD_PROPERTIES=${OLD_PROPERTIES:-} NEW_PROPERTIES=${NEW_PROPERTIES:-} LOADGEN_ARGS=${LOADGEN_ARGS:-}
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
        extra=$([ "$which" = old ] && echo "$OLD_PROPERTIES" || echo "$NEW_PROPERTIES")
        printf 'bindAddress=127.0.0.1\nlistenPort=%s\nkvConfigPath=%s/kv-%s.json\nwarmRestart=false\n%s\n' \
            "$port" "$work" "$port" "$extra" > "$work/ns-$port.properties"
        RUST_LOG=warn taskset -c "$SERVER_CPUS" "$bin" -c "$work/ns-$port.properties" > "$work/ns-$port.log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
        line=$(taskset -c "$GEN_CPUS" "$loadgen" run --addr "127.0.0.1:$port" --brokers 4 --topics "$TOPICS" \
            --connections "$CONNECTIONS" --in-flight "$IN_FLIGHT" --churn off --duration "$DURATION" --warmup "$WARMUP" --label "round$round/$which" --server-pid "$pid" $LOADGEN_ARGS \
            | tail -n 1) || true
        peak=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status") rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
        echo "${line%\}},\"peak_rss_kb\":$peak,\"rss_kb\":$rss}"
        kill "$pid"; wait "$pid" 2>/dev/null || true
    done
done
