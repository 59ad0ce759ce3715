#!/usr/bin/env bash
# Puts the jars of Java RocketMQ VERSION (tests/java/pom-VERSION.xml) into one folder and prints its path:
# $ROCKETNS_INTEROP_CACHE/java/VERSION (default ~/.cache/rocketns-interop). Maven's own cache (~/.m2) keeps
# the downloads; nothing is fetched when the folder is complete for the pom as it is (its marker holds the
# pom's checksum). Installs Maven and a JDK from Debian's packages when they are missing.
#   tests/java/fetch.sh 5.3.3
set -euo pipefail
version=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${ROCKETNS_INTEROP_CACHE:-$HOME/.cache/rocketns-interop}/java/$version
pom_sum=$(sha256sum "$here/pom-$version.xml" | cut -d' ' -f1)
if [ "$(cat "$cache/.complete" 2> /dev/null)" != "$pom_sum" ]; then
    if ! command -v mvn > /dev/null || ! command -v java > /dev/null; then
        echo "java: installing Maven and OpenJDK 17" >&2
        apt-get update -qq >&2 && apt-get install -y -qq maven openjdk-17-jdk-headless >&2
    fi
    echo "java: fetching RocketMQ $version with Maven" >&2
    rm -rf "$cache" && mkdir -p "$cache"
    # Maven's output (colour codes even in batch mode) goes to a log beside the jars, shown on a failure.
    log=$cache.maven.log
    if ! mvn -B -q -Dstyle.color=never -f "$here/pom-$version.xml" \
        org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$cache" > "$log" 2>&1; then
        echo "java: Maven failed; its log ($log):" >&2
        tail -n 40 "$log" >&2
        exit 1
    fi
    echo "$pom_sum" > "$cache/.complete"
fi
echo "$cache"
