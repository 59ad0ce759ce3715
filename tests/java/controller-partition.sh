#!/usr/bin/env bash
# Partitions and delays between the controller nodes, with a Java 5.3.3 broker group in controller mode:
# each of the three nodes runs in a network namespace of its own (ctl0-ctl2, 10.10.0.1-3), joined by a
# bridge to the namespace of the brokers and clients (10.10.0.254), so that a node's link can be slowed
# (tc) or cut (the link taken down). For rocketns's controller, then Java 5.3.3's (the same keys):
#   1. two brokers (ids 1 and 2) join, one is master; every node's link is slowed (100 ms of delay with
#      tc netem, or where the kernel has no netem a 256 kbit/s tc tbf link), and the master is killed (-9):
#      the other must be elected through the slow links;
#   2. the leader node is cut off (the minority side): a write sent to it from inside its own namespace
#      must be refused (CONTROLLER_NOT_LEADER, or no answer), and the other two must elect a leader;
#   3. the killed broker starts again and rejoins as a slave; then the master is killed: the majority
#      elects the slave while the old leader is still cut off;
#   4. the link comes back: every node must name the same leader, and that leader the same master.
# Throughout, no two masters of the group may share an epoch: each broker logs the master and epoch of
# every role change it makes ("Begin to change to master/slave"), and across both brokers' logs each epoch
# must have one master. Needs root (network namespaces); INTEROP_KEEP=DIR keeps the logs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NODES=(10.10.0.1 10.10.0.2 10.10.0.3)
PORTS=(9878 9868 9858)
CONTROLLERS="10.10.0.1:9878;10.10.0.2:9868;10.10.0.3:9858"
PEERS="n0-10.10.0.1:9878;n1-10.10.0.2:9868;n2-10.10.0.3:9858"
NAMESRVS="10.10.0.1:9876;10.10.0.2:9876;10.10.0.3:9876"
HOST=10.10.0.254

# shellcheck source=tests/java/lib.sh
. "$ROOT/tests/java/lib.sh"
[ "${1:-}" = inner ] || prepare_java 5.3.3
enter_sandbox "${BASH_SOURCE[0]}" "$@"
sandbox_setup

# The bridge and the nodes' namespaces (removed with the sandbox's).
ip link add br0 type bridge
ip addr add "$HOST/24" dev br0
ip link set br0 up
for i in 0 1 2; do
    ip netns add "ctl$i"
    ip link add "veth$i" type veth peer name eth0 netns "ctl$i"
    ip link set "veth$i" master br0 up
    ip -n "ctl$i" addr add "${NODES[$i]}/24" dev eth0
    ip -n "ctl$i" link set eth0 up
    ip -n "ctl$i" link set lo up
done
cleanup_netns() {
    for i in 0 1 2; do ip netns pids "ctl$i" 2> /dev/null | xargs -r kill -9 2> /dev/null || true; done
    for i in 0 1 2; do ip netns del "ctl$i" 2> /dev/null || true; done
    sandbox_cleanup
}
trap cleanup_netns EXIT

ctl() { timeout 200 python3 "$ROOT/tests/java/controller.py" "$@"; }
# rocketns's nodes sign their Raft frames with a shared secret, as a group of several nodes must
# (Java's DLedger has no such key, and ignores it).
printf '%s\n' "the partition stage's peer secret" > "$work/peer-secret"
in_node() { local i=$1; shift; ip netns exec "ctl$i" "$@"; }

# start_node KIND I: node I of KIND (rocketns or java) in its namespace, also a NameServer on 9876.
start_node() {
    local kind=$1 i=$2 conf="$work/$1-n$2.properties"
    printf '%s\n' "bindAddress=${NODES[$i]}" listenPort=9876 "kvConfigPath=$work/$kind-n$i/kvConfig.json" \
        enableControllerInNamesrv=true controllerDLegerGroup=group1 "controllerDLegerPeers=$PEERS" \
        "controllerDLegerSelfId=n$i" "controllerStorePath=$work/$kind-store-n$i" \
        "controllerPeerSecretFile=$work/peer-secret" > "$conf"
    if [ "$kind" = rocketns ]; then
        in_node "$i" env RUST_LOG=info "$ROOT/target/debug/rocketns" -c "$conf" > "$work/$kind-n$i.log" 2>&1 &
    else
        in_node "$i" env ROCKETMQ_HOME="$work" java -Xms256m -Xmx256m -Duser.home="$work/$kind-home-n$i" \
            -Drocketmq.namesrv.logRoot="$work/$kind-n$i-logs" -cp "$JARS5/*" \
            org.apache.rocketmq.namesrv.NamesrvStartup -c "$conf" > "$work/$kind-n$i.log" 2>&1 &
    fi
    pids+=($!)
    wait_port "${PORTS[$i]}" "${NODES[$i]}" || { echo "partition: node $i did not start"; tail -n 20 "$work/$kind-n$i.log"; exit 1; }
}

declare -A broker_pid
# start_broker KIND PORT: a broker of group broker-a in controller mode, reachable at $HOST:PORT.
start_broker() {
    local kind=$1 port=$2
    broker "$kind-b$port" "$JARS5" "$port" "$NAMESRVS" brokerName=broker-a brokerId=-1 brokerRole=SLAVE \
        enableControllerMode=true "controllerAddr=$CONTROLLERS" allAckInSyncStateSet=true \
        "brokerIP1=$HOST" "brokerIP2=$HOST"
    broker_pid[$port]=$BROKER_PID
}

