#!/usr/bin/env bash
# Replacing the NameServers of a running cluster one at a time, under traffic, with rocketns (namesrvPeers)
# and, as the baseline, with Java's NameServer. Each row:
#   1. two Java 5.3.3 NameServers, A (19876) and B (19878); two Java 5.3.3 brokers, masters of DefaultCluster
#      (broker-a, broker-b) registering with "A;B" every 30 s (their default); four topics created on both
#      (mqadmin updateTopic -c DefaultCluster), routed by both NameServers;
#   2. tests/java/clients/Migration.java throughout: a steady producer (20 sync sends a second), a push
#      consumer of every topic, and every second a new producer of its own client instance (its own route
#      cache and random NameServer choice) that sends one message and stops;
#   3. the steps, each with at least 20 s of traffic and until the new node routes every topic on both
#      brokers (at most 36 s; 3 s more after it): (a) A is replaced by the row's new kind on the same port
#      (Java: kill -9, then started at once; rocketns: started first with --wait-for-port, then the Java
#      node killed), (b) B the same, (c) a Java NameServer back on A;
#   4. (rocketns row) two brand-new rocketns nodes that no broker registers with, one with the rocketns node
#      first in namesrvPeers, one with the Java node first: their cluster info (106), topic list (206) and
#      every route (105), code and body bytes, against their first peer's.
# Rows: "rocketns" (the new kind is rocketns with namesrvPeers naming the other node, and a fresh kvConfigPath
# folder, so no route file); "java" (the new kind is a fresh Java 5.3.3 NameServer, which starts empty).
# Per step: failed sends (and those saying "No route info"), messages sent OK and never consumed, and the
# time from the new node's port opening until it routes every topic (105 SUCCESS; and with both brokers).
# Checks: no lost message in any row; in the rocketns row no failed send at all in steps (a) and (b) (a 5.3.3
# client's send fails when its first NameServer call is refused, whatever the NameServer, so rocketns is
# started beside the node it replaces with --wait-for-port, copies its routes, and listens within a
# millisecond of its end), and its nodes route every topic in the first round of lookups after their port
# opens; the brand-new node answers
# as its first peer (byte for byte against rocketns; against Java, bytes or order-only differences, shown).
# Step (c) puts an empty Java NameServer back: its failures are reported, not checked.
# Runs in a loopback-only network namespace with its files on a tmpfs; needs root. INTEROP_KEEP=DIR keeps
# the logs. Builds Migration.java with javac into target/java-clients/5.3.3.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
A=127.0.0.1:19876
B=127.0.0.1:19878
TOPICS=(MigrationT0 MigrationT1 MigrationT2 MigrationT3)
BUILT=$ROOT/target/java-clients

# shellcheck source=tests/java/lib.sh
. "$ROOT/tests/java/lib.sh"
if [ "${1:-}" != inner ]; then
    prepare_java 5.3.3
    mkdir -p "$BUILT/5.3.3"
    javac -nowarn -XDsuppressNotes -d "$BUILT/5.3.3" -cp "$JARS5/*" "$ROOT/tests/java/clients/Migration.java"
fi
enter_sandbox "${BASH_SOURCE[0]}" "$@"
sandbox_setup
began=$SECONDS
# elapsed: the seconds since the sandbox began, and the time of day (the logs' clock).
elapsed() { echo "at $((SECONDS - began)) s, $(date +%T)"; }
helper() { python3 "$ROOT/tests/java/migration.py" "$@"; }

# start_node KIND PORT [PEERS]: a NameServer of KIND (java: a fresh home; rocketns: a fresh kvConfigPath
# folder, so no route file, and namesrvPeers=PEERS) on PORT; node_pid[PORT] is its process.
declare -A node_pid
started_nodes=0
start_node() {
    local kind=$1 port=$2 peers=${3:-}
    started_nodes=$((started_nodes + 1))
    if [ "$kind" = java ]; then
        start_java_namesrv "$row-$port-$started_nodes" "$JARS5" "$port" "$work" || exit 1
        pids+=("$JAVA_NAMESRV_PID")
        node_pid[$port]=$JAVA_NAMESRV_PID
    else
        rm -rf "$work/rocketns-$port"
        start_rocketns "$port" "namesrvPeers=$peers" || exit 1
        node_pid[$port]=${pids[-1]}
    fi
}

