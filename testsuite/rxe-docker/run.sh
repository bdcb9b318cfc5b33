#!/usr/bin/env bash
# Real Soft-RoCE in Docker containers on a machine whose kernel has no RDMA: boots a qemu guest with a
# kernel whose rdma_rxe works per network namespace, runs a Docker engine in it, forwards the engine's API to
# the host's 127.0.0.1 and runs RxeDockerEchoTest (Testcontainers) against it. See testsuite/README.md.
#
# usage: run.sh [all|prepare|up|test|down]
#   prepare  fetch and unpack (never install) the guest kernel and Debian's docker.io, build the initramfs and
#            the container image's root file system (debootstrap); cached in $RXE_DOCKER_WORK
#   up       boot the guest in the background, wait for its engine, import the image
#   test     mvn verify of testsuite/rxe-docker (and what it needs) with DOCKER_HOST pointing at the guest
#   down     stop the engine and the guest
#   all      prepare, up, test, down (the default); the guest is stopped also when a step fails
# env: RXE_DOCKER_WORK (/var/tmp/netty-rdma-rxe-docker),
#      RXE_DOCKER_PORT (23751, on 127.0.0.1), RXE_DOCKER_MEM (MiB, 6144), RXE_DOCKER_TIMEOUT (guest life, s, 1800),
#      JAVA_HOME (a JDK 25; default /usr/lib/jvm/*25*)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
W=${RXE_DOCKER_WORK:-/var/tmp/netty-rdma-rxe-docker}
PORT=${RXE_DOCKER_PORT:-23751}
IMAGE=netty-rdma-rxe:local
KDIR=$W/kernel
ENGINE=$W/engine
mkdir -p "$W/share"
log() { echo "[rxe-docker $(date -u +%T)] $*" >&2; }
api() { curl -sf --max-time 10 "http://127.0.0.1:$PORT$1" "${@:2}"; }


# apt over a private configuration in the work folder, so nothing changes in the host's apt state
apt_private() { # NAME "SOURCES LINE" apt-get|apt-cache ARGS...
  local d=$W/apt/$1 src=$2 tool=$3; shift 3
  mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
  echo "$src" > "$d/sources.list"
  "$tool" -o Dir::Etc::SourceList="$d/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o Dir::State::Lists="$d/lists" -o Dir::Cache="$d/cache" -o Dir::State::status=/dev/null "$@"
}

