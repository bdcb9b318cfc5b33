#!/usr/bin/env bash
# Runs the whole test suite: the software device's C conformance tests, the library's unit and
# integration tests, and the testsuite module; then the RDMA tests on the Linux kernel's Soft-RoCE
# (rdma_rxe) in a qemu guest (testsuite/rxe-vm/run.sh; RDMA_RXE_VM=skip leaves it out). Installs
# missing prerequisites first.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/prereqs.sh
mvn -B -ntp verify "$@"
if [ "${RDMA_RXE_VM:-}" = skip ]; then
  echo "kernel rxe tests (testsuite/rxe-vm) skipped: RDMA_RXE_VM=skip"
else
  testsuite/rxe-vm/run.sh
fi
