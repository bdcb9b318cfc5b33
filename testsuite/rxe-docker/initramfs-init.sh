#!/bin/sh
# /init of the guest's busybox initramfs (copied in by run.sh). Loads the modules listed in
# /modules/order, mounts the host's root (virtio-9p, read-only) under a tmpfs overlay, stacks it on "/"
# and runs the script named by rxescript= on the kernel command line; its exit status goes to the work
# share's .guest-rc. Then powers off.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r m; do insmod "/modules/$m" || echo "[init] insmod $m failed"; done < /modules/order
R=/newroot
mkdir -p /lower /rw "$R"
P9="trans=virtio,version=9p2000.L,msize=512000"
mount -t 9p -o "$P9,cache=loose,ro" hostroot /lower || { echo "[init] cannot mount the host root"; poweroff -f; }
mount -t tmpfs -o size=60% rw /rw && mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work "$R" ||
  { echo "[init] overlay mount failed"; poweroff -f; }
mount -t proc proc "$R/proc"
mount -t sysfs sysfs "$R/sys"
mount -t devtmpfs devtmpfs "$R/dev"
mkdir -p "$R/dev/pts" "$R/dev/shm"
mount -t devpts devpts "$R/dev/pts"
mount -t tmpfs tmpfs "$R/dev/shm"
mount -t tmpfs -o mode=755 tmpfs "$R/run"
# the work share under /run: /tmp stays the host's (overlaid), so a checkout under /tmp is seen too
mkdir -p "$R/run/rxe-work"
mount -t 9p -o "$P9" work "$R/run/rxe-work" || { echo "[init] cannot mount the work share"; poweroff -f; }
ip link set lo up
# The real root must be the root of the mount namespace (as after switch_root), not a chroot below it:
# runc joins a container's mount namespace with setns(), which resets the root to the namespace's root.
cd "$R" && mount --move . / && chroot . /bin/true || { echo "[init] cannot stack the root"; poweroff -f; }
SCRIPT=$(sed -n 's/.*rxescript=\([^ ]*\).*/\1/p' /proc/cmdline)
chroot . /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  /bin/bash "$SCRIPT"
rc=$?
echo "[init] $SCRIPT exited with $rc"
chroot . /bin/sh -c "echo $rc > /run/rxe-work/.guest-rc; sync"
echo o > /proc/sysrq-trigger
poweroff -f
