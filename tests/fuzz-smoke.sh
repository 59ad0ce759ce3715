#!/usr/bin/env bash
# A few seconds of every cargo-fuzz target (fuzz/), starting from the committed seeds, as part of the test
# command: it keeps the targets building and catches a crash the seeds already reach. The long runs are in
# fuzz/README.md. Installs cargo-fuzz if it is missing; the stable compiler takes its flags with
# RUSTC_BOOTSTRAP=1. FUZZ_SECONDS (default 5) per target.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../fuzz"
seconds=${FUZZ_SECONDS:-5}
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked --quiet
fi
export RUSTC_BOOTSTRAP=1
cargo fuzz build -O 2>&1 | grep -vE '^\s+(Compiling|Downloaded|Downloading)' || true
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# What the targets write (request_sequence keeps a KV file) goes there too.
export TMPDIR="$scratch"
for target in $(cargo fuzz list); do
    mkdir -p "$scratch/$target"
    # New inputs go to the scratch corpus; the seeds stay as committed.
    if ! out=$(cargo fuzz run -O "$target" "$scratch/$target" "seeds/$target" -- -max_total_time="$seconds" 2>&1); then
        echo "$out" | tail -n 40
        echo "fuzz: $target failed (the crashing input is under fuzz/artifacts/$target)"
        exit 1
    fi
    echo "fuzz: $target: $(echo "$out" | grep -E '^Done [0-9]+ runs' || echo 'ran')"
done
