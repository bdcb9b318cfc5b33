#!/bin/bash
# Runs Debian's unmodified rdma-core / perftest programs against an RDMA library directory and checks
# exit codes and output. Proof of ABI fidelity of the software device.
#
# usage: rdma-core-utils.sh [LIBDIR]      LIBDIR: dir with libibverbs.so.1 + librdmacm.so.1
#                                         (default $SOFTRDMA_LIBDIR, else native/build/lib;
#                                          "system" = the installed rdma-core, no LD_LIBRARY_PATH)
# env: ADDR (default 127.0.0.1), UTIL_TIMEOUT (s per program, default 60), VERBOSE=1 (show outputs)
# prints one PASS/FAIL line per check and "N passed, N failed"; exit status 1 on any failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
LIBDIR=${1:-${SOFTRDMA_LIBDIR:-$HERE/../build/lib}}
ADDR=${ADDR:-127.0.0.1}
T=${UTIL_TIMEOUT:-60}
if [ "$LIBDIR" = system ]; then unset LD_LIBRARY_PATH; else
  [ -e "$LIBDIR/libibverbs.so.1" ] || { echo "no libibverbs.so.1 in $LIBDIR" >&2; exit 2; }
  export LD_LIBRARY_PATH=$(cd "$LIBDIR" && pwd)
fi
W=$(mktemp -d /tmp/sr-utils.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$W"' EXIT
PASS=0; FAIL=0; FAILED=""
pass() { PASS=$((PASS+1)); echo "PASS $1"; }
fail() { FAIL=$((FAIL+1)); FAILED="$FAILED  $1: $2"$'\n'; echo "FAIL $1: $2"
         [ -n "${3:-}" ] && [ -f "$3" ] && sed 's/^/    | /' "$3" | tail -15; }
show() { [ "${VERBOSE:-0}" = 1 ] && sed 's/^/    | /' "$1"; true; }
port() { echo $(( 20000 + (RANDOM % 20000) )); }

# run NAME OUTFILE CMD...   (foreground, under timeout)
run() { local n=$1 o=$2; shift 2; timeout -k 5 "$T" "$@" >"$o" 2>&1; }

# wait (max 15 s) until FILE matches REGEX (the server says it is listening), then a little more
ready() { local i; for i in $(seq 150); do grep -Eq "$2" "$1" 2>/dev/null && { sleep 0.3; return; }; sleep 0.1; done; }

# server/client pair: pair NAME "SERVER CMD" "CLIENT CMD" CLIENT_REGEX [SERVER_REGEX] [SERVER_READY_REGEX]
# A client that fails while its server is still up is run once more against a new server, not the same one: a
# perftest -R server that has taken the first of its two rdma_cm connections waits for the second, and a new
# client's first would meet that. Why a first attempt fails: perftest -R connects twice to the same port (the
# parameter exchange, then the test QPs), and its server listens again only after the first; addresses and routes
# resolve at once on the software device, so the client's second REQ can come before that listen and be refused.
pair() {
  local n=$1 s=$2 c=$3 re=$4 sre=${5:-} rdy=${6:-} sp crc src attempt
  for attempt in 1 2; do
    timeout -k 5 "$T" $s >"$W/$n.s" 2>&1 & sp=$!
    if [ -n "$rdy" ]; then ready "$W/$n.s" "$rdy"; else sleep 1.5; fi
    timeout -k 5 "$T" $c >"$W/$n.c" 2>&1; crc=$?
    if [ $crc = 0 ] || ! kill -0 $sp 2>/dev/null || [ $attempt = 2 ]; then break; fi
    echo "    (client failed with $crc while the server was up; once more with a new server; first attempt:)"
    sed 's/^/    1| /' "$W/$n.c" | tail -8
    kill $sp 2>/dev/null; wait $sp 2>/dev/null
  done
  src=0; wait $sp || src=$?
  show "$W/$n.s"; show "$W/$n.c"
  if [ $crc != 0 ]; then fail "$n" "client exit $crc" "$W/$n.c"; [ $crc = 124 ] && echo "    (timeout)"; sed 's/^/    s| /' "$W/$n.s" | tail -5; return; fi
  if [ $src != 0 ]; then fail "$n" "server exit $src" "$W/$n.s"; return; fi
  if [ -n "$re" ] && ! grep -Eq "$re" "$W/$n.c"; then fail "$n" "client output lacks /$re/" "$W/$n.c"; return; fi
  if [ -n "$sre" ] && ! grep -Eq "$sre" "$W/$n.s"; then fail "$n" "server output lacks /$sre/" "$W/$n.s"; return; fi
  pass "$n"
}

echo "rdma-core utilities against ${LD_LIBRARY_PATH:-the system libraries} (addr $ADDR)"

# ibv_devices
if run ibv_devices "$W/dev" ibv_devices && [ "$(grep -cEv '^\s*(device|------)' "$W/dev")" -ge 1 ]; then
  pass ibv_devices; show "$W/dev"; else fail ibv_devices "exit/empty list" "$W/dev"; fi

# ibv_devinfo (and -v: the GID of ::ffff:ADDR)
if run ibv_devinfo "$W/info" ibv_devinfo && grep -q PORT_ACTIVE "$W/info" && grep -Eq 'link_layer:\s+Ethernet' "$W/info"; then
  pass ibv_devinfo; show "$W/info"; else fail ibv_devinfo "exit, no PORT_ACTIVE or link_layer not Ethernet" "$W/info"; fi
run ibv_devinfo_v "$W/infov" ibv_devinfo -v
# pick device + GID index whose GID is ::ffff:ADDR (prefer RoCE v2)
awk -v a="::ffff:$ADDR" '
  /hca_id:/ {dev=$2}
  /GID\[ *[0-9]+\]:/ { line=$0; sub(/.*GID\[ */, "", line); idx=line; sub(/\].*/, "", idx);
     g=$0; sub(/.*\]:[ \t]*/, "", g); split(g, parts, ","); gid=parts[1]; gsub(/[ \t]/, "", gid);
     if (gid == a) { if (g ~ /v2/) { if (!v2) { v2=dev" "idx } } else if (!any) any=dev" "idx } }
  END { if (v2) print v2; else if (any) print any; else print "" }' "$W/infov" >"$W/gid"
