#!/usr/bin/env bash
# Chaos under a Java 5.3.3 broker group in controller mode: for CHAOS_SECONDS (120), every 4 to 8 s, kill -9
# either a random controller node (started again 3 s later) or the group's master broker (started again 5 s
# later; it rejoins as a slave), while a Java producer sends one message at a time and writes down each one
# acknowledged (allAckInSyncStateSet=true: acknowledged means every in-sync replica has it). Then everything
# is started again, a master must be elected, and a consumer must read back every acknowledged message; and
# across the three brokers' role-change logs no epoch may have two masters. rocketns's controller
# (enableControllerInNamesrv), then the same run, its random choices seeded alike (how many fit in the time
# differs with how long each start takes), with Java 5.3.3's own; the counts side by side as
# `controller chaos: KIND: ...` lines. Each node is also the brokers' NameServer. Runs in a
# loopback-only network namespace with its files on a tmpfs; needs root. INTEROP_KEEP=DIR keeps the logs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=tests/java/controller-group.sh
. "$ROOT/tests/java/controller-group.sh" "${BASH_SOURCE[0]}" "$@"

# start_node KIND I: controller node I (also a NameServer), on its store of before if it had one.
declare -a node_pid
start_node() {
    local kind=$1 i=$2
    local keys=(enableControllerInNamesrv=true controllerDLegerGroup=group1 "controllerDLegerPeers=$PEERS"
        "controllerDLegerSelfId=n$i" "controllerStorePath=$work/$kind-store-n$i")
    if [ "$kind" = rocketns ]; then
        start_rocketns "${NS_PORTS[$i]}" "${keys[@]}" "$SIGNED" || return 1
        node_pid[$i]=${pids[-1]}
    else
        JAVA_NS_OPTS="-Drocketmq.namesrv.logRoot=$work/java-n$i-logs" \
            start_java_namesrv "n$i" "$JARS5" "${NS_PORTS[$i]}" "$work" "${keys[@]}" || return 1
        pids+=("$JAVA_NAMESRV_PID")
        node_pid[$i]=$JAVA_NAMESRV_PID
    fi
}

# start_broker KIND PORT: a broker of group broker-a in controller mode, on its store of before if it had one.
declare -A broker_pid
start_broker() {
    broker "$1-b$2" "$JARS5" "$2" "$NAMESRVS" brokerName=broker-a brokerId=-1 brokerRole=SLAVE \
        enableControllerMode=true "controllerAddr=$CONTROLLERS" allAckInSyncStateSet=true
    broker_pid[$2]=$BROKER_PID
}


scenario() {
    local kind=$1 i port master
    echo "--- $kind's controller"
    for i in 0 1 2; do start_node "$kind" "$i" || { verdict 1 "$kind: node $i starts"; return; }; done
    ctl wait-leader "$CONTROLLERS" 60 > /dev/null || { verdict 1 "$kind: a controller leader within 60 s"; return; }
    for port in "${BROKER_PORTS[@]}"; do start_broker "$kind" "$port"; done
    master=$(ctl wait-set "$CONTROLLERS" broker-a 120 3)
    verdict $? "$kind: three brokers in sync under one master ($master)"
    mqadmin updateTopic -c DefaultCluster -t Failover -r 4 -w 4 -n "${NAMESRVS%%;*}" > /dev/null
    rm -f "$work/acked" "$work/stop"
    "${java_client[@]}" produce "$NAMESRVS" Failover "$work/acked" "$work/stop" > "$work/producer-$kind.log" 2>&1 &
    local producer=$!
    pids+=("$producer")

    # Both kinds draw from the generator seeded alike.
    RANDOM=${CHAOS_SEED:-43}
    local until=$((SECONDS + ${CHAOS_SECONDS:-120})) node_kills=0 master_kills=0 no_master=0 id addr
    while [ $SECONDS -lt $until ]; do
        sleep $((4 + RANDOM % 5))
        if [ $((RANDOM % 2)) = 0 ]; then
            i=$((RANDOM % 3))
            kill9 "${node_pid[$i]}"
            node_kills=$((node_kills + 1))
            sleep 3
            start_node "$kind" "$i" || { verdict 1 "$kind: node $i starts again"; break; }
        elif master=$(ctl master "$CONTROLLERS" broker-a); then
            read -r id addr _ <<< "$master"
            port=${addr##*:}
            [ -n "${broker_pid[$port]:-}" ] || continue
            kill9 "${broker_pid[$port]}"
            master_kills=$((master_kills + 1))
            sleep 5
            start_broker "$kind" "$port"
        else
            no_master=$((no_master + 1))
        fi
    done
    local during
    during=$(acked)
    verdict "$([ "$during" -gt 0 ] && echo 0 || echo 1)" \
        "$kind: $node_kills controller nodes and $master_kills masters killed ($no_master times no master to kill); $during messages acknowledged meanwhile"

    # Everything runs again: a master, and every acknowledged message read back through it.
    master=$(ctl wait-set "$CONTROLLERS" broker-a 180 3)
    verdict $? "$kind: after the chaos, all three brokers in sync under one master ($master)"
    touch "$work/stop"
    wait "$producer" 2> /dev/null || true
    timeout 200 "${java_client[@]}" consume "$NAMESRVS" Failover "$work/acked" > "$work/consumer-$kind.log" 2>&1
    local status=$?
    grep -E '^(acknowledged|FAIL)' "$work/consumer-$kind.log" | sed "s/^/    /" || true
    grep -qE '^acknowledged' "$work/consumer-$kind.log" || grep -vE '^\s*at ' "$work/consumer-$kind.log" | tail -n 15
    verdict $status "$kind: every acknowledged message is read back ($(acked) acknowledged)"

    local masters twice
    masters=$(broker_epochs "$kind" 127.0.0.1)
    twice=$(cut -d' ' -f1 <<< "$masters" | uniq -d)
    [ -z "$twice" ] && [ -n "$masters" ]
    verdict $? "$kind: no epoch has two masters in the brokers' logs ($(wc -l <<< "$masters") epochs${twice:+; twice: $twice})"
    echo "$kind: $node_kills node kills, $master_kills master kills, $no_master without a master, $during acknowledged during the chaos and $(acked) in all, all read back: $([ $status = 0 ] && echo yes || echo NO), $(wc -l <<< "$masters") epochs in the brokers' logs, none twice: $([ -z "$twice" ] && echo yes || echo NO)" \
        > "$work/chaos-$kind"
    for pid in "${pids[@]}"; do kill -9 "$pid" 2> /dev/null || true; done
    wait 2> /dev/null || true
    pids=()
}

set +e
for kind in ${KINDS:-rocketns java}; do scenario "$kind"; done
set -e
for kind in rocketns java; do
    [ -f "$work/chaos-$kind" ] && echo "controller chaos: $(cat "$work/chaos-$kind")"
done
echo "java controller chaos: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
