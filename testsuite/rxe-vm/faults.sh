#!/bin/bash
# The fault matrix on kernel rxe (issue 29), run inside the rxe guest: by guest.sh's part "faults", or alone with
# `testsuite/rxe-vm/run.sh --script testsuite/rxe-vm/faults.sh`. A veth pair, each end with its own rxe device
# (rxefs for the server, rxefc for the client) and address, the traffic between the two forced through the pair
# (see setup_net), so tc netem / ip link / rdma link on them act on real RoCE v2 traffic. One FaultServerProcess JVM serves every row; each row runs one FaultClientProcess JVM (echo streams,
# every byte verified by position), applies its fault while the streams run, and records bytes verified,
# streams that survived, the time from the fault to each close and the cause, a new client's echo after the
# fault, the queue pairs left on both sides, Netty's PARANOID leak reports and JVM crashes.
#
# environment: FAULT_ROWS  the rows, in order (default: all of them; guest.sh passes RDMA_RXE_VM_FAULT_ROWS)
#              FAULT_OUT   results directory (default $out/faults, or /tmp/faults)
# Writes $FAULT_OUT/table.md (the table of docs/faults.md) and a log per JVM. Exit status 0 when every row is as
# expected, 1 otherwise.
set -u
project=${project:-$(cd "$(dirname "$0")/../.." && pwd)}
java_home=${java_home:-${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}}
java=$java_home/bin/java
fout=${FAULT_OUT:-${out:-/tmp}/faults}
# link-down before rows that need the server to connect again (until run 12 nothing connected after it: the CM
# messages of connections closed while the link was down; docs/ARCHITECTURE.md, "No CM message while a port is down")
all_rows="clean verbs-loss1 loss1 loss5 reorder delay duplicate partition-short partition-long link-down memlock device-delete"
rows=${FAULT_ROWS:-$all_rows}
[ "$rows" = all ] && rows=$all_rows
mkdir -p "$fout"
rm -f "$fout"/*.log "$fout"/table.md "$fout"/hs_err*

srv_if=vfs cli_if=vfc srv_dev=rxefs cli_dev=rxefc
srv_addr=198.18.9.1 cli_addr=198.18.9.2
# The retry budget of the partition rows: ACK_TIMEOUT 17 = 4.096 us x 2^17 = 536.9 ms, which kernel rxe turns
# into nsecs_to_jiffies (134 jiffies at HZ=250: 536 ms) and re-arms whenever its completer runs with packets
# unacknowledged; RETRY_COUNT 6: the first timeout and six retries, each a timeout, then RETRY_EXC_ERR. Budget:
# 7 x 536 ms = 3752 ms after the last acknowledgement. Why 6 and not fewer: rxe's completer also spends a retry on
# the first sequence NAK (a lost packet) and, while that retry is under way, ignores further NAKs, so a second
# loss before the next acknowledgement waits for a timeout and spends another: under 1 % loss, with an ACK asked
# for every 65 packets, a handful of such retries in a row happens. (rxe treats retry_cnt 7 as "retry forever",
# like rnr_retry 7: with the default RETRY_COUNT 7 a partition is never noticed there.)
ack_timeout=17 retry_count=6 budget_ms=3752
streams=2 seconds=12 fault_at=3
now_ms() { date +%s%3N; }
log() { echo "[faults $(cut -d' ' -f1 /proc/uptime)] $*"; }

cp="$project/netty-transport-rdma/target/test-classes:$project/testsuite/target/test-classes"
cp="$cp:$(cat "$project/testsuite/target/rxe-vm-classpath.txt")"
libdir=$(dirname "$(ldconfig -p | awk '$1 == "libibverbs.so.1" && /x86-64/ { print $NF; exit }')")
# FAULT_RING_SIZE: the channels' RING_SIZE on both sides (0: no receive rings, so no memory windows: large
# messages by SEND), to tell the transport's behaviour under a fault from that of rxe's memory windows
ring_size=${FAULT_RING_SIZE:-}
# FAULT_KERNEL_RXE_RINGS=true: offer receive rings on kernel rxe anyway (the transport offers none there by default,
# since rxe's retransmissions replay memory-window work: docs/faults.md, finding 1), to show what that does
rxe_rings=${FAULT_KERNEL_RXE_RINGS:-}
jvm=("$java" --enable-native-access=ALL-UNNAMED -XX:TieredStopAtLevel=1 -XX:+UseSerialGC
  -XX:ErrorFile="$fout/hs_err_pid%p.log" -Dio.netty.leakDetection.level=advanced
  -Dlogback.configurationFile="$project/testsuite/rxe-vm/logback.xml"
  -Dio.netty.contrib.rdma.libraryPath="$libdir" ${ring_size:+-Dfault.ringSize=$ring_size}
  ${rxe_rings:+-Dio.netty.contrib.rdma.kernelRxeRings=$rxe_rings} -cp "$cp")
pkg=io.netty.contrib.channel.rdma.testsuite.process

# Kernel 6.1's rxe has one UDP socket, in the initial network namespace, so a device on a netdev of another
# namespace sends but never receives (rdma_cm's requests time out: UNREACHABLE, -110). So both veth ends stay in
# the initial namespace, and policy routing makes each address reach the other through the veth pair instead of
# the local table (lo): locally sent packets to $srv_addr leave by $cli_if, to $cli_addr by $srv_if; arriving
# packets find the local table as usual; accept_local lets a packet (and an ARP request) from a local address in.
# The oif rules serve lookups bound to a device: rdma_cm's check that a connect request arrived on the netdev that
# routes back to its sender (without them the local table answers, and the server rejects: IB CM reason 28).
# Permanent neighbour entries: a partition drops ARP too, and a neighbour that failed its probes meanwhile would
# hold RoCE packets back after the heal (ARP's timers, not the transport's); a link down flushes them.
routes() {
  ip route replace $cli_addr dev $srv_if src $srv_addr table 101 &&
    ip route replace $srv_addr dev $cli_if src $cli_addr table 102 &&
    ip neigh replace $cli_addr lladdr "$(cat /sys/class/net/$cli_if/address)" dev $srv_if nud permanent &&
    ip neigh replace $srv_addr lladdr "$(cat /sys/class/net/$srv_if/address)" dev $cli_if nud permanent
}

# The devices' hardware counters (rxe: retries, sequence NAKs, RNR, ...): a snapshot, and what changed since one
counters() {
  local d f
  for d in $srv_dev $cli_dev; do
    for f in /sys/class/infiniband/$d/ports/1/hw_counters/*; do
      [ -f "$f" ] && echo "$d.$(basename "$f") $(cat "$f" 2>/dev/null || echo 0)"
    done
  done
}
counters_delta() { # $1 = earlier snapshot: the counters that moved, "name +n" joined by commas
  counters | awk 'NR == FNR { before[$1] = $2; next } $2 != before[$1] { printf "%s%s +%d", sep, $1, $2 - before[$1]; sep = ", " }' "$1" -
}
setup_net() {
  local i
  ip link add $srv_if type veth peer name $cli_if &&
    ip addr add $srv_addr/32 dev $srv_if && ip addr add $cli_addr/32 dev $cli_if &&
    ip link set $srv_if up && ip link set $cli_if up || return 1
  for i in all default $srv_if $cli_if; do
    sysctl -qw net.ipv4.conf.$i.rp_filter=0 net.ipv4.conf.$i.accept_local=1 || return 1
  done
  routes &&
    ip rule add pref 10 iif lo to $cli_addr lookup 101 &&
    ip rule add pref 11 iif lo to $srv_addr lookup 102 &&
    ip rule add pref 12 oif $srv_if to $cli_addr lookup 101 &&
    ip rule add pref 13 oif $cli_if to $srv_addr lookup 102 &&
    ip rule add pref 100 lookup local && ip rule del pref 0 lookup local &&
    rdma link add $srv_dev type rxe netdev $srv_if &&
    rdma link add $cli_dev type rxe netdev $cli_if &&
    ip rule show && ip route get $srv_addr && ip route get $cli_addr
}

# netem on both veth ends (each end's egress), so both directions see the fault; "off" removes it. One tc process
# for both ends: starting tc takes 0.2-0.8 s under emulation, so with two the first direction was cut that much
# before the second (run 12), and the fault's start (when its command returns) would be vague by as much.
shape() {
  if [ "$1" = off ]; then
    printf 'qdisc del dev %s root\nqdisc del dev %s root\n' $srv_if $cli_if | tc -force -batch - 2>/dev/null
  else
    printf 'qdisc replace dev %s root netem %s\n' $srv_if "$*" $cli_if "$*" | tc -batch -
  fi
  return 0
}

server_pid=""
start_server() {
  # the server's standard input: a FIFO in the guest's own /tmp (9p, the results directory, has none)
  local fifo=/tmp/fault-server.fifo
  rm -f $fifo
  mkfifo $fifo || return 1
  "${jvm[@]}" $pkg.FaultServerProcess $srv_addr 0 $ack_timeout \
    <$fifo >"$fout/server.log" 2>&1 &
  server_pid=$!
  exec 7>$fifo
  for _ in $(seq 1200); do
    grep -q '^PORT ' "$fout/server.log" && break
    kill -0 $server_pid 2>/dev/null || break
    sleep 0.1
  done
  port=$(sed -n 's/^PORT //p' "$fout/server.log")
  grpc_port=$(sed -n 's/^GRPC-PORT //p' "$fout/server.log")
  [ -n "$port" ] && [ -n "$grpc_port" ]
}
server_stats() { # the server's STATS line after the row
  local before
  before=$(grep -c '^STATS' "$fout/server.log")
  echo stats >&7
  for _ in $(seq 100); do
    [ "$(grep -c '^STATS' "$fout/server.log")" -gt "$before" ] && break
    sleep 0.1
  done
  grep '^STATS' "$fout/server.log" | tail -1
}

# the end of the device-delete row's fault: the delete has returned (30 s at most), then the device is added back
device_back() {
  for _ in $(seq 300); do
    kill -0 "${delete_pid:-0}" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "${delete_pid:-0}" 2>/dev/null; then
    echo "rdma link delete still blocked after 30 s (it waits for the processes that have $srv_dev open)" \
      >>"$fout/device-delete.txt"
  elif rdma link add $srv_dev type rxe netdev $srv_if; then
    echo "$srv_dev added back" >>"$fout/device-delete.txt"
  fi
}

# one row: $1 name, $2 expectation kind (throughput|close|port|degrade|removed), $3 fault start command, $4 fault end
# command ("" = none), $5 seconds from the start of the fault to its end; client wrapper in $client_prefix
row_results=()
run_row() {
  local name=$1 kind=$2 fault_on=$3 fault_off=$4 fault_s=$5
  local clog=$fout/client-$name.log t_fault="" t_heal="" cpid healed=/tmp/fault-healed
  log "row $name"
  counters >"$fout/counters-before.txt"
  rm -f $healed
  # shellcheck disable=SC2086
  ${client_prefix:-} "${jvm[@]}" -Dfault.healedFile=$healed $pkg.FaultClientProcess $srv_addr "$port" $seconds \
    $ack_timeout $retry_count $streams "$grpc_port" >"$clog" 2>&1 &
  cpid=$!
  for _ in $(seq 1800); do
    grep -q '^STREAMING' "$clog" && break
    kill -0 $cpid 2>/dev/null || break
    sleep 0.1
  done
  if grep -q '^STREAMING' "$clog" && [ -n "$fault_on" ]; then
    sleep $fault_at
    # what the server's children hold just before the fault (CHILD-STATE lines in server.log), and every queue
    # pair's state and sequence numbers as the kernel sees them (qps-<row>.txt)
    server_stats >/dev/null
    rdma res show qp >"$fout/qps-$name.txt" 2>&1
    local t_issue
    t_issue=$(now_ms)
    eval "$fault_on"
    # The fault is in effect once its command has returned (under emulation starting tc or ip takes 0.2-1.1 s):
    # the times to close count from then, and the fault lasts $fault_s from then; the command's own time is logged
    t_fault=$(now_ms)
    log "fault of $name applied in $((t_fault - t_issue)) ms"
    if [ -n "$fault_off" ]; then
      sleep "$fault_s"
      eval "$fault_off"
      t_heal=$(now_ms)
    fi
  fi
  # the client's new channel and new gRPC channel wait for this (under emulation a fault can outlast the streams)
  touch $healed
  # a stalled stream: its STALLED line comes 3 s before the client closes; the server's children meanwhile
  for _ in $(seq 3000); do
    kill -0 $cpid 2>/dev/null || break
    if grep -q '^STALLED' "$clog"; then
      server_stats >/dev/null
      rdma res show qp >"$fout/qps-$name-stalled.txt" 2>&1
      break
    fi
    sleep 0.1
  done
  timeout 300 tail --pid=$cpid -f /dev/null
  kill -9 $cpid 2>/dev/null
  wait $cpid
  local crc=$?
  sleep 2
  local stats
  stats=$(server_stats)
  counters_delta "$fout/counters-before.txt" >"$fout/counters-$name.txt"
  log "counters of $name: $(cat "$fout/counters-$name.txt")"
  verdict "$name" "$kind" "$clog" "$crc" "$t_fault" "$stats"
}

# the verdict of a row from the client's log: appends a table row and sets row_ok
failed=0
verdict() {
  local name=$1 kind=$2 clog=$3 crc=$4 t_fault=$5 stats=$6
  local result verified mism survived newc qps causes closes="" worst=0 ok=1 why=""
  result=$(grep '^RESULT' "$clog")
  verified=$(sed -n 's/.*verifiedBytes=\([0-9]*\).*/\1/p' <<<"$result")
  mism=$(sed -n 's/.*mismatches=\([0-9]*\).*/\1/p' <<<"$result")
  survived=$(sed -n 's/.*survived=\([0-9]*\).*/\1/p' <<<"$result")
  mbps=$(sed -n 's/.*MBps=\([0-9.]*\).*/\1/p' <<<"$result")
  newc=$(sed -n 's/^NEWCLIENT //p' "$clog")
  qps=$(sed -n 's/^CLIENT-QPS //p' "$clog")
  causes=$(sed -n 's/^STREAM .* cause=\(.*\) metric=.*/\1/p' "$clog" | sort | uniq -c | sed 's/^ *//' | paste -sd';')
  local pending
  pending=$(sed -n 's/^STREAM .* writesPending=\([0-9]*\).*/\1/p' "$clog" | awk '{ s += $1 } END { print s + 0 }')
  if [ -n "$t_fault" ]; then
    local c
    for c in $(sed -n 's/^STREAM .* closed=\([0-9]*\) .*/\1/p' "$clog"); do
      local d=$((c - t_fault))
      closes="$closes${closes:+,}$d"
      [ $d -gt $worst ] && worst=$d
    done
  fi
  # the gRPC calls beside the streams (FaultGrpc): GRPC calls=.. ok=.. failed=.. verifiedBytes=.. mismatches=..
  local grpc gcalls gok gfailed gbytes gmism gcodes gnew
  grpc=$(grep '^GRPC ' "$clog")
  gok=$(sed -n 's/.* ok=\([0-9]*\).*/\1/p' <<<"$grpc")
  gfailed=$(sed -n 's/.* failed=\([0-9]*\).*/\1/p' <<<"$grpc")
  gbytes=$(sed -n 's/.* verifiedBytes=\([0-9]*\).*/\1/p' <<<"$grpc")
  gmism=$(sed -n 's/.* mismatches=\([0-9]*\).*/\1/p' <<<"$grpc")
  gcodes=$(sed -n 's/.* failures=\([^ ]*\).*/\1/p' <<<"$grpc")
  gnew=$(sed -n 's/^GRPC-NEW //p' "$clog")
  [ "$gcodes" = none ] && gcodes=""
  [ -n "$grpc" ] || { ok=0; why="$why no GRPC line;"; }
  [ "${gmism:-1}" = 0 ] || { ok=0; why="$why gRPC mismatches;"; }
  [ -n "$result" ] || { ok=0; why="$why no RESULT (exit $crc);"; }
  [ "${mism:-1}" = 0 ] || { ok=0; why="$why mismatches;"; }
  [ "${pending:-1}" = 0 ] || { ok=0; why="$why $pending write promises never completed;"; }
  [ "${qps:-1}" = 0 ] || { ok=0; why="$why client QPs left ${qps:-?};"; }
  local stalled
  stalled=$(grep -c '^STALLED' "$clog")
  [ "$stalled" = 0 ] || { ok=0; why="$why $stalled streams stalled (open, no progress);"; }
  grep -q 'LEAK:' "$clog" && { ok=0; why="$why Netty leak report;"; }
  ls "$fout"/hs_err* >/dev/null 2>&1 && { ok=0; why="$why JVM crash;"; }
  case "$kind" in
    throughput)
      [ "$survived" = "$streams" ] || { ok=0; why="$why $((streams - ${survived:-0})) streams closed;"; }
      [ "${gfailed:-1}" = 0 ] && [ "${gok:-0}" -gt 0 ] || { ok=0; why="$why gRPC calls failed;"; }
      [[ "$newc" == ok* ]] || { ok=0; why="$why new client failed;"; } ;;
    close)
      [ "${survived:-1}" = 0 ] || { ok=0; why="$why $survived streams survived;"; }
      [ "$(grep -c '^STREAM .* closed=[0-9]' "$clog")" = "$streams" ] || { ok=0; why="$why not every stream closed;"; }
      [ -n "$closes" ] && [ "$worst" -le $((budget_ms + 1000)) ] ||
        { ok=0; why="$why close after ${worst} ms > budget + 1 s;"; }
      grep -q '^STREAM .*cause=.*RETRY_EXC_ERR' "$clog" || { ok=0; why="$why cause does not name retry exhaustion;"; }
      [[ "$newc" == ok* ]] || { ok=0; why="$why new client failed;"; } ;;
    port)
      [ "${survived:-1}" = 0 ] || { ok=0; why="$why $survived streams survived;"; }
      [ "$(grep -c '^STREAM .* closed=[0-9]' "$clog")" = "$streams" ] || { ok=0; why="$why not every stream closed;"; }
      [ -n "$closes" ] && [ "$worst" -le $((budget_ms + 1000)) ] ||
        { ok=0; why="$why close after ${worst} ms > budget + 1 s;"; }
      grep -q '^STREAM .*cause=.*IBV_EVENT_PORT_ERR' "$clog" || { ok=0; why="$why cause does not name the port;"; }
      [[ "$newc" == ok* ]] || { ok=0; why="$why new client failed;"; } ;;
    degrade)
      [[ "$newc" == ok* || "$newc" == FAILED*[Mm]em* ]] || { ok=0; why="$why new client: $newc;"; } ;;
    removed)
      [ "${survived:-1}" = 0 ] || { ok=0; why="$why $survived streams survived;"; }
      kill -0 "$server_pid" 2>/dev/null || { ok=0; why="$why server JVM gone;"; }
      grep -q 'rdma link delete: exit 0' "$fout/device-delete.txt" 2>/dev/null ||
        { ok=0; why="$why rdma link delete did not finish (the process kept the device);"; }
      grep -q '^CHILD-CLOSED .*was removed (RDMA_CM_EVENT_DEVICE_REMOVAL)' "$fout/server.log" ||
        { ok=0; why="$why no server child closed naming the removal;"; }
      grep -q '^LISTENING-AGAIN' "$fout/server.log" || { ok=0; why="$why the server did not listen again;"; }
      [[ "$newc" == ok* ]] || { ok=0; why="$why new client failed;"; }
      newc="$newc; $(paste -sd';' "$fout/device-delete.txt" 2>/dev/null); server $(grep -m1 '^LISTENING-AGAIN' "$fout/server.log")" ;;
  esac
  if [ "$kind" != degrade ]; then
    [[ "$gnew" == ok* ]] || { ok=0; why="$why new gRPC channel failed;"; }
  fi
  grep -q 'LEAK:' "$fout/server.log" && { ok=0; why="$why server leak report;"; }
  local verdict_s="as expected"
  [ "$ok" = 1 ] || { verdict_s="NOT as expected:$why"; failed=1; }
  local line
  line="| $name | ${verified:-?} B, ${mbps:-?} MB/s, ${mism:-?} mismatches; gRPC: ${gok:-?} calls ok, ${gfailed:-?}"
  line="$line failed${gcodes:+ ($gcodes)}, ${gbytes:-?} B verified, ${gmism:-?} mismatches | ${survived:-?}/$streams"
  line="$line | ${closes:--} | ${causes:-?} | new client: ${newc:-?}; new gRPC channel: ${gnew:-?} | client QPs ${qps:-?}, pending promises"
  line="$line ${pending:-?}; server ${stats#STATS } | $verdict_s |"
  echo "$line" >>"$fout/table.md"
  log "$line"
}

