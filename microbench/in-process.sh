#!/usr/bin/env bash
# In-process benchmarks (docs/benchmarks/in-process.md): raw verbs ping-pong between two threads of one C process
# (native/tests/floor pingpong) and InProcessEcho (RdmaChannel busy-poll and adaptive, Netty epoll) between two
# loops of one JVM, same sizes, same run. REPEAT (default 3) repeats, each the floor then every transport (InProcessEcho
# runs the floor itself); medians kept, ratios taken within a repeat. Builds what it needs
# unless BENCH_NO_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/prereqs.sh
repeat="${REPEAT:-3}"
jar=microbench/target/microbenchmarks.jar
if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then
  mvn -B -ntp -q ${MVN_OPTS:-} -DskipTests -pl microbench -am package
fi
make -s -C native all && make -s -C native/tests floor BUILD=build LIBDIR=../build/lib
exec java --enable-native-access=ALL-UNNAMED -Dio.netty.contrib.rdma.libraryPath=bundled \
  -Dio.netty.leakDetection.level=disabled -cp "$jar" \
  io.netty.contrib.channel.rdma.microbench.harness.InProcessEcho --repeat "$repeat" \
  --floor-command native/tests/build/floor --floor-libraries native/build/lib \
  --out docs/benchmarks/in-process.md "$@"
