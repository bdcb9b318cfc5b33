#!/usr/bin/env bash
# Runs the project's RDMA tests on the Linux kernel's Soft-RoCE driver (rdma_rxe) through the system rdma-core,
# on machines whose own kernel has no RDMA (CI, most laptops): Debian's stock kernel boots under qemu (TCG) with
# the host's root file system as its own (read-only virtio-9p under a tmpfs overlay), so the JDK, Maven's
# repository, rdma-core, perftest and this checkout are all there at the same paths. guest.sh sets up rxe and
# runs the tests; reports and logs land in the results directory on the host.
#
# usage: testsuite/rxe-vm/run.sh [--no-build | --prepare] [--shell | --script FILE]
#   --no-build     use the classes and the C test binary built by an earlier run
#   --prepare      install, download and build what the guest needs, then stop without booting it (so that a
#                  later --no-build run does no apt-get or Maven work: scripts/test.sh runs that one alongside
#                  testsuite/rxe-docker)
#   --shell        set up rxe in the guest and open a shell on the console instead of running the tests
#   --script FILE  set up rxe in the guest and run FILE with bash (in the checkout, with $addr and $device set)
#                  instead of the tests; for debugging. The guest sees the host's files at their host paths.
# environment:
#   RDMA_RXE_VM_PARTS    which parts run (default "c java perf faults"): the C conformance tests, the Java tests,
#                        perftest and the echo example, and rows of the fault matrix (docs/faults.md)
#   RDMA_RXE_VM_FAULT_ROWS  rows of the fault matrix the part "faults" runs (default "clean loss1 partition-short",
#                        CI's subset, about 3 min; "all" for the whole matrix of docs/faults.md, about 17 min; rows
#                        named in testsuite/rxe-vm/faults.sh)
#   RDMA_RXE_VM_ECHO_COUNT  echoes the echo example times (default 2000; EchoClient waits 120 s for them all)
#   RDMA_RXE_VM_OUT      results directory (default testsuite/target/rxe-vm; earlier results are removed)
#   RDMA_RXE_VM_CACHE    downloaded kernel and the initramfs (default ~/.cache/netty-transport-rdma/rxe-vm)
#   RDMA_RXE_VM_KERNEL   the Debian kernel package (default: the one linux-image-amd64 depends on)
#   RDMA_RXE_VM_KERNEL_SUITE  a Debian suite to take the kernel from instead of the machine's apt sources, e.g.
#                        trixie (6.12): its package list is kept in the cache, the machine's apt configuration is
#                        left alone (RDMA_RXE_VM_KERNEL_SUITE=trixie RDMA_RXE_VM_KERNEL=linux-image-6.12.117+deb13-amd64)
#   RDMA_RXE_VM_TIMEOUT  seconds the guest may run in all (default 1800); each part has its own, shorter limit
#   RDMA_RXE_VM_MEM, RDMA_RXE_VM_CPUS   guest memory in MiB (default 4096) and CPUs (default 2)
# Exit status: 0 when every part passed, 1 when a test failed, 2 when the guest or the setup failed.
# Runs as root (apt-get, and qemu reads the whole root file system) or with sudo for apt-get.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"   # depmod and modprobe, for users whose PATH lacks them

here=$(cd "$(dirname "$0")" && pwd)
project=$(cd "$here/../.." && pwd)
cache=${RDMA_RXE_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netty-transport-rdma/rxe-vm}
out=${RDMA_RXE_VM_OUT:-$project/testsuite/target/rxe-vm}
parts=${RDMA_RXE_VM_PARTS:-c java perf faults}
timeout_s=${RDMA_RXE_VM_TIMEOUT:-1800}
build=yes
mode=test
script=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=no ;;
    --prepare) mode=prepare ;;
    --shell) mode=shell ;;
    --script) mode=script; script=$(realpath "${2:?--script needs a file}"); shift ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
  esac
  shift
done

log() { echo "[rxe-vm $(date +%T)] $*" >&2; }
die() { log "$*"; exit 2; }
started=$(date +%s)

case "$project$out$cache" in
  *' '*) die "the project, results and cache paths must not contain spaces (they go on the guest's command line)" ;;
esac

sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
apt_updated=no
apt_update() {
  if [ "$apt_updated" = no ]; then
    $sudo_cmd apt-get update -qq
    apt_updated=yes
  fi
}

# qemu and the initramfs tools; rdma-core with its rxe provider (ibverbs-providers), perftest and the headers the
# C tests are built against. The JDK and Maven come from scripts/prereqs.sh.
packages="qemu-system-x86 busybox-static kmod cpio iproute2 rdma-core ibverbs-providers ibverbs-utils
  rdmacm-utils perftest libibverbs-dev librdmacm-dev gcc make maven"
install_packages() {
  command -v apt-get >/dev/null && command -v dpkg-query >/dev/null ||
    die "this runner needs Debian's apt-get and dpkg (Debian 12 or a derivative)"
  local missing="" p
  for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    log "installing Debian packages:$missing"
    apt_update
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends $missing >/dev/null
  fi
}

