#!/usr/bin/env bash
# The 5.x acting-master paths with real brokers: a Java 5.3.3 master/slave pair (broker-a, ids 0 and 1) with
# enableSlaveActingMaster=true and compatibleWithOldNameSrv=false registers with the Java NameServer 5.3.3
# and rocketns at once, both with supportActingMaster=true. mqadmin compares the two NameServers' routes and
# cluster lists with the pair up, after the master stops (the slave must show as acting master, id 0), and
# after the master returns. The brokers' BROKER_HEARTBEAT (904) and GET_BROKER_MEMBER_GROUP (901) must reach
# rocketns (its metrics count them). Both NameServers start with notifyMinBrokerIdChanged=true; the Java one
# turns it off before the pair starts, so that when the master stops the slave hears of it from rocketns alone:
# its log must say so, and rocketns's metrics count the 905. Before the pair starts, test brokers
# (tests/java/min_broker_id.py) go through every trigger of a 905 with each NameServer in turn, and must
# receive the same frames from both. Runs in a loopback-only network namespace with its files on a tmpfs;
# needs root. INTEROP_KEEP=DIR keeps the logs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
JAVA_NS=127.0.0.1:19876
ROCKETNS=127.0.0.1:19877
MASTER=127.0.0.1:10911
SLAVE=127.0.0.1:10915

# shellcheck source=tests/java/lib.sh
. "$ROOT/tests/java/lib.sh"
[ "${1:-}" = inner ] || prepare_java 5.3.3
enter_sandbox "${BASH_SOURCE[0]}" "$@"
sandbox_setup

both=(supportActingMaster=true notifyMinBrokerIdChanged=true scanNotActiveBrokerInterval=1000)
start_java_namesrv 5.3.3 "$JARS5" 19876 "$work" "${both[@]}" || exit 1
pids+=("$JAVA_NAMESRV_PID")
start_rocketns 19877 "${both[@]}" metricsPort=19880 || exit 1

# requests_seen CODE: how many requests of CODE rocketns has answered (its metrics).
requests_seen() {
    curl -s "http://127.0.0.1:19880/metrics" | awk -v c="code=\"$1\"" 'index($0, c) {n += $2} END {print n + 0}'
}
# notices_sent: how many 905s rocketns has sent.
notices_sent() {
    curl -s "http://127.0.0.1:19880/metrics" | awk '/^rocketns_min_broker_id_notifications_total\{result="sent"\}/ {print $2}'
}

same_output "905 notices test brokers receive, trigger by trigger" \
    "$(timeout 120 python3 "$ROOT/tests/java/min_broker_id.py" "$JAVA_NS" 20000 2>&1)" \
    "$(timeout 120 python3 "$ROOT/tests/java/min_broker_id.py" "$ROCKETNS" 20000 2>&1)"

pair=(enableSlaveActingMaster=true compatibleWithOldNameSrv=false)
master() { broker broker-a "$JARS5" 10911 "$JAVA_NS;$ROCKETNS" "${pair[@]}"; }
master
master_pid=$BROKER_PID
# broker() names the conf and store after its first argument; the slave is broker-a too, by its settings.
broker broker-a-slave "$JARS5" 10915 "$JAVA_NS;$ROCKETNS" "${pair[@]}" brokerName=broker-a brokerId=1 brokerRole=SLAVE

route_of() { mqadmin topicRoute -t broker-a -n "$1" | normalize_mqadmin; }

# same_route WHAT EXPECTED_ADDRS: both NameServers give the same route of topic broker-a, and its broker
# addresses are EXPECTED_ADDRS (as `"id":"addr",...` in the canonical JSON). A broker's state changes reach
# the two NameServers a moment apart, so this asks again for up to 40 s before it fails.
same_route() {
    local what=$1 expected=$2 java ours addrs
    for _ in $(seq 20); do
        java=$(route_of "$JAVA_NS") ours=$(route_of "$ROCKETNS")
        addrs=$(tr -d ' \n' <<< "$ours" | grep -o '"brokerAddrs":{[^}]*}' || true)
        [ "$java" = "$ours" ] && [ "$addrs" = "\"brokerAddrs\":{$expected}" ] && break
        sleep 2
    done
    if [ "$addrs" = "\"brokerAddrs\":{$expected}" ]; then
        same_output "$what: $addrs" "$java" "$ours"
    else
        verdict 1 "$what: rocketns has $addrs, expected {$expected}"
    fi
}
# The slave's logs (its own logging setup writes INFO under its home); its AdminBrokerProcessor logs each
# 905 it handles.
slave_log() { cat "$work/broker-a-slave.log" "$work"/broker-a-slave/logs/rocketmqlogs/*.log 2> /dev/null || true; }
slave_heard() { slave_log | grep -c "min broker id changed" || true; }

# From here on only rocketns notifies (Java applies this update to its running config).
python3 "$ROOT/tests/java/requests.py" config "$JAVA_NS" notifyMinBrokerIdChanged=false

same_route "master and slave up" "\"0\":\"$MASTER\",\"1\":\"$SLAVE\""
sent_before=$(notices_sent) heard_before=$(slave_heard)
kill "$master_pid"
same_route "master stopped: the slave acts as master" "\"0\":\"$SLAVE\""
for _ in $(seq 20); do [ "$(notices_sent)" -gt "$sent_before" ] && break; sleep 1; done
[ "$(notices_sent)" -gt "$sent_before" ] && ok=0 || ok=1
verdict "$ok" "master stopped: rocketns sent the slave a 905 ($sent_before before, $(notices_sent) after)"
for _ in $(seq 20); do [ "$(slave_heard)" -gt "$heard_before" ] && break; sleep 1; done
[ "$(slave_heard)" -gt "$heard_before" ] && ok=0 || ok=1
verdict "$ok" "master stopped: the slave logged rocketns's 905: $(slave_log | grep -o 'min broker id changed.*' | tail -n 1)"
same_output "clusterList with the master stopped" "$(mqadmin clusterList -n "$JAVA_NS" | normalize_mqadmin)" \
    "$(mqadmin clusterList -n "$ROCKETNS" | normalize_mqadmin)"

# The stopped master has left its routes but may still be shutting down: it has to be gone (its port, its
# store) before it starts again.
wait "$master_pid" 2> /dev/null || true
master
same_route "master back" "\"0\":\"$MASTER\",\"1\":\"$SLAVE\""

# BROKER_HEARTBEAT goes one-way to every NameServer; GET_BROKER_MEMBER_GROUP to one of them, which the
# brokers' remoting client picks and keeps while it answers: stopping the Java NameServer makes them ask
# rocketns.
kill "$JAVA_NAMESRV_PID"
heartbeats=0 member_groups=0
for _ in $(seq 30); do
    heartbeats=$(requests_seen 904) member_groups=$(requests_seen 901)
    [ "$heartbeats" -gt 0 ] && [ "$member_groups" -gt 0 ] && break
    sleep 1
done
{ [ "$heartbeats" -gt 0 ] && [ "$member_groups" -gt 0 ]; } && ok=0 || ok=1
verdict "$ok" "rocketns got the pair's BROKER_HEARTBEAT ($heartbeats) and GET_BROKER_MEMBER_GROUP ($member_groups)"
echo "java acting master: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
