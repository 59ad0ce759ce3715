#!/usr/bin/env bash
# The hostile fleet (`rocketns-loadgen hostile`, perf/README.md "Hostile clients") against each server in
# SERVERS, one after the other, fresh for each: the server on core 1, the fleet on core 0 (its lookups'
# thread SCHED_FIFO, ahead of its attackers, where allowed: run as root). Writes perf/out/hostile.md and
# hostile.jsonl (untracked; UPDATE=1: perf/results/).
#   SERVERS="rocketns java"   rocketns (ROCKETNS, default target/release/rocketns; ROCKETNS_BEFORE too, as
#                             "rocketns-before", when set) and the Java NameServer 5.3.3 (tests/java/fetch.sh),
#                             with the JVM options of its shipped bin/runserver.sh (perf/java-runserver.sh)
#   PER_KIND=150 QUIET=10 DURATION=60 REAL_TOPICS=100000 REREGISTER_MS=30000 CHURN_RATE=1000 LOOKUP_RATE=20000
#   KINDS=(all twelve; the http- kinds only where there is a metrics port: rocketns)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SERVERS=${SERVERS:-rocketns java}
PER_KIND=${PER_KIND:-150} QUIET=${QUIET:-10} DURATION=${DURATION:-60} REAL_TOPICS=${REAL_TOPICS:-100000}
REREGISTER_MS=${REREGISTER_MS:-30000} CHURN_RATE=${CHURN_RATE:-1000} LOOKUP_RATE=${LOOKUP_RATE:-20000} KINDS=${KINDS:-}
# shellcheck source=perf/prelude.sh
. perf/prelude.sh
work=$(mktemp -d -t rocketns-hostile.XXXXXX)
trap 'rm -rf "$work"' EXIT
json="$OUT/hostile.jsonl" table="$OUT/hostile.md"
: > "$json"
port=21000
for server in $SERVERS ${ROCKETNS_BEFORE:+rocketns-before}; do
    port=$((port + 2))
    metrics=()
    case $server in
        rocketns | rocketns-before)
            binary=$ROCKETNS
            [ "$server" = rocketns-before ] && binary=$ROCKETNS_BEFORE
            printf 'bindAddress=127.0.0.1\nlistenPort=%s\nmetricsPort=%s\nkvConfigPath=%s/kv-%s.json\nwarmRestart=false\nnotifyMinBrokerIdChanged=true\n' \
                "$port" "$((port + 1))" "$work" "$port" > "$work/ns.properties"
            cmd=(env RUST_LOG=warn "$binary" -c "$work/ns.properties")
            metrics=(--metrics-port "$((port + 1))") ;;
        java)
            jars=$(bash tests/java/fetch.sh 5.3.3)
            printf 'listenPort=%s\nnotifyMinBrokerIdChanged=true\n' "$port" > "$work/java.properties"
            # shellcheck disable=SC2206
            cmd=(env ROCKETMQ_HOME="$work" java $JAVA_RUNSERVER_OPTS -Duser.home="$work/java-home" -cp "$jars/*"
                org.apache.rocketmq.namesrv.NamesrvStartup -c "$work/java.properties") ;;
        *) echo "hostile.sh: no server \"$server\"" >&2; exit 2 ;;
    esac
    taskset -c 1 "${cmd[@]}" > "$work/$server.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do (exec 3<>/dev/tcp/127.0.0.1/"$port") 2> /dev/null && break; sleep 0.05; done
    echo "== $server"
    taskset -c 0 target/release/rocketns-loadgen hostile --addr "127.0.0.1:$port" --server-pid "$pid" "${metrics[@]}" \
        --per-kind "$PER_KIND" --quiet "$QUIET" --duration "$DURATION" --real-topics "$REAL_TOPICS" \
        --reregister-ms "$REREGISTER_MS" --churn-rate "$CHURN_RATE" --lookup-rate "$LOOKUP_RATE" ${KINDS:+--kinds "$KINDS"} | tee "$work/out"
    kill "$pid" 2> /dev/null || true
    for _ in $(seq 100); do [ -e "/proc/$pid" ] || break; sleep 0.1; done
    line=$(tail -n 1 "$work/out")
    echo "${line%\}},\"server\":\"$server\"}" >> "$json"
done
python3 - "$json" > "$table" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
mb = lambda b: "%.0f" % (b / 2**20) if b else "n/a"
print("| server | hostile connections | RSS quiet MB | peak RSS MB | bound MB | lookups p99 quiet / attack ms | p99.9 | max | real re-registrations sent / applied / waiting | real brokers routed at the end | lookups failed |")
print("|---|---:|---:|---:|---:|---|---|---|---|---:|---:|")
for r in rows:
    q, a, g = r["lookups_quiet"], r["lookups_attack"], r["reregistrations"]
    print(f"| {r['server']} | {r['hostile_connections']} | {mb(r['quiet_rss'])} | {mb(r['peak_rss'])} | {mb(r['bound'] or 0)} "
          f"| {q['p99_ms']:.2f} / {a['p99_ms']:.2f} | {q['p999_ms']:.2f} / {a['p999_ms']:.2f} | {q['max_ms']:.1f} / {a['max_ms']:.1f} "
          f"| {g['sent']} / {g['applied']} / {g['unanswered']} | {r['real_routed']} of 4 | {r['lookups_failed']} |")
print()
print("| server | kind | sessions | answered ok | refused | closed by the server |")
print("|---|---|---:|---:|---:|---:|")
for r in rows:
    for kind, k in r["kinds"].items():
        if k["sessions"]:
            print(f"| {r['server']} | {kind} | {k['sessions']} | {k['ok']} | {k['refused']} | {k['closed_by_server']} |")
EOF
cat "$table"
