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

if [ "${1:-}" != inner ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "java: needs root for a private network namespace (unshare --net)" >&2
        exit 1
    fi
    JARS5=$("$ROOT/tests/java/fetch.sh" 5.3.3)
    JARS4=$("$ROOT/tests/java/fetch.sh" 4.9.7)
    export JARS5 JARS4
    cargo build --quiet --manifest-path "$ROOT/Cargo.toml" --bin rocketns
    exec unshare --net --mount -- bash "${BASH_SOURCE[0]}" inner
fi

ip link set lo up
work=$(mktemp -d)
mount -t tmpfs -o size=1g,mode=0700 rocketns-java "$work" || echo "java: no tmpfs, using $work on disk"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -9 "$pid" 2> /dev/null || true; done
    wait 2> /dev/null || true
    if [ -n "${INTEROP_KEEP:-}" ]; then mkdir -p "$INTEROP_KEEP" && cp "$work"/*.log "$INTEROP_KEEP"/ 2> /dev/null; fi
    umount --lazy "$work" 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
export ROCKETMQ_HOME="$work"
# 4.x brokers read their logging setup from $ROCKETMQ_HOME/conf (5.x ones carry theirs): warnings to the log.
mkdir -p "$work/conf"
cat > "$work/conf/logback_broker.xml" << 'XML'
<configuration>
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{30} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="OUT"/></root>
</configuration>
XML
JDK17="--add-exports=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
    --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED
    --add-exports=java.base/jdk.internal.ref=ALL-UNNAMED"

# shellcheck source=tests/java/lib.sh
. "$ROOT/tests/java/lib.sh"

# The two NameServers.
start_java_namesrv 5.3.3 "$JARS5" 19876 "$work" || exit 1
pids+=("$JAVA_NAMESRV_PID")
printf 'bindAddress=127.0.0.1\nlistenPort=19877\nkvConfigPath=%s/rocketns/kvConfig.json\n' "$work" > "$work/rocketns.properties"
RUST_LOG=info "$ROOT/target/debug/rocketns" -c "$work/rocketns.properties" > "$work/rocketns.log" 2>&1 &
pids+=($!)
wait_port 19877 || { echo "java: rocketns did not start"; tail -n 20 "$work/rocketns.log"; exit 1; }

# broker NAME VERSION JARS PORT EXTRA...: a small broker registering with both NameServers.
broker() {
    local name=$1 jars=$3 port=$4
    mkdir -p "$work/$name"
    {
        printf 'brokerClusterName=DefaultCluster\nbrokerName=%s\nbrokerId=0\nbrokerRole=ASYNC_MASTER\n' "$name"
        printf 'flushDiskType=ASYNC_FLUSH\nlistenPort=%s\nbrokerIP1=127.0.0.1\nbrokerIP2=127.0.0.1\n' "$port"
        printf 'namesrvAddr=%s;%s\nstorePathRootDir=%s/%s/store\nautoCreateTopicEnable=true\n' "$JAVA_NS" "$ROCKETNS" "$work" "$name"
        printf 'mappedFileSizeCommitLog=16777216\nmappedFileSizeConsumeQueue=60000\nmaxHashSlotNum=5000\nmaxIndexNum=20000\n'
        printf 'timerWheelEnable=false\ndiskMaxUsedSpaceRatio=95\n'
        printf '%s\n' "${@:5}"
    } > "$work/$name.conf"
    # shellcheck disable=SC2086
    java -Xms256m -Xmx256m -XX:MaxDirectMemorySize=256m $JDK17 -Duser.home="$work/$name" -cp "$jars/*" \
        org.apache.rocketmq.broker.BrokerStartup -c "$work/$name.conf" > "$work/$name.log" 2>&1 &
    pids+=($!)
}
broker broker-a 5.3.3 "$JARS5" 10911
broker broker-b 4.9.7 "$JARS4" 10921 compressedRegister=true
broker_b_pid=${pids[-1]}

# mqadmin (5.3.3) with its own JVM per command; it exits 0 even when the command failed, so its output is
# what is compared.
mqadmin() {
    java -Xms64m -Xmx256m -Duser.home="$work/mqadmin" -cp "$JARS5/*" \
        org.apache.rocketmq.tools.command.MQAdminStartup "$@" 2>&1 \
        | grep -vE '^$|^[0-9:,]+ \|-' || true
}

# What differs on purpose or by time between two runs of the same command: the NameServer's own address
# where a command prints it; brokers' runtime figures (TPS, hours, disk use: decimal numbers that are not
# addresses); the order Java's HashMaps give to brokers and keys (COMPATIBILITY.md, hashmap-order), by
# canonical.py; and rocketns's own settings in getNamesrvConfig (namesrv-config-keys), with the paths and
# ports of each NameServer.
normalize() {
    sed -E -e "s/$JAVA_NS|$ROCKETNS/NAMESRV/g" -e 's/(^|[^.0-9])[0-9]+\.[0-9]+([^.0-9]|$)/\1N\2/g' \
        -e '/^(rocketmqHome|kvConfigPath|configStorePath|listenPort|bindAddress) *=/d' \
        -e '/^(aclCredentialsPath|aclEnable|aclProtectReads|frameMaxLength|largeFrameBufferBytes) *=/d' \
        -e '/^(largeFrameTimeoutMillis|metricsPort|routeSnapshotIntervalSeconds|routeSnapshotPath) *=/d' \
        -e '/^(serializeType|serverMaxConnections|tls\.server\.[a-zA-Z]+|warmRestart) *=/d' \
        | python3 "$ROOT/tests/java/canonical.py"
}

pass=0 fail=0
# same WHAT ARGS...: runs `mqadmin ARGS -n NS` against each NameServer and compares the outputs.
same() {
    local what=$1; shift
    local java ours
    java=$(mqadmin "$@" -n "$JAVA_NS" | normalize)
    ours=$(mqadmin "$@" -n "$ROCKETNS" | normalize)
    [ -n "${SHOW:-}" ] && printf '%s\n' "--- $what (Java)" "$java" "--- $what (rocketns)" "$ours"
    if [ "$java" = "$ours" ] && [ -n "$java" ]; then
        echo "PASS: $what"
        pass=$((pass + 1))
    else
        echo "FAIL: $what"
        diff <(echo "$java") <(echo "$ours") | head -n 20 || true
        fail=$((fail + 1))
    fi
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
    for f in "$work"/*.log; do echo "--- $f"; grep -vE '^\s+at |INFO' "$f" | tail -n 15; done
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

# The 4.9.7 broker stops: both NameServers drop its routes (its connection closes).
kill "$broker_b_pid"
stopped=$SECONDS java_gone="" ours_gone=""
gone() { ! mqadmin topicRoute -t broker-b -n "$1" | grep -q brokerDatas; }
for _ in $(seq 60); do
    [ -z "$java_gone" ] && gone "$JAVA_NS" && java_gone=$((SECONDS - stopped))
    [ -z "$ours_gone" ] && gone "$ROCKETNS" && ours_gone=$((SECONDS - stopped))
    [ -n "$java_gone" ] && [ -n "$ours_gone" ] && break
    sleep 0.5
done
# Each look is an mqadmin run of a second or two: the times are that coarse.
if [ -n "$java_gone" ] && [ -n "$ours_gone" ]; then
    echo "PASS: both drop the routes of the stopped 4.9.7 broker (Java within ${java_gone} s, rocketns ${ours_gone} s)"
    pass=$((pass + 1))
else
    echo "FAIL: a NameServer still routes to the stopped 4.9.7 broker (Java: ${java_gone:-no}, rocketns: ${ours_gone:-no})"
    fail=$((fail + 1))
fi
# Which brokers TBW102 routes to now, by name; not its perms, which broker-a's re-registration after the order
# conf may restore on one NameServer between the two questions (see above).
brokers_of() { mqadmin topicRoute -t TBW102 -n "$1" | grep -o '"brokerName":"[^"]*"' | sort -u | tr '\n' ' '; }
java_brokers=$(brokers_of "$JAVA_NS") ours_brokers=$(brokers_of "$ROCKETNS")
if [ "$java_brokers" = "$ours_brokers" ] && [[ "$java_brokers" != *broker-b* ]] && [ -n "$java_brokers" ]; then
    echo "PASS: TBW102 routes to the same brokers after broker-b stopped: $java_brokers"; pass=$((pass + 1))
else
    echo "FAIL: TBW102 after broker-b stopped: Java $java_brokers, rocketns $ours_brokers"; fail=$((fail + 1))
fi
echo "java side by side: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
