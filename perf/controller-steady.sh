#!/usr/bin/env bash
# The controller beside a loaded NameServer (issue 43, item 5): a three-node rocketns group
# (`enableControllerInNamesrv`, Raft heartbeats every 300 ms, elections after 1-2 s without one), all three
# on core 1; for DURATION seconds the hostile NameServer fleet (`rocketns-loadgen hostile`) and restart
# storms one after another (`rocketns-loadgen storm`, 1,000 brokers x STORM_TOPICS topics each, after a
# probe broker of PROBE_TOPICS) against the NameServer port of the node that leads (TARGET=follower: of a
# follower), from core 0. Each storm's frames, and its probe's, stay under 16 KiB: a larger registration
# waits its turn behind the fleet's trickled 16 MiB frames for as long as the attack lasts (perf/README.md,
# "The controller beside a loaded NameServer"), and the storms are there to keep the route writer busy
# beside the controller. Each node's
# leader changes and term (its /metrics) are read before and after: the goal is none in the whole run.
# Needs root for the fleet's SCHED_FIFO lookups (as perf/hostile.sh). Writes perf/out/controller-steady.md
# and .jsonl (untracked; UPDATE=1: perf/results/).
#   DURATION=600 TARGET=leader PER_KIND=150 REAL_TOPICS=100000 STORM_TOPICS=90 PROBE_TOPICS=50
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DURATION=${DURATION:-600} TARGET=${TARGET:-leader} PER_KIND=${PER_KIND:-150} REAL_TOPICS=${REAL_TOPICS:-100000}
STORM_TOPICS=${STORM_TOPICS:-90} PROBE_TOPICS=${PROBE_TOPICS:-50}
# shellcheck source=perf/prelude.sh
. perf/prelude.sh
work=$(mktemp -d -t rocketns-steady.XXXXXX)
pids=()
trap 'kill "${pids[@]}" 2> /dev/null; rm -rf "$work"' EXIT
json="$OUT/controller-steady.jsonl" table="$OUT/controller-steady.md"
ns() { echo $((23001 + $1)); }
ctl() { echo $((23101 + $1)); }
metrics() { echo $((23201 + $1)); }
peers="n0-127.0.0.1:$(ctl 0);n1-127.0.0.1:$(ctl 1);n2-127.0.0.1:$(ctl 2)"
printf '%s\n' "the steady run's peer secret" > "$work/peer-secret"
for i in 0 1 2; do
    printf '%s\n' bindAddress=127.0.0.1 "listenPort=$(ns $i)" "metricsPort=$(metrics $i)" "kvConfigPath=$work/kv-$i.json" \
        warmRestart=false enableControllerInNamesrv=true controllerDLegerGroup=steady "controllerDLegerPeers=$peers" \
        "controllerDLegerSelfId=n$i" "controllerStorePath=$work/controller-$i" \
        "controllerPeerSecretFile=$work/peer-secret" > "$work/n$i.properties"
    taskset -c 1 env RUST_LOG=warn "$ROCKETNS" -c "$work/n$i.properties" > "$work/n$i.log" 2>&1 &
    pids+=($!)
done

metric() { # node name: the value of an unlabelled metric
    curl -s "http://127.0.0.1:$(metrics "$1")/metrics" | awk -v m="$2" '$1 == m { print $2 }'
}
leader=
for _ in $(seq 600); do
    for i in 0 1 2; do [ "$(metric $i rocketns_controller_leader 2> /dev/null)" = 1 ] && leader=$i; done
    [ -n "$leader" ] && break
    sleep 0.1
done
[ -n "$leader" ] || { echo "controller-steady.sh: no leader in 60 s" >&2; tail -n 20 "$work"/n*.log >&2; exit 1; }
target=$leader
[ "$TARGET" = follower ] && target=$(((leader + 1) % 3))
# Every node must know the leader before the counts are taken.
for i in 0 1 2; do
    for _ in $(seq 100); do [ "$(metric $i rocketns_controller_has_leader)" = 1 ] && break; sleep 0.1; done
done
read_counts() { for i in 0 1 2; do printf '%s/%s ' "$(metric $i rocketns_controller_leader_changes_total)" "$(metric $i rocketns_controller_term)"; done; }
before=$(read_counts)
echo "== leader n$leader, load on n$target ($TARGET), leader changes/term before: $before"

