#!/usr/bin/env bash
# In-process benchmarks (docs/benchmarks/in-process.md): raw verbs ping-pong between two threads of one C process
# (native/tests/floor pingpong) and InProcessEcho (RdmaChannel busy-poll and adaptive, Netty epoll) between two
# loops of one JVM, same sizes, same run. REPEAT (default 3) repeats of each row, median kept. Builds what it needs
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
floor=""
for size in 64 4096 65536; do
  runs=()
  for _ in $(seq "$repeat"); do
    # "... (round trip p50 X us)"
    runs+=("$(LD_LIBRARY_PATH=native/build/lib native/tests/build/floor pingpong -n 200000 -s "$size" \
      | sed -n 's/.*round trip p50 \([0-9.]*\) us).*/\1/p')")
  done
  median=$(printf '%s\n' "${runs[@]}" | sort -g | sed -n "$(( (repeat + 1) / 2 ))p")
  echo "raw verbs ${size} B: round trip p50 ${median} us (runs: ${runs[*]})"
  floor="${floor:+$floor,}${size}=${median}"
done
exec java --enable-native-access=ALL-UNNAMED -Dio.netty.contrib.rdma.libraryPath=bundled \
  -Dio.netty.leakDetection.level=disabled -cp "$jar" \
  io.netty.contrib.channel.rdma.microbench.harness.InProcessEcho --repeat "$repeat" --floor "$floor" \
  --out docs/benchmarks/in-process.md "$@"