# perftest between the two devices under 1 % loss: what the verbs alone (RDMA WRITE and SEND of 64 KiB, RC)
# do with the same loss, without the transport
verbs_row() {
  local t ok_all=1 res="" rc
  log "row verbs-loss1"
  for t in ib_write_bw ib_send_bw; do
    timeout -k 5 120 $t -d $srv_dev -F -s 65536 -n 2000 >"$fout/$t-server.log" 2>&1 &
    local spid=$!
    sleep 3
    timeout -k 5 110 $t -d $cli_dev -F -s 65536 -n 2000 $srv_addr >"$fout/$t-client.log" 2>&1
    rc=$?
    wait $spid
    local err
    err=$(cat "$fout/$t-client.log" "$fout/$t-server.log" | grep -m1 -i 'status\|error\|failed' | tr -s ' |' ' ')
    if [ "$rc" = 0 ]; then
      res="$res $t: $(awk 'found { print $4 " MB/s"; exit } /#bytes/ { found = 1 }' "$fout/$t-client.log");"
    else
      ok_all=0
      res="$res $t: FAILED (exit $rc${err:+, $err});"
    fi
  done
  echo "| verbs-loss1 | perftest 64 KiB x 2000 under 1 % loss:$res | - | - | - | - | - |" \
    "$([ $ok_all = 1 ] && echo 'as expected' || echo 'NOT as expected: the verbs alone fail') |" >>"$fout/table.md"
  [ $ok_all = 1 ] || failed=1
}

