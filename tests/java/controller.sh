#!/usr/bin/env bash
# A Java 5.3.3 broker group in controller mode fails over through a three-node controller group: rocketns's
# (enableControllerInNamesrv), then, the same scenario, Java 5.3.3's own (NamesrvStartup with the same
# keys), and the times side by side. Each node is also the brokers' NameServer. The group: three brokers
# named broker-a (enableControllerMode, brokerId=-1, allAckInSyncStateSet=true, as the quick-start
# configuration of Java's distribution); the controller gives them ids and elects one master (before, mqadmin
# updateControllerConfig changes a setting on the three nodes and getControllerConfig reads it back). Then:
#   1. the SyncStateSet grows to all three (the master's 1001s), and a Java producer sends through the group
#      (tests/java/clients/Failover.java), one message at a time, writing down each one acknowledged;
#   2. kill -9 the master: a slave must be elected (time from the kill to the leader answering 1004 with a
#      new master), and the producer must get acknowledgements through it;
#   3. kill -9 the controller leader: another node must lead (time from the kill), the producer must go on,
#      and the brokers must find the new leader: the remaining slave is killed, and the master's shrunken
#      SyncStateSet (its 1001) must reach the new leader;
#   4. the producer stops; a consumer must read back every message that was acknowledged;
#   5. kill -9 of every controller node, and all three start again: the leader must name the same master,
#      SyncStateSet and epochs as before (time from the start of the processes).
# The times are printed as `controller: TIMES` lines, one per controller. Runs in a loopback-only network
# namespace with its files on a tmpfs; needs root. INTEROP_KEEP=DIR keeps the logs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=tests/java/controller-group.sh
. "$ROOT/tests/java/controller-group.sh" "${BASH_SOURCE[0]}" "$@"

# start_nodes KIND: the three controller nodes, KIND rocketns or java; node_pid[i] is node i's process.
start_nodes() {
    local kind=$1 i keys
    node_pid=()
    for i in 0 1 2; do
        keys=(enableControllerInNamesrv=true controllerDLegerGroup=group1 "controllerDLegerPeers=$PEERS"
            "controllerDLegerSelfId=n$i" "controllerStorePath=$work/$kind-store-n$i")
        if [ "$kind" = rocketns ]; then
            start_rocketns "${NS_PORTS[$i]}" "${keys[@]}" "$SIGNED" || exit 1
            node_pid+=("${pids[-1]}")
        else
            JAVA_NS_OPTS="-Drocketmq.namesrv.logRoot=$work/java-n$i-logs" \
                start_java_namesrv "n$i" "$JARS5" "${NS_PORTS[$i]}" "$work" "${keys[@]}" || exit 1
            pids+=("$JAVA_NAMESRV_PID")
            node_pid+=("$JAVA_NAMESRV_PID")
        fi
    done
    for port in 9878 9868 9858; do wait_port "$port" || { echo "controller: nothing listens on $port"; exit 1; }; done
}

# start_brokers: three brokers of group broker-a in controller mode; broker_pid[port] is each one's process.
declare -A broker_pid
start_brokers() {
    local port
    for port in "${BROKER_PORTS[@]}"; do
        broker "$1-b$port" "$JARS5" "$port" "$NAMESRVS" brokerName=broker-a brokerId=-1 brokerRole=SLAVE \
            enableControllerMode=true "controllerAddr=$CONTROLLERS" allAckInSyncStateSet=true
        broker_pid[$port]=$BROKER_PID
    done
}


# wait_acked MORE SECONDS: until MORE messages beyond those acknowledged now are; says whether they were.
wait_acked() {
    local target=$(($(acked) + $1)) deadline=$((SECONDS + $2))
    while [ "$(acked)" -lt "$target" ] && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
    [ "$(acked)" -ge "$target" ]
}

stop_everything() {
    for pid in "${pids[@]}"; do kill -9 "$pid" 2> /dev/null || true; done
    wait 2> /dev/null || true
    pids=()
}

