#!/usr/bin/env bash
# The 5.x acting-master paths with real brokers: a Java 5.3.3 master/slave pair (broker-a, ids 0 and 1) with
# enableSlaveActingMaster=true and compatibleWithOldNameSrv=false registers with the Java NameServer 5.3.3
# and rocketns at once, both with supportActingMaster=true. mqadmin compares the two NameServers' routes and
# cluster lists with the pair up, after the master stops (the slave must show as acting master, id 0), and
# after the master returns. The brokers' BROKER_HEARTBEAT (904) and GET_BROKER_MEMBER_GROUP (901) must reach
# rocketns (its metrics count them). Runs in a loopback-only network namespace with its files on a tmpfs; needs
# root. INTEROP_KEEP=DIR keeps the logs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
JAVA_NS=127.0.0.1:19876
ROCKETNS=127.0.0.1:19877
MASTER=127.0.0.1:10911
SLAVE=127.0.0.1:10915

# shellcheck source=tests/java/lib.sh
. "$ROOT/tests/java/lib.sh"
if [ "${1:-}" != inner ]; then
    JARS5=$("$ROOT/tests/java/fetch.sh" 5.3.3)
    export JARS5
    cargo build --quiet --manifest-path "$ROOT/Cargo.toml" --bin rocketns
fi
enter_sandbox "${BASH_SOURCE[0]}" "$@"
sandbox_setup

start_java_namesrv 5.3.3 "$JARS5" 19876 "$work" supportActingMaster=true || exit 1
pids+=("$JAVA_NAMESRV_PID")
start_rocketns 19877 supportActingMaster=true metricsPort=19880 || exit 1

pair=(enableSlaveActingMaster=true compatibleWithOldNameSrv=false)
master() { broker broker-a "$JARS5" 10911 "$JAVA_NS;$ROCKETNS" "${pair[@]}"; }
master
master_pid=$BROKER_PID
# broker() names the conf and store after its first argument; the slave is broker-a too, by its settings.
broker broker-a-slave "$JARS5" 10915 "$JAVA_NS;$ROCKETNS" "${pair[@]}" brokerName=broker-a brokerId=1 brokerRole=SLAVE

# What mqadmin prints for the route or the cluster, normalized as side-by-side.sh does (addresses of the
# NameServers, runtime figures, HashMap order).
normalize() {
    sed -E -e "s/$JAVA_NS|$ROCKETNS/NAMESRV/g" -e 's/(^|[^.0-9])[0-9]+\.[0-9]+([^.0-9]|$)/\1N\2/g' \
        | python3 "$ROOT/tests/java/canonical.py"
}
route_of() { mqadmin topicRoute -t broker-a -n "$1" | normalize; }

pass=0 fail=0
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
    [ -n "${SHOW:-}" ] && printf '%s\n' "--- $what (Java)" "$java" "--- $what (rocketns)" "$ours"
    if [ "$java" = "$ours" ] && [ "$addrs" = "\"brokerAddrs\":{$expected}" ]; then
        echo "PASS: $what: $addrs"
        pass=$((pass + 1))
    else
        echo "FAIL: $what (rocketns has $addrs, expected {$expected})"
        diff <(echo "$java") <(echo "$ours") | head -n 20 || true
        fail=$((fail + 1))
    fi
}
# requests_seen CODE: how many requests of CODE rocketns has answered (its metrics).
requests_seen() {
    curl -s "http://127.0.0.1:19880/metrics" | awk -v c="code=\"$1\"" 'index($0, c) {n += $2} END {print n + 0}'
}

same_route "master and slave up" "\"0\":\"$MASTER\",\"1\":\"$SLAVE\""
kill "$master_pid"
same_route "master stopped: the slave acts as master" "\"0\":\"$SLAVE\""
java=$(mqadmin clusterList -n "$JAVA_NS" | normalize) ours=$(mqadmin clusterList -n "$ROCKETNS" | normalize)
if [ "$java" = "$ours" ]; then
    echo "PASS: clusterList with the master stopped"; pass=$((pass + 1))
else
    echo "FAIL: clusterList with the master stopped"; diff <(echo "$java") <(echo "$ours") | head; fail=$((fail + 1))
fi

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
if [ "$heartbeats" -gt 0 ] && [ "$member_groups" -gt 0 ]; then
    echo "PASS: the pair sent BROKER_HEARTBEAT ($heartbeats) and GET_BROKER_MEMBER_GROUP ($member_groups) to rocketns"
    pass=$((pass + 1))
else
    echo "FAIL: rocketns saw $heartbeats BROKER_HEARTBEAT and $member_groups GET_BROKER_MEMBER_GROUP"
    fail=$((fail + 1))
fi

echo "java acting master: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