# wait_log FILE TEXT PID: until FILE has a line with TEXT (a minute at most) while process PID runs.
wait_log() {
    for _ in $(seq 600); do
        grep -qF "$2" "$1" 2> /dev/null && return 0
        kill -0 "$3" 2> /dev/null || return 1
        sleep 0.1
    done
    return 1
}

set_step() {
    echo "$1" > "$work/$row-ctl/step.tmp" && mv "$work/$row-ctl/step.tmp" "$work/$row-ctl/step"
}

# replace STEP PORT KIND [PEERS]: step STEP: the node on PORT killed (-9) and KIND started there at once;
# traffic goes on for 20 s at least, and until the new node routes every topic on both brokers (3 s more
# after it; 36 s at most). $work/ROW-ctl/closed exists from just before the kill until the new node listens
# (Migration.java tells the sends refused meanwhile apart). The new node's times go to
# $work/ROW-STEP.routed.log.
replace() {
    local step=$1 port=$2 kind=$3 peers=${4:-} watcher from old
    old=${node_pid[$port]}
    set_step "$step"
    helper new-node "127.0.0.1:$port" 45 "$work/$row-ctl/killed-$step" "${TOPICS[@]}" > "$work/$row-$step.routed.log" &
    watcher=$!
    for _ in $(seq 100); do grep -q watching "$work/$row-$step.routed.log" && break; sleep 0.05; done
    from=$SECONDS
    echo "--- $row: step $step: $kind on $port ($(elapsed))"
    if [ "$kind" = rocketns ]; then
        # Started beside the node it replaces, as README's migration says: it copies that node's routes (the
        # first of namesrvPeers), waits for the port (--wait-for-port), and listens within a millisecond of
        # the old node's end.
        rm -rf "$work/rocketns-$port"
        ROCKETNS_OPTS="--wait-for-port 60" start_rocketns "$port" "namesrvPeers=127.0.0.1:$port;$peers" || exit 1
        node_pid[$port]=${pids[-1]}
        if ! wait_log "$work/rocketns-$port.log" "the port is in use" "${node_pid[$port]}"; then
            echo "migration: rocketns did not copy and wait for the port; its log:"
            tail -n 20 "$work/rocketns-$port.log"
            exit 1
        fi
        touch "$work/$row-ctl/closed"
        kill9 "$old"
        touch "$work/$row-ctl/killed-$step"
        wait_log "$work/rocketns-$port.log" "boot success" "${node_pid[$port]}" \
            || { echo "migration: rocketns did not take the port"; tail -n 20 "$work/rocketns-$port.log"; exit 1; }
    else
        touch "$work/$row-ctl/closed"
        kill9 "$old"
        touch "$work/$row-ctl/killed-$step"
        start_node "$kind" "$port" "$peers"
    fi
    rm "$work/$row-ctl/closed"
    while [ $((SECONDS - from)) -lt 36 ] && kill -0 "$watcher" 2> /dev/null; do sleep 0.5; done
    local done_at=$((SECONDS - from))
    while [ $((SECONDS - from)) -lt 20 ] || [ $((SECONDS - from)) -lt $((done_at + 3)) ]; do sleep 0.5; done
    if kill -0 "$watcher" 2> /dev/null; then kill9 "$watcher"; else wait "$watcher" || true; fi
    sed -i 's/^watching$//; /^$/d' "$work/$row-$step.routed.log"
    [ -s "$work/$row-$step.routed.log" ] || echo "routed_ms=never complete_ms=never first_round=no" > "$work/$row-$step.routed.log"
    echo "    $port: $(cat "$work/$row-$step.routed.log"); $((SECONDS - from)) s of traffic"
}

