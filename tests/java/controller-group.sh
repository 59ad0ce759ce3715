# What tests/java/controller.sh and tests/java/controller-chaos.sh share: a three-node controller group on
# loopback (each node also the brokers' NameServer), three brokers of group broker-a, the Java 5.3.3 jars and
# the Failover client, the sandbox, and the helpers that ask the group. Sourced by such a script as
# `. controller-group.sh "${BASH_SOURCE[0]}" "$@"`, after it has set ROOT: the script's own path and
# arguments, since entering the sandbox runs the script again.
BUILT=$ROOT/target/java-clients
CONTROLLERS="127.0.0.1:9878;127.0.0.1:9868;127.0.0.1:9858"
PEERS="n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858"
NS_PORTS=(19876 19886 19896)
NAMESRVS="127.0.0.1:19876;127.0.0.1:19886;127.0.0.1:19896"
BROKER_PORTS=(10911 10921 10931)

# shellcheck source=tests/java/lib.sh
. "$ROOT/tests/java/lib.sh"
if [ "${2:-}" != inner ]; then
    prepare_java 5.3.3
    mkdir -p "$BUILT/failover"
    javac -nowarn -XDsuppressNotes -d "$BUILT/failover" -cp "$JARS5/*" "$ROOT/tests/java/clients/Failover.java"
fi
enter_sandbox "$@"
sandbox_setup

# rocketns's nodes sign their Raft frames with a shared secret, as a group of several nodes must
# (controllerPeerSecretFile; Java's DLedger has no such key).
printf '%s\n' "the controller stage's peer secret" > "$work/peer-secret"
SIGNED="controllerPeerSecretFile=$work/peer-secret"

ctl() { timeout 200 python3 "$ROOT/tests/java/controller.py" "$@"; }
java_client=(java -Xms64m -Xmx256m -Duser.home="$work/java-client" -Drocketmq.client.logRoot="$work/java-client-logs"
    -cp "$JARS5/*:$BUILT/failover" Failover)

# How many messages the producer has had acknowledged (the lines of $work/acked).
acked() { if [ -f "$work/acked" ]; then wc -l < "$work/acked"; else echo 0; fi; }