prepare() {
  local need=()
  command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
  [ -x /bin/busybox ] && /bin/busybox --list | grep -qx insmod || need+=(busybox-static)
  command -v cpio >/dev/null || need+=(cpio)
  command -v modprobe >/dev/null || need+=(kmod)
  command -v xz >/dev/null || need+=(xz-utils)
    command -v curl >/dev/null || need+=(curl)
  command -v ip >/dev/null || need+=(iproute2)
  if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi

  # 1. The guest kernel: Debian trixie-backports' (7.x). Debian 12's 6.1 and 13's 6.12 lack rxe's per-network-
  #    namespace sockets, and RDMA between two containers' netdevs then times out (RDMA_CM_EVENT_UNREACHABLE).
  if [ ! -f "$KDIR/.done" ]; then
    log "fetching the guest kernel (trixie-backports)"
    rm -rf "$KDIR" "$W/debs/kernel"; mkdir -p "$W/debs/kernel"
    local src="deb http://deb.debian.org/debian trixie-backports main"
    apt_private kernel "$src" apt-get -qq update
    local kv
    kv=$(apt_private kernel "$src" apt-cache depends linux-image-amd64 |
      awk '/Depends: linux-image-[0-9]/ {print substr($2, 13); exit}')
    [ -n "$kv" ] || { log "no linux-image-amd64 in trixie-backports"; exit 1; }
    log "guest kernel $kv"
    # for 7.x, linux-image-amd64 is a stub: the kernel is in linux-binary-*, its modules in linux-modules-*,
    # modules.builtin etc. in linux-base-*
    (cd "$W/debs/kernel" && apt_private kernel "$src" apt-get -q download "linux-binary-$kv" "linux-modules-$kv" "linux-base-$kv")
    mkdir -p "$KDIR"
    for p in "$W"/debs/kernel/*.deb; do dpkg-deb -x "$p" "$KDIR"; done
    ln -sfn usr/lib "$KDIR/lib"
    depmod -b "$KDIR" "$kv"
    touch "$KDIR/.done"
  fi
  local kv; kv=$(ls "$KDIR/usr/lib/modules")

  # 2. The Docker engine: Debian 12's docker.io, containerd and runc, unpacked (not installed) for the guest.
  if [ ! -f "$ENGINE/.done" ]; then
    log "fetching docker.io, containerd, runc (unpacked for the guest only)"
    rm -rf "$ENGINE" "$W/debs/engine"; mkdir -p "$W/debs/engine" "$ENGINE"
    local src="deb http://deb.debian.org/debian bookworm main"
    apt_private engine "$src" apt-get -qq update
    (cd "$W/debs/engine" && apt_private engine "$src" apt-get -q download docker.io containerd runc)
    for p in "$W"/debs/engine/*.deb; do dpkg-deb -x "$p" "$ENGINE"; done
    touch "$ENGINE/.done"
  fi

  # 3. The initramfs: busybox and the modules the guest needs, resolved with their dependencies by kmod.
  local initrd=$W/initramfs.cpio.gz
  if [ ! -f "$initrd" ] || [ "$here/initramfs-init.sh" -nt "$initrd" ]; then
    log "building the initramfs"
    local r=$W/initramfs; rm -rf "$r"; mkdir -p "$r"/{bin,proc,sys,dev,modules}
    cp /bin/busybox "$r/bin/busybox"
    for a in $("$r/bin/busybox" --list); do [ "$a" = busybox ] || ln -s busybox "$r/bin/$a"; done
    cp "$here/initramfs-init.sh" "$r/init"
    local m f b
    for m in virtio_pci virtio_net 9pnet_virtio 9p overlay rdma_rxe ib_uverbs rdma_ucm bridge veth; do
      modprobe -d "$KDIR" -S "$kv" --show-depends "$m"
    done | awk '$1 == "insmod" && !seen[$2]++ {print $2}' | while read -r f; do
      b=$(basename "$f")
      case "$f" in   # busybox's insmod wants uncompressed modules
        *.xz) b=${b%.xz}; xz -dc "$f" > "$r/modules/$b" ;;
        *.zst) b=${b%.zst}; zstd -qdc "$f" > "$r/modules/$b" ;;
        *) cp "$f" "$r/modules/$b" ;;
      esac
      echo "$b" >> "$r/modules/order"
    done
    (cd "$r" && find . | cpio -o -H newc --quiet | gzip -1 > "$initrd")
  fi

  # 4. The container image: no distribution of its own. Its /usr is the host's, bind-mounted read-only by the
  #    test (the guest sees the host's files at the same paths), so the containers run the host's rdma-core, its
  #    rxe provider, iproute2's rdma tool and the JDK. The image holds the merged-/usr symlinks, the few /etc
  #    files the dynamic linker and libibverbs read, and rxe-up: a few hundred KiB, built in a second.
  if [ ! -f "$W/image.tar" ] || [ "$here/rxe-up" -nt "$W/image.tar" ] || [ "$0" -nt "$W/image.tar" ]; then
    log "building the container image (the host's /usr, bind-mounted)"
    local rf=$W/rootfs d; rm -rf "$rf"; mkdir -p "$rf"/{usr,etc,tmp,root,proc,sys,dev,run,var/tmp,opt/rxe}
    chmod 1777 "$rf/tmp" "$rf/var/tmp"
    for d in bin lib lib64 sbin; do ln -s "usr/$d" "$rf/$d"; done
    for f in ld.so.cache ld.so.conf ld.so.conf.d libibverbs.d rdma passwd group nsswitch.conf; do
      [ -e "/etc/$f" ] && cp -a "/etc/$f" "$rf/etc/"
    done
    [ -d "$rf/etc/libibverbs.d" ] || { log "the host has no /etc/libibverbs.d: install ibverbs-providers"; exit 1; }
    install -m 755 "$here/rxe-up" "$rf/opt/rxe/rxe-up"
    tar -C "$rf" --numeric-owner -cf "$W/image.tar.part" . && mv "$W/image.tar.part" "$W/image.tar"
    rm -rf "$rf"
  fi
  cp "$here/guest-engine.sh" "$W/share/guest-engine.sh"
  log "prepared: kernel $kv, image $(du -h "$W/image.tar" | cut -f1)"
}

boot() { # starts qemu in the background; its pid goes to $W/qemu.pid
  local vmlinuz f
  for f in "$KDIR"/boot/vmlinuz-* "$KDIR"/usr/lib/modules/*/vmlinuz; do [ -f "$f" ] && vmlinuz=$f && break; done
  [ -n "${vmlinuz:-}" ] || { log "no kernel image in $KDIR"; exit 1; }
  rm -f "$W/share/.ready" "$W/share/.stop" "$W/share/.guest-rc"
  printf 'ENGINE_DIR=%s\nSTOP_AFTER=%s\n' "$ENGINE" "${RXE_DOCKER_TIMEOUT:-1800}" > "$W/share/guest.env"
  # No KVM here: TCG. The only NIC is qemu's user-mode one with restrict=on (the guest reaches nothing);
  # its one forward makes the engine's port 2375 the host's 127.0.0.1:$PORT.
  setsid timeout "$(( ${RXE_DOCKER_TIMEOUT:-1800} + 60 ))" qemu-system-x86_64 -accel "tcg,thread=${RDMA_RXE_TCG_THREAD:-single}" -cpu max \
    -smp 2 -m "${RXE_DOCKER_MEM:-6144}" -nographic -no-reboot \
    -nic "user,model=virtio-net-pci,restrict=on,hostfwd=tcp:127.0.0.1:$PORT-:2375" \
    -kernel "$vmlinuz" -initrd "$W/initramfs.cpio.gz" \
    -append "console=ttyS0 quiet panic=-1 rxescript=/run/rxe-work/guest-engine.sh" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$W/share,mount_tag=work,security_model=none" \
    > "$W/guest.log" 2>&1 < /dev/null &
  echo $! > "$W/qemu.pid"
}

