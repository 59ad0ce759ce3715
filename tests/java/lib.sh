# Shared by tests/java/reference.sh and side-by-side.sh (sourced inside their network namespace): waiting
# for a port, and starting a fresh Java NameServer.

# wait_port PORT: until something listens on 127.0.0.1:PORT (at most a minute).
wait_port() {
    for _ in $(seq 600); do
        (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null && return 0
        sleep 0.1
    done
    return 1
}

# start_java_namesrv NAME JARS PORT DIR: a Java NameServer with only `listenPort` set and its own home under
# DIR (so no KV file from before), logging to DIR/java-namesrv-NAME.log; its pid in JAVA_NAMESRV_PID. Fails,
# showing the log's end, if it does not listen.
start_java_namesrv() {
    local name=$1 jars=$2 port=$3 dir=$4
    printf 'listenPort=%s\n' "$port" > "$dir/ns-$name.properties"
    ROCKETMQ_HOME="$dir" java -Xms256m -Xmx256m -Duser.home="$dir/home-$name" -cp "$jars/*" \
        org.apache.rocketmq.namesrv.NamesrvStartup -c "$dir/ns-$name.properties" > "$dir/java-namesrv-$name.log" 2>&1 &
    JAVA_NAMESRV_PID=$!
    wait_port "$port" && return 0
    echo "java: the Java NameServer $name did not start; its log:" >&2
    tail -n 20 "$dir/java-namesrv-$name.log" >&2
    return 1
}
