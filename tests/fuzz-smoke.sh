#!/usr/bin/env bash
# A few seconds of every fuzz target (fuzz/), starting from the committed seeds, as part of the test command:
# it keeps the targets building and catches a crash the seeds already reach. The long runs are in
# fuzz/README.md. The targets are built as `cargo fuzz build` builds them without -O (cargo-fuzz 0.13's
# flags: libFuzzer's coverage instrumentation, AddressSanitizer, `--cfg fuzzing`; the dev profile, so debug
# assertions and overflow checks are on too), but with cargo itself, so that a fresh machine need not
# install cargo-fuzz (3 minutes on 2 cores) for a smoke run; the stable compiler takes the unstable flags
# with RUSTC_BOOTSTRAP=1. Unoptimised, they build in about 3.8 minutes on 2 cores against about 5 for
# `-O` (2026-12-06), and still run thousands of inputs a second. FUZZ_SECONDS (default 5) per target.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../fuzz"
seconds=${FUZZ_SECONDS:-5}
triple=$(rustc -vV | sed -n 's/^host: //p')
export RUSTC_BOOTSTRAP=1
RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table
    -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cllvm-args=-simplifycfg-branch-fold-threshold=0
    -Zsanitizer=address -Cllvm-args=-sanitizer-coverage-stack-depth" \
    cargo build --quiet --target "$triple" --bins --config 'profile.dev.debug="line-tables-only"'
export ASAN_OPTIONS=detect_odr_violation=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# What the targets write (request_sequence keeps a KV file) goes there too.
export TMPDIR="$scratch"
# The targets are the [[bin]]s of fuzz/Cargo.toml.
for target in $(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^rocketns-fuzz$'); do
    mkdir -p "$scratch/$target" "artifacts/$target"
    # New inputs go to the scratch corpus; the seeds stay as committed.
    if ! out=$("target/$triple/debug/$target" -artifact_prefix="artifacts/$target/" \
        -max_total_time="$seconds" "$scratch/$target" "seeds/$target" 2>&1); then
        echo "$out" | tail -n 40
        echo "fuzz: $target failed (the crashing input is under fuzz/artifacts/$target)"
        exit 1
    fi
    echo "fuzz: $target: $(echo "$out" | grep -E '^Done [0-9]+ runs' || echo 'ran')"
done