# The guest kernel: a Debian kernel package downloaded and unpacked into the cache, never installed on the host.
# The package lists are refreshed only when they cannot name or deliver the kernel.
kernel_dir=""
# With RDMA_RXE_VM_KERNEL_SUITE, apt reads a sources list and package lists of its own under the cache.
apt_opts=()
suite=${RDMA_RXE_VM_KERNEL_SUITE:-}
if [ -n "$suite" ]; then
  apt_dir=$cache/apt-$suite
  apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=- -o "Dir::State::Lists=$apt_dir/lists"
    -o "Dir::Cache=$apt_dir/cache" -o APT::Get::List-Cleanup=0)
fi
suite_lists() {
  if [ -n "$suite" ] && [ ! -f "$apt_dir/lists/.updated" ]; then
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
    echo "deb http://deb.debian.org/debian $suite main" >"$apt_dir/sources.list"
    apt-get "${apt_opts[@]}" update -qq || die "apt-get update of $suite failed"
    touch "$apt_dir/lists/.updated"
  fi
}
kernel_package() {
  if [ -n "${RDMA_RXE_VM_KERNEL:-}" ]; then
    echo "$RDMA_RXE_VM_KERNEL"
  else
    apt-cache "${apt_opts[@]}" depends linux-image-amd64 2>/dev/null |
      awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
  fi
}
download_kernel() { # $1 = package; leaves the .deb in $cache/debs
  rm -rf "$cache/debs"
  mkdir -p "$cache/debs"
  (cd "$cache/debs" && apt-get "${apt_opts[@]}" download -q "$1" 2>&1 | grep -v 'unsandboxed') || true
  ls "$cache/debs/$1"_*.deb >/dev/null 2>&1
}
fetch_kernel() {
  local pkg
  suite_lists
  pkg=$(kernel_package)
  if [ -z "$pkg" ]; then
    apt_update
    pkg=$(kernel_package)
    [ -n "$pkg" ] || die "cannot tell which kernel package linux-image-amd64 depends on (apt-cache depends)"
  fi
  kernel_dir=$cache/$pkg
  [ -f "$kernel_dir/.unpacked" ] && return 0
  log "downloading $pkg (unpacked into $kernel_dir, not installed)"
  if ! download_kernel "$pkg"; then
    [ "$apt_updated" = no ] || die "apt-get download $pkg failed"
    apt_update
    pkg=$(kernel_package)
    kernel_dir=$cache/$pkg
    download_kernel "$pkg" || die "apt-get download $pkg failed"
  fi
  rm -rf "$kernel_dir"
  dpkg-deb -x "$cache/debs/$pkg"_*.deb "$kernel_dir"
  rm -rf "$cache/debs"
  # trixie's kernels keep their modules under /usr (merged /usr)
  if [ ! -d "$kernel_dir/lib/modules" ] && [ -d "$kernel_dir/usr/lib/modules" ]; then
    mkdir -p "$kernel_dir/lib" && mv "$kernel_dir/usr/lib/modules" "$kernel_dir/lib/modules"
  fi
  depmod -b "$kernel_dir" "$(ls "$kernel_dir/lib/modules")"
  touch "$kernel_dir/.unpacked"
}

# busybox, the modules the guest needs (with their dependencies, in load order, as kmod resolves them) and init.
# virtio 9p and overlay for the root; crc32 implementations for rdma_rxe's ICRC (a crypto lookup, not a module
# dependency); dummy for an address rdma_cm accepts; veth for two-namespace tests; sch_netem for the fault matrix.
modules="virtio_pci 9pnet_virtio 9p overlay crc32_generic crc32-pclmul rdma_rxe ib_uverbs rdma_ucm dummy veth sch_netem"
initramfs=""
build_initramfs() {
  local version key root
  version=$(ls "$kernel_dir/lib/modules")
  key=$( (echo "$version $modules"; dpkg-query -W -f='${Version}' busybox-static; cat "$here/init"
    declare -f build_initramfs) | sha256sum | cut -c1-16)
  initramfs=$cache/initramfs-$key.cpio.gz
  [ -f "$initramfs" ] && return 0
  log "building the initramfs for $version"
  root=$(mktemp -d "$cache/initramfs.XXXXXX")
  mkdir -p "$root"/{bin,dev,proc,sys,modules}
  cp "$(command -v busybox)" "$root/bin/busybox"
  local applet
  for applet in $("$root/bin/busybox" --list); do
    [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
  done
  install -m 755 "$here/init" "$root/init"
  local m f
  for m in $modules; do
    modprobe -d "$kernel_dir" -S "$version" --show-depends "$m" || log "no module $m in kernel $version"
  done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' | while read -r f; do
    case "$f" in
      *.ko.xz) # busybox's insmod takes plain modules (newer Debian kernels ship them xz-compressed)
        xz -dc "$f" >"$root/modules/$(basename "$f" .xz)"
        basename "$f" .xz >>"$root/modules/load-order" ;;
      *) cp "$f" "$root/modules/"
        basename "$f" >>"$root/modules/load-order" ;;
    esac
  done
  [ -s "$root/modules/load-order" ] || die "no kernel modules found in $kernel_dir"
  (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$initramfs.tmp"
  mv "$initramfs.tmp" "$initramfs"
  rm -rf "$root"
  find "$cache" -maxdepth 1 -name 'initramfs-*.cpio.gz' ! -path "$initramfs" -delete
}

