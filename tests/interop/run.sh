#!/usr/bin/env bash
# Real RocketMQ software against rocketns: the rocketmq-rust broker (crates.io rocketmq-broker 1.0.0) registers
# with rocketns, and a program built on rocketmq-client-rust 1.0.0 (tests/interop/client) creates a topic,
# sends and consumes 1,000 messages, shows TBW102 auto-creation, runs the admin API against rocketns (cluster
# info, topic list, KV, config, write permission), checks that a rocketns with access control on accepts the
# client's own ACL signatures and refuses unsigned writes, that a TLS-only rocketns serves the client's own
# TLS, keeps producing through three rocketns replicas while two of them are killed, removes the broker while
# it is frozen (SIGSTOP) and routes it again once it resumes, and checks that rocketns drops the broker's
# routes once the broker stops.
#
# The third-party binaries dial the machine's own interface address (with no setting to stop them), so
# everything runs inside a private network namespace that has only loopback. Needs root (CI runs as root).
# Installs what it needs from crates.io (tests/interop/install.sh), skipping what is already installed at the
# right version.
# The run's files (logs, the broker's store) live on a tmpfs in a private mount namespace: the broker refuses
# writes when the disk under its store is over 75% full, which a shared build machine can be, and nothing is
# left behind. INTEROP_KEEP=DIR copies the run's logs to DIR.
# ROCKETNS_INTEROP_CACHE (default ~/.cache/rocketns-interop) keeps the builds between runs.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${ROCKETNS_INTEROP_CACHE:-$HOME/.cache/rocketns-interop}
NS_ADDR=127.0.0.1:9876
# Three replicas, as an operator runs them; the broker registers with all three.
NS_LIST="127.0.0.1:9876;127.0.0.1:9877;127.0.0.1:9878"

ns_pids=()
broker_pid=""
work=""

