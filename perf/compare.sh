#!/usr/bin/env bash
# One comparison run: the plain echo (the yardstick: the best simple server for the same replies), the
# rocketns-shaped echo (rocketns's own I/O path with nothing behind it), rocketns, the rocketmq-rust
# NameServer (crates.io rocketmq-namesrv 1.0.0) and the Java NameServer 5.3.3 (the server users replace; jars from tests/java/fetch.sh, run with
# the JVM options of its shipped bin/runserver.sh) under the same loads, on this machine, in one go; then
# each server's start-to-first-answer. Prints a markdown table and writes it, with the raw JSON lines, to
# perf/out/latest.md and latest.jsonl (not tracked); `UPDATE=1` writes the committed perf/results/ instead.
# Runs inside a private network namespace with only loopback (the rocketmq-rust NameServer dials the
# machine's interface address every 30 s); needs root.
#
# Installs, when missing: the rocketmq-rust NameServer (crates.io `rocketmq-namesrv` 1.0.0, `cargo install`
# into ~/.cargo/bin, several minutes), the Java NameServer 5.3.3's jars (Maven Central, through
# tests/java/fetch.sh into ~/.cache/rocketns-interop/java); SERVERS without them installs neither.
#
#   perf/compare.sh                 # every scenario, 10 s each
#   DURATION=3 perf/compare.sh      # shorter
#   SCENARIOS="anchor churn" perf/compare.sh
#   SERVERS="echo rocketns" perf/compare.sh   # leave out the others (and their installs)
#   HEADERS="go binary" perf/compare.sh       # rocketns's extra rows in the reference scenario: the same load
#                                   # with each client family's request header (default: all of them, and
#                                   # java-long, a long-lived Java client's ten-digit and negative opaques)
#   JAVA_WARMUP=20                  # seconds of load before the Java NameServer is measured (JIT; see
#                                   # perf/README.md for how long it takes); the others get 1 s
#   BIG_DURATION=10                 # seconds of each bigchurn case (at least three registrations a broker)
#   ROCKETNS_BEFORE=/tmp/old/target/release/rocketns SERVERS="rocketns-before rocketns" perf/compare.sh
#                                   # an older build beside this one, as server `rocketns-before`
#   IDLE_CONNECTIONS=18000          # connections of the idle scenario (each server and the load generator
#                                   # need as many descriptors: keep it under `ulimit -Hn`)
#   IDLE_POLLS=2                    # lookups on each idle connection before it is left (1: the first only)
#
# `bigchurn` is four runs: 64 connections x 1 lookup in flight on the reference table while two brokers of
# 100,000 topics of their own (frames of about 15 MB, sent at 1 Gbit/s) change the table every 3 s between
# them: `quiet` (registered once, then silent: the baseline), `same` (re-registering with an unchanged
# DataVersion, a real broker's heartbeat), `bump` (a new DataVersion), `join` (the broker leaves and a new
# one with the same 100,000 topics joins).
#
# `thousand` and `million` are the same lookups over routes of one broker each: one broker of 1,000 topics,
# and 1,000 brokers of 1,000 topics of their own (a million routes, registered all at once as after a
# restart); lookups ask for any of them at random. Their CPU per request side by side is what a table a
# thousand times larger costs a lookup. The echoes are left out of `million` (their one reply has every
# broker in it).
#
# `idle` is a client fleet's connections held open: IDLE_CONNECTIONS connections, 256 opening at once, each
# after one route lookup (a client's first poll) and, with IDLE_POLLS=2, another 1.1 s later (its next poll,
# which moves it off rocketns's intake), then left idle; the server's resident set before and after
# (settled), and what each connection added. No lookups are timed there but each connection's first.
# `opening` is a client fleet's restart: IDLE_CONNECTIONS connections opened all at once, each with one
# lookup; none may fail, and each first lookup's time (from its request, and from its connect) is reported.
# `c1000idle` is `c1000` (1,000 connections x 1 lookup in flight) with IDLE_CONNECTIONS more held idle
# meanwhile, each after two polls: the lookups' tail beside a large fleet's idle connections.
#
# Brokers register as a default Java broker does: the whole topic table in one REGISTER_BROKER.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${ROCKETNS_INTEROP_CACHE:-$HOME/.cache/rocketns-interop}
if [ -n "${UPDATE:-}" ]; then OUT=$ROOT/perf/results; else OUT=${OUT:-$ROOT/perf/out}; fi
DURATION=${DURATION:-10}
SCENARIOS=${SCENARIOS:-"reference anchor 10k churn 100k thousand million c1000 c10000 storm idle opening c1000idle bigchurn"}
SCENARIOS=${SCENARIOS//bigchurn/bigchurn-quiet bigchurn-same bigchurn-bump bigchurn-join}
BIG_DURATION=${BIG_DURATION:-10}
SERVERS=${SERVERS:-"echo echo-rocketns rocketns rocketmq-rust java"}
HEADERS=${HEADERS:-"go rust cpp node binary java-long"}
JAVA_WARMUP=${JAVA_WARMUP:-20}
IDLE_CONNECTIONS=${IDLE_CONNECTIONS:-18000}
IDLE_POLLS=${IDLE_POLLS:-2}
# shellcheck source=perf/java-runserver.sh
. "$ROOT/perf/java-runserver.sh"
# The load generator gets one core and the server the other (2-core machines); override on bigger ones.
GEN_CPUS=${GEN_CPUS:-0}
SERVER_CPUS=${SERVER_CPUS:-1}

inner() {
    ip link set lo up
    # 10,000 connections need as many descriptors in the server and in the load generator.
    ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    local loadgen="$ROOT/target/release/rocketns-loadgen"
    local rocketns="$ROOT/target/release/rocketns"
    local rmq; rmq=$(command -v rocketmq-namesrv-rust || echo "${CARGO_HOME:-$HOME/.cargo}/bin/rocketmq-namesrv-rust")
    mkdir -p "$OUT" "$work/home"
    local json="$OUT/latest.jsonl" table="$OUT/latest.md"
    : > "$json"
    # scenario → "brokers topics connections in_flight churn big"; connections "storm": 5,000 new connections
    # within a second, each asking 20 routes one at a time, then closing (a fleet of clients starting); big:
    # what two brokers of 100,000 topics do meanwhile (`-`: there are none); own: each broker has topics
    # of its own (`--own-topics`).
    declare -A spec=(
        [reference]="4 1000 4 16 off -"
        [anchor]="1 100 4 16 off -"
        [10k]="4 10000 4 16 off -"
        [churn]="4 1000 4 16 bump -"
        [100k]="4 100000 4 16 off -"
        [thousand]="1 1000 4 16 off - shared"
        [million]="1000 1000 4 16 off - own"
        [c1000]="4 1000 1000 1 off -"
        [c10000]="4 1000 10000 1 off -"
        [c1000idle]="4 1000 1000 1 off - idle"
        [storm]="4 1000 storm 1 off -"
        [bigchurn-quiet]="4 1000 64 1 off static"
        [bigchurn-same]="4 1000 64 1 off same"
        [bigchurn-bump]="4 1000 64 1 off bump"
        [bigchurn-join]="4 1000 64 1 off join"
    )
    # server_cmd NAME PORT BROKERS: the command line of a server listening on PORT, in the array `cmd`.
    server_cmd() {
        case $1 in
            echo) cmd=("$loadgen" echo --listen "127.0.0.1:$2" --brokers "$3") ;;
            echo-rocketns) cmd=("$loadgen" echo --rocketns-shaped --listen "127.0.0.1:$2" --brokers "$3") ;;
            rocketns|rocketns-before)
                      printf 'bindAddress=127.0.0.1\nlistenPort=%s\nkvConfigPath=%s/kv-%s.json\nwarmRestart=false\n' "$2" "$work" "$2" > "$work/ns-$2.properties"
                      local bin=$rocketns
                      [ "$1" = rocketns-before ] && bin=${ROCKETNS_BEFORE:?"rocketns-before needs ROCKETNS_BEFORE=BINARY"}
                      cmd=(env RUST_LOG=warn "$bin" -c "$work/ns-$2.properties") ;;
            rocketmq-rust) cmd=(env ROCKETMQ_HOME="$work/home" HOME="$work/home" "$rmq" --listenPort "$2" --bindAddress 127.0.0.1
                      --kvConfigPath "$work/rmq-kv-$2.json" --log-filter warn) ;;
            java) printf 'listenPort=%s\n' "$2" > "$work/java-$2.properties"
                  # shellcheck disable=SC2206
                  cmd=(env ROCKETMQ_HOME="$work/home" java $JAVA_RUNSERVER_OPTS -Duser.home="$work/java-home-$2" -cp "$JARS5/*"
                      org.apache.rocketmq.namesrv.NamesrvStartup -c "$work/java-$2.properties") ;;
        esac
    }
    start_server() { # name port brokers → pid
        server_cmd "$@"
        taskset -c "$SERVER_CPUS" "${cmd[@]}" > "$work/$1.log" 2>&1 &
        echo $!
    }
    wait_port() { for _ in $(seq 600); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }
    local port=20000
    # measure SCENARIO SERVER LABEL [LOADGEN OPTIONS...]: one server, one load, one JSON line.
    measure() {
        local scenario=$1 server=$2 label=$3; shift 3
        read -r brokers topics conns inflight churn big own <<< "${spec[$scenario]}"
        local shape=(--connections "$conns") duration=$DURATION
        [ "${own:-}" = own ] && shape+=(--own-topics)
        [ "${own:-}" = idle ] && shape+=(--idle "$IDLE_CONNECTIONS")
        [ "$conns" = storm ] && shape=(--connections 1 --storm 5000 --storm-requests 20)
        if [ "$big" != - ]; then
            shape+=(--big-brokers 2 --big-topics 100000 --big-period-ms 3000 --big-mode "$big")
            duration=$BIG_DURATION
        fi
        port=$((port + 1))
        local pid; pid=$(start_server "$server" "$port" "$brokers")
        wait_port "$port" || { echo "$server did not start" >&2; return; }
        local line
        line=$(taskset -c "$GEN_CPUS" "$loadgen" run --addr "127.0.0.1:$port" --brokers "$brokers" --topics "$topics" \
            "${shape[@]}" --in-flight "$inflight" --churn "$([[ "$server" == echo* ]] && echo off || echo "$churn")" \
            --duration "$duration" --warmup "$([ "$server" = java ] && echo "$JAVA_WARMUP" || echo 1)" \
            --label "$scenario/$label" --server-pid "$pid" "$@" | tail -n 1) || true
        local rss; rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
        kill "$pid" 2>/dev/null || true
        # Gone before the next server starts (a JVM takes a moment to stop).
        for _ in $(seq 100); do [ -e "/proc/$pid" ] || break; sleep 0.1; done
        echo "${line%\}},\"server\":\"$label\",\"scenario\":\"$scenario\",\"peak_rss_kb\":${rss:-0}}" >> "$json"
        echo "$scenario/$label: $line, peak RSS ${rss} kB" >&2
    }
    # measure_idle SCENARIO SERVER OPENING POLLS: the idle or opening scenario's one JSON line (no load:
    # connections held, RSS before and after, each first lookup's time).
    measure_idle() {
        local scenario=$1 server=$2 opening=$3 polls=$4 register=()
        [[ "$server" == echo* ]] || register=(--register)
        port=$((port + 1))
        local pid; pid=$(start_server "$server" "$port" 1)
        wait_port "$port" || { echo "$server did not start" >&2; return; }
        local line
        line=$(taskset -c "$GEN_CPUS" "$loadgen" idle --addr "127.0.0.1:$port" --connections "$IDLE_CONNECTIONS" \
            --opening "$opening" --polls "$polls" --server-pid "$pid" --label "$scenario/$server" "${register[@]}" \
            | tail -n 1) || true
        [ -n "$line" ] || line='{"label":"'"$scenario/$server"'"}'
        local rss; rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 100); do [ -e "/proc/$pid" ] || break; sleep 0.1; done
        echo "${line%\}},\"server\":\"$server\",\"scenario\":\"$scenario\",\"peak_rss_kb\":${rss:-0}}" >> "$json"
        echo "$scenario/$server: $line, peak RSS ${rss} kB" >&2
    }
    for scenario in $SCENARIOS; do
        for server in $SERVERS; do
            case $scenario in
                idle) measure_idle idle "$server" 256 "$IDLE_POLLS"; continue ;;
                opening) measure_idle opening "$server" "$IDLE_CONNECTIONS" 1; continue ;;
            esac
            # The plain echo is the bigchurn control (what the machine and the load generator add); the
            # rocketns-shaped one adds nothing there.
            [[ "$scenario" == bigchurn-* && "$server" == echo-rocketns ]] && continue
            [[ "$scenario" == million && "$server" == echo* ]] && continue
            measure "$scenario" "$server" "$server"
            if [ "$server" = rocketns ] && [ "$scenario" = reference ]; then
                for header in $HEADERS; do
                    case $header in
                        java-long) measure "$scenario" rocketns "rocketns-$header" --header java --opaque-start 2147000000 ;;
                        *) measure "$scenario" rocketns "rocketns-$header" --header "$header" ;;
                    esac
                done
            fi
        done
    done
    # Start to first answer, a cold start of each NameServer: no route file of an earlier scenario to restore.
    local startup="{}"
    for server in $SERVERS; do
        [[ "$server" == echo* ]] && continue
        port=$((port + 1))
        server_cmd "$server" "$port" 1
        local ms
        ms=$(taskset -c "$SERVER_CPUS" "$loadgen" startup --addr "127.0.0.1:$port" -- "${cmd[@]}" | tail -n 1) || true
        echo "startup/$server: $ms" >&2
        startup=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d[sys.argv[2]]=json.loads(sys.argv[3] or "null"); print(json.dumps(d))' "$startup" "$server" "$ms")
    done
    python3 "$ROOT/perf/table.py" "$json" "$startup" "$(nproc)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" > "$table"
    cat "$table"
}

if [ "${1:-}" = inner ]; then
    inner
    exit
fi
if [ "$(id -u)" != 0 ]; then
    echo "compare: needs root for a private network namespace (unshare --net)" >&2
    exit 1
fi
if [[ " $SERVERS " == *" rocketmq-rust "* ]] && ! cargo install --list | grep -q '^rocketmq-namesrv v1\.0\.0:'; then
    echo "compare: installing rocketmq-namesrv 1.0.0 from crates.io (several minutes on 2 cores)"
    CARGO_TARGET_DIR="$CACHE/target" cargo install rocketmq-namesrv@1.0.0 --locked
fi
if [[ " $SERVERS " == *" java "* ]]; then
    JARS5=$("$ROOT/tests/java/fetch.sh" 5.3.3)
    export JARS5
fi
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" --bin rocketns --bin rocketns-loadgen
exec unshare --net -- bash "${BASH_SOURCE[0]}" inner