read -r DEV GIDX <"$W/gid"
if [ -n "${DEV:-}" ]; then pass "ibv_devinfo -v (GID ::ffff:$ADDR = $DEV index $GIDX)"
else fail "ibv_devinfo -v" "no GID ::ffff:$ADDR listed" "$W/infov"; DEV=$(awk '/hca_id:/{print $2; exit}' "$W/info"); GIDX=0; fi

P=$(port)
pair ibv_rc_pingpong "ibv_rc_pingpong -d $DEV -g $GIDX -p $P -n 200" "ibv_rc_pingpong -d $DEV -g $GIDX -p $P -n 200 $ADDR" \
  'bytes in .* seconds' 'bytes in .* seconds'
P=$(port)
pair "ibv_rc_pingpong -e -c" "ibv_rc_pingpong -d $DEV -g $GIDX -p $P -n 100 -e -c -s 8192" \
  "ibv_rc_pingpong -d $DEV -g $GIDX -p $P -n 100 -e -c -s 8192 $ADDR" 'bytes in .* seconds'
P=$(port)
pair "rping -C 10" "rping -s -a $ADDR -p $P -C 10" "rping -c -a $ADDR -p $P -v -C 10" 'ping data: rdma-ping-9:'
if [ -f "$W/rping -C 10.c" ]; then
  n=$(grep -c 'ping data: rdma-ping-' "$W/rping -C 10.c"); [ "$n" = 10 ] || echo "    note: rping printed $n ping lines"
fi
P=$(port)
# -V: a data mismatch fails the exit status; the client may print nothing at all (whether its CM thread
# reports the DISCONNECT before main returns is a race in rping: output is no criterion)
pair "rping -V -S 4096" "rping -s -a $ADDR -p $P -C 20 -V -S 4096" "rping -c -a $ADDR -p $P -C 20 -V -S 4096" '' 
P=$(port)
pair ucmatose "ucmatose -b $ADDR -p $P -C 10 -c 2" "ucmatose -s $ADDR -p $P -C 10 -c 2" 'test complete' 'test complete' 'starting server'
for t in "ib_send_lat" "ib_write_bw" "ib_send_lat -R" "ib_write_bw -R" "ib_read_lat" "ib_send_bw"; do
  P=$(port)
  case "$t" in *-R*) G="-d $DEV" ;; *) G="-d $DEV -x $GIDX" ;; esac
  pair "$t -F" "$t $G -F -p $P -n 200" "$t $G -F -p $P -n 200 $ADDR" '^ *[0-9]+ +[0-9]+ +[0-9.]+' '' 'Waiting for client'
done

echo
[ -n "$FAILED" ] && printf 'failed:\n%s\n' "$FAILED"
echo "$PASS passed, $FAIL failed"
[ $FAIL = 0 ]
