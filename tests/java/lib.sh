# Shared by the scripts of tests/java (sourced): entering a loopback-only network namespace, a scratch folder
# on a tmpfs, and starting NameServers (Java and rocketns), Java brokers and mqadmin inside it.

# enter_sandbox SCRIPT ARGS...: outside the namespace (no "inner" argument), checks for root and re-runs
# SCRIPT inside a new network and mount namespace with "inner" as its argument; inside, returns. What the
# script needs from outside (jars, builds) it prepares before calling this, and exports.
enter_sandbox() {
    local script=$1
    [ "${2:-}" = inner ] && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "java: needs root for a private network namespace (unshare --net)" >&2
        exit 1
    fi
    exec unshare --net --mount -- bash "$script" inner
}

# prepare_java VERSION...: outside the namespace (it needs Maven Central): the jars of each Java version
# (tests/java/fetch.sh), exported as JARS5 (5.3.3) or JARS4 (4.9.7); and the debug build of rocketns that
# start_rocketns runs.
prepare_java() {
    local version
    for version in "$@"; do
        case $version in
            5.3.3) JARS5=$("$ROOT/tests/java/fetch.sh" 5.3.3) && export JARS5 ;;
            4.9.7) JARS4=$("$ROOT/tests/java/fetch.sh" 4.9.7) && export JARS4 ;;
            *) echo "java: no jar folder variable for $version" >&2 && exit 1 ;;
        esac
    done
    cargo build --quiet --manifest-path "$ROOT/Cargo.toml" --bin rocketns
}

# normalize_mqadmin [SED_EXPRESSION...]: mqadmin's output without what differs by time or on purpose between
# two NameServers: their own addresses ($JAVA_NS, $ROCKETNS) where a command prints them; brokers' runtime
# figures (TPS, hours, disk use: decimal numbers that are not addresses); the order Java's HashMaps give to
# brokers and keys (COMPATIBILITY.md, hashmap-order), by canonical.py; and whatever the given sed
# expressions take out.
normalize_mqadmin() {
    local args=() expression
    for expression in "$@"; do args+=(-e "$expression"); done
    sed -E -e "s/$JAVA_NS|$ROCKETNS/NAMESRV/g" -e 's/(^|[^.0-9])[0-9]+\.[0-9]+([^.0-9]|$)/\1N\2/g' "${args[@]}" \
        | python3 "$ROOT/tests/java/canonical.py"
}

# sandbox_setup: loopback up; `work`, a scratch folder on a tmpfs (a broker refuses writes to a nearly full
# disk, and nothing is left behind) that is ROCKETMQ_HOME too; `pids`, killed at exit; the logs copied to
# $INTEROP_KEEP at exit when it is set. 4.x brokers read their logging setup from $ROCKETMQ_HOME/conf (5.x
# ones carry theirs): warnings only, to their log.
sandbox_setup() {
    ip link set lo up
    work=$(mktemp -d)
    mount -t tmpfs -o size=2g,mode=0700 rocketns-java "$work" || echo "java: no tmpfs, using $work on disk"
    pids=()
    trap sandbox_cleanup EXIT
    export ROCKETMQ_HOME="$work"
    mkdir -p "$work/conf"
    cat > "$work/conf/logback_broker.xml" << 'XML'
<configuration>
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{30} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="OUT"/></root>
</configuration>
XML
}

sandbox_cleanup() {
    for pid in "${pids[@]}"; do kill -9 "$pid" 2> /dev/null || true; done
    wait 2> /dev/null || true
    if [ -n "${INTEROP_KEEP:-}" ]; then
        mkdir -p "$INTEROP_KEEP" && cp -r "$work"/*.log "$work"/*.conf "$work"/*-logs "$INTEROP_KEEP"/ 2> /dev/null || true
        # A broker's own logs (broker.log: its controller requests and what they got) are in its home.
        local logs
        for logs in "$work"/*/logs/rocketmqlogs; do
            if [ -d "$logs" ]; then cp -r "$logs" "$INTEROP_KEEP/$(basename "$(dirname "$(dirname "$logs")")")-rocketmqlogs"; fi
        done
    fi
    umount --lazy "$work" 2> /dev/null || true
    rm -rf "$work"
}