{
  echo "Kernel $(uname -r), rdma-core $(dpkg-query -W -f='${Version}' libibverbs1 2>/dev/null), ACK_TIMEOUT" \
    "$ack_timeout, RETRY_COUNT $retry_count (budget $budget_ms ms)${ring_size:+, RING_SIZE $ring_size}${rxe_rings:+, kernelRxeRings $rxe_rings}."
  echo
  echo "| row | bytes verified, throughput, mismatches | streams survived | close after fault (ms) | cause |" \
    "recovery | leaks (after the row) | verdict |"
} >"$fout/table.md"
echo "|---|---|---|---|---|---|---|---|" >>"$fout/table.md"
ulimit -l unlimited
if ip link show $srv_if >/dev/null 2>&1 && rdma link show $srv_dev/1 >/dev/null 2>&1; then
  echo "the pair and its devices are there from an earlier run of this script" >"$fout/setup.log"
elif ! setup_net >"$fout/setup.log" 2>&1; then
  cat "$fout/setup.log"
  echo "| setup | FAILED: namespaces, veth or rdma link add (setup.log) |" >>"$fout/table.md"
  exit 1
fi
rdma link show >>"$fout/setup.log" 2>&1
if ! start_server; then
  echo "| setup | FAILED: the server did not start (server.log) |" >>"$fout/table.md"
  cat "$fout/server.log"
  exit 1
