#!/usr/bin/env bash
# The alerting rules and the dashboard (deploy/prometheus, deploy/grafana), checked by a real Prometheus:
# `promtool check rules` and `promtool test rules` (every alert fires on its condition, and stays quiet on
# healthy series); then Debian's Prometheus scrapes a live rocketns under the load generator, with the rules
# loaded, and every expression of the rules and of every dashboard panel must return data through its HTTP
# API (tests/ops/expressions.py). Needs root: the live part runs in a loopback-only network namespace with
# its files on a tmpfs. Installs Debian's `prometheus` (Prometheus 2.42 with promtool) when promtool is
# missing. Prints PASS/FAIL per check and `prometheus: N passed, N failed`; INTEROP_KEEP=DIR keeps the logs.
# DURATION=S: seconds of load (15). SCREENSHOT=FILE.png: at the end, Prometheus's graphs of the main
# expressions rendered by headless Chromium (Debian's `chromium`, not installed by this script) into FILE
# (deploy/grafana/prometheus-graphs.png was made with DURATION=90).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export ROOT
# shellcheck source=tests/java/lib.sh
source "$ROOT/tests/java/lib.sh"

if [ "${1:-}" != inner ]; then
    if ! command -v promtool > /dev/null || ! command -v prometheus > /dev/null; then
        echo "prometheus: installing Debian's prometheus (for promtool and a Prometheus to scrape with)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus > /dev/null \
            || { echo "prometheus: apt-get install prometheus failed" >&2; exit 1; }
    fi
    cargo build --quiet --manifest-path "$ROOT/Cargo.toml" --bin rocketns --bin rocketns-loadgen || exit 1
fi
enter_sandbox "$0" "${1:-}"
sandbox_setup

rules=$ROOT/deploy/prometheus/rocketns-rules.yml
promtool check rules "$rules" > "$work/promtool-check.log" 2>&1
verdict $? "promtool check rules: $(grep -o 'SUCCESS: [0-9]* rules found' "$work/promtool-check.log" || tail -n 3 "$work/promtool-check.log")"
promtool test rules "$ROOT/deploy/prometheus/rocketns-rules.test.yml" > "$work/promtool-test.log" 2>&1
ok=$?
verdict $ok "promtool test rules: every alert of the rules fires on its condition and not otherwise"
[ $ok = 0 ] || tail -n 30 "$work/promtool-test.log"

# rocketns with the metrics port, an audit log, a one-node controller (for the controller's series) and
# itself as its peer (for the comparison's: the same namesrvPeers on every node lists the node too), and a
# Prometheus scraping it every second with the rules evaluated every second.
start_rocketns 19876 metricsPort=19880 "auditLogPath=$work/audit.jsonl" namesrvPeers=127.0.0.1:19876 enableControllerInNamesrv=true \
    controllerDLegerPeers=n0-127.0.0.1:19878 controllerDLegerSelfId=n0 "controllerStorePath=$work/controller" || exit 1
cat > "$work/prometheus.yml" << YML
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: ["$rules"]
scrape_configs:
  - job_name: rocketns
    static_configs: [{targets: ["127.0.0.1:19880"]}]
YML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address=127.0.0.1:19090 --log.level=warn > "$work/prometheus.log" 2>&1 &
pids+=($!)
wait_port 19090 || { echo "prometheus did not start"; tail "$work/prometheus.log"; exit 1; }

# Load: brokers re-registering, route lookups; and what the quieter series need to exist at all: an
# audited change and a refused one, a registration with a bad CRC, a heartbeat, an unregistration.
"$ROOT/target/debug/rocketns-loadgen" run --addr 127.0.0.1:19876 --brokers 4 --topics 200 --connections 4 \
    --in-flight 4 --duration "${DURATION:-15}" --warmup 0 --churn bump --churn-interval-ms 500 > "$work/loadgen.log" 2>&1 &
load=$!
python3 - 127.0.0.1:19876 << 'PY'
import sys
sys.path.insert(0, __import__("os").environ["ROOT"] + "/tests/java")
from remoting import Connection
c = Connection(sys.argv[1])
assert c.request(100, {"namespace": "ops", "key": "k", "value": "v"})[0]["code"] == 0
assert c.request(318, {}, b"listenPort=1")[0]["code"] != 0
bad = {"brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "c", "brokerId": "0", "bodyCrc32": "1"}
assert c.request(103, bad, b'{"topicConfigSerializeWrapper":{}}')[0]["code"] != 0
gone = {"brokerName": "gone", "brokerAddr": "127.0.0.1:2", "clusterName": "c", "brokerId": "0"}
c.request(904, gone)
assert c.request(104, gone)[0]["code"] == 0
PY
verdict $? "an audited change, a refused one, a refused registration, a heartbeat and an unregistration"
wait "$load"
verdict $? "the load generator's run against rocketns ($(grep -oE '[0-9]+ requests/s' "$work/loadgen.log" | head -n 1))"

# The scrapes of the whole run are in, and the rules have been evaluated on them.
for _ in $(seq 100); do
    n=$(curl -s 'http://127.0.0.1:19090/api/v1/query' --data-urlencode 'query=count_over_time(up{job="rocketns"}[1m])' \
        | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(int(float(r[0]["value"][1])) if r else 0)')
    [ "${n:-0}" -ge 15 ] && break
    sleep 0.5
done
python3 "$ROOT/tests/ops/expressions.py" http://127.0.0.1:19090 "$rules" "$ROOT/deploy/grafana/rocketns.json" \
    > "$work/expressions.log" 2>&1
ok=$?
verdict $ok "every rule and dashboard expression returns data from a real Prometheus: $(tail -n 1 "$work/expressions.log")"
[ $ok = 0 ] && [ -z "${SHOW:-}" ] || grep -v '^ok ' "$work/expressions.log"

if [ -n "${SCREENSHOT:-}" ]; then
    graphs=""
    i=0
    for expr in 'sum by (code) (rate(rocketns_requests_total[15s]))' \
        'histogram_quantile(0.99, sum by (le) (rate(rocketns_lookup_latency_seconds_bucket[15s])))' \
        'rocketns_connections' 'rate(rocketns_registrations_total[15s])' \
        'rate(rocketns_snapshot_publishes_total[15s])' 'rocketns_topics'; do
        graphs="$graphs&g$i.expr=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$expr")&g$i.tab=0&g$i.range_input=2m"
        i=$((i + 1))
    done
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,4200 \
        --virtual-time-budget=20000 --screenshot="$SCREENSHOT" "http://127.0.0.1:19090/graph?${graphs#&}" \
        > "$work/chromium.log" 2>&1
    verdict $? "Prometheus's graphs rendered into $SCREENSHOT"
fi

echo "prometheus: $pass passed, $fail failed"
[ "$fail" = 0 ]
