#!/usr/bin/env bash
# The Debian package (`cargo deb`, metadata in Cargo.toml, files in deploy/debian): builds it, checks its
# contents and conffile, installs it with dpkg -i into this machine, `systemd-analyze verify`s the installed
# unit, runs the unit's ExecStart line as the unit's user with the unit's environment (in a loopback-only
# network namespace, with the state and runtime folders systemd would make) and checks that it serves and
# writes its state where the unit lets it, stops it with the unit's KillSignal within TimeoutStopSec, then
# removes and purges the package and checks that nothing of it is left. Needs root.
#
# The package is built from the debug binary the other stages build (`cargo deb --profile dev`): this
# checks the packaging, not the optimizer, and a release build with whole-program LTO would add about five
# minutes to the test command. `cargo deb` alone makes the release package. Installs cargo-deb 3.8.0
# (without its xz feature, 1.5 minutes to build) when missing. Prints PASS/FAIL per check and
# `package: N passed, N failed`.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export ROOT
# shellcheck source=tests/java/lib.sh
source "$ROOT/tests/java/lib.sh"

if [ "${1:-}" != inner ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "package: needs root (dpkg -i)" >&2
        exit 1
    fi
    if ! cargo deb --version 2> /dev/null | grep -q '^cargo-deb 3.8.0'; then
        echo "package: installing cargo-deb 3.8.0 from crates.io"
        cargo install --quiet --locked --no-default-features cargo-deb --version 3.8.0 || exit 1
    fi
    if dpkg -s rocketns > /dev/null 2>&1; then
        echo "package: rocketns is installed on this machine already; not touching it" >&2
        exit 1
    fi
    cargo build --quiet --manifest-path "$ROOT/Cargo.toml" --bin rocketns || exit 1
    DEB_OUT=$(mktemp -d)
    export DEB_OUT
    # cargo-deb warns that a dev profile is meant for testing only, which it is here.
    if ! (cd "$ROOT" && cargo deb --profile dev --no-build --output "$DEB_OUT/" > "$DEB_OUT/cargo-deb.log" 2>&1); then
        cat "$DEB_OUT/cargo-deb.log"
        exit 1
    fi
fi
enter_sandbox "$0" "${1:-}"
sandbox_setup
trap 'dpkg -P rocketns > /dev/null 2>&1; rm -rf "$DEB_OUT"; sandbox_cleanup' EXIT

deb=$(ls "$DEB_OUT"/rocketns_*.deb)
contents=$(dpkg-deb --contents "$deb" | awk '{print $NF}')
missing=""
for f in ./usr/bin/rocketns ./etc/rocketns/namesrv.properties ./usr/lib/systemd/system/rocketns.service \
    ./etc/rocketns/controller.properties ./usr/lib/systemd/system/rocketns-controller.service \
    ./usr/share/rocketns/prometheus/rocketns-rules.yml ./usr/share/rocketns/grafana/rocketns.json \
    ./usr/share/doc/rocketns/README.md; do
    grep -qxF "$f" <<< "$contents" || missing="$missing $f"
done
verdict "$([ -z "$missing" ] && echo 0 || echo 1)" "the package holds the server, its config, the unit, the controller's config and unit, rules, dashboard and docs${missing:+ (missing:$missing)}"
conffiles=$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | sort | tr '\n' ' ')
verdict "$([ "$conffiles" = "/etc/rocketns/controller.properties /etc/rocketns/namesrv.properties " ] && echo 0 || echo 1)" \
    "the two configs are its conffiles ($conffiles)"

dpkg -i "$deb" > "$work/dpkg-install.log" 2>&1
verdict $? "dpkg -i installs it (the rocketns system user: $(getent passwd rocketns | cut -d: -f1,6,7))"
unit=/usr/lib/systemd/system/rocketns.service
systemd-analyze verify "$unit" > "$work/verify.log" 2>&1
ok=$?
verdict $ok "systemd-analyze verify $unit$([ -s "$work/verify.log" ] && echo ": $(head -c 300 "$work/verify.log")")"
exposure=$(systemd-analyze security --offline=true "$unit" 2> /dev/null | tail -n 1)
echo "INFO: systemd-analyze security of the unit: ${exposure:-not available}"