started=$SECONDS
taskset -c 0 target/release/rocketns-loadgen hostile --addr "127.0.0.1:$(ns "$target")" --server-pid "${pids[$target]}" \
    --metrics-port "$(metrics "$target")" --per-kind "$PER_KIND" --quiet 5 --duration "$DURATION" \
    --real-topics "$REAL_TOPICS" > "$work/hostile.out" 2>&1 &
fleet=$!
storms=0 tries=0 registered=0 storm_seconds=0
while [ $((SECONDS - started)) -lt "$DURATION" ] && kill -0 "$fleet" 2> /dev/null; do
    tries=$((tries + 1)) storm_started=$SECONDS
    taskset -c 0 target/release/rocketns-loadgen storm --addr "127.0.0.1:$(ns "$target")" --server-pid "${pids[$target]}" \
        --brokers 1000 --topics "$STORM_TOPICS" --probe-topics "$PROBE_TOPICS" --quiet 1 --after 2 --label storm > "$work/storm.out" 2>> "$work/storm.err" || true
    line=$(grep '^{' "$work/storm.out" | tail -n 1) || { echo "storm $tries: no summary" >&2; tail -n 5 "$work/storm.err" >&2; continue; }
    storms=$((storms + 1))
    registered=$((registered + $(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["registered"])' "$line")))
    storm_seconds=$((storm_seconds + SECONDS - storm_started))
    echo "storm $tries: $((SECONDS - storm_started)) s, $(grep -v '^{' "$work/storm.out" | tail -n 1)"
done
wait "$fleet" || true
after=$(read_counts)
elapsed=$((SECONDS - started))
fleet_line=$(grep '^{' "$work/hostile.out" | tail -n 1 || echo '{}')
echo "== after ${elapsed} s: leader changes/term $after; $storms storms ($registered registrations at the first try)"
for i in 0 1 2; do kill -0 "${pids[$i]}" 2> /dev/null || { echo "controller-steady.sh: n$i exited" >&2; tail -n 20 "$work/n$i.log" >&2; exit 1; }; done
python3 - "$before" "$after" "$leader" "$target" "$elapsed" "$storms" "$registered" "$fleet_line" "$tries" "$storm_seconds" "$STORM_TOPICS" "$PROBE_TOPICS" >> "$json" <<'EOF'
import json, sys
before, after = sys.argv[1].split(), sys.argv[2].split()
fleet = json.loads(sys.argv[8])
print(json.dumps({"before": before, "after": after, "leader": int(sys.argv[3]), "target": int(sys.argv[4]),
                  "seconds": int(sys.argv[5]), "storms": int(sys.argv[6]), "registered": int(sys.argv[7]),
                  "storm_tries": int(sys.argv[9]), "storm_seconds": int(sys.argv[10]), "storm_topics": int(sys.argv[11]), "probe_topics": int(sys.argv[12]),
                  "hostile_connections": fleet.get("hostile_connections"), "peak_rss": fleet.get("peak_rss"),
                  "lookups_attack": fleet.get("lookups_attack"), "reregistrations": fleet.get("reregistrations")}))
EOF
python3 - "$json" > "$table" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| load on | seconds | storms of 1,000 brokers x T topics, probe's topics (registrations at the first try, seconds in storms) | hostile connections | real re-registrations sent / applied / waiting | leader changes / term before (n0 n1 n2) | after | changed | lookups p99.9 / max ms under attack |")
print("|---|---:|---|---:|---|---|---|---|---|")
for r in rows:
    changed = "no" if r["before"] == r["after"] else "**yes**"
    who = "the leader" if r["leader"] == r["target"] else "a follower"
    la = r.get("lookups_attack") or {}
    rr = r.get("reregistrations")
    rr = f"{rr['sent']} / {rr['applied']} / {rr['unanswered']}" if rr else "not recorded"
    print(f"| n{r['target']} ({who}) | {r['seconds']} | {r['storms']} x {r.get('storm_topics', 1000)}, {r.get('probe_topics', 100)} ({r['registered']}, {r.get('storm_seconds', '?')} s) | {r['hostile_connections']} | {rr} "
          f"| {' '.join(r['before'])} | {' '.join(r['after'])} | {changed} | {la.get('p999_ms', 0):.2f} / {la.get('max_ms', 0):.1f} |")
EOF
cat "$table"
[ "$before" = "$after" ]
