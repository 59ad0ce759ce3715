#!/usr/bin/env bash
# Zero-downtime upgrade (src/service/upgrade.rs): a client fleet (rocketns-loadgen fleet: brokers re-registering
# every second, long-lived clients asking routes every 20 ms, short-lived ones connecting, asking three
# routes and closing, all the time) runs across two upgrades in a row (`rocketns --take-over`). Checks: no
# connection refused, every request answered (GO_AWAY counts; a connection closed while idle is a clean
# close), no route missing, each old process exits 0 after draining, the brokers register with the newest
# process, told by GO_AWAY; the fleet is stopped once the brokers have reached the newest process. Then,
# for comparison only (not a check), the same fleet across a plain restart (SIGTERM, then start): what
# clients of a restarted NameServer see, as with the Java NameServer, which has no take-over.
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

# rocketns_registrations_total of the process serving the metrics port now (0 when it cannot be read).
registrations() {
    local n
    n=$(curl -s http://127.0.0.1:19880/metrics | awk '$1 == "rocketns_registrations_total" {print $2}')
    echo "${n:-0}"
}

# Waits up to 30 s for the fleet's brokers to register with the process serving now (the fleet moved
# over: GO_AWAY, or the old process gone); prints its count of registrations.
brokers_arrived() {
    local n
    for _ in $(seq 300); do
        n=$(registrations)
        [ "$n" -gt 0 ] && break
        sleep 0.1
    done
    echo "$n"
}

# Stops a fleet (SIGTERM: it prints its summary and exits with its verdict) and returns that verdict.
stop_fleet() {
    kill -TERM "$1"
    wait "$1"
}

RUST_LOG=info "$bin/rocketns" -c "$conf" > "$work/rocketns-1.log" 2>&1 &
old=$!
pids+=("$old")
wait_port 19876 || { echo "rocketns did not start"; exit 1; }
# The fleet runs until it is stopped once the brokers have reached the newest process (120 s at most).
"$bin/rocketns-loadgen" fleet --addr 127.0.0.1:19876 --duration 120 > "$work/fleet.json" 2> "$work/fleet.log" &
fleet=$!
for n in 2 3; do
    sleep 6 # of the fleet against this process before it is upgraded
    RUST_LOG=info "$bin/rocketns" -c "$conf" --take-over > "$work/rocketns-$n.log" 2>&1 &
    new=$!
    pids+=("$new")
    wait "$old"
    verdict $? "upgrade $((n - 1)): the old process handed over, drained and exited 0 ($(grep -o 'grace_ms=[0-9]* connections=[0-9]*' "$work/rocketns-$((n - 1)).log"))"
    old=$new
done
regs=$(brokers_arrived)
stop_fleet "$fleet"
ok=$?
summary=$(cat "$work/fleet.json")
verdict $ok "the fleet across two upgrades: no refusal, every request answered, no route missing: $summary"
[ $ok = 0 ] || tail -n 20 "$work/fleet.log"
verdict "$([ "$regs" -gt 0 ] && echo 0 || echo 1)" "the brokers registered with the newest process ($regs registrations)"
# The old processes' GO_AWAY moved the clients (nothing else stops a process while the fleet runs); without
# it they would move only when the old process closes their connections at the end of its grace period.
go_away=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("go_away", 0))' "$work/fleet.json" 2> /dev/null)
verdict "$([ "${go_away:-0}" -gt 0 ] && echo 0 || echo 1)" "GO_AWAY moved the fleet's clients over ($go_away answers)"
kill -TERM "$old"
wait "$old"

# For comparison: the same fleet across a plain restart on the same port.
printf 'upgradeSocketPath=\n' >> "$conf"
RUST_LOG=info "$bin/rocketns" -c "$conf" > "$work/restart-1.log" 2>&1 &
old=$!
pids+=("$old")
wait_port 19876
"$bin/rocketns-loadgen" fleet --addr 127.0.0.1:19876 --duration 120 > "$work/restart-fleet.json" 2> "$work/restart-fleet.log" &
fleet=$!
sleep 6 # of the fleet against this process before it is restarted
kill -TERM "$old"
wait "$old"
RUST_LOG=info "$bin/rocketns" -c "$conf" > "$work/restart-2.log" 2>&1 &
pids+=($!)
brokers_arrived > /dev/null
stop_fleet "$fleet"
echo "INFO: for comparison, a plain restart (SIGTERM, then start) under the same fleet: $(cat "$work/restart-fleet.json")"

echo "upgrade: $pass passed, $fail failed"
[ "$fail" = 0 ]
