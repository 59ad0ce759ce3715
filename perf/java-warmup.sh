#!/usr/bin/env bash
# How long the Java NameServer 5.3.3 needs under load before its throughput settles (its JIT), which sets
# perf/compare.sh's JAVA_WARMUP: a fresh Java NameServer (bin/runserver.sh's JVM options, pinned as
# compare.sh pins servers) under the reference load (4 brokers × 1000 topics, 4 connections × 16 in flight),
# measured in consecutive windows from its first request; prints one line per window. Loopback-only network
# namespace; needs root.
#   perf/java-warmup.sh              # 12 windows of 3 s
#   WINDOWS=20 WINDOW=2 perf/java-warmup.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WINDOWS=${WINDOWS:-12}
WINDOW=${WINDOW:-3}
GEN_CPUS=${GEN_CPUS:-0}
SERVER_CPUS=${SERVER_CPUS:-1}

if [ "${1:-}" != inner ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "java-warmup: needs root for a private network namespace (unshare --net)" >&2
        exit 1
    fi
    JARS5=$("$ROOT/tests/java/fetch.sh" 5.3.3)
    export JARS5
    cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" --bin rocketns-loadgen
    exec unshare --net -- bash "${BASH_SOURCE[0]}" inner
fi

ip link set lo up
work=$(mktemp -d)
# shellcheck source=perf/java-runserver.sh
. "$ROOT/perf/java-runserver.sh"
printf 'listenPort=20999\n' > "$work/ns.properties"
# shellcheck disable=SC2086
ROCKETMQ_HOME="$work" taskset -c "$SERVER_CPUS" java $JAVA_RUNSERVER_OPTS -Duser.home="$work" -cp "$JARS5/*" \
    org.apache.rocketmq.namesrv.NamesrvStartup -c "$work/ns.properties" > "$work/java.log" 2>&1 &
pid=$!
trap 'kill $pid 2> /dev/null; wait $pid 2> /dev/null; rm -rf "$work"' EXIT
for _ in $(seq 600); do (exec 3<> /dev/tcp/127.0.0.1/20999) 2> /dev/null && break; sleep 0.05; done
elapsed=0
for window in $(seq "$WINDOWS"); do
    line=$(taskset -c "$GEN_CPUS" "$ROOT/target/release/rocketns-loadgen" run --addr 127.0.0.1:20999 --brokers 4 \
        --topics 1000 --connections 4 --in-flight 16 --duration "$WINDOW" --warmup 0 --label "window $window" | tail -n 1)
    elapsed=$((elapsed + WINDOW))
    python3 -c 'import json, sys
d = json.loads(sys.argv[1])
print("after %3s s of load: %8.0f requests/s, p99 %6.0f µs" % (sys.argv[2], d["rps"], d["p99_us"]))' "$line" "$elapsed"
done