# The unit's own lines, as systemd would use them.
unit_value() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }
exec_start=$(unit_value ExecStart)
user=$(unit_value User)
group=$(unit_value Group)
state=/var/lib/$(unit_value StateDirectory)
runtime=/run/$(unit_value RuntimeDirectory)
mapfile -t environment < <(sed -n 's/^Environment=//p' "$unit")
install -d -o "$user" -g "$group" -m "$(unit_value StateDirectoryMode)" "$state"
install -d -o "$user" -g "$group" -m 0755 "$runtime"
# LimitNICE as systemd applies it, where this machine lets root raise RLIMIT_NICE (CAP_SYS_RESOURCE).
nice_limit=$(unit_value LimitNICE)
limits=()
prlimit --nice="$nice_limit:$nice_limit" true 2> /dev/null && limits=(prlimit --nice="$nice_limit:$nice_limit")
# shellcheck disable=SC2086
(cd "$(unit_value WorkingDirectory)" && exec "${limits[@]}" setpriv --reuid="$user" --regid="$group" \
    --init-groups env -i "${environment[@]}" $exec_start) > "$work/service.log" 2>&1 &
service=$!
pids+=("$service")
wait_port 9876
verdict $? "the unit's ExecStart ($exec_start) runs as $user and listens on 9876"
# Field 41 of a thread's stat is its policy (5: SCHED_IDLE); the lane keeps nice 10 without LimitNICE.
policies=$(for t in /proc/"$service"/task/*; do
    [ "$(cat "$t/comm" 2> /dev/null)" = rocketns-lane ] && sed 's/.*) //' "$t/stat" | awk '{print $39}'
done | sort -u | tr '\n' ' ')
if [ ${#limits[@]} -gt 0 ]; then
    verdict "$([ "$policies" = "5 " ] && echo 0 || echo 1)" \
        "with LimitNICE=$nice_limit the work lane's threads run SCHED_IDLE (policies: ${policies:-none found})"
else
    # 0: SCHED_OTHER (at nice 10), and the log says why.
    verdict "$([ "$policies" = "0 " ] && grep -q 'the work lane runs at nice 10, not SCHED_IDLE' "$work/service.log" \
        && echo 0 || echo 1)" "without RLIMIT_NICE (root here cannot raise it: no CAP_SYS_RESOURCE) the work lane's threads stay SCHED_OTHER at nice 10 and the log says so (policies: ${policies:-none found})"
fi
python3 - << 'PY' > "$work/requests.log" 2>&1
import os, sys, urllib.request
sys.path.insert(0, os.environ["ROOT"] + "/tests/java")
from remoting import Connection
c = Connection("127.0.0.1:9876")
assert c.request(100, {"namespace": "ops", "key": "k", "value": "v"})[0]["code"] == 0, "KV put"
assert c.request(101, {"namespace": "ops", "key": "k"})[0]["extFields"]["value"] == "v", "KV get"
assert c.request(318, {}, b"orderMessageEnable=true")[0]["code"] == 0, "config update written back"
assert urllib.request.urlopen("http://127.0.0.1:9880/readyz", timeout=10).status == 200, "ready"
PY
verdict $? "it serves: KV put and get, a config update written back, /readyz on the metrics port$( [ -s "$work/requests.log" ] && echo ": $(tail -n 2 "$work/requests.log")")"
owner=$(stat -c %U "$state/kvConfig.json" 2> /dev/null)
verdict "$([ "$owner" = "$user" ] && grep -q '^orderMessageEnable=true$' /etc/rocketns/namesrv.properties && echo 0 || echo 1)" \
    "the KV store is in $state, owned by $user; the update is in /etc/rocketns/namesrv.properties"
kill "-$(unit_value KillSignal | sed 's/^SIG//')" "$service"
stop=$(unit_value TimeoutStopSec)
timeout "${stop%s}" tail --pid="$service" -f /dev/null
wait "$service"
verdict $? "$(unit_value KillSignal) stops it within TimeoutStopSec=$stop, exit status 0"

# The controller's unit (--controller-only): installed, not enabled; its ExecStart as its user serves a one-node
# group from the shipped controller.properties, in its own state folder, and SIGTERM stops it.
unit=/usr/lib/systemd/system/rocketns-controller.service
systemd-analyze verify "$unit" > "$work/verify-controller.log" 2>&1
verdict $? "systemd-analyze verify $unit$([ -s "$work/verify-controller.log" ] && echo ": $(head -c 300 "$work/verify-controller.log")")"
enabled=$(find /etc/systemd/system -name rocketns-controller.service 2> /dev/null | head -n 1)
verdict "$([ -z "$enabled" ] && echo 0 || echo 1)" "the controller's unit is not enabled${enabled:+ ($enabled)}"
controller_state=/var/lib/$(unit_value StateDirectory)
install -d -o "$(unit_value User)" -g "$(unit_value Group)" -m "$(unit_value StateDirectoryMode)" "$controller_state"
# shellcheck disable=SC2046
(cd "$(unit_value WorkingDirectory)" && exec setpriv --reuid="$(unit_value User)" --regid="$(unit_value Group)" \
    --init-groups env -i $(sed -n 's/^Environment=//p' "$unit") $(unit_value ExecStart)) > "$work/controller.log" 2>&1 &
controller=$!
pids+=("$controller")
wait_port 9878
python3 - << 'PY' > "$work/controller-requests.log" 2>&1
import os, sys, time
sys.path.insert(0, os.environ["ROOT"] + "/tests/java")
from remoting import Connection
for _ in range(100):
    reply = Connection("127.0.0.1:9878").request(1005, {})[0]
    if reply["extFields"].get("isLeader") == "true":
        break
    time.sleep(0.1)
assert reply["extFields"].get("isLeader") == "true", reply
PY
verdict $? "the controller's ExecStart ($(unit_value ExecStart)) leads its one-node group on 9878$( [ -s "$work/controller-requests.log" ] && echo ": $(tail -n 2 "$work/controller-requests.log")")"
verdict "$([ "$(stat -c %U "$controller_state/raft-peers.json" 2> /dev/null)" = "$(unit_value User)" ] && echo 0 || echo 1)" \
    "the controller's store is in $controller_state, owned by $(unit_value User)"
kill -TERM "$controller"
timeout "$(unit_value TimeoutStopSec | tr -d s)" tail --pid="$controller" -f /dev/null
wait "$controller"
verdict $? "SIGTERM stops the controller within TimeoutStopSec, exit status 0"

files=$(dpkg -L rocketns | while read -r f; do [ -f "$f" ] && echo "$f"; done)
dpkg -r rocketns > "$work/dpkg-remove.log" 2>&1
verdict "$([ $? = 0 ] && [ ! -e /usr/bin/rocketns ] && [ -e /etc/rocketns/namesrv.properties ] && echo 0 || echo 1)" \
    "dpkg -r removes it and keeps the changed config"
dpkg -P rocketns > "$work/dpkg-purge.log" 2>&1
left=$(for f in $files /etc/rocketns "$state" "$controller_state"; do [ -e "$f" ] && echo "$f"; done)
verdict "$([ -z "$left" ] && ! dpkg -s rocketns > /dev/null 2>&1 && echo 0 || echo 1)" \
    "dpkg -P purges it: none of its $(wc -w <<< "$files") files, its config or its state is left${left:+ (left: $left)}"

echo "package: $pass passed, $fail failed"
[ "$fail" = 0 ]