# scenario KIND: the whole run with KIND's controllers; its times go to $work/times-KIND.
scenario() {
    local kind=$1 master old_id old_addr new new_id new_addr leader took
    echo "--- $kind's controller"
    start_nodes "$kind"
    leader=$(ctl wait-leader "$CONTROLLERS" 60) || { verdict 1 "$kind: a controller leader within 60 s"; return; }
    verdict 0 "$kind: a controller leader (${leader% *})"
    # What an operator does with mqadmin (UPDATE/GET_CONTROLLER_CONFIG on every node); the value is
    # near the default, and Java reads it only when a node first leads.
    mqadmin updateControllerConfig -a "$CONTROLLERS" -k scanInactiveMasterInterval -v 4000 > "$work/update-$kind.txt"
    mqadmin getControllerConfig -a "$CONTROLLERS" > "$work/config-$kind.txt"
    [ "$(grep -cE '^scanInactiveMasterInterval +=  4000$' "$work/config-$kind.txt")" = 3 ] \
        && grep -q 'update controller config success' "$work/update-$kind.txt"
    verdict $? "$kind: mqadmin updateControllerConfig, then getControllerConfig shows it on the three nodes"
    start_brokers "$kind"
    master=$(ctl wait-master "$CONTROLLERS" broker-a 120 none) || { verdict 1 "$kind: a master elected within 120 s"; show_logs; return; }
    verdict 0 "$kind: the brokers register and one is elected master: ${master% *}"
    local full
    full=$(ctl wait-set "$CONTROLLERS" broker-a 60 3)
    verdict $? "$kind: the slaves catch up: the SyncStateSet is all three ($full)"
    mqadmin updateTopic -c DefaultCluster -t Failover -r 4 -w 4 -n "${NAMESRVS%%;*}" > /dev/null
    rm -f "$work/acked" "$work/stop"
    "${java_client[@]}" produce "$NAMESRVS" Failover "$work/acked" "$work/stop" > "$work/producer-$kind.log" 2>&1 &
    local producer=$!
    pids+=("$producer")
    wait_acked 200 90
    verdict $? "$kind: the producer's messages are acknowledged through the master"

    read -r old_id old_addr _ <<< "$full"
    kill9 "${broker_pid[${old_addr##*:}]}"
    new=$(ctl wait-master "$CONTROLLERS" broker-a 90 "$old_id") || { verdict 1 "$kind: a new master within 90 s of kill -9"; show_logs; return; }
    took=${new##* }
    read -r new_id new_addr _ <<< "$new"
    verdict 0 "$kind: kill -9 of master $old_id: broker $new_id elected in $took s"
    echo "new-master $took" >> "$work/times-$kind"
    wait_acked 200 90
    verdict $? "$kind: the producer goes on through the new master (acknowledged: $(acked))"

    leader=$(ctl leader "$CONTROLLERS")
    local index
    case ${leader##*:} in 9878) index=0 ;; 9868) index=1 ;; 9858) index=2 ;; esac
    kill9 "${node_pid[$index]}"
    local rest=${CONTROLLERS//$leader/}
    rest=${rest#;} rest=${rest%;} rest=${rest//;;/;}
    new=$(ctl wait-leader "$rest" 60 "$leader") || { verdict 1 "$kind: a new controller leader within 60 s"; return; }
    took=${new##* }
    verdict 0 "$kind: kill -9 of controller leader n$index: ${new% *} leads in $took s"
    echo "new-leader $took" >> "$work/times-$kind"
    wait_acked 100 90
    verdict $? "$kind: the producer goes on without the controller leader (acknowledged: $(acked))"
    local slave_port=""
    for port in "${BROKER_PORTS[@]}"; do
        [ "$port" = "${old_addr##*:}" ] || [ "$port" = "${new_addr##*:}" ] || slave_port=$port
    done
    local both
    both=$(ctl wait-set "$rest" broker-a 60 2)
    verdict $? "$kind: the other slave rejoins the new master's SyncStateSet, as the new leader has it ($both)"
    kill9 "${broker_pid[$slave_port]}"
    local shrunk
    shrunk=$(ctl wait-set "$rest" broker-a 90 1)
    [ "$(cut -d' ' -f4 <<< "$shrunk")" = "$new_id" ]
    verdict $? "$kind: the master finds the new leader: its SyncStateSet without the killed slave reaches it ($shrunk)"

    touch "$work/stop"
    wait "$producer" 2> /dev/null || true
    grep -E '^acked' "$work/producer-$kind.log" | sed "s/^/    $kind producer: /" || true
    # The consumer asks the two NameServers still running: a client's start on a dead one (the killed
    # leader's node) is not what this checks. (Once, a Java run's consumer ended without its count, its log
    # gone with the run; a start against the dead node is the likeliest cause, so its log is shown now.)
    local live_ns="" i
    for i in 0 1 2; do [ "$i" = "$index" ] || live_ns+="127.0.0.1:${NS_PORTS[$i]};"; done
    timeout 200 "${java_client[@]}" consume "${live_ns%;}" Failover "$work/acked" > "$work/consumer-$kind.log" 2>&1
    local status=$?
    grep -E '^(acknowledged|FAIL)' "$work/consumer-$kind.log" | sed "s/^/    /" || true
    # A consumer that ended without its count says why.
    grep -qE '^acknowledged' "$work/consumer-$kind.log" || grep -vE '^\s*at ' "$work/consumer-$kind.log" | tail -n 15
    verdict $status "$kind: every acknowledged message is read back"

    # The whole group restarts (kill -9 of the two nodes left): each node reads its store back, and the
    # master the leader then names, and its SyncStateSet and epoch, are those of before.
    local before after started
    before=$(ctl master "$rest" broker-a)
    for pid in "${node_pid[@]}"; do kill9 "$pid"; done
    started=$EPOCHREALTIME
    start_nodes "$kind"
    after=$(ctl wait-master "$CONTROLLERS" broker-a 120 none)
    took=$(python3 -c "print(f'{$EPOCHREALTIME - $started:.1f}')")
    [ -n "$before" ] && [ "${after% *}" = "$before" ]
    verdict $? "$kind: all three nodes restarted: the leader has the same master in $took s (${after% *}; before: $before)"
    echo "restart $took" >> "$work/times-$kind"
    stop_everything
}

set +e
for kind in ${KINDS:-rocketns java}; do scenario "$kind"; done
set -e
for kind in rocketns java; do
    echo "controller: $kind: $(tr '\n' ' ' < "$work/times-$kind" 2> /dev/null) (seconds)"
done
echo "java controller: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
