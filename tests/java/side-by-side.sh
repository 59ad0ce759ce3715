#!/usr/bin/env bash
# Real Java brokers and mqadmin, against rocketns and the Java NameServer 5.3.3 side by side: a Java 5.3.3
# broker and a Java 4.9.7 broker (compressedRegister=true) register with both NameServers at once; mqadmin
# (5.3.3) then asks each NameServer the same questions and makes the same changes, and the two outputs must
# be the same once what differs on purpose is taken out (normalize() says what). Finally the 4.9.7 broker
# stops, and both NameServers must drop its routes. Runs in a loopback-only network namespace with its files
# on a tmpfs; needs root. INTEROP_KEEP=DIR keeps the logs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
JAVA_NS=127.0.0.1:19876
ROCKETNS=127.0.0.1:19877

# shellcheck source=tests/java/lib.sh
. "$ROOT/tests/java/lib.sh"
[ "${1:-}" = inner ] || prepare_java 5.3.3 4.9.7
enter_sandbox "${BASH_SOURCE[0]}" "$@"
sandbox_setup

# The two NameServers.
start_java_namesrv 5.3.3 "$JARS5" 19876 "$work" || exit 1
pids+=("$JAVA_NAMESRV_PID")
start_rocketns 19877 || exit 1

broker broker-a "$JARS5" 10911 "$JAVA_NS;$ROCKETNS"
broker broker-b "$JARS4" 10921 "$JAVA_NS;$ROCKETNS" compressedRegister=true
broker_b_pid=$BROKER_PID

# What differs on purpose besides what normalize_mqadmin takes out: rocketns's own settings in
# getNamesrvConfig (namesrv-config-keys), and the paths and ports of each NameServer.
normalize() {
    normalize_mqadmin '/^(rocketmqHome|kvConfigPath|configStorePath|listenPort|bindAddress) *=/d' \
        '/^(aclCredentialsPath|aclEnable|aclProtectReads|frameMaxLength|largeFrameBufferBytes) *=/d' \
        '/^(largeFrameTimeoutMillis|metricsPort|namesrvPeers|routeSnapshotIntervalSeconds|routeSnapshotPath) *=/d' \
        '/^(serializeType|serverMaxConnections|tls\.server\.[a-zA-Z]+|warmRestart) *=/d' \
        '/^(auditLogPath|logFormat|upgradeSocketPath|largeReplyBufferBytes|largeReplyBytesPerSecond) *=/d'
}

# same WHAT ARGS...: runs `mqadmin ARGS -n NS` against each NameServer and compares the outputs.
same() {
    local what=$1; shift
    same_output "$what" "$(mqadmin "$@" -n "$JAVA_NS" | normalize)" "$(mqadmin "$@" -n "$ROCKETNS" | normalize)"
}

# Both brokers registered with both NameServers (a broker registers at start, then every 30 s).
registered=0
for _ in $(seq 30); do
    registered=$( (mqadmin clusterList -n "$JAVA_NS"; mqadmin clusterList -n "$ROCKETNS") | grep -cE 'broker-[ab] ' || true)
    [ "$registered" -ge 4 ] && break
    sleep 1
done
if [ "$registered" -lt 4 ]; then
    echo "java: the brokers did not register with both NameServers; the logs:"
    show_logs
    exit 1
fi
echo "java: brokers 5.3.3 and 4.9.7 registered with both NameServers"

same "clusterList" clusterList
same "topicList" topicList
same "topicList -c" topicList -c
same "topicRoute TBW102" topicRoute -t TBW102
same "topicRoute broker-a" topicRoute -t broker-a
same "topicRoute broker-b" topicRoute -t broker-b
same "topicRoute of an unknown topic" topicRoute -t NoSuchTopic
same "getNamesrvConfig" getNamesrvConfig

# Changes: the same change made through each NameServer, then the same question.
mqadmin updateTopic -b 127.0.0.1:10911 -t SideTopic -r 4 -w 4 -n "$JAVA_NS" > /dev/null
for _ in $(seq 40); do
    mqadmin topicRoute -t SideTopic -n "$ROCKETNS" | grep -q broker-a && mqadmin topicRoute -t SideTopic -n "$JAVA_NS" | grep -q broker-a && break
    sleep 0.5
done
same "updateTopic, then topicRoute" topicRoute -t SideTopic
same "updateKvConfig" updateKvConfig -s SideNs -k k1 -v v1
same "deleteKvConfig" deleteKvConfig -s SideNs -k k1
same "wipeWritePerm" wipeWritePerm -b broker-a
same "topicRoute, write perm wiped" topicRoute -t SideTopic
same "addWritePerm" addWritePerm -b broker-a
# After the write-permission changes: an order conf reaches the broker in a registration reply, the broker
# marks the topic ordered and bumps its DataVersion, and its next registration re-applies every topic config
# (perm included) on each NameServer; mqadmin asks the two NameServers a second or two apart, so a
# registration landing in between would make the same change look different.
same "updateOrderConf put" updateOrderConf -t SideTopic -m put -v broker-a:4
same "updateOrderConf get" updateOrderConf -t SideTopic -m get
same "updateNamesrvConfig, allowed key" updateNamesrvConfig -k orderMessageEnable -v true
same "updateNamesrvConfig, refused key" updateNamesrvConfig -k kvConfigPath -v /tmp/elsewhere.json

# The 4.9.7 broker stops: both NameServers drop its routes (it unregisters as it shuts down, then its
# connection closes), and rocketns no later than Java (a second's grace: the two are asked in turn).
kill "$broker_b_pid"
gone=$(python3 "$ROOT/tests/java/routes_gone.py" broker-b 60 "$JAVA_NS" "$ROCKETNS")
java_gone=$(awk -v a="$JAVA_NS" '$1 == a {print $2}' <<< "$gone")
ours_gone=$(awk -v a="$ROCKETNS" '$1 == a {print $2}' <<< "$gone")
{ [ "$java_gone" != never ] && [ "$ours_gone" != never ] && awk -v j="$java_gone" -v o="$ours_gone" 'BEGIN {exit !(o <= j + 1)}'; } && ok=0 || ok=1
verdict "$ok" "the routes of the stopped 4.9.7 broker: Java dropped them after ${java_gone} s, rocketns after ${ours_gone} s"
# Which brokers TBW102 routes to now, by name; not its perms, which broker-a's re-registration after the order
# conf may restore on one NameServer between the two questions (see above).
brokers_of() { mqadmin topicRoute -t TBW102 -n "$1" | grep -o '"brokerName":"[^"]*"' | sort -u | tr '\n' ' '; }
java_brokers=$(brokers_of "$JAVA_NS") ours_brokers=$(brokers_of "$ROCKETNS")
{ [ "$java_brokers" = "$ours_brokers" ] && [[ "$java_brokers" != *broker-b* ]] && [ -n "$java_brokers" ]; } && ok=0 || ok=1
verdict "$ok" "TBW102 routes to the same brokers after broker-b stopped: Java $java_brokers, rocketns $ours_brokers"
echo "java side by side: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
