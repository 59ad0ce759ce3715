#!/usr/bin/env bash
# Replicas that disagree, seen (src/service/peer_compare.rs): two rocketns nodes, each the other's peer
# (namesrvPeers), two Java 5.3.3 brokers (masters of DefaultCluster) registering with both, and Debian's
# Prometheus scraping both nodes every second with deploy/prometheus/rocketns-rules.yml. Then broker-b is
# cut from node A alone: it reaches A at 127.0.0.2 (A listens on every address; everyone else uses
# 127.0.0.1), so an `ip rule` that blackholes 127.0.0.2:A's port cuts that one link, and `ss -K` resets the
# connection it had, as a broken link that resets does (one that resets nothing is seen once A expires the
# broker, 120 s, which this stage does not wait for). Checks:
#   - within two scan periods (scanNotActiveBrokerInterval, 5 s) of the cut, A's rocketns_peer_divergence
#     says missing_here=1 and B's extra_here=1, and both nodes' /cluster name broker-b under `peers`;
#     within two more A's log names it in a "disagree" line (a divergence is logged once seen twice);
#   - the alert RocketnsPeersDisagree fires in the real Prometheus for both nodes;
#   - once the rule is gone, broker-b's next registration (every 30 s) reaches A again: the divergence is 0
#     on both nodes, A logs that they agree, and the alert is resolved.
# Runs in a loopback-only network namespace with its files on a tmpfs; needs root (and installs Debian's
# prometheus when promtool or prometheus is missing). INTEROP_KEEP=DIR keeps the logs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
A=19876 B=19878 A_HTTP=19886 B_HTTP=19888 PROM=19090
SCAN_S=5

# shellcheck source=tests/java/lib.sh
. "$ROOT/tests/java/lib.sh"
if [ "${1:-}" != inner ]; then
    if ! command -v promtool > /dev/null || ! command -v prometheus > /dev/null; then
        echo "partition: installing Debian's prometheus"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus > /dev/null \
            || { echo "partition: apt-get install prometheus failed" >&2; exit 1; }
    fi
    prepare_java 5.3.3
fi
enter_sandbox "${BASH_SOURCE[0]}" "$@"
sandbox_setup

# The local table's rule after ours, so that a rule of ours can stop loopback traffic (the local rule is
# the first one otherwise).
ip rule add pref 100 lookup local
ip rule del pref 0

start_rocketns "$A" bindAddress=0.0.0.0 "metricsPort=$A_HTTP" "namesrvPeers=127.0.0.1:$B" || exit 1
start_rocketns "$B" "metricsPort=$B_HTTP" "namesrvPeers=127.0.0.1:$A" || exit 1
cat > "$work/prometheus.yml" << YML
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: ["$ROOT/deploy/prometheus/rocketns-rules.yml"]
scrape_configs:
  - job_name: rocketns
    static_configs: [{targets: ["127.0.0.1:$A_HTTP", "127.0.0.1:$B_HTTP"]}]
YML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$PROM" --log.level=warn > "$work/prometheus.log" 2>&1 &
pids+=($!)
wait_port "$PROM" || { echo "partition: prometheus did not start"; tail "$work/prometheus.log"; exit 1; }

broker broker-a "$JARS5" 10911 "127.0.0.1:$A;127.0.0.1:$B"
broker broker-b "$JARS5" 10921 "127.0.0.2:$A;127.0.0.1:$B"

# metric HTTP_PORT SERIES: its value on that node's /metrics, empty when absent.
metric() {
    curl -s "http://127.0.0.1:$1/metrics" | awk -v s="$2" '$1 == s {print $2}'
}
divergence() { metric "$1" "rocketns_peer_divergence{peer=\"127.0.0.1:$2\",kind=\"$3\"}"; }
# firing: the nodes (instances) for which Prometheus says RocketnsPeersDisagree fires, sorted.
firing() {
    curl -s "http://127.0.0.1:$PROM/api/v1/alerts" | python3 -c '
import json, sys
alerts = json.load(sys.stdin)["data"]["alerts"]
print(" ".join(sorted(a["labels"]["instance"] for a in alerts
    if a["labels"]["alertname"] == "RocketnsPeersDisagree" and a["state"] == "firing")))'
}
# within SECONDS COMMAND...: until COMMAND holds, polled every 0.2 s; fails after SECONDS.
within() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.2
    done
}
agree() {
    [ "$(divergence $A_HTTP $B missing_here)" = 0 ] && [ "$(divergence $A_HTTP $B extra_here)" = 0 ] \
        && [ "$(divergence $B_HTTP $A missing_here)" = 0 ] && [ "$(divergence $B_HTTP $A extra_here)" = 0 ]
}
both_registered() {
    for port in $A_HTTP $B_HTTP; do
        curl -s "http://127.0.0.1:$port/cluster" | grep -q '"broker-a"' || return 1
        curl -s "http://127.0.0.1:$port/cluster" | grep -q '"broker-b"' || return 1
    done
}

