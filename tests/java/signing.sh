#!/usr/bin/env bash
# Signed NameServer requests from real Java software against a rocketns with aclEnable=true and one account:
# a Java 5.3.3 broker given that account in `innerClientAuthenticationCredentials` signs its registrations
# and is routed; an unsigned Java 4.9.7 broker is refused (NO_PERMISSION, logged by rocketns) and the routes
# stay as they were; mqadmin 5.3.3 signs with $ROCKETMQ_HOME/conf/tools.yml, and without it is refused.
# Runs in a loopback-only network namespace with its files on a tmpfs; needs root. INTEROP_KEEP=DIR keeps
# the logs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ROCKETNS=127.0.0.1:19877
ACCESS_KEY=rocketns-test
SECRET_KEY=s3cret-for-tests

# shellcheck source=tests/java/lib.sh
. "$ROOT/tests/java/lib.sh"
[ "${1:-}" = inner ] || prepare_java 5.3.3 4.9.7
enter_sandbox "${BASH_SOURCE[0]}" "$@"
sandbox_setup

printf '%s=%s\n' "$ACCESS_KEY" "$SECRET_KEY" > "$work/acl.properties"
start_rocketns 19877 aclEnable=true "aclCredentialsPath=$work/acl.properties" || exit 1
# A 5.3 broker given inner credentials also records them as a user of its own (ACL 2.0) at start, so it needs
# a place for users, or it does not start; its own authentication stays off.
broker broker-a "$JARS5" 10911 "$ROCKETNS" \
    "innerClientAuthenticationCredentials={\"accessKey\":\"$ACCESS_KEY\",\"secretKey\":\"$SECRET_KEY\"}" \
    authenticationMetadataProvider=org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider \
    "authConfigPath=$work/broker-a/auth"

# Reads need no signature (aclProtectReads=false), so mqadmin without credentials can look.
route_brokers() { mqadmin topicRoute -t "$1" -n "$ROCKETNS" | grep -o '"brokerName":"[^"]*"' | sort -u | tr '\n' ' '; }

for _ in $(seq 20); do
    [ -n "$(route_brokers broker-a)" ] && break
    sleep 1
done
{ [ "$(route_brokers TBW102)" = '"brokerName":"broker-a" ' ]; } && ok=0 || ok=1
verdict "$ok" "the 5.3.3 broker's signed registration is accepted: TBW102 routes to broker-a"
before=$(mqadmin topicRoute -t TBW102 -n "$ROCKETNS")

broker broker-b "$JARS4" 10921 "$ROCKETNS"
# The 4.9.7 broker registers as it starts; rocketns logs each refusal.
refused=""
for _ in $(seq 60); do
    refused=$(grep -c 'code 103 needs an ACL signature' "$work/rocketns-19877.log" || true)
    [ "$refused" -gt 0 ] && break
    sleep 1
done
{ [ "$refused" -gt 0 ] && [ "$(mqadmin clusterList -n "$ROCKETNS" | grep -c 'broker-b ' || true)" = 0 ]; } && ok=0 || ok=1
verdict "$ok" "the unsigned 4.9.7 broker is refused ($refused registrations refused) and not listed"
{ [ "$(mqadmin topicRoute -t TBW102 -n "$ROCKETNS")" = "$before" ]; } && ok=0 || ok=1
verdict "$ok" "TBW102's route is unchanged by the refused registrations"

# mqadmin: unsigned, then signed with tools.yml.
mqadmin updateOrderConf -t SignedTopic -m put -v broker-a:4 -n "$ROCKETNS" > "$work/unsigned.out"
unsigned=$(mqadmin updateOrderConf -t SignedTopic -m get -n "$ROCKETNS")
{ grep -q 'needs an ACL signature' "$work/unsigned.out" && ! grep -q 'broker-a:4' <<< "$unsigned"; } && ok=0 || ok=1
verdict "$ok" "mqadmin without credentials is refused: $(grep -o 'CODE: [0-9]*' "$work/unsigned.out" | head -n 1)"
printf 'accessKey: %s\nsecretKey: %s\n' "$ACCESS_KEY" "$SECRET_KEY" > "$work/conf/tools.yml"
mqadmin updateOrderConf -t SignedTopic -m put -v broker-a:4 -n "$ROCKETNS" > "$work/signed.out"
{ mqadmin updateOrderConf -t SignedTopic -m get -n "$ROCKETNS" | grep -q 'broker-a:4'; } && ok=0 || ok=1
verdict "$ok" "mqadmin signing with conf/tools.yml changes the order conf"
printf 'accessKey: %s\nsecretKey: %s\n' "$ACCESS_KEY" "not-the-secret" > "$work/conf/tools.yml"
mqadmin updateOrderConf -t SignedTopic -m put -v broker-a:2 -n "$ROCKETNS" > "$work/wrong.out"
{ grep -q 'signature check failed' "$work/wrong.out" && mqadmin updateOrderConf -t SignedTopic -m get -n "$ROCKETNS" | grep -q 'broker-a:4'; } && ok=0 || ok=1
verdict "$ok" "mqadmin with a wrong secret is refused and changes nothing"

echo "java signing: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
