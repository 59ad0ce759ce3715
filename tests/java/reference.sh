#!/usr/bin/env bash
# The Java NameServer as the reference, live: starts the Java NameServer 5.3.3 (jars from tests/java/fetch.sh)
# in a loopback-only network namespace and checks that it answers the corpus of tests/java_reference.rs as
# recorded in tests/fixtures/java-5.3.3/corpus.jsonl (which plain `cargo test` holds rocketns to); then runs
# the same corpus against the newest 5.x that Maven serves (5.5.0, fastjson2) and prints where it differs
# from 5.3.3, without failing. First, Java's Properties.load reads the -c file rocketns writes back on
# UPDATE_NAMESRV_CONFIG (tests/config_file.rs). Needs root (unshare --net).
#   tests/java/reference.sh            # check
#   RECORD=1 tests/java/reference.sh   # record the 5.3.3 fixture anew (then review the diff)
#   INTEROP_KEEP=DIR                   # keep the Java NameServers' logs in DIR
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NEWEST=5.5.0

# shellcheck source=tests/java/lib.sh
. "$ROOT/tests/java/lib.sh"
if [ "${1:-}" != inner ]; then
    JARS_REFERENCE=$("$ROOT/tests/java/fetch.sh" 5.3.3)
    JARS_NEWEST=$("$ROOT/tests/java/fetch.sh" "$NEWEST")
    export JARS_REFERENCE JARS_NEWEST
    cargo test --quiet --no-run --manifest-path "$ROOT/Cargo.toml" --test java_reference 2> /dev/null
    # The -c file that UPDATE_NAMESRV_CONFIG writes back, read by Java's Properties.load (no network needed).
    cargo test --quiet --manifest-path "$ROOT/Cargo.toml" --test config_file -- --ignored --exact \
        java_reads_back_what_an_update_wrote 2>&1 | tail -n 20
fi
enter_sandbox "${BASH_SOURCE[0]}" "$@"
sandbox_setup

# start_java VERSION JARS PORT / stop_java: one Java NameServer at a time.
start_java() {
    start_java_namesrv "$1" "$2" "$3" "$work" || return 1
    java_pid=$JAVA_NAMESRV_PID
    pids+=("$java_pid")
}

stop_java() {
    kill "$java_pid" && wait "$java_pid" 2> /dev/null || true
}

corpus() { # VERSION PORT [extra env]
    env ROCKETNS_JAVA_NAMESRV="127.0.0.1:$2" ROCKETNS_JAVA_VERSION="$1" "${@:3}" \
        cargo test --quiet --manifest-path "$ROOT/Cargo.toml" --test java_reference -- \
        --ignored --exact java_answers_the_corpus_as_recorded --nocapture 2>&1 | grep -vE '^(running|$)'
}

start_java 5.3.3 "$JARS_REFERENCE" 19876
if [ -n "${RECORD:-}" ]; then
    corpus 5.3.3 19876 ROCKETNS_JAVA_RECORD=1
else
    corpus 5.3.3 19876
fi
stop_java
echo "java: Java 5.3.3 answers the corpus as recorded"

start_java "$NEWEST" "$JARS_NEWEST" 19877
corpus "$NEWEST" 19877 ROCKETNS_JAVA_REPORT_ONLY=1
stop_java
