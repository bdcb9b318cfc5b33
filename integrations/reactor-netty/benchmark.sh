#!/usr/bin/env bash
# reactor-netty over RDMA (RdmaLoopResources, bundled software device unless told otherwise) against reactor-netty
# over NIO in one JVM (ReactorNettyBenchmark): WebSocket small-frame bursts and HTTP/1.1 pipelining, as ratios from
# the same run. Arguments: warm-up seconds (default 3), measure seconds per row (default 5).
# Environment: MVN_OPTS for mvn (e.g. "-o -Dmaven.repo.local=..."); RDMA_LIBRARY_PATH (default bundled) for
# -Dio.netty.contrib.rdma.libraryPath; JAVA_OPTS for java, e.g. -Dbench.rearm=true (also run the pipelining rows
# with reads re-armed), -Dbench.pipeline=N, -Dbench.trace=true (see ReactorNettyBenchmark).
set -euo pipefail
cd "$(dirname "$0")/../.."
export JAVA_HOME="${JAVA_HOME:-$(ls -d /usr/lib/jvm/*25* | head -1)}"
# install: the classpath below names the sibling modules' jars (-DskipTests still compiles the test classes:
# the benchmark is one)
mvn -B -q -ntp ${MVN_OPTS:-} -pl integrations/reactor-netty -am install -DskipTests
mvn -B -q -ntp ${MVN_OPTS:-} -pl integrations/reactor-netty dependency:build-classpath \
  -Dmdep.includeScope=test -Dmdep.outputFile=target/classpath.txt
cd integrations/reactor-netty
exec "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED -Dio.netty.leakDetection.level=disabled ${JAVA_OPTS:-} \
  -Dio.netty.contrib.rdma.libraryPath="${RDMA_LIBRARY_PATH:-bundled}" \
  -cp "target/test-classes:target/classes:$(cat target/classpath.txt)" \
  io.netty.contrib.rdma.reactor.ReactorNettyBenchmark "$@"
