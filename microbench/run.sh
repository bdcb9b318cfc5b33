#!/usr/bin/env bash
# The end-to-end benchmark harness: builds microbench (and what it needs) unless BENCH_NO_BUILD=1, then runs
# io.netty.contrib.channel.rdma.microbench.harness.Harness from the repository root with the given options
# (--quick, --transports, --out, --page, ...; --help lists them). Writes docs/benchmarks/ and docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/prereqs.sh
jar=microbench/target/microbenchmarks.jar
if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then
  mvn -B -ntp -q -DskipTests -pl microbench -am package
fi
exec java --enable-native-access=ALL-UNNAMED -cp "$jar" io.netty.contrib.channel.rdma.microbench.harness.Harness "$@"