# slow_links: every node's link, both ways, 100 ms (+-50 ms) of delay with tc netem; on a kernel without
# netem (some VMs' kernels: `Specified qdisc kind is unknown`), a 256 kbit/s link (tc tbf), whose queue
# delays what follows a large frame (a registration) by up to a second. Prints which.
slow_links() {
    local i qdisc="netem delay 100ms 50ms" what="100 ms (+-50 ms) delays (netem)"
    if ! tc qdisc replace dev veth0 root $qdisc 2> /dev/null; then
        qdisc="tbf rate 256kbit burst 1600 latency 1s" what="256 kbit/s links (tbf; this kernel has no netem)"
    fi
    for i in 0 1 2; do
        # shellcheck disable=SC2086
        tc qdisc replace dev "veth$i" root $qdisc && in_node "$i" tc qdisc replace dev eth0 root $qdisc || return 1
    done
    echo "$what"
}

scenario() {
    local kind=$1 i state old_id old_addr new leader index
    echo "--- $kind's controller"
    for i in 0 1 2; do start_node "$kind" "$i"; done
    ctl wait-leader "$CONTROLLERS" 60 > /dev/null || { verdict 1 "$kind: a leader"; return; }
    start_broker "$kind" 10911
    start_broker "$kind" 10921
    state=$(ctl wait-set "$CONTROLLERS" broker-a 90 2)
    [ "$(cut -d' ' -f4 <<< "$state")" = 1,2 ]
    verdict $? "$kind: two brokers join, one master, both in sync ($state)"

    local links
    links=$(slow_links) || { verdict 1 "$kind: slow links"; return; }
    read -r old_id old_addr _ <<< "$state"
    kill9 "${broker_pid[${old_addr##*:}]}"
    new=$(ctl wait-master "$CONTROLLERS" broker-a 90 "$old_id")
    verdict $? "$kind: $links, kill -9 of master $old_id: ${new:-no new master}"

    leader=$(ctl leader "$CONTROLLERS")
    for index in 0 1 2; do [ "${NODES[$index]}:${PORTS[$index]}" = "$leader" ] && break; done
    ip link set "veth$index" down
    local refused
    refused=$(in_node "$index" timeout 20 python3 "$ROOT/tests/java/controller.py" request "$leader" 1013 \
        clusterName=DefaultCluster brokerName=broker-a appliedBrokerId=9 registerCheckCode=10.10.0.254:1 2>&1 || true)
    ! grep -q '"code": 0,' <<< "$refused"
    verdict $? "$kind: the cut-off leader n$index refuses a write: $(grep -oE '"code": [0-9]+|no answer' <<< "$refused" | head -1)"
    local rest=${CONTROLLERS//$leader/}
    rest=${rest#;} rest=${rest%;} rest=${rest//;;/;}
    new=$(ctl wait-leader "$rest" 60 "$leader")
    verdict $? "$kind: the other two elect a leader: ${new:-none}"

    start_broker "$kind" "${old_addr##*:}"
    state=$(ctl wait-set "$rest" broker-a 90 2)
    verdict $? "$kind: the killed broker rejoins as a slave, in sync ($state)"
    read -r old_id old_addr _ <<< "$state"
    kill9 "${broker_pid[${old_addr##*:}]}"
    new=$(ctl wait-master "$rest" broker-a 90 "$old_id")
    verdict $? "$kind: with n$index still cut off, kill -9 of master $old_id: ${new:-no new master}"

    ip link set "veth$index" up
    local leaders="" masters=""
    for _ in $(seq 60); do
        leaders=$(for a in ${CONTROLLERS//;/ }; do ctl request "$a" 1005 \
            | grep -oE '"controllerLeaderAddress": "[^"]*"' || echo none; done | sort -u)
        [ "$(wc -l <<< "$leaders")" = 1 ] && [ "$leaders" != none ] && break
        sleep 1
    done
    [ "$(wc -l <<< "$leaders")" = 1 ] && [ "$leaders" != none ]
    verdict $? "$kind: the link back, every node names the same leader: $leaders"
    masters=$(broker_epochs "$kind" "$HOST")
    local twice
    twice=$(cut -d' ' -f1 <<< "$masters" | uniq -d)
    [ -z "$twice" ] && [ -n "$masters" ]
    verdict $? "$kind: no epoch has two masters in the brokers' logs: $(tr '\n' ';' <<< "$masters")"
    for pid in "${pids[@]}"; do kill -9 "$pid" 2> /dev/null || true; done
    for i in 0 1 2; do ip netns pids "ctl$i" | xargs -r kill -9 2> /dev/null || true; done
    wait 2> /dev/null || true
    pids=()
    for i in 0 1 2; do
        tc qdisc del dev "veth$i" root 2> /dev/null || true
        in_node "$i" tc qdisc del dev eth0 root 2> /dev/null || true
    done
}

set +e
for kind in ${KINDS:-rocketns java}; do scenario "$kind"; done
set -e
echo "java controller partitions: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
