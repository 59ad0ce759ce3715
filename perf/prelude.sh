# shellcheck shell=bash
# What perf/storm.sh and perf/hostile.sh both begin with, sourced from the repository root: the output folder
# (perf/out; perf/results with UPDATE=1), release builds of the server and the load generator, the binary
# under test (ROCKETNS), the Java NameServer's JVM options, and descriptors for thousands of connections.
OUT=perf/out
[ "${UPDATE:-}" = 1 ] && OUT=perf/results
mkdir -p "$OUT"
ROCKETNS=${ROCKETNS:-target/release/rocketns}
cargo build --release --quiet --bin rocketns --bin rocketns-loadgen
# shellcheck source=perf/java-runserver.sh
. perf/java-runserver.sh
ulimit -n 65536 2> /dev/null || ulimit -n "$(ulimit -Hn)"