ok=0
within 90 both_registered || ok=1
verdict $ok "both Java brokers registered with both nodes"
ok=0
within $((3 * SCAN_S)) agree || ok=1
verdict $ok "both nodes compare and agree: rocketns_peer_divergence 0 on each"

# The cut: broker-b's link to A only.
ip rule add pref 10 to 127.0.0.2 ipproto tcp dport "$A" blackhole
cut=$SECONDS
# What A logs from here on: a warning from the start (broker-b reaching B seconds before A) names the same
# broker, and must not pass for the cut's.
cut_line=$(wc -l < "$work/rocketns-$A.log")
ss -K dst 127.0.0.2 dport = ":$A" > /dev/null 2>&1 || true
ss -K src 127.0.0.2 sport = ":$A" > /dev/null 2>&1 || true
seen() { [ "$(divergence $A_HTTP $B missing_here)" = 1 ] && [ "$(divergence $B_HTTP $A extra_here)" = 1 ]; }
ok=0
within $((2 * SCAN_S)) seen || ok=1
verdict $ok "within two scan periods of the cut ($((SECONDS - cut)) s): A says missing_here 1, B extra_here 1"
logged_since() { tail -n "+$(($1 + 1))" "$work/rocketns-$A.log"; }
logged() { logged_since "$cut_line" | grep -qE 'disagree on brokers.*missing_here: DefaultCluster/broker-b/0@127\.0\.0\.1:10921'; }
ok=0
# Within two scans, or a minute later when a warning went out in the minute before the cut (a broker that
# reached one node seconds before the other at start): a peer's warnings are at most one a minute.
within $((60 + 2 * SCAN_S)) logged || ok=1
verdict $ok "A's log names broker-b ($((SECONDS - cut)) s after the cut): $(logged_since "$cut_line" | grep -oE 'disagree on brokers.*' | tail -n 1 | head -c 200)"
ok=0
curl -s "http://127.0.0.1:$A_HTTP/cluster" | python3 -c '
import json, sys
peer = json.load(sys.stdin)["peers"][0]
assert peer["state"] == "disagree" and peer["missingHere"]["brokers"] == ["DefaultCluster/broker-b/0@127.0.0.1:10921"], peer' || ok=1
verdict $ok "A's /cluster names broker-b as missing here"
ok=0
curl -s "http://127.0.0.1:$B_HTTP/cluster" | python3 -c '
import json, sys
peer = json.load(sys.stdin)["peers"][0]
assert peer["state"] == "disagree" and peer["extraHere"]["brokers"] == ["DefaultCluster/broker-b/0@127.0.0.1:10921"], peer' || ok=1
verdict $ok "B's /cluster names broker-b as extra here"
fires() { [ "$(firing)" = "127.0.0.1:$A_HTTP 127.0.0.1:$B_HTTP" ]; }
ok=0
within 30 fires || ok=1
verdict $ok "RocketnsPeersDisagree fires in Prometheus for both nodes ($((SECONDS - cut)) s after the cut)"

# The link back: broker-b's next registration (30 s at most) reaches A again.
ip rule del pref 10
back=$SECONDS
back_line=$(wc -l < "$work/rocketns-$A.log")
ok=0
within 45 agree || ok=1
verdict $ok "the link back: both nodes agree again ($((SECONDS - back)) s after it, a registration period at most)"
said_last() { logged_since "$back_line" | grep -oE '(dis)?agree on brokers' | tail -n 1; }
agreed_again() { [ "$(said_last)" = "agree on brokers" ]; }
ok=0
# At once, or up to a minute later when an all-clear went out in the minute before (after a start's warning);
# only what A logged once the link was back counts.
within 70 agreed_again || ok=1
verdict $ok "A's log says they agree again"
cleared() { [ -z "$(firing)" ]; }
ok=0
within 20 cleared || ok=1
verdict $ok "RocketnsPeersDisagree no longer fires"

[ "$fail" = 0 ] || show_logs
echo "peers partition: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