fi
log "server on $srv_addr:$port; rows: $rows; budget $budget_ms ms (ACK_TIMEOUT $ack_timeout, RETRY_COUNT $retry_count); kernel $(uname -r)${ring_size:+; RING_SIZE $ring_size}${rxe_rings:+; kernelRxeRings $rxe_rings}"
part_ms=$((budget_ms * 2))
part_s=$(awk -v m=$part_ms 'BEGIN { printf "%.3f", m / 1000 }')
for r in $rows; do
  client_prefix=""
  case "$r" in
    clean) run_row clean throughput "" "" 0 ;;
    loss1) shape loss 1%; run_row loss1 throughput "" "" 0; shape off ;;
    loss5) shape loss 5%; run_row loss5 throughput "" "" 0; shape off ;;
    reorder) shape delay 2ms reorder 25% 50%; run_row reorder throughput "" "" 0; shape off ;;
    delay) # jitter without reordering (the row reorder has its own): with a rate, netem never sends a packet
      # before the one ahead of it; without one, jitter this wide reorders nearly every back-to-back pair (run 8)
      shape delay 10ms 5ms distribution normal rate 1gbit; run_row delay throughput "" "" 0; shape off ;;
    duplicate) shape duplicate 2%; run_row duplicate throughput "" "" 0; shape off ;;
    partition-short) run_row partition-short throughput "shape loss 100%" "shape off" 1 ;;
    partition-long) run_row partition-long close "shape loss 100%" "shape off" "$part_s" ;;
    link-down) # the routes through the link go with it: back with it
      run_row link-down port "ip link set $srv_if down" "ip link set $srv_if up; routes" "$part_s" ;;
    memlock)
      # root holds CAP_IPC_LOCK, which the kernel's pinning checks before RLIMIT_MEMLOCK: drop it, then 16 MiB
      mkdir -p "$fout/bin"
      printf '#!/bin/bash\nulimit -l 16384 && exec "$@"\n' >"$fout/bin/memlock16m"
      chmod +x "$fout/bin/memlock16m"
      client_prefix="setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock $fout/bin/memlock16m"
      run_row memlock degrade "" "" 0 ;;
    device-delete)
      # The delete in the background (kernel rxe's removal waits, uninterruptibly, until every process has closed
      # the device, so timeout cannot end it); the fault's end waits for it, 30 s at most, and adds the device back,
      # so that the server, which binds its listener again, serves the new client and the rows after.
      rm -f "$fout/device-delete.txt"
      run_row device-delete removed \
        "(t0=\$(now_ms); timeout 60 rdma link delete $srv_dev; echo \"rdma link delete: exit \$? after \$((\$(now_ms) - t0)) ms\" >>$fout/device-delete.txt) & delete_pid=\$!" \
        "device_back" 0.1
      cat "$fout/device-delete.txt" 2>/dev/null ;;
    verbs-loss1) shape loss 1%; verbs_row; shape off ;;
    *) echo "| $r | unknown row |" >>"$fout/table.md"; failed=1 ;;
  esac
done
exec 7>&-
timeout 60 tail --pid=$server_pid -f /dev/null || kill -9 $server_pid 2>/dev/null
wait $server_pid
echo "server exit status $?" >>"$fout/server.log"
grep -q '^STOPPED' "$fout/server.log" || echo "| server | did not stop cleanly (server.log) |" >>"$fout/table.md"
rdma link show >"$fout/rdma-link-after.txt" 2>&1
cat "$fout/table.md"
exit $failed
