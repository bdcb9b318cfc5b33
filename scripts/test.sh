#!/usr/bin/env bash
# Runs the whole test suite: the software device's C conformance tests, the library's unit and
# integration tests, and the testsuite module; then the RDMA tests on the Linux kernel's Soft-RoCE
# (rdma_rxe) in a qemu guest (testsuite/rxe-vm/run.sh; RDMA_RXE_VM=skip leaves it out), and the examples
# across two Docker containers with their own rxe devices, against a Docker engine in a second qemu guest
# (testsuite/rxe-docker/run.sh; RDMA_RXE_DOCKER=skip leaves it out). Installs missing prerequisites first.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/prereqs.sh
mvn -B -ntp verify "$@"
if [ "${RDMA_RXE_VM:-}" = skip ]; then
  echo "kernel rxe tests (testsuite/rxe-vm) skipped: RDMA_RXE_VM=skip"
else
  testsuite/rxe-vm/run.sh
fi
if [ "${RDMA_RXE_DOCKER:-}" = skip ]; then
  echo "kernel rxe tests in Docker containers (testsuite/rxe-docker) skipped: RDMA_RXE_DOCKER=skip"
else
  testsuite/rxe-docker/run.sh
fi
