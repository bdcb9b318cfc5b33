#!/usr/bin/env bash
# gRPC over RdmaChannel against NIO in one JVM, or with --two-jvms each server in a JVM of its own
# (RpcThroughputBenchmark): large-message throughput and small-call latency, as ratios from the same run.
# Arguments: rounds (default 3), small calls per round (default 5000), one large call (1-8 MiB) after every how
# many small ones (default 64), optionally the RDMA loops' spin in ns; --two-jvms anywhere among them.
# RPC_JAVA_OPTS: JVM options for the client's JVM, whose -D properties the server JVMs of --two-jvms get too;
# -Drpc.segments=true prints each transport's two halves of a small call (caller to the service on the server's
# executor, and back), timed on the machine's one monotonic clock.
set -euo pipefail
cd "$(dirname "$0")/../.."
export JAVA_HOME="${JAVA_HOME:-$(ls -d /usr/lib/jvm/*25* | head -1)}"
# install: the classpath below names the sibling modules' jars
mvn -B -q -ntp ${MVN_OPTS:-} -pl examples/rpc -am install -DskipTests
mvn -B -q -ntp ${MVN_OPTS:-} -pl examples/rpc dependency:build-classpath -Dmdep.outputFile=target/classpath.txt
cd examples/rpc
exec "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED -Dio.netty.leakDetection.level=disabled ${RPC_JAVA_OPTS:-} \
  -cp "target/test-classes:target/classes:$(cat target/classpath.txt)" \
  io.netty.contrib.channel.rdma.examples.rpc.RpcThroughputBenchmark "$@"
