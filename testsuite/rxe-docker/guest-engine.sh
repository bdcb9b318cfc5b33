#!/bin/bash
# Runs inside the qemu guest as its only job (run.sh boots the guest with it): starts a Docker engine
# (Debian's docker.io, unpacked by run.sh into the work folder) listening on tcp :2375, which qemu forwards
# to the host's 127.0.0.1, touches .ready in the work share and idles until run.sh touches .stop.
set -u
W=/run/rxe-work
. "$W/guest.env"          # ENGINE_DIR (the unpacked docker.io/containerd/runc), STOP_AFTER (s)
t() { cut -d' ' -f1 /proc/uptime; }
echo "[guest $(t)s] kernel $(uname -r)"
export PATH="$ENGINE_DIR/usr/sbin:$ENGINE_DIR/usr/bin:$PATH"
# qemu user-mode networking's fixed addresses; restrict=on lets the guest reach nothing beyond it
ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2
mount -t cgroup2 cgroup2 /sys/fs/cgroup
# overlay2 cannot use an overlayfs as its backing file system: the engine's data goes to a tmpfs
mkdir -p /var/lib/docker && mount -t tmpfs -o size=4g tmpfs /var/lib/docker
# --iptables=false: containers on one bridge network reach each other without NAT rules, and the host
# needs no iptables; --tls=false avoids a 15 s wait for the unencrypted TCP listener
dockerd -H unix:///run/docker.sock -H tcp://0.0.0.0:2375 --tls=false --iptables=false --ip-masq=false \
  --userland-proxy=false --storage-driver overlay2 --data-root /var/lib/docker --exec-root /run/docker \
  --pidfile /run/docker.pid > "$W/dockerd.log" 2>&1 &
engine=$!
for _ in $(seq 600); do docker version >/dev/null 2>&1 && break; sleep 0.2; done
echo "[guest $(t)s] engine $(docker version --format '{{.Server.Version}}' 2>&1)"
touch "$W/.ready"
for _ in $(seq "$STOP_AFTER"); do [ -f "$W/.stop" ] && break; sleep 1; done
echo "[guest $(t)s] stopping the engine"
dmesg > "$W/dmesg.log" 2>&1
docker ps -aq | xargs -r docker rm -f >/dev/null 2>&1
kill "$engine"; wait "$engine"
