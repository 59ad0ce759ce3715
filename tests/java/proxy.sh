#!/usr/bin/env bash
# RocketMQ 5's gRPC clients, which talk only to a Proxy, with brokers found through rocketns: a Java RocketMQ
# Proxy 5.3.3 in cluster mode (namesrvAddr = one NameServer) in front of a Java 5.3.3 broker registered only
# with that NameServer; the gRPC Java client (rocketmq-client-java 5.0.7, tests/java/clients/GrpcRoundtrip.java)
# sends 1,000 messages through the Proxy to a topic created with mqadmin and receives all 1,000 back with a
# SimpleConsumer. Run with rocketns, then with the Java NameServer 5.3.3 in its place; the Proxy's QueryRoute
# (tests/java/clients/QueryRoute.java, what the client asks before it sends) must be the same both times.
# Then a Proxy in front of two brokers of one cluster, via rocketns: a third of the way through 1,000 sends one
# broker stops; the client keeps sending; the broker starts again once all are sent, and every message whose
# send succeeded must come back (duplicates are counted and printed). Brokers run with timerWheelEnable=true:
# they refuse the consumers' pops without it. Runs in a loopback-only network namespace with its files on a
# tmpfs; needs root. INTEROP_KEEP=DIR keeps the logs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
JAVA_NS=127.0.0.1:19876
ROCKETNS=127.0.0.1:19877
BUILT=$ROOT/target/java-clients

# shellcheck source=tests/java/lib.sh
. "$ROOT/tests/java/lib.sh"
if [ "${1:-}" != inner ]; then
    prepare_java 5.3.3
    PROXY_JARS=$("$ROOT/tests/java/fetch.sh" proxy-5.3.3) && export PROXY_JARS
    GRPC_JARS=$("$ROOT/tests/java/fetch.sh" grpc-client-5.0.7) && export GRPC_JARS
    mkdir -p "$BUILT/grpc" "$BUILT/proxy"
    javac -nowarn -d "$BUILT/grpc" -cp "$GRPC_JARS/*" "$ROOT/tests/java/clients/GrpcRoundtrip.java"
    javac -nowarn -d "$BUILT/proxy" -cp "$PROXY_JARS/*" "$ROOT/tests/java/clients/QueryRoute.java"
fi
enter_sandbox "${BASH_SOURCE[0]}" "$@"
sandbox_setup

start_java_namesrv 5.3.3 "$JARS5" 19876 "$work" || exit 1
pids+=("$JAVA_NAMESRV_PID")
start_rocketns 19877 || exit 1

# proxy NAMESRV: a Proxy in cluster mode asking NAMESRV for routes, gRPC on 18081 (remoting on 18080); its
# pid in PROXY_PID.
proxy() {
    mkdir -p "$work/proxy"
    printf '{"rocketMQClusterName":"DefaultCluster","namesrvAddr":"%s","grpcServerPort":18081,"remotingListenPort":18080}\n' \
        "$1" > "$work/proxy.json"
    java -Xms256m -Xmx256m $JDK17 -Duser.home="$work/proxy" -cp "$PROXY_JARS/*" \
        org.apache.rocketmq.proxy.ProxyStartup -pm cluster -pc "$work/proxy.json" > "$work/proxy.log" 2>&1 &
    PROXY_PID=$!
    pids+=("$PROXY_PID")
    wait_port 18081 || { echo "proxy: the Proxy did not start; its log:"; tail -n 20 "$work/proxy.log"; exit 1; }
}
# stop SIGNAL PID...: the signal, then until they are gone.
stop() {
    local signal=$1; shift
    kill "-$signal" "$@" 2> /dev/null || true
    for pid in "$@"; do while kill -0 "$pid" 2> /dev/null; do sleep 0.1; done; done
}
# registered NAMESRV BROKER: until NAMESRV lists BROKER in its cluster (a minute at most).
registered() {
    for _ in $(seq 300); do
        python3 "$ROOT/tests/java/requests.py" brokers "$1" 2> /dev/null | grep -qx "$2" && return 0
        sleep 0.2
    done
    echo "proxy: broker $2 did not register with $1; the logs:"
    show_logs
    exit 1
}
# grpc WHAT ARGS...: the gRPC client program, 4 minutes at most; it prints PASS or FAIL.
grpc() {
    local what=$1 status=0; shift
    echo "--- $what"
    timeout 240 java -Xms64m -Xmx256m -Duser.home="$work/grpc-client" -cp "$GRPC_JARS/*:$BUILT/grpc" \
        GrpcRoundtrip 127.0.0.1:18081 "$@" > "$work/grpc.out" 2>&1 || status=$?
    grep -vE '^PASS$|WARN|INFO' "$work/grpc.out" | sed 's/^/    /' | tail -n 15
    grep -qx PASS "$work/grpc.out" && [ "$status" = 0 ] && ok=0 || ok=1
    verdict "$ok" "$what"
    cat "$work/grpc.out" >> "$work/grpc-clients.log"
}
query_route() {
    # shellcheck disable=SC2086
    java -Xms64m -Xmx128m $SHORT_JVM -cp "$PROXY_JARS/*:$BUILT/proxy" QueryRoute 127.0.0.1 18081 "$1" 2>> "$work/query-route.log"
}
new_topic() { mqadmin updateTopic -n "$1" -c DefaultCluster -t "$2" -a +message.type=NORMAL > /dev/null; }