inner() {
    # work is global: the EXIT trap runs after inner has returned.
    local client broker_bin pass=0 fail=0
    work=$(mktemp -d)
    # Small store files (broker.toml below) keep the tmpfs small; 2 GiB is a ceiling, not a reservation.
    if ! mount -t tmpfs -o size=2g,mode=0700 rocketns-interop "$work"; then
        echo "interop: no tmpfs for the run's files; using $work on disk (the broker needs it under 75% full)"
    fi
    client="$CACHE/target/debug/rocketns-interop-client"
    broker_bin=$(command -v rocketmq-broker-rust || echo "${CARGO_HOME:-$HOME/.cargo}/bin/rocketmq-broker-rust")
    cleanup() {
        [ -n "$broker_pid" ] && kill -9 "$broker_pid" 2>/dev/null || true
        for pid in "${ns_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
        wait 2>/dev/null || true
        if [ -n "${INTEROP_KEEP:-}" ]; then
            mkdir -p "$INTEROP_KEEP" && (cd "$work" && cp -- *.log *.toml *.properties "$INTEROP_KEEP"/) || true
        fi
        umount --lazy "$work" 2>/dev/null || true
        rm -rf "$work"
    }
    trap cleanup EXIT

    # A zombie still answers kill -0, so look at its state.
    broker_down() {
        [ -n "$broker_pid" ] && ! ps -o stat= -p "$broker_pid" 2>/dev/null | grep -qv Z
    }

    check() {
        local what=$1; shift
        echo "--- $what"
        if broker_down; then
            echo "FAIL: the broker stopped before this check; its log (tail):"
            tail -n 30 "$work/broker.log" | cut -c1-400
            echo "interop: $pass passed, $((fail + 1)) failed (the rest not run)"
            exit 1
        fi
        local log="$work/client-$((pass + fail)).log"
        # The client's own tracing goes to its log file; its findings (plain lines) are shown.
        local held=0
        HOME="$work" timeout 240 "$client" "$@" > "$log" 2>&1 && held=1
        grep -aE '^(route of|cluster info|topic list|KV|after|NameServer config|write permission|created|sent|consumed|PASS|FAIL)' "$log" | cut -c1-400 || true
        if [ "$held" = 1 ]; then
            pass=$((pass + 1))
        else
            echo "--- client log (tail)"; tail -n 30 "$log" | cut -c1-400
            fail=$((fail + 1))
            echo "interop check failed: $what"
            echo "--- rocketns log (tail)"; tail -n 40 "$work/rocketns-9876.log" || true
            echo "--- broker log (tail)"; tail -n 40 "$work/broker.log" || true
        fi
    }

    # rocketns on PORT, with any further properties lines given, once it accepts connections.
    start_rocketns() {
        local port=$1; shift
        {
            printf 'bindAddress=127.0.0.1\nlistenPort=%s\nkvConfigPath=%s/namesrv-%s/kvConfig.json\n' "$port" "$work" "$port"
            printf '%s\n' "$@"
        } > "$work/namesrv-$port.properties"
        RUST_LOG="${ROCKETNS_LOG:-info}" "$ROOT/target/debug/rocketns" -c "$work/namesrv-$port.properties" > "$work/rocketns-$port.log" 2>&1 &
        ns_pids+=($!)
        for _ in $(seq 100); do
            (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
            sleep 0.1
        done
    }

    for port in 9876 9877 9878; do
        start_rocketns "$port"
    done

    # A fourth rocketns, alone, with access control on: the client's own ACL signer against it.
    printf 'interop-ak=interop-secret\n' > "$work/acl.properties"
    start_rocketns 9879 aclEnable=true "aclCredentialsPath=$work/acl.properties"

    # A fifth, TLS only, with a CA and a server certificate made for this run: the client's own TLS
    # (verifying the server against the CA) against it.
    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=rocketns-interop-ca \
        -keyout "$work/ca.key" -out "$work/ca.crt" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout "$work/tls.key" -out "$work/tls.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' > "$work/tls.ext"
    openssl x509 -req -in "$work/tls.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" -CAcreateserial -days 1 \
        -extfile "$work/tls.ext" -out "$work/tls.crt" 2>/dev/null
    start_rocketns 9880 tls.server.mode=enforcing "tls.server.certPath=$work/tls.crt" "tls.server.keyPath=$work/tls.key"

    mkdir -p "$work/store"
    cat > "$work/broker.toml" <<TOML
[broker]
namesrvAddr = "$NS_LIST"
brokerIp1 = "127.0.0.1"
listenPort = 10911
storePathRootDir = "$work/store"
autoCreateTopicEnable = true
# With slave acting master the broker sends a 10 s liveness timeout (heartbeatTimeoutMillis) with each
# registration, and it re-registers every 10 s: the SIGSTOP check below needs no 120 s wait. (Unlike Java's,
# this broker sends its BROKER_HEARTBEATs to a controller only, so registrations are what keep it alive.)
enableSlaveActingMaster = true
brokerNotActiveTimeoutMillis = 10000
registerNameServerPeriod = 10000

[broker.brokerServerConfig]
bindAddress = "127.0.0.1"

[broker.brokerIdentity]
brokerName = "broker-a"
brokerClusterName = "DefaultCluster"
brokerId = 0

[store]
storeType = "LocalFile"
mappedFileSizeCommitLog = 67108864
maxHashSlotNum = 50000
maxIndexNum = 200000
brokerRole = "ASYNC_MASTER"
storePathRootDir = "$work/store"
haListenAddress = "127.0.0.1"
haListenPort = 10912
TOML
    ROCKETMQ_HOME="$work" HOME="$work" "$broker_bin" -c "$work/broker.toml" -n "$NS_LIST" > "$work/broker.log" 2>&1 &
    broker_pid=$!
    for _ in $(seq 300); do
        (exec 3<>/dev/tcp/127.0.0.1/10911) 2>/dev/null && break
        broker_down && break
        sleep 0.1
    done

    check "the broker registers (cluster info lists broker-a)" wait-broker "$NS_ADDR" broker-a 90
    check "TBW102 is routed (registered by the broker with autoCreateTopicEnable)" route "$NS_ADDR" TBW102 present 30
    check "create a topic through the broker, send and consume 1000 messages" produce-consume "$NS_ADDR" InteropTopic 1000
    check "a producer sends to an uncreated topic via TBW102; its route appears" auto-create "$NS_ADDR" AutoCreatedTopic
    check "admin API: cluster info, topic list, KV, config, write permission" admin "$NS_ADDR" broker-a InteropTopic
    check "access control: writes signed by the client's AclClientRPCHook are accepted, others refused" acl 127.0.0.1:9879 interop-ak interop-secret
    check "TLS: the client's own TLS is served in enforcing mode, plain TCP is not" tls 127.0.0.1:9880 "$work/ca.crt"
    check "the broker registered with the second replica too" wait-broker 127.0.0.1:9877 broker-a 60
    check "... and with the third" wait-broker 127.0.0.1:9878 broker-a 60
    echo "--- replicas: producing through all three while two are killed (SIGKILL) after 4 s"
    ( sleep 4; kill -9 "${ns_pids[0]}" "${ns_pids[1]}" 2>/dev/null ) &
    check "a client keeps producing with two of three NameServers killed" replicas "$NS_LIST" InteropTopic 12 AutoCreatedTopic
    check "the surviving replica still routes the topic" route 127.0.0.1:9878 InteropTopic present 10
    echo "--- freezing the broker (SIGSTOP): its connections stay open, its heartbeats stop"
    kill -STOP "$broker_pid"
    frozen_at=$SECONDS
    check "a frozen broker is removed once its 10 s timeout passes without a registration, plus a scan" route 127.0.0.1:9878 InteropTopic absent 40
    echo "(removed $((SECONDS - frozen_at)) s after SIGSTOP)"
    kill -CONT "$broker_pid"
    check "... and routed again once it resumes and re-registers" route 127.0.0.1:9878 InteropTopic present 60
    echo "--- stopping the broker (SIGTERM)"
    kill -TERM "$broker_pid" 2>/dev/null || true
    for _ in $(seq 150); do kill -0 "$broker_pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$broker_pid" 2>/dev/null || true
    broker_pid=""
    check "rocketns drops the routes of the stopped broker" route 127.0.0.1:9878 InteropTopic absent 30
    check "... including TBW102" route 127.0.0.1:9878 TBW102 absent 30
    check "... and the auto-created topic" route 127.0.0.1:9878 AutoCreatedTopic absent 30
    echo "interop: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}

if [ "${1:-}" = inner ]; then
    inner
    exit $?
fi

if [ "$(id -u)" != 0 ]; then
    echo "interop: needs root for a private network namespace (unshare --net)" >&2
    exit 1
fi
mkdir -p "$CACHE"
if ! command -v ip >/dev/null || ! command -v unshare >/dev/null || ! command -v openssl >/dev/null; then
    echo "interop: installing iproute2, util-linux and openssl (ip, unshare, a test certificate)"
    apt-get update -qq && apt-get install -y -qq iproute2 util-linux openssl
fi
bash "$ROOT/tests/interop/install.sh"
cargo build --quiet --manifest-path "$ROOT/Cargo.toml" --bin rocketns
exec unshare --net --mount -- bash -c 'ip link set lo up && exec "$0" inner' "${BASH_SOURCE[0]}"
