#!/usr/bin/env bash
# Runs the whole test suite: the software device's C conformance tests, the library's unit and
# integration tests, and the testsuite module; then the RDMA tests on the Linux kernel's Soft-RoCE
# (rdma_rxe) in a qemu guest (testsuite/rxe-vm/run.sh; RDMA_RXE_VM=skip leaves it out), and the examples
# across two Docker containers with their own rxe devices, against a Docker engine in a second qemu guest
# (testsuite/rxe-docker/run.sh; RDMA_RXE_DOCKER=skip leaves it out). Installs missing prerequisites first.
#
# The two guests run at the same time: each emulates its CPUs on one host thread (single-threaded TCG), so
# one after the other they would leave one of two cores idle for twenty minutes. What they install, download
# and build is done first, one after the other; the kernel rxe guest's output is printed when both are done.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/prereqs.sh
mvn -B -ntp verify "$@"
vm=yes docker=yes
if [ "${RDMA_RXE_VM:-}" = skip ]; then
  echo "kernel rxe tests (testsuite/rxe-vm) skipped: RDMA_RXE_VM=skip"; vm=no
fi
if [ "${RDMA_RXE_DOCKER:-}" = skip ]; then
  echo "kernel rxe tests in Docker containers (testsuite/rxe-docker) skipped: RDMA_RXE_DOCKER=skip"; docker=no
fi
if [ "$vm" = yes ] && [ "$docker" = no ]; then
  exec testsuite/rxe-vm/run.sh
fi
[ "$docker" = yes ] || exit 0
vm_rc=0 vm_pid="" vm_log=testsuite/target/rxe-vm-run.log
if [ "$vm" = yes ]; then
  testsuite/rxe-vm/run.sh --prepare
  testsuite/rxe-docker/run.sh prepare
  echo "kernel rxe guest (testsuite/rxe-vm) started; its output follows when the Docker guest is done ($vm_log)"
  testsuite/rxe-vm/run.sh --no-build >"$vm_log" 2>&1 &
  vm_pid=$!
  trap '[ -n "$vm_pid" ] && kill "$vm_pid" 2>/dev/null' EXIT
fi
docker_rc=0
testsuite/rxe-docker/run.sh || docker_rc=$?
if [ -n "$vm_pid" ]; then
  wait "$vm_pid" || vm_rc=$?
  vm_pid=""
  echo; echo "== testsuite/rxe-vm/run.sh (exit status $vm_rc)"
  cat "$vm_log"
fi
echo "kernel rxe guest: exit status $vm_rc; Docker guest: exit status $docker_rc"
[ "$vm_rc" = 0 ] && [ "$docker_rc" = 0 ]
