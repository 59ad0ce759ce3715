#!/usr/bin/env bash
# Restart storms (`rocketns-loadgen storm`, perf/README.md "Restart storms and a million topics") against
# each server in SERVERS, each scenario on a fresh server, the server on core 1. LAYOUT says where the
# generator runs:
#   probe (default)  its lookups alone on core 0 (SCHED_FIFO), the brokers' sending on core 1 beside the
#                    server at SCHED_IDLE. Over loopback the kernel moves a storm's bytes on the sender's
#                    core, in its system calls and in softirq, which no thread preempts: on the lookups'
#                    core that showed as their latency (the generator's, not the server's). Here it lands
#                    on the server's core, as a NIC's receive work would, and the senders yield to the
#                    server's threads.
#   apart            the whole generator on core 0 (the layout before 2026-12-04).
# Needs root (SCHED_FIFO, chrt). Writes perf/out/storm.md and storm.jsonl (untracked; UPDATE=1: perf/results/).
#   storm1000   1,000 brokers x 1,000 topics of their own (the million routes), whole tables in one frame
#   storm100k   50 brokers x the same 100,000 topics (15.6 MB frames, as default Java brokers send)
# rocketns runs each twice: cold (a fresh start, no route file) and warm (restarted, SIGTERM, over the route
# file the cold storm left; the same frames again). The Java NameServer 5.3.3 (tests/java/fetch.sh, with the
# JVM options of its shipped bin/runserver.sh) has no route file: cold only.
#   SERVERS="rocketns java"  SCENARIOS="storm1000 storm100k"  QUIET=3 AFTER=5  LAYOUT=probe
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SERVERS=${SERVERS:-rocketns java} SCENARIOS=${SCENARIOS:-storm1000 storm100k} LAYOUT=${LAYOUT:-probe}
QUIET=${QUIET:-3} AFTER=${AFTER:-5}
# shellcheck source=perf/prelude.sh
. perf/prelude.sh
work=$(mktemp -d -t rocketns-storm.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null; rm -rf "$work"' EXIT
json="$OUT/storm.jsonl" table="$OUT/storm.md"
: > "$json"
port=22000

start() { # server, then the port answers
    local server=$1
    case $server in
        rocketns)
            printf 'bindAddress=127.0.0.1\nlistenPort=%s\nkvConfigPath=%s/kv.json\n' "$port" "$work" > "$work/ns.properties"
            taskset -c 1 env RUST_LOG=warn "$ROCKETNS" -c "$work/ns.properties" >> "$work/$server.log" 2>&1 & ;;
        java)
            jars=$(bash tests/java/fetch.sh 5.3.3)
            printf 'listenPort=%s\n' "$port" > "$work/java.properties"
            # shellcheck disable=SC2086
            taskset -c 1 env ROCKETMQ_HOME="$work" java $JAVA_RUNSERVER_OPTS -Duser.home="$work/java-home" -cp "$jars/*" \
                org.apache.rocketmq.namesrv.NamesrvStartup -c "$work/java.properties" >> "$work/$server.log" 2>&1 & ;;
    esac
    pid=$!
    for _ in $(seq 600); do (exec 3<>/dev/tcp/127.0.0.1/"$port") 2> /dev/null && return; sleep 0.05; done
    echo "storm.sh: $server did not start" >&2
    tail -n 20 "$work/$server.log" >&2
    exit 1
}

stop() {
    kill "$pid" 2> /dev/null || true
    for _ in $(seq 600); do [ -e "/proc/$pid" ] || break; sleep 0.1; done
    pid=
}

storm() { # server scenario phase [hold]
    local server=$1 scenario=$2 phase=$3 hold=${4:-} args generator
    case $scenario in
        storm1000) args=(--brokers 1000 --topics 1000) ;;
        storm100k) args=(--brokers 50 --topics 100000 --shared-topics) ;;
        *) echo "storm.sh: no scenario \"$scenario\"" >&2; exit 2 ;;
    esac
    echo "== $server $scenario $phase"
    case $LAYOUT in
        apart) generator=(taskset -c 0 target/release/rocketns-loadgen storm) ;;
        probe) generator=(chrt --idle 0 taskset -c 1 target/release/rocketns-loadgen storm --lookup-cpu 0) ;;
        *) echo "storm.sh: no layout \"$LAYOUT\"" >&2; exit 2 ;;
    esac
    "${generator[@]}" --addr "127.0.0.1:$port" --server-pid "$pid" "${args[@]}" \
        --quiet "$QUIET" --after "$AFTER" --label "$scenario" ${hold:+--hold} > "$work/out" 2> "$work/err" &
    local gen=$!
    # With --hold the generator keeps its brokers connected after its summary, until the server stops.
    until grep -q '^{' "$work/out" 2> /dev/null || ! kill -0 "$gen" 2> /dev/null; do sleep 0.2; done
    cat "$work/out"
    line=$(grep '^{' "$work/out" | tail -n 1) || { cat "$work/err" >&2; exit 1; }
    echo "${line%\}},\"server\":\"$server\",\"phase\":\"$phase\",\"layout\":\"$LAYOUT\"}" >> "$json"
    [ -n "$hold" ] && stop
    wait "$gen" || true
}

for server in $SERVERS; do
    for scenario in $SCENARIOS; do
        port=$((port + 1))
        rm -f "$work"/kv.json "$work"/routeSnapshot.json
        start "$server"
        if [ "$server" = rocketns ]; then
            storm "$server" "$scenario" cold hold
            start "$server"
            storm "$server" "$scenario" warm
        else
            storm "$server" "$scenario" cold
        fi
        stop
    done
done
python3 - "$json" > "$table" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
mb = lambda b: "%.0f" % (b / 2**20) if b else "n/a"
print("| server | scenario | start | registered at the first try | refused / closed / unanswered | last answer s | RSS before / peak / after MB | lookups p99 quiet / storm ms | p99.9 | max | routed |")
print("|---|---|---|---:|---|---:|---|---|---|---|---:|")
for r in rows:
    q, s = r["lookups_quiet"], r["lookups_storm"]
    print(f"| {r['server']} | {r['label']} ({r['brokers']} x {r['topics']}{' shared' if r['shared_topics'] else ''}) | {r['phase']} "
          f"| {r['registered']} of {r['brokers']} | {r['error_codes']} / {r['closed']} / {r['unanswered']} | {r['answer_max_ms'] / 1000:.1f} "
          f"| {mb(r['quiet_rss'])} / {mb(r['peak_rss'])} / {mb(r['after_rss'])} "
          f"| {q['p99_ms']:.2f} / {s['p99_ms']:.2f} | {q['p999_ms']:.2f} / {s['p999_ms']:.2f} | {q['max_ms']:.1f} / {s['max_ms']:.1f} | {r['routed']} |")
EOF
cat "$table"
