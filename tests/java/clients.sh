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

# listed NAME: whether rocketns lists broker NAME in its cluster.
listed() { mqadmin clusterList -n "$ROCKETNS" | grep -qE "^DefaultCluster +$1 "; }

# check WHAT COMMAND...: the client program prints what it did and PASS, or FAIL and why; 3 minutes at most.
# It holds when the program exited 0 having printed a line PASS and none starting FAIL. Where that line
# stands does not matter: a client library's background threads may still log (to the same output) after
# it. On a failure the exit status is printed with the output's end (124: the 3 minutes ran out).
check() {
    local what=$1 status=0; shift
    echo "--- $what"
    timeout 180 "$@" > "$work/client.out" 2>&1 || status=$?
    if [ "$status" = 0 ] && grep -qx PASS "$work/client.out" && ! grep -q '^FAIL' "$work/client.out"; then
        grep -vE 'WARN|level=|^PASS$' "$work/client.out" | sed 's/^/    /'
        verdict 0 "$what"
    else
        tail -n 20 "$work/client.out" | sed 's/^/    /'
        echo "    (exit status $status)"
        verdict 1 "$what"
    fi
    cat "$work/client.out" >> "$work/clients.log"
}
java_client=(java -Xms64m -Xmx256m -Duser.home="$work/java-client" -Drocketmq.client.logRoot="$work/java-client-logs")

# through NAME JARS VERSION PORT ORDER_CONF: broker NAME (Java VERSION) registers with rocketns alone; the Java
# client of that version and the Go client each make their round trip through it, on topics of their own,
# and take their queues from ORDER_CONF once it is their topic's order conf; then the broker stops, and is gone from rocketns before this returns,
# so that the next broker is the only one TBW102 routes to.
through() {
    local name=$1 jars=$2 version=$3 port=$4 order_conf=$5 topic_suffix=${3//./}
    broker "$name" "$jars" "$port" "$ROCKETNS"
    for _ in $(seq 30); do listed "$name" && break; sleep 1; done
    if ! listed "$name"; then
        echo "clients: broker $name did not register with rocketns; the logs:"
        show_logs
        exit 1
    fi
    echo "clients: $name ($version) registered with rocketns"
    check "Java $version client via $name ($version): 1,000 through TBW102 and back, orderTopicConf" \
        "${java_client[@]}" -cp "$jars/*:$BUILT/$version" Roundtrip "$ROCKETNS" "JavaClientTopic$topic_suffix" 1000 "$order_conf"
    check "Go client via $name ($version): 1,000 through TBW102 and back" \
        env HOME="$work/client-go" "$BUILT/goclient" roundtrip "$ROCKETNS" "GoClientTopic$topic_suffix" 1000
    # The Go client has no KV call: the order conf goes in with mqadmin, then a fresh Go client reads the route.
    mqadmin updateOrderConf -t "GoClientTopic$topic_suffix" -m put -v "$order_conf" -n "$ROCKETNS" > /dev/null
    check "Go client via $name ($version): orderTopicConf" \
        env HOME="$work/client-go" "$BUILT/goclient" ordered "$ROCKETNS" "GoClientTopic$topic_suffix" "$order_conf"
    kill "$BROKER_PID"
    wait "$BROKER_PID" 2> /dev/null || true
    for _ in $(seq 30); do listed "$name" || return 0; sleep 1; done
    echo "clients: broker $name stopped but rocketns still lists it"
    exit 1
}

# One broker at a time, so that TBW102 routes to it alone: a 5.3.3 client's lite pull consumer pulls with
# LITE_PULL_MESSAGE (361), which 4.x brokers do not know, so each Java client goes through its own version's
# broker; the Go client through both.
through broker-a "$JARS5" 5.3.3 10911 "broker-a:2"
through broker-b "$JARS4" 4.9.7 10921 "broker-b:3"

echo "java clients: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
