#!/usr/bin/env bash
# Generated differential testing (tests/difftest): random request sequences against a fresh Java NameServer
# 5.3.3 and a fresh rocketns each, in lockstep, in a loopback-only network namespace; a difference fails
# the stage, shrunk to the smallest sequence that shows it and printed as a script. The fixed seeds run
# every time, then RANDOM_SEQUENCES from seeds drawn now (printed first: `SEEDS=... tests/java/difftest.sh`
# runs them again). Needs root (unshare --net).
#   tests/java/difftest.sh                     # the test command's share: fixed seeds and a few drawn ones
#   SEQUENCES=500 tests/java/difftest.sh       # a soak: 500 drawn seeds after the fixed ones
#   JAVA_VERSION=5.5.0 tests/java/difftest.sh  # another Java version, differences reported, not failed
#   SAVE=DIR                                   # keep each shrunk difference as a fixture in DIR
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=tests/java/lib.sh
. "$ROOT/tests/java/lib.sh"
JAVA_VERSION=${JAVA_VERSION:-5.3.3}
if [ "${1:-}" != inner ]; then
    JARS=$("$ROOT/tests/java/fetch.sh" "$JAVA_VERSION")
    export JARS JAVA_VERSION
    cargo build --quiet --manifest-path "$ROOT/Cargo.toml" -p rocketns-difftest
fi
enter_sandbox "${BASH_SOURCE[0]}" "$@"
sandbox_setup

args=(run --jars "$JARS" --java-version "$JAVA_VERSION" --writes "${WRITES:-30}")
args+=(--seeds "${SEEDS:-1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}" --random "${SEQUENCES:-8}")
[ "$JAVA_VERSION" = 5.3.3 ] || args+=(--report-only)
[ -n "${SAVE:-}" ] && args+=(--save "$SAVE")
TMPDIR=$work "$ROOT/target/debug/rocketns-difftest" "${args[@]}"
# The controller's codes against Java's controller (5.3.3 only): fixed seeds, then drawn ones.
if [ "$JAVA_VERSION" = 5.3.3 ]; then
    TMPDIR=$work "$ROOT/target/debug/rocketns-difftest" controller --jars "$JARS" --writes "${CONTROLLER_WRITES:-20}" \
        --seeds "${CONTROLLER_SEEDS:-1,2,3,4,5,6,7,8}" --random "${CONTROLLER_SEQUENCES:-4}"
fi