stop_everything() {
    for pid in "${pids[@]}"; do kill -9 "$pid" 2> /dev/null || true; done
    wait 2> /dev/null || true
    pids=()
}

# the_brand_new_node PORT PEERS: a rocketns node on PORT copying from PEERS (its first one answers), which no
# broker registers with; its answers compared with its first peer's, to $work/compare-PORT.log.
the_brand_new_node() {
    local port=$1 peers=$2 first=${2%%;*}
    start_node rocketns "$port" "$peers"
    helper compare "127.0.0.1:$port" "$first" > "$work/compare-$port.log" || echo "compare failed" >> "$work/compare-$port.log"
    # Both bodies of the first three that differ, the names of the others (all in compare-PORT.log).
    awk '/^same: /{next} /^(ORDER ONLY|DIFFERENT): /{n++} n<=3 || !/^    /' "$work/compare-$port.log" | sed 's/^/    /'
}

# run_row ROW KIND CLEAN_STEPS: the whole sequence with KIND as the new kind of NameServer.
run_row() {
    row=$1
    local kind=$2 clean=$3 port ns t client waited line ok
    echo "=== row $row ($(elapsed))"
    mkdir -p "$work/$row-ctl"
    set_step start
    start_node java 19876
    start_node java 19878
    echo "--- $row: two Java NameServers ($(elapsed))"
    broker "$row-broker-a" "$JARS5" 10911 "$A;$B" brokerName=broker-a
    broker "$row-broker-b" "$JARS5" 10915 "$A;$B" brokerName=broker-b
    for ns in "$A" "$B"; do
        if ! helper brokers "$ns" 90 broker-a broker-b; then
            echo "migration: the brokers did not register with $ns; the logs:"
            show_logs
            exit 1
        fi
    done
    echo "--- $row: two brokers registered with both ($(elapsed))"
    local creating=()
    for t in "${TOPICS[@]}"; do
        mqadmin updateTopic -n "$A" -c DefaultCluster -t "$t" > "$work/$row-updateTopic-$t.txt" &
        creating+=($!)
    done
    for pid in "${creating[@]}"; do wait "$pid"; done
    for ns in "$A" "$B"; do
        if ! helper routed "$ns" 30 "${TOPICS[@]}"; then
            echo "migration: $ns does not route the topics on both brokers; mqadmin said:"
            cat "$work/$row-updateTopic-"*.txt
            exit 1
        fi
    done
    echo "--- $row: two Java NameServers, two brokers, ${#TOPICS[@]} topics routed ($(elapsed))"

    # shellcheck disable=SC2086
    java -Xms128m -Xmx256m $SHORT_JVM -Duser.home="$work/$row-client" \
        -Drocketmq.client.logRoot="$work/$row-client-logs" -cp "$JARS5/*:$BUILT/5.3.3" \
        Migration "$A;$B" "$(IFS=,; echo "${TOPICS[*]}")" "$work/$row-ctl" "$clean" > "$work/$row-client.log" 2>&1 &
    client=$!
    pids+=("$client")
    for _ in $(seq 60); do grep -q '^READY' "$work/$row-client.log" && break; sleep 0.5; done
    if ! grep -q '^READY' "$work/$row-client.log"; then
        echo "migration: the client sent nothing within 30 s; its output:"
        tail -n 20 "$work/$row-client.log"
        exit 1
    fi
    sleep 5

    if [ "$kind" = rocketns ]; then
        replace a 19876 rocketns "$B"
        replace b 19878 rocketns "$A"
    else
        replace a 19876 java
        replace b 19878 java
    fi
    replace c 19876 java

    if [ "$kind" = rocketns ]; then
        set_step new-node
        echo "--- $row: brand-new rocketns nodes, no broker registering with them ($(elapsed))"
        echo "  19880, namesrvPeers=$B;$A (first peer rocketns), against $B:"
        the_brand_new_node 19880 "$B;$A"
        echo "  19882, namesrvPeers=$A;$B (first peer Java), against $A:"
        the_brand_new_node 19882 "$A;$B"
    fi

    set_step end
    touch "$work/$row-ctl/stop"
    for waited in $(seq 120); do kill -0 "$client" 2> /dev/null || break; sleep 0.5; done
    if kill -0 "$client" 2> /dev/null; then
        echo "migration: the client did not end within 60 s of the stop; its output's end:"
        tail -n 20 "$work/$row-client.log"
        verdict 1 "$row: the client ends and prints its tally"
    fi
    echo "--- $row: the client's tally (drained in about $((waited / 2)) s)"
    grep -E '^(STEP|FAILURE) ' "$work/$row-client.log" | sed 's/^/    /' || true
    while read -r line; do
        case $line in
            "PASS: "*) verdict 0 "$row: ${line#PASS: }" ;;
            "FAIL: "*) verdict 1 "$row: ${line#FAIL: }" ;;
        esac
    done < <(grep -E '^(PASS|FAIL): ' "$work/$row-client.log" || true)
    grep -qE '^PASS: no lost message' "$work/$row-client.log" || grep -qE '^FAIL: no lost message' "$work/$row-client.log" \
        || verdict 1 "$row: the client printed its verdict on lost messages"

    if [ "$kind" = rocketns ]; then
        for step in a b; do
            port=19876 && [ "$step" = b ] && port=19878
            ok=0 && grep -q 'first_round=yes' "$work/$row-$step.routed.log" || ok=1
            verdict $ok "$row: step $step: rocketns on $port routes every topic on both brokers at once (the first lookups after its port opens): $(cat "$work/$row-$step.routed.log")"
        done
        local identical total content
        total=$(sed -nE 's/^compared ([0-9]+).*/\1/p' "$work/compare-19880.log")
        identical=$(sed -nE 's/^compared [0-9]+: identical ([0-9]+).*/\1/p' "$work/compare-19880.log")
        ok=0 && [ -n "$total" ] && [ "$identical" = "$total" ] || ok=1
        verdict $ok "$row: a brand-new node answers byte for byte as its first peer, rocketns ($(tail -n 1 "$work/compare-19880.log"))"
        content=$(sed -nE 's/.*content ([0-9]+)$/\1/p' "$work/compare-19882.log")
        ok=0 && [ "$content" = 0 ] || ok=1
        verdict $ok "$row: a brand-new node answers as its first peer, Java, byte for byte or in another order only, shown above ($(tail -n 1 "$work/compare-19882.log"))"
    fi
    stop_everything
}

