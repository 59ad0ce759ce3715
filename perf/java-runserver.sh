# The JVM options Java RocketMQ 5.x's bin/runserver.sh gives the NameServer on Java 9 and later, without its
# GC log: how users run the server rocketns replaces. Sourced by perf/compare.sh and perf/java-warmup.sh.
# shellcheck disable=SC2034
JAVA_RUNSERVER_OPTS="-server -Xms4g -Xmx4g -XX:MetaspaceSize=128m -XX:MaxMetaspaceSize=320m -XX:+UseG1GC
    -XX:G1HeapRegionSize=16m -XX:G1ReservePercent=25 -XX:InitiatingHeapOccupancyPercent=30
    -XX:SoftRefLRUPolicyMSPerMB=0 -XX:-OmitStackTraceInFastThrow -XX:-UseLargePages"
