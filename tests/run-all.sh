#!/usr/bin/env bash
# Every test of rocketns, as CI runs them, in stages: formatting, lints, the README's first command (as
# `cargo run -- -p`, so that it cannot break unseen), unit and wire tests (cargo test, benches built and run
# once in test mode, rocketns against the recorded replies of the Java NameServer), the operators' kit
# (tests/ops: the Debian package and its systemd unit installed and run, the Prometheus rules and Grafana
# dashboard against a real Prometheus, upgrades under a client fleet), a few seconds of each fuzz target
# (tests/fuzz-smoke.sh), the live Java NameServer against its recorded replies (tests/java/reference.sh), Java brokers and mqadmin with
# rocketns beside the Java NameServer (tests/java/side-by-side.sh), Java and Go clients through brokers found
# via rocketns (tests/java/clients.sh), a 5.x acting-master pair and 905 notices (tests/java/acting-master.sh),
# signed broker and mqadmin requests (tests/java/signing.sh), cluster-test mode beside the Java NameServer
# 4.9.7 (tests/java/cluster-test.sh), the gRPC Java client through a Java Proxy (tests/java/proxy.sh),
# generated request sequences against the Java NameServer in lockstep (tests/java/difftest.sh), a live
# Java cluster's NameServers replaced by rocketns under traffic, beside Java's own baseline
# (tests/java/migration.sh), a Java broker cut from one of two rocketns peers, seen by both and alerted in Prometheus
# (tests/java/peers-partition.sh), and a Java
# broker group in controller mode failing over through rocketns's controller, then Java's
# (tests/java/controller.sh), also with controller nodes cut off and slowed (tests/java/controller-partition.sh)
# and killed (controller-chaos.sh), and last real third-party RocketMQ software against rocketns
# (tests/interop/run.sh); the ops, interop and Java stages need root. Each stage's checks and result are printed as it ends (its whole output
# is in target/test-logs/STAGE.log); the last line counts the stages: `stages: N passed, N failed, N skipped`. After a failure the later stages are not run, and are
# named. The first run on a fresh machine installs cargo-deb, Debian's prometheus, the rocketmq-rust broker
# and the Java RocketMQ jars, and builds the fuzz targets and the interop client (README, "Before you start").
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Test servers keep their KV files in temporary folders that outlive each test (restarts read them back):
# they all go under one folder, removed at the end.
scratch=$(mktemp -d -t rocketns-tests.XXXXXX)
prebuild=""
trap 'rm -rf "$scratch"; [ -z "$prebuild" ] || kill -- -"$prebuild" 2> /dev/null' EXIT
export TMPDIR="$scratch"
# A clean clone builds everything once: incremental caches (2.5 GB for the test stage) only take disk and
# time there. Set CARGO_INCREMENTAL=1 to keep them when rerunning stages after small changes.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# Each stage's whole output (third-party programs' logging, build progress) goes to its log here; the
# terminal shows its checks and counts, and the end of its log when it fails.
logs=target/test-logs
mkdir -p "$logs"
shown='^(PASS|FAIL|WARN|INFO)|^controller: |^[a-z][a-z0-9 -]*: [0-9]+ passed, [0-9]+ failed|^difftest: [0-9]+ sequences|^fuzz: |^test result: FAILED|^error(\[|:)'

all=(fmt clippy readme-run test ops-package ops-prometheus ops-upgrade fuzz java-reference java-side-by-side
    java-clients java-acting-master java-signing java-cluster-test java-proxy java-difftest java-migration
    java-peers-partition java-controller java-controller-partition java-controller-chaos interop)
stages=("${all[@]}")
# STAGES="fmt ops-upgrade" runs only those.
if [ -n "${STAGES:-}" ]; then read -ra stages <<< "$STAGES"; fi
declare -A what=(
    [fmt]="cargo fmt --check of every crate, every tracked Rust file reached by it, and bare rustfmt file by file (tests/fmt.sh)"
    [clippy]="cargo clippy, warnings denied (the library and the server alone too: without test helpers)"
    [readme-run]="the README's first command, as cargo run -- -p"
    [test]="cargo test: unit, wire and real-binary tests"
    [ops-package]="the Debian package: built, systemd-analyze verify, dpkg -i, the unit's command served, removed"
    [ops-prometheus]="promtool on the alerting rules; a real Prometheus runs every rule and dashboard expression"
    [ops-upgrade]="a client fleet across two rocketns --take-over upgrades: nothing refused or unanswered"
    [fuzz]="a few seconds of each fuzz target"
    [interop]="the rocketmq-rust broker and client against rocketns"
    [java-reference]="the Java NameServer 5.3.3 answers the corpus as recorded (and 5.5.0 is compared)"
    [java-side-by-side]="Java 5.3.3 and 4.9.7 brokers and mqadmin, rocketns beside the Java NameServer"
    [java-clients]="Java 5.3.3, Java 4.9.7 and Go clients, 1,000 messages each, via rocketns"
    [java-acting-master]="a Java 5.3.3 master/slave pair with an acting master, and 905 notices, beside the Java NameServer"
    [java-signing]="a signing Java 5.3.3 broker and mqadmin against rocketns with aclEnable"
    [java-cluster-test]="cluster-test mode beside the Java NameServer 4.9.7 (and 5.3.3) in the same mode"
    [java-proxy]="the gRPC Java client through a Java Proxy 5.3.3 whose NameServer is rocketns, then Java's"
    [java-difftest]="generated request sequences, Java NameServer 5.3.3 and rocketns in lockstep"
    [java-migration]="two Java NameServers replaced by rocketns under Java 5.3.3 brokers and clients, then Java's baseline: failed sends and lost messages per step"
    [java-peers-partition]="two rocketns peers and Java 5.3.3 brokers: one broker cut from one node is seen on both, and alerted in Prometheus"
    [java-controller]="a Java 5.3.3 broker group in controller mode fails over through rocketns's controller, then Java's"
    [java-controller-partition]="controller nodes cut off and slowed under a Java 5.3.3 broker group: rocketns's, then Java's"
    [java-controller-chaos]="kill -9 of controller nodes and masters for 2 minutes under a Java 5.3.3 producer: rocketns's, then Java's"
)
for stage in "${stages[@]}"; do
    if [ -z "${what[$stage]+set}" ]; then
        echo "run-all: STAGES names no stage \"$stage\"; the stages: ${all[*]}" >&2
        exit 2
    fi
