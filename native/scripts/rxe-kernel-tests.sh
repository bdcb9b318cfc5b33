#!/bin/bash
# Run the conformance suite against the Linux kernel's Soft-RoCE (rdma_rxe) with the system rdma-core.
# Must run as root on a kernel with rdma_rxe (e.g. inside the qemu guest of the rxe VM runner).
# Sets up rxe on a dummy netdev carrying 198.18.0.1 (the kernel's rdma_cm refuses loopback), then runs
# native/tests built with SYSTEM=1. Extra arguments go to the test runner (e.g. -v -t send_recv).
# env: SOFTRDMA_TEST_ADDR (default 198.18.0.1), SOFTRDMA_TEST_SKIP (default: the netns test, since
#      rxe on kernels < 7.x has no per-netns support), TESTS_BIN (default native/tests/build/softrdma-tests)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${TESTS_BIN:-$HERE/../tests/build-system/softrdma-tests}
ADDR=${SOFTRDMA_TEST_ADDR:-198.18.0.1}
[ -x "$BIN" ] || { echo "build the tests first: make -C native/tests build SYSTEM=1" >&2; exit 2; }
modprobe rdma_rxe 2>/dev/null; modprobe rdma_ucm 2>/dev/null
ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy
ip addr show dev dummy0 | grep -q "inet $ADDR/" || ip addr add "$ADDR/32" dev dummy0
ip link set dummy0 up; ip link set lo up
rdma link show | grep -q 'netdev dummy0' || rdma link add rxe_sr type rxe netdev dummy0 || exit 2
ulimit -l unlimited 2>/dev/null
export SOFTRDMA_TEST_ADDR=$ADDR
export SOFTRDMA_TEST_SKIP=${SOFTRDMA_TEST_SKIP-netns_two_hosts}
export SOFTRDMA_TEST_TIMEOUT_SCALE=${SOFTRDMA_TEST_TIMEOUT_SCALE:-4}   # TCG guests are slow
"$BIN" "$@"
