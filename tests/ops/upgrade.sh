#!/usr/bin/env bash
# Zero-downtime upgrade (src/upgrade.rs): a client fleet (rocketns-loadgen fleet: brokers re-registering
# every second, long-lived clients asking routes every 20 ms, short-lived ones connecting, asking three
# routes and closing, all the time) runs across two upgrades in a row (`rocketns --take-over`). Checks: no
# connection refused, every request answered (GO_AWAY counts; a connection closed while idle is a clean
# close), no route missing, each old process exits 0 after draining, the brokers register with the newest
# process. Then, for comparison only (not a check), the same fleet across a plain restart (SIGTERM, then
# start): what clients of a restarted NameServer see, as with the Java NameServer, which has no take-over.
# Needs root (a loopback-only network namespace). Prints PASS/FAIL per check and `upgrade: N passed, N failed`.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export ROOT
# shellcheck source=tests/java/lib.sh
source "$ROOT/tests/java/lib.sh"

if [ "${1:-}" != inner ]; then
    cargo build --quiet --manifest-path "$ROOT/Cargo.toml" --bin rocketns --bin rocketns-loadgen || exit 1
fi
enter_sandbox "$0" "${1:-}"
sandbox_setup

bin=$ROOT/target/debug
conf=$work/ns.properties
printf '%s\n' bindAddress=127.0.0.1 listenPort=19876 metricsPort=19880 "kvConfigPath=$work/ns/kvConfig.json" \
    "upgradeSocketPath=$work/upgrade.sock" enableShutdownGracefully=true shutdownWaitTimeSeconds=5 > "$conf"

# rocketns_registrations_total of the process serving the metrics port now.
registrations() {
    curl -s http://127.0.0.1:19880/metrics | awk '$1 == "rocketns_registrations_total" {print $2}'
}

RUST_LOG=info "$bin/rocketns" -c "$conf" > "$work/rocketns-1.log" 2>&1 &
old=$!
pids+=("$old")
wait_port 19876 || { echo "rocketns did not start"; exit 1; }
"$bin/rocketns-loadgen" fleet --addr 127.0.0.1:19876 --duration 20 > "$work/fleet.json" 2> "$work/fleet.log" &
fleet=$!
for n in 2 3; do
    sleep 6
    RUST_LOG=info "$bin/rocketns" -c "$conf" --take-over > "$work/rocketns-$n.log" 2>&1 &
    new=$!
    pids+=("$new")
    wait "$old"
    verdict $? "upgrade $((n - 1)): the old process handed over, drained and exited 0 ($(grep -o 'grace_ms=[0-9]* connections=[0-9]*' "$work/rocketns-$((n - 1)).log"))"
    old=$new
done
wait "$fleet"
ok=$?
summary=$(cat "$work/fleet.json")
verdict $ok "the fleet across two upgrades: no refusal, every request answered, no route missing: $summary"
[ $ok = 0 ] || tail -n 20 "$work/fleet.log"
regs=$(registrations)
verdict "$([ "${regs:-0}" -gt 0 ] && echo 0 || echo 1)" "the brokers registered with the newest process ($regs registrations)"
kill -TERM "$old"
wait "$old"

# For comparison: the same fleet across a plain restart on the same port.
printf 'upgradeSocketPath=\n' >> "$conf"
RUST_LOG=info "$bin/rocketns" -c "$conf" > "$work/restart-1.log" 2>&1 &
old=$!
pids+=("$old")
wait_port 19876
"$bin/rocketns-loadgen" fleet --addr 127.0.0.1:19876 --duration 12 > "$work/restart-fleet.json" 2> "$work/restart-fleet.log" &
fleet=$!
sleep 6
kill -TERM "$old"
wait "$old"
RUST_LOG=info "$bin/rocketns" -c "$conf" > "$work/restart-2.log" 2>&1 &
pids+=($!)
wait "$fleet"
echo "INFO: for comparison, a plain restart (SIGTERM, then start) under the same fleet: $(cat "$work/restart-fleet.json")"

echo "upgrade: $pass passed, $fail failed"
[ "$fail" = 0 ]