run_row rocketns rocketns a,b
run_row java java -

echo "--- the table: failed sends, of them \"No route info\" and refused while the port was closed (kill to listen),"
echo "    messages sent OK and never consumed; the new node's time from its port opening until it routes every"
echo "    topic (105 SUCCESS), and until with both brokers; the NameServer each new producer's client ended with"
printf '    %-9s %-4s %6s %8s %7s %4s %9s %11s  %s\n' row step failed no-route refused lost routed_ms complete_ms "new producers"
# field KEY LINE: the value of KEY=VALUE in LINE.
field() { sed -nE "s/^(.* )?$1=([^ ]+).*/\2/p" <<< "$2"; }
for row in rocketns java; do
    for step in a b c; do
        line=$(grep -E "^STEP $step " "$work/$row-client.log" 2> /dev/null || true)
        routed=$(cat "$work/$row-$step.routed.log" 2> /dev/null || true)
        printf '    %-9s %-4s %6s %8s %7s %4s %9s %11s  %s\n' "$row" "$step" "$(field failed "$line")" "$(field noroute "$line")" \
            "$(field refused_closed "$line")" "$(field lost "$line")" "$(field routed_ms "$routed")" "$(field complete_ms "$routed")" "${line##*chose=}"
    done
done
echo "migration: $((SECONDS - began)) s in the sandbox"
echo "migration: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