# wait_port PORT [HOST]: until something listens on HOST:PORT, 127.0.0.1 by default (at most a minute).
wait_port() {
    for _ in $(seq 600); do
        (exec 3<> "/dev/tcp/${2:-127.0.0.1}/$1") 2> /dev/null && return 0
        sleep 0.1
    done
    return 1
}

# start_java_namesrv NAME JARS PORT DIR [KEY=VALUE...]: a Java NameServer with `listenPort` and the given
# settings and its own home under DIR (so no KV file from before), logging to DIR/java-namesrv-NAME.log; its
# pid in JAVA_NAMESRV_PID. Fails, showing the log's end, if it does not listen. JAVA_NS_OPTS: more JVM
# options (system properties).
start_java_namesrv() {
    local name=$1 jars=$2 port=$3 dir=$4
    printf '%s\n' "listenPort=$port" "${@:5}" > "$dir/ns-$name.properties"
    # shellcheck disable=SC2086
    ROCKETMQ_HOME="$dir" java -Xms256m -Xmx256m ${JAVA_NS_OPTS:-} -Duser.home="$dir/home-$name" -cp "$jars/*" \
        org.apache.rocketmq.namesrv.NamesrvStartup -c "$dir/ns-$name.properties" > "$dir/java-namesrv-$name.log" 2>&1 &
    JAVA_NAMESRV_PID=$!
    wait_port "$port" && return 0
    echo "java: the Java NameServer $name did not start; its log:" >&2
    tail -n 20 "$dir/java-namesrv-$name.log" >&2
    return 1
}

# start_rocketns PORT [KEY=VALUE...]: the debug build of rocketns (built by the caller) with those settings
# and its KV file in $work, logging to $work/rocketns-PORT.log; its pid added to `pids`. ROCKETNS_OPTS: more
# command-line options (-D system properties).
start_rocketns() {
    local port=$1
    printf '%s\n' bindAddress=127.0.0.1 "listenPort=$port" "kvConfigPath=$work/rocketns-$port/kvConfig.json" \
        "${@:2}" > "$work/rocketns-$port.properties"
    # A restart on the same port keeps the earlier run's log beside it (INTEROP_KEEP keeps both).
    if [ -f "$work/rocketns-$port.log" ]; then mv "$work/rocketns-$port.log" "$work/rocketns-$port.before-$EPOCHSECONDS.log"; fi
    # shellcheck disable=SC2086
    RUST_LOG=info "$ROOT/target/debug/rocketns" ${ROCKETNS_OPTS:-} -c "$work/rocketns-$port.properties" \
        > "$work/rocketns-$port.log" 2>&1 &
    pids+=($!)
    wait_port "$port" && return 0
    echo "java: rocketns did not start on $port; its log:" >&2
    tail -n 20 "$work/rocketns-$port.log" >&2
    return 1
}

# The options a broker needs on JDK 17 (4.9.x: jdk.internal.ref too).
JDK17="--add-exports=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
    --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED
    --add-exports=java.base/jdk.internal.ref=ALL-UNNAMED"

