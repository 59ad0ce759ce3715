#!/usr/bin/env bash
# Cluster-test mode (clusterTest=true, productEnvName=prod) beside the Java NameServer 4.9.7 in the same mode:
# a product-environment Java NameServer 5.3.3 routes PRODT and P2 (a broker registered by
# tests/java/requests.py); each test NameServer finds it through NAMESRV_ADDR and routes a broker of its
# own (LOCALT, with an orderTopicConf in its KV store). The same corpus of lookups (a local hit, a remote hit,
# a miss in both, and after the product NameServer stops, a remote topic) and of other codes (REGISTER_BROKER,
# GET_BROKER_CLUSTER_INFO) must give the same replies from both, byte for byte after two COMPATIBILITY.md
# rows (the FAQ link of 4.x remarks; 5.x's BrokerData.enableActingMaster). Also through the address server
# (rocketmq.namesrv.domain = a local HTTP server, asked for /rocketmq/nsaddr-prod?nofix=1 by both). And the
# Java NameServer 5.3.3 in the same mode, as run: its remote lookups are rocketns's byte for byte, but it
# answers REGISTER_BROKER and GET_BROKER_CLUSTER_INFO as route queries (COMPATIBILITY.md). Runs in a
# loopback-only network namespace with its files on a tmpfs; needs root. INTEROP_KEEP=DIR keeps the logs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PRODUCT=127.0.0.1:19876
ROCKETNS=127.0.0.1:19877
JAVA4=127.0.0.1:19878
JAVA5=127.0.0.1:19879
helper=("python3" "$ROOT/tests/java/requests.py")

# shellcheck source=tests/java/lib.sh
. "$ROOT/tests/java/lib.sh"
[ "${1:-}" = inner ] || prepare_java 5.3.3 4.9.7
enter_sandbox "${BASH_SOURCE[0]}" "$@"
sandbox_setup
# The 4.x NameServer reads its logging setup from $ROCKETMQ_HOME/conf.
sed 's/logback_broker/logback_namesrv/' "$work/conf/logback_broker.xml" > "$work/conf/logback_namesrv.xml"

mode=(clusterTest=true productEnvName=prod)
start_java_namesrv product "$JARS5" 19876 "$work" || exit 1
product_pid=$JAVA_NAMESRV_PID
pids+=("$product_pid")

# stay_registered NAMESRV NAME ADDR TOPIC...: broker NAME registered with NAMESRV until the script ends.
stay_registered() {
    local out="$work/broker-$2-${1##*:}.out"
    "${helper[@]}" broker "$@" > "$out" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do grep -q registered "$out" && return 0; sleep 0.1; done
    echo "cluster-test: broker $2 did not register with $1:"; cat "$out"
    exit 1
}
stay_registered "$PRODUCT" broker-p 127.0.0.1:30911 PRODT P2

NAMESRV_ADDR=$PRODUCT start_java_namesrv java4 "$JARS4" 19878 "$work" "${mode[@]}" || exit 1
pids+=("$JAVA_NAMESRV_PID")
NAMESRV_ADDR=$PRODUCT start_java_namesrv java5 "$JARS5" 19879 "$work" "${mode[@]}" || exit 1
pids+=("$JAVA_NAMESRV_PID")
NAMESRV_ADDR=$PRODUCT start_rocketns 19877 "${mode[@]}" metricsPort=19890 || exit 1
for ns in "$ROCKETNS" "$JAVA4"; do
    stay_registered "$ns" broker-t 127.0.0.1:40911 LOCALT L2
    "${helper[@]}" kv "$ns" ORDER_TOPIC_CONFIG LOCALT broker-t:4
done

# The COMPATIBILITY.md rows between 4.x and rocketns: the FAQ link 4.x remarks end with, and the
# enableActingMaster of 5.x's BrokerData.
faq() { sed -E 's#\\nSee [^ ]+ for further details\.#\\nSee FAQ for further details.#'; }
as_4x() { faq | sed 's/,"enableActingMaster":false//g'; }
corpus() { "${helper[@]}" lookups "$1" LOCALT PRODT NOWHERE && "${helper[@]}" others "$1"; }
same_output "local hit, remote hit, miss; REGISTER_BROKER and cluster info: Java 4.9.7 and rocketns" \
    "$(corpus "$JAVA4" | faq)" "$(corpus "$ROCKETNS" | as_4x)"
same_output "remote hit and miss: Java 5.3.3 and rocketns, byte for byte" \
    "$("${helper[@]}" lookups "$JAVA5" PRODT NOWHERE)" "$("${helper[@]}" lookups "$ROCKETNS" PRODT NOWHERE)"
java5_others=$("${helper[@]}" others "$JAVA5")
echo "$java5_others" | sed 's/^/    Java 5.3.3: /'
grep -q "^REGISTER_BROKER: code=17 remark='No topic route info in name server for the topic: null" <<< "$java5_others" \
    && grep -q "^GET_BROKER_CLUSTER_INFO: code=17" <<< "$java5_others" && ok=0 || ok=1
verdict "$ok" "Java 5.3.3 in cluster-test mode answers REGISTER_BROKER and cluster info as route queries (17)"

# Through the address server: a local HTTP server names the product NameServer to whoever asks.
python3 - "$PRODUCT" "$work/address-server.log" > /dev/null 2>&1 << 'PY' &
import http.server, sys
answer, log = sys.argv[1], sys.argv[2]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as f:
            f.write(self.path + "\n")
        self.send_response(200)
        self.end_headers()
        self.wfile.write((answer + "\n").encode())
http.server.HTTPServer(("127.0.0.1", 18080), Handler).serve_forever()
PY
pids+=($!)
wait_port 18080
JAVA_NS_OPTS=-Drocketmq.namesrv.domain=127.0.0.1:18080 start_java_namesrv java4-address "$JARS4" 19880 "$work" \
    "${mode[@]}" || exit 1
pids+=("$JAVA_NAMESRV_PID")
ROCKETNS_OPTS=-Drocketmq.namesrv.domain=127.0.0.1:18080 start_rocketns 19881 "${mode[@]}" || exit 1
same_output "remote hit and miss through the address server: Java 4.9.7 and rocketns" \
    "$("${helper[@]}" lookups 127.0.0.1:19880 PRODT NOWHERE | faq)" \
    "$("${helper[@]}" lookups 127.0.0.1:19881 PRODT NOWHERE | as_4x)"
same_output "what each asked the address server" "/rocketmq/nsaddr-prod?nofix=1" \
    "$(sort -u "$work/address-server.log")"

# The product NameServer stops: its topics are misses.
kill "$product_pid"
while kill -0 "$product_pid" 2> /dev/null; do sleep 0.1; done
same_output "the product NameServer down: Java 4.9.7 and rocketns" \
    "$("${helper[@]}" lookups "$JAVA4" P2 | faq)" "$("${helper[@]}" lookups "$ROCKETNS" P2 | as_4x)"
metrics=$(curl -s http://127.0.0.1:19890/metrics | grep '^rocketns_cluster_test_lookups_total' | tr '\n' ' ')
echo "    rocketns: $metrics"
grep -q 'result="found"} [1-9]' <<< "$metrics" && grep -q 'result="failed"} [1-9]' <<< "$metrics" && ok=0 || ok=1
verdict "$ok" "rocketns counted its remote lookups, found and failed"
echo "java cluster-test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