# round_trip NAMESRV LABEL: broker-a (fresh store) and a Proxy with NAMESRV alone, QueryRoute into ROUTE,
# 1,000 messages there and back; then both are killed (a graceful stop takes a broker 15-20 s).
round_trip() {
    local namesrv=$1 label=$2
    rm -rf "$work/broker-a"
    broker broker-a "$JARS5" 10911 "$namesrv" timerWheelEnable=true
    local broker_pid=$BROKER_PID
    registered "$namesrv" broker-a
    new_topic "$namesrv" GrpcTopic
    proxy "$namesrv"
    ROUTE=$(query_route GrpcTopic || true)
    grpc "gRPC client via a Proxy via $label: 1,000 sent and received" GrpcTopic 1000 "GrpcGroup$label"
    stop KILL "$PROXY_PID" "$broker_pid"
}
round_trip "$ROCKETNS" rocketns
ours=$ROUTE
round_trip "$JAVA_NS" java
same_output "the Proxy's QueryRoute of GrpcTopic, via the Java NameServer and via rocketns" "$ROUTE" "$ours"

# Two brokers, one stopped a third of the way through.
rm -rf "$work/broker-a"
broker broker-a "$JARS5" 10911 "$ROCKETNS" timerWheelEnable=true
broker broker-b "$JARS5" 10921 "$ROCKETNS" timerWheelEnable=true
b_pid=$BROKER_PID
registered "$ROCKETNS" broker-a
registered "$ROCKETNS" broker-b
new_topic "$ROCKETNS" GrpcFailover
proxy "$ROCKETNS"
flags=$work/flags && mkdir -p "$flags"
# The client goes on as soon as the broker is told to stop (it shuts down, unregistering, while the
# client sends); the broker starts again once it is gone and every message is sent.
(
    while [ ! -e "$flags/stop" ]; do sleep 0.1; done
    kill "$b_pid" && touch "$flags/stopped"
    stop TERM "$b_pid"
    while [ ! -e "$flags/sent" ]; do sleep 0.1; done
    broker broker-b "$JARS5" 10921 "$ROCKETNS" timerWheelEnable=true
    echo "$BROKER_PID" > "$flags/restarted"
    wait
) &
restarter=$!
grpc "gRPC client via a Proxy via rocketns, one of two brokers stopped a third of the way: all sent received" \
    GrpcFailover 1000 GrpcFailoverGroup "$flags"
# The restart may still be starting when the client is done: its broker is stopped with the others, not
# left for the waiting subshell to wait on for good (a CI run hung here 22 minutes).
for _ in $(seq 600); do
    [ -e "$flags/restarted" ] || ! kill -0 "$restarter" 2> /dev/null && break
    sleep 0.1
done
[ -e "$flags/restarted" ] && pids+=("$(cat "$flags/restarted")")
echo "java proxy: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