up() {
  if api /_ping >/dev/null; then log "an engine already answers on 127.0.0.1:$PORT"; else
    [ -f "$W/share/guest-engine.sh" ] || { echo "run '$0 prepare' first" >&2; exit 1; }
    local s=$SECONDS attempt
    # The 7.x kernel sometimes panics early in boot under multi-threaded TCG (an int3 while it patches its
    # own code, seen once in three boots): a guest that stops before its engine is up is booted again.
    for attempt in 1 2 3; do
      boot
      until [ -f "$W/share/.ready" ]; do
        kill -0 "$(cat "$W/qemu.pid")" 2>/dev/null || break
        [ $((SECONDS - s)) -lt 300 ] || { tail -20 "$W/guest.log" >&2; log "no engine after 300 s"; down; exit 1; }
        sleep 1
      done
      [ -f "$W/share/.ready" ] && break
      tail -5 "$W/guest.log" >&2; log "the guest stopped before its engine was up (boot $attempt)"
      [ "$attempt" = 3 ] && exit 1
    done
    log "guest and engine up in $((SECONDS - s)) s"
  fi
  api /_ping >/dev/null || { log "the engine does not answer on 127.0.0.1:$PORT"; exit 1; }
  if ! api "/images/$IMAGE/json" >/dev/null; then
    local s=$SECONDS
    curl -sf --max-time 300 -X POST -H 'Content-Type: application/x-tar' --data-binary "@$W/image.tar" \
      "http://127.0.0.1:$PORT/images/create?fromSrc=-&repo=${IMAGE%:*}&tag=${IMAGE#*:}" > /dev/null
    log "image $IMAGE imported in $((SECONDS - s)) s"
  fi
}

run_tests() {
  export JAVA_HOME=${JAVA_HOME:-$(ls -d /usr/lib/jvm/*25* | head -1)}
  export DOCKER_HOST=tcp://127.0.0.1:$PORT TESTCONTAINERS_RYUK_DISABLED=true
  cd "$root"
  # upstream modules are built but only this module's tests run (-Dtest matches nothing elsewhere)
  local rc=0 report=$here/target/surefire-reports/TEST-io.netty.contrib.channel.rdma.testsuite.rxedocker.RxeDockerEchoTest.xml
  rm -f "$report"
  timeout 1200 mvn -B -ntp verify -pl testsuite/rxe-docker -am -Dnative.skipCheck=true \
    -Dtest='RxeDocker*' -Dsurefire.failIfNoSpecifiedTests=false -Drxe.docker.image="$IMAGE" "$@" || rc=$?
  # here the engine is expected: tests skipped (no engine, no image, no rdma_rxe) fail the run
  if [ "$rc" = 0 ] && { [ ! -f "$report" ] || grep -q 'skipped="[1-9]' "$report"; }; then
    log "RxeDockerEchoTest did not run (skipped or no report): see the reason above"; rc=1
  fi
  return "$rc"
}

down() {
  [ -f "$W/qemu.pid" ] || return 0
  local pid; pid=$(cat "$W/qemu.pid")
  if kill -0 "$pid" 2>/dev/null; then
    touch "$W/share/.stop"
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill "$pid" 2>/dev/null || true
  fi
  rm -f "$W/qemu.pid"
  log "guest stopped"
}

case "${1:-all}" in
  prepare) prepare ;;
  up) up ;;
  test) shift; run_tests "$@" ;;
  down) down ;;
  all)
    s=$SECONDS; trap down EXIT
    prepare; log "prepare: $((SECONDS - s)) s"
    up; log "up: $((SECONDS - s)) s"
    run_tests; log "all: $((SECONDS - s)) s"
    ;;
  *) echo "usage: $0 [all|prepare|up|test|down]" >&2; exit 2 ;;
esac
