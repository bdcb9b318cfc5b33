#!/bin/bash
# One full conformance round against the software device: (re)build the device if stale, then the test
# suite (plain and ASan+UBSan), rdma-core's utilities and the perftest floor. Logs in $OUT (default
# /tmp/softrdma-conformance). Prints each part's summary line; exit 1 if any part failed.
#   native/scripts/conformance.sh [--no-build] [--no-asan] [--no-utils] [--no-perf]
set -u
N=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/softrdma-conformance}; mkdir -p "$OUT"
BUILD=1 ASAN=1 UTILS=1 PERF=1
for a in "$@"; do case $a in --no-build) BUILD=0;; --no-asan) ASAN=0;; --no-utils) UTILS=0;; --no-perf) PERF=0;; esac; done
RC=0
if [ $BUILD = 1 ]; then
  make -C "$N" >"$OUT/build.log" 2>&1 || { echo "device build failed (see $OUT/build.log)"; RC=1; }
  [ $ASAN = 1 ] && { make -C "$N" asan >"$OUT/build-asan.log" 2>&1 || { echo "device asan build failed"; ASAN=0; RC=1; }; }
fi
make -C "$N/tests" build >"$OUT/tests-build.log" 2>&1 || { echo "test build failed"; tail "$OUT/tests-build.log"; exit 1; }
make -C "$N/tests" run >"$OUT/tests.log" 2>&1 || RC=1
echo "tests:        $(grep -E '^[0-9]+ passed' "$OUT/tests.log") $(grep -E '^[0-9]+ skipped' "$OUT/tests.log")  ($OUT/tests.log)"
if [ $ASAN = 1 ]; then
  make -C "$N/tests" asan >"$OUT/tests-asan.log" 2>&1 || RC=1
  echo "tests (asan): $(grep -E '^[0-9]+ passed' "$OUT/tests-asan.log")  ($OUT/tests-asan.log)"
fi
if [ $UTILS = 1 ]; then
  "$N/scripts/rdma-core-utils.sh" "$N/build/lib" >"$OUT/utils.log" 2>&1 || RC=1
  echo "rdma-core utils: $(tail -1 "$OUT/utils.log")  ($OUT/utils.log)"
fi
if [ $PERF = 1 ]; then
  "$N/scripts/perftest.sh" "$N/build/lib" >"$OUT/perftest.log" 2>&1 || RC=1
  sed -n '2,$p' "$OUT/perftest.log"
fi
exit $RC