# broker NAME JARS PORT NAMESRV_ADDR [KEY=VALUE...]: a small master (the settings may override that) in
# cluster DefaultCluster registering with NAMESRV_ADDR (`a;b` for several), its store and home under
# $work/NAME, logging to $work/NAME.log; its pid in BROKER_PID and added to `pids`. A broker also listens
# on PORT-2 and PORT+1: space them 4 or more apart.
broker() {
    local name=$1 jars=$2 port=$3 namesrv=$4
    mkdir -p "$work/$name"
    {
        printf 'brokerClusterName=DefaultCluster\nbrokerName=%s\nbrokerId=0\nbrokerRole=ASYNC_MASTER\n' "$name"
        printf 'flushDiskType=ASYNC_FLUSH\nlistenPort=%s\nbrokerIP1=127.0.0.1\nbrokerIP2=127.0.0.1\n' "$port"
        printf 'namesrvAddr=%s\nstorePathRootDir=%s/%s/store\nautoCreateTopicEnable=true\n' "$namesrv" "$work" "$name"
        printf 'mappedFileSizeCommitLog=16777216\nmappedFileSizeConsumeQueue=60000\nmaxHashSlotNum=5000\nmaxIndexNum=20000\n'
        printf 'timerWheelEnable=false\ndiskMaxUsedSpaceRatio=95\n'
        printf '%s\n' "${@:5}"
    } > "$work/$name.conf"
    # shellcheck disable=SC2086
    java -Xms256m -Xmx256m -XX:MaxDirectMemorySize=256m $JDK17 -Duser.home="$work/$name" -cp "$jars/*" \
        org.apache.rocketmq.broker.BrokerStartup -c "$work/$name.conf" > "$work/$name.log" 2>&1 &
    BROKER_PID=$!
    pids+=("$BROKER_PID")
}

# kill9 PID: kill -9, and reaped without the shell's report of it.
kill9() {
    kill -9 "$1" 2> /dev/null || true
    wait "$1" 2> /dev/null || true
}

# broker_epochs KIND HOST: the role changes that the brokers "$work/KIND-bPORT" logged, as `EPOCH ADDRESS`
# lines (the master each took for that epoch), each once: two lines with one epoch are two masters in it.
broker_epochs() {
    local kind=$1 host=$2 f addr
    for f in "$work/$kind"-b*/logs/rocketmqlogs/*.log; do
        [ -f "$f" ] || continue
        addr=$host:$(basename "$(dirname "$(dirname "$(dirname "$f")")")" | sed 's/.*-b//')
        sed -nE "s/.*Begin to change to master, .*new Epoch:([0-9]+).*/\1 $addr/p" "$f"
        sed -nE 's/.*Begin to change to slave, .*newMasterAddress=([0-9.:]+), newMasterEpoch=([0-9]+).*/\2 \1/p' "$f"
    done | sort -u
}

# For JVMs that run one command: the first compiler tier only and the serial collector start mqadmin in 4.0 s
# instead of 6.5-7.5 (2 cores, 2026-12-01).
SHORT_JVM="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

# mqadmin ARGS...: the 5.3.3 mqadmin ($JARS5), a JVM per command. It exits 0 even when the command failed,
# so its output is what callers look at; Logback's status lines are left out.
mqadmin() {
    # shellcheck disable=SC2086
    java -Xms64m -Xmx256m $SHORT_JVM -Duser.home="$work/mqadmin" -cp "$JARS5/*" \
        org.apache.rocketmq.tools.command.MQAdminStartup "$@" 2>&1 \
        | grep -vE '^$|^[0-9:,]+ \|-' || true
}

# The checks' tally, printed by each script at its end.
pass=0 fail=0

# verdict OK WHAT: counts a check, OK being 0 when it held, and prints PASS or FAIL with WHAT.
verdict() {
    if [ "$1" = 0 ]; then
        echo "PASS: $2"
        pass=$((pass + 1))
    else
        echo "FAIL: $2"
        fail=$((fail + 1))
    fi
}

# same_output WHAT JAVA OURS: the check that the Java NameServer's output and rocketns's are the same and not
# empty; with SHOW=1 both are printed, and on a failure their diff.
same_output() {
    local what=$1 java=$2 ours=$3
    [ -n "${SHOW:-}" ] && printf '%s\n' "--- $what (Java)" "$java" "--- $what (rocketns)" "$ours"
    if [ "$java" = "$ours" ] && [ -n "$java" ]; then
        verdict 0 "$what"
    else
        verdict 1 "$what"
        diff <(echo "$java") <(echo "$ours") | head -n 20 || true
    fi
}

# show_logs: the end of every log of the run, without stack frames and INFO lines, for a failure.
show_logs() {
    for f in "$work"/*.log; do
        echo "--- $f"
        grep -vE '^\s+at |INFO' "$f" | tail -n 15
    done
}
