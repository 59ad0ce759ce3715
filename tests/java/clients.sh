#!/usr/bin/env bash
# Real clients through brokers found only via rocketns, one broker at a time: a Java 5.3.3 broker
# (broker-a), then a Java 4.9.7 broker (broker-b), registered with rocketns alone. The Java 5.3.3 client, the
# Java 4.9.7 client (both built from tests/java/clients/Roundtrip.java against their own jars) and the Go
# client (tests/java/clients/go) each send 1,000 messages to a topic that does not exist yet (so through
# TBW102), see rocketns route the topic the broker created, and consume all 1,000 back with a new group; then
# read `orderTopicConf` from the route (rocketns has orderMessageEnable=true) and take their queues from it.
# Runs in a loopback-only network namespace with its files on a tmpfs; needs root. INTEROP_KEEP=DIR keeps
# the logs.
# Builds on first use: the Java programs with javac, the Go one with `go build` (modules from the Go module
# proxy, pinned by go.sum); both into target/java-clients.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ROCKETNS=127.0.0.1:19877
BUILT=$ROOT/target/java-clients

# shellcheck source=tests/java/lib.sh
. "$ROOT/tests/java/lib.sh"
if [ "${1:-}" != inner ]; then
    prepare_java 5.3.3 4.9.7
    for version in 5.3.3 4.9.7; do
        jars=$JARS5 && [ "$version" = 4.9.7 ] && jars=$JARS4
        mkdir -p "$BUILT/$version"
        javac -nowarn -XDsuppressNotes -d "$BUILT/$version" -cp "$jars/*" "$ROOT/tests/java/clients/Roundtrip.java"
    done
    if ! command -v go > /dev/null; then
        if [ -x /usr/local/go/bin/go ]; then
            PATH=$PATH:/usr/local/go/bin
        else
            echo "clients: installing Go from Debian's packages" >&2
            apt-get update -qq >&2 && apt-get install -y -qq golang-go >&2
        fi
    fi
    (cd "$ROOT/tests/java/clients/go" && go build -o "$BUILT/goclient" .)
fi
enter_sandbox "${BASH_SOURCE[0]}" "$@"
sandbox_setup

start_rocketns 19877 orderMessageEnable=true || exit 1

# registered NAME: until rocketns lists broker NAME in its cluster (at most 30 s), or fails showing the logs.
registered() {
    for _ in $(seq 30); do
        mqadmin clusterList -n "$ROCKETNS" | grep -qE "^DefaultCluster +$1 " && return 0
        sleep 1
    done
    echo "clients: broker $1 did not register with rocketns; the logs:"
    show_logs
    exit 1
}

# check WHAT COMMAND...: the client program prints what it did and PASS, or FAIL and why; 3 minutes at most.
check() {
    local what=$1; shift
    echo "--- $what"
    if timeout 180 "$@" > "$work/client.out" 2>&1 && tail -n 1 "$work/client.out" | grep -qx PASS; then
        grep -vE 'WARN|level=|^PASS$' "$work/client.out" | sed 's/^/    /'
        verdict 0 "$what"
    else
        tail -n 20 "$work/client.out" | sed 's/^/    /'
        verdict 1 "$what"
    fi
    cat "$work/client.out" >> "$work/clients.log"
}
java_client=(java -Xms64m -Xmx256m -Duser.home="$work/java-client" -Drocketmq.client.logRoot="$work/java-client-logs")

# One broker at a time, so that TBW102 routes to it alone: a 5.3.3 client's lite pull consumer pulls with
# LITE_PULL_MESSAGE (361), which 4.x brokers do not know, so each Java client goes through its own version's
# broker; the Go client through both.
broker broker-a "$JARS5" 10911 "$ROCKETNS"
registered broker-a
echo "clients: broker-a (5.3.3) registered with rocketns"
check "Java 5.3.3 client via broker-a (5.3.3): 1,000 through TBW102 and back, orderTopicConf" \
    "${java_client[@]}" -cp "$JARS5/*:$BUILT/5.3.3" Roundtrip "$ROCKETNS" JavaClientTopic5 1000 "broker-a:2"
check "Go client via broker-a (5.3.3): 1,000 through TBW102 and back" \
    env HOME="$work/client-go" "$BUILT/goclient" roundtrip "$ROCKETNS" GoClientTopic5 1000
# The Go client has no KV call: the order conf goes in with mqadmin, then a fresh Go client reads the route.
mqadmin updateOrderConf -t GoClientTopic5 -m put -v "broker-a:3" -n "$ROCKETNS" > /dev/null
check "Go client: orderTopicConf" \
    env HOME="$work/client-go" "$BUILT/goclient" ordered "$ROCKETNS" GoClientTopic5 "broker-a:3"

kill "$BROKER_PID"
broker broker-b "$JARS4" 10921 "$ROCKETNS"
registered broker-b
echo "clients: broker-a stopped, broker-b (4.9.7) registered with rocketns"
check "Java 4.9.7 client via broker-b (4.9.7): 1,000 through TBW102 and back, orderTopicConf" \
    "${java_client[@]}" -cp "$JARS4/*:$BUILT/4.9.7" Roundtrip "$ROCKETNS" JavaClientTopic4 1000 "broker-b:3"
check "Go client via broker-b (4.9.7): 1,000 through TBW102 and back" \
    env HOME="$work/client-go" "$BUILT/goclient" roundtrip "$ROCKETNS" GoClientTopic4 1000

echo "java clients: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