# Everything the guest runs is built here: the C tests against the system libraries, the Java test classes and
# their class path (with JUnit's console launcher), the echo example.
build_host() {
  log "building the C conformance tests (SYSTEM=1) and the Java test classes"
  make -s -C "$project/native/tests" build SYSTEM=1
  (cd "$project" && mvn -B -ntp -q -Prxe-vm -pl testsuite,examples/echo -am test-compile)
}

# Runs qemu (under a time limit) in the background and waits for it, so that the trap below can stop it.
qemu_pid=""
boot() {
  local kernel_image
  kernel_image=$(ls "$kernel_dir"/boot/vmlinuz-* | head -1)
  # No KVM: the machines this runs on either have none or one a stock kernel cannot boot on, so TCG.
  # -nic none: the guest has no network device at all; its RDMA traffic stays inside it.
  timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 -accel "tcg,thread=${RDMA_RXE_TCG_THREAD:-single}" -cpu max \
    -m "${RDMA_RXE_VM_MEM:-4096}" -smp "${RDMA_RXE_VM_CPUS:-2}" -nographic -no-reboot -nic none \
    -kernel "$kernel_image" -initrd "$initramfs" \
    -append "console=ttyS0 quiet panic=-1 rxevm.script=$here/guest.sh rxevm.out=$out" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs local,path="$out",mount_tag=out,security_model=none,multidevs=remap &
  qemu_pid=$!
  wait "$qemu_pid"
}
trap '[ -n "$qemu_pid" ] && kill "$qemu_pid" 2>/dev/null' EXIT
trap 'exit 130' INT TERM

install_packages
. "$project/scripts/prereqs.sh"
fetch_kernel
build_initramfs
if [ "$build" = yes ]; then
  build_start=$(date +%s)
  build_host
  log "host build: $(( $(date +%s) - build_start )) s"
fi
if [ "$mode" = prepare ]; then
  log "prepared: $(basename "$kernel_dir"), the C tests and the Java classes"
  exit 0
fi
[ -x "$project/native/tests/build-system/softrdma-tests" ] && [ -f "$project/testsuite/target/rxe-vm-classpath.txt" ] &&
  [ -f "$project/examples/echo/target/rxe-vm-classpath.txt" ] ||
  die "nothing built yet: run without --no-build"

mkdir -p "$out"
rm -rf "${out:?}"/{c,java,perf,faults} "$out"/*.txt "$out"/*.log "$out"/guest-exit "$out"/guest.conf
cat >"$out/guest.conf" <<EOF
project=$project
java_home=$JAVA_HOME
parts="$parts"
mode=$mode
script=$script
echo_count=${RDMA_RXE_VM_ECHO_COUNT:-2000}
fault_rows="${RDMA_RXE_VM_FAULT_ROWS:-clean loss1 partition-short}"
EOF
log "booting $(basename "$kernel_dir") under qemu (TCG); results in $out"
boot_start=$(date +%s)
qemu_rc=0
if [ "$mode" = shell ]; then
  boot || qemu_rc=$?
  exit 0
fi
# The guest's console, without the firmware's terminal control sequences, to the terminal and console.log.
boot </dev/null > >(sed -u 's/\x1bc//g; s/\x1b\[[0-9;?]*[a-zA-Z]//g' | tee "$out/console.log") 2>&1 || qemu_rc=$?
wait $! 2>/dev/null || true
qemu_pid=""
guest_s=$(( $(date +%s) - boot_start ))

echo
echo "== kernel rxe in a qemu guest: summary"
[ -f "$out/summary.txt" ] && cat "$out/summary.txt"
echo "guest: ${guest_s} s (qemu, from start to power-off); whole run: $(( $(date +%s) - started )) s;" \
  "host load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs (emulation slows down with it)"
if [ "$qemu_rc" = 124 ] || [ "$qemu_rc" = 137 ]; then
  echo "FAILED: the guest did not finish within RDMA_RXE_VM_TIMEOUT=${timeout_s} s"
  exit 2
fi
if [ ! -f "$out/guest-exit" ]; then
  echo "FAILED: the guest stopped before its script finished (qemu exit status $qemu_rc; see $out/console.log)"
  exit 2
fi
guest_rc=$(cat "$out/guest-exit")
if [ "$guest_rc" != 0 ]; then
  echo "FAILED (guest script exit status $guest_rc): reports and logs in $out"
  [ "$guest_rc" = 1 ] && exit 1
  exit 2
fi
echo "PASSED: reports and logs in $out"