done

run_stage() {
    case $1 in
        fmt) bash tests/fmt.sh ;;
        clippy) cargo clippy --all-targets --quiet -- -D warnings && cargo clippy -p rocketns --lib --bins --quiet -- -D warnings ;;
        readme-run) cargo run --quiet -- -p > "$scratch/printed-config" && grep -q '^listenPort=9876$' "$scratch/printed-config" ;;
        test) cargo test --all-targets ;;
        ops-package) bash tests/ops/package.sh ;;
        ops-prometheus) bash tests/ops/prometheus.sh ;;
        ops-upgrade) bash tests/ops/upgrade.sh ;;
        fuzz) bash tests/fuzz-smoke.sh ;;
        interop) bash tests/interop/run.sh ;;
        java-reference) bash tests/java/reference.sh ;;
        java-side-by-side) bash tests/java/side-by-side.sh ;;
        java-clients) bash tests/java/clients.sh ;;
        java-acting-master) bash tests/java/acting-master.sh ;;
        java-signing) bash tests/java/signing.sh ;;
        java-cluster-test) bash tests/java/cluster-test.sh ;;
        java-proxy) bash tests/java/proxy.sh ;;
        java-difftest) bash tests/java/difftest.sh ;;
        java-migration) bash tests/java/migration.sh ;;
        java-peers-partition) bash tests/java/peers-partition.sh ;;
        java-controller) bash tests/java/controller.sh ;;
        java-controller-partition) bash tests/java/controller-partition.sh ;;
        # Its failures depend on timing, so its brokers' and nodes' own logs are kept for the next one.
        java-controller-chaos)
            rm -rf "$logs/java-controller-chaos"
            INTEROP_KEEP="${INTEROP_KEEP:-$PWD/$logs/java-controller-chaos}" bash tests/java/controller-chaos.sh ;;
    esac
}

# What a stage counted, for the summary.
detail() {
    case $1 in
        java-difftest) grep -hE '^difftest: [0-9]+ sequences' "$logs/java-difftest.log" 2>/dev/null | sed 's/^difftest: //' ;;
        test) awk '/^test result:/ {p += $4; f += $6} END {if (p + f) printf "%d tests passed, %d failed", p, f}' \
            "$logs/test.log" 2>/dev/null ;;
    esac
}

# The interop stage's builds (tests/interop/install.sh: the rocketmq-rust broker and its client, minutes on a
# fresh machine) start in the background once the stages that measure the server's own timing (the unit
# and wire tests) are done, at the lowest CPU priority (SCHED_IDLE): they take the cores only while the
# other stages leave them idle, which the Java stages mostly do, and the interop stage, the last, waits
# for them. What they print is in $logs/interop-install.log; run.sh builds again whatever they did not.
start_prebuild() {
    [ -n "$prebuild" ] && return
    [[ " ${stages[*]} " == *" interop "* ]] || return
    local idle=(nice -n 19)
    command -v chrt > /dev/null && idle=(chrt --idle 0)
    # A process group of its own (setsid), ended with the run whatever it still does.
    setsid "${idle[@]}" bash tests/interop/install.sh > "$logs/interop-install.log" 2>&1 &
    prebuild=$!
}

declare -A result took
passed=0 failed=0 skipped=0
for stage in "${stages[@]}"; do
    if [ "$failed" -gt 0 ]; then
        result[$stage]=SKIP
        skipped=$((skipped + 1))
        continue
    fi
    case $stage in
        fmt | clippy | readme-run | test) ;;
        interop) start_prebuild; wait "$prebuild" || true ;;
        *) start_prebuild ;;
    esac
    echo "== $stage: ${what[$stage]}"
    started=$SECONDS
    run_stage "$stage" 2>&1 | tee "$logs/$stage.log" | { grep --line-buffered -E "$shown" || true; }
    if [ "${PIPESTATUS[0]}" = 0 ]; then
        result[$stage]=PASS
        passed=$((passed + 1))
    else
        result[$stage]=FAIL
        failed=$((failed + 1))
        echo "-- the end of $logs/$stage.log:"
        tail -n 60 "$logs/$stage.log"
    fi
    took[$stage]=$((SECONDS - started))
    echo "== $stage: ${result[$stage]} in ${took[$stage]} s"
done

echo
echo "== summary"
for stage in "${stages[@]}"; do
    case ${result[$stage]} in
        SKIP) printf '%s  %-18s not run: an earlier stage failed\n' SKIP "$stage" ;;
        *) printf '%s  %-18s %4d s  %s\n' "${result[$stage]}" "$stage" "${took[$stage]}" "$(detail "$stage")" ;;
    esac
done
echo "each stage's whole output: $logs/STAGE.log"
echo "stages: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
