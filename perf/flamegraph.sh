#!/usr/bin/env bash
# Profiles a server under the load generator and writes perf/out/flamegraphs/<scenario>.svg and
# <scenario>.top.txt (not tracked; `UPDATE=1` writes the committed flamegraphs/ instead):
#   lookup: rocketns, 4 brokers x 1000 topics, 4 connections x 16 requests in flight (Java headers);
#   echo:   the plain echo (the yardstick) under the same load, to set beside lookup;
#   lookup-go: rocketns under the same load with the Go client's headers;
#   c1000:  rocketns, 1,000 connections x 1 in flight (many clients polling);
#   churn:  rocketns under the lookup load while every broker re-registers with a new DataVersion every 100 ms;
#   bigchurn: rocketns, 64 connections x 1 lookup in flight while two brokers of 100,000 topics take turns
#           leaving and joining every 3 s (perf/compare.sh's bigchurn `join` case, the heaviest for the writer);
#   thousand, million: the lookup load over one broker's 1,000 topics, and over 1,000 brokers' 1,000 topics
#           of their own (a million routes; perf/compare.sh's scenarios of the same names).
# Uses perf (cpu-clock sampling, frame pointers) and inferno. Installs, when missing: Debian's linux-perf
# (apt-get) and inferno (crates.io, `cargo install inferno` into ~/.cargo/bin, about two minutes).
#   perf/flamegraph.sh [lookup|echo|lookup-go|c1000|churn|bigchurn ...]      DURATION=10 by default;
#   KEEP=1 keeps the work folder (perf.data, folded stacks, per-thread folded stacks).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${DURATION:-10}
SCENARIOS=${*:-lookup echo lookup-go c1000 churn bigchurn}
GEN_CPUS=${GEN_CPUS:-0}
SERVER_CPUS=${SERVER_CPUS:-1}
if [ -n "${UPDATE:-}" ]; then OUT=$ROOT/flamegraphs; else OUT=${OUT:-$ROOT/perf/out/flamegraphs}; fi
mkdir -p "$OUT"

if ! command -v perf > /dev/null; then
    echo "flamegraph: installing Debian's linux-perf"
    apt-get update -qq && apt-get install -y -qq linux-perf
fi
if ! command -v inferno-flamegraph > /dev/null; then
    echo "flamegraph: installing inferno from crates.io (cargo install)"
    cargo install inferno --locked
fi
# Frame pointers make perf's call graphs cheap and complete; a separate target dir keeps the normal build.
RUSTFLAGS="-C force-frame-pointers=yes" cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" \
    --target-dir "$ROOT/target/profiling" --bin rocketns --bin rocketns-loadgen
bin="$ROOT/target/profiling/release"
work=$(mktemp -d)
trap 'if [ -n "${KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi' EXIT
port=21000
for scenario in $SCENARIOS; do
    port=$((port + 1))
    server=rocketns churn=off load=() table=(--brokers 4 --topics 1000)
    case $scenario in
        lookup) ;;
        echo) server=echo ;;
        lookup-go) load=(--header go) ;;
        c1000) load=(--connections 1000 --in-flight 1) ;;
        churn) churn=bump ;;
        bigchurn) load=(--connections 64 --in-flight 1 --big-brokers 2 --big-topics 100000 --big-period-ms 3000
                        --big-mode join) ;;
        thousand) table=(--brokers 1 --topics 1000) ;;
        million) table=(--brokers 1000 --topics 1000 --own-topics) ;;
        *) echo "unknown scenario $scenario" >&2; exit 2 ;;
    esac
    if [ "$server" = echo ]; then
        taskset -c "$SERVER_CPUS" "$bin/rocketns-loadgen" echo --listen "127.0.0.1:$port" > "$work/ns.log" 2>&1 &
    else
        printf 'bindAddress=127.0.0.1\nlistenPort=%s\nkvConfigPath=%s/kv.json\n' "$port" "$work" > "$work/ns.properties"
        RUST_LOG=warn taskset -c "$SERVER_CPUS" "$bin/rocketns" -c "$work/ns.properties" > "$work/ns.log" 2>&1 &
    fi
    pid=$!
    for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
    taskset -c "$GEN_CPUS" "$bin/rocketns-loadgen" run --addr "127.0.0.1:$port" "${table[@]}" \
        --churn "$churn" --duration "$((DURATION + 1))" --warmup 1 --label "flamegraph/$scenario" --server-pid "$pid" \
        "${load[@]}" > "$work/load.log" &
    load=$!
    # Sampled once the table is registered and the warm-up is over.
    until grep -q '^registered' "$work/load.log" 2> /dev/null || ! kill -0 "$load" 2> /dev/null; do sleep 0.1; done
    sleep 1.5
    perf record -e cpu-clock -F 997 -g -p "$pid" -o "$work/perf.data" -- sleep "$DURATION" 2> /dev/null
    wait "$load" || true
    kill "$pid"; wait "$pid" 2> /dev/null || true
    grep -v '^{' "$work/load.log" || true
    perf script -i "$work/perf.data" 2> /dev/null | inferno-collapse-perf > "$work/folded"
    inferno-flamegraph --title "$server: $scenario ($(tail -n 1 "$work/load.log" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("%d req/s, p99 %d us, %.2f us of server CPU a request" % (r["rps"], r["p99_us"], r.get("server_cpu_us_per_req", 0)))'))" \
        < "$work/folded" > "$OUT/$scenario.svg"
    echo "wrote $OUT/$scenario.svg"
    # Where the samples end (self time), heaviest first.
    awk '{n = $NF; $NF = ""; k = split($0, f, ";"); leaf[f[k]] += n; total += n}
         END {for (l in leaf) printf "%5.1f%%  %s\n", 100 * leaf[l] / total, l}' "$work/folded" \
        | sort -rn | awk "NR <= 15" | tee "$OUT/$scenario.top.txt"
    # Where the samples were taken, by thread name: the lookup threads (src/net/cores.rs: settled connections),
    # the intake (the main thread: new connections), the work lane, and the others (blocking pools: the route
    # writer's batches, registration bodies, large-frame buffers, file writes).
    [ "$server" = echo ] && continue
    perf script -i "$work/perf.data" 2> /dev/null | inferno-collapse-perf --tid > "$work/tid.folded"
    awk '{n = $NF; split($0, f, ";"); t += n
          if (f[1] ~ /^rocketns-lookup/) l += n; else if (f[1] ~ /^rocketns-lane/) w += n
          else if (f[1] ~ /^rocketns-[0-9]/) i += n}
         END {printf "threads: lookups %.1f%%, intake %.1f%%, work lane %.1f%%, others %.1f%%\n",
              100 * l / t, 100 * i / t, 100 * w / t, 100 * (t - l - i - w) / t}' "$work/tid.folded" \
        | tee -a "$OUT/$scenario.top.txt"
done
