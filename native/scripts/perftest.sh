#!/bin/bash
# Benchmark floor of an RDMA library dir: perftest's ib_send_lat, ib_write_bw, ib_send_bw at 64, 4096
# and 65536 bytes (ib_write_bw also 1 MiB) on ADDR (loopback), printed as one table, with the floors
# measured in the same run (tests/floor.c: the raw-verbs ping-pong inside one process, TCP loopback
# between two processes) and the two ratios the device is held to. Numbers, not assertions.
# usage: perftest.sh [LIBDIR|system]   (default $SOFTRDMA_LIBDIR, else native/build/lib)
# env: ADDR (default 127.0.0.1), ITERS (default 5000 lat / 2000 bw), PT_TIMEOUT (s, default 120),
#      EXTRA (extra perftest flags, e.g. "-R" to connect through rdma_cm),
#      FLOOR (the floor program, default tests/build/floor; `make -C native perf` builds it)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
LIBDIR=${1:-${SOFTRDMA_LIBDIR:-$HERE/../build/lib}}
ADDR=${ADDR:-127.0.0.1}
T=${PT_TIMEOUT:-120}
if [ "$LIBDIR" = system ]; then unset LD_LIBRARY_PATH; else
  [ -e "$LIBDIR/libibverbs.so.1" ] || { echo "no libibverbs.so.1 in $LIBDIR" >&2; exit 2; }
  export LD_LIBRARY_PATH=$(cd "$LIBDIR" && pwd)
fi
W=$(mktemp -d /tmp/sr-perf.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$W"' EXIT
ibv_devinfo -v >"$W/infov" 2>&1
awk -v a="::ffff:$ADDR" '
  /hca_id:/ {dev=$2}
  /GID\[ *[0-9]+\]:/ { line=$0; sub(/.*GID\[ */, "", line); idx=line; sub(/\].*/, "", idx);
     g=$0; sub(/.*\]:[ \t]*/, "", g); split(g, parts, ","); gid=parts[1]; gsub(/[ \t]/, "", gid);
     if (gid == a && !f) { print dev, idx; f=1 } }' "$W/infov" >"$W/gid"
read -r DEV GIDX <"$W/gid"
[ -n "${DEV:-}" ] || { echo "no GID ::ffff:$ADDR found (ibv_devinfo -v)" >&2; exit 2; }
echo "perftest on ${LD_LIBRARY_PATH:-system libraries}: device $DEV gid index $GIDX addr $ADDR ${EXTRA:-}"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
FLOOR=${FLOOR:-$HERE/../tests/build/floor}
FLOOR_LAT= TCP_BW=
if [ -x "$FLOOR" ]; then
  f=$(timeout -k 5 "$T" "$FLOOR" pingpong -n ${ITERS:-5000}0 -s 64 2>&1) && echo "floor: $f" || echo "floor pingpong FAILED: $f"
  FLOOR_LAT=$(echo "$f" | sed -n 's/.*half round trip p50 \([0-9.]*\) us.*/\1/p')
  f=$(timeout -k 5 "$T" "$FLOOR" tcp -s 1048576 -t 3 2>&1) && echo "floor: $f" || echo "floor tcp FAILED: $f"
  TCP_BW=$(echo "$f" | sed -n 's/.*: \([0-9.]*\) MB\/s.*/\1/p')
fi
printf '%-12s %8s  %s\n' test bytes result
RC=0 LAT64= BW1M=
for t in ib_send_lat ib_write_bw ib_send_bw; do
  SIZES="64 4096 65536"; [ $t = ib_write_bw ] && SIZES="$SIZES 1048576"
  for s in $SIZES; do
    case $t in *lat) n=${ITERS:-5000} ;; *) n=${ITERS:-2000} ;; esac
    P=$(( 20000 + RANDOM % 20000 ))
    G="-d $DEV -x $GIDX"; case "${EXTRA:-}" in *-R*) G="-d $DEV" ;; esac
    # A client that fails while its server is up runs once more against a new server (perftest -R connects twice;
    # a server that took the first connection waits for the second: see rdma-core-utils.sh, pair).
    for attempt in 1 2; do
      timeout -k 5 "$T" $t $G -F -s $s -n $n -p $P ${EXTRA:-} >"$W/s" 2>&1 & sp=$!
      for i in $(seq 150); do grep -q 'Waiting for client' "$W/s" 2>/dev/null && break; sleep 0.1; done; sleep 0.3
      timeout -k 5 "$T" $t $G -F -s $s -n $n -p $P ${EXTRA:-} "$ADDR" >"$W/c" 2>&1; c=$?
      if [ $c = 0 ] || ! kill -0 $sp 2>/dev/null || [ $attempt = 2 ]; then break; fi
      kill $sp 2>/dev/null; wait $sp 2>/dev/null; P=$(( 20000 + RANDOM % 20000 ))
    done
    wait $sp; sr=$?
    line=$(awk '/#bytes/{h=1; next} h && /^ *[0-9]/{print; exit}' "$W/c")
    if [ $c != 0 ] || [ $sr != 0 ] || [ -z "$line" ]; then
      printf '%-12s %8s  FAILED (client %s, server %s)\n' $t $s $c $sr; tail -3 "$W/c" | sed 's/^/      | /'; RC=1; continue
    fi
    set -- $line
    case $t in *lat) [ $s = 64 ] && LAT64=$5 ;; esac
    [ $t = ib_write_bw ] && [ $s = 1048576 ] && BW1M=$4
    case $t in
      *lat) printf '%-12s %8s  t_min %s us  t_typical %s us  t_avg %s us  t_99%% %s us\n' $t $s $3 $5 $6 $8 ;;
      *)    printf '%-12s %8s  BW avg %s MB/s  peak %s MB/s  %s Mpps\n' $t $s $4 $3 $5 ;;
    esac
  done
done
if [ -n "$FLOOR_LAT" ] && [ -n "$LAT64" ]; then
  awk -v l="$LAT64" -v f="$FLOOR_LAT" 'BEGIN { printf "ib_send_lat 64 B between processes / in-process floor: %s / %s us = %.2f (goal <= 2)\n", l, f, l / f }'
fi
if [ -n "$TCP_BW" ] && [ -n "$BW1M" ]; then
  awk -v b="$BW1M" -v t="$TCP_BW" 'BEGIN { printf "ib_write_bw 1 MiB / TCP loopback: %s / %s MB/s = %.2f (goal >= 1)\n", b, t, b / t }'
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $RC
