#!/bin/bash
# Runs inside the rxe guest (started by run.sh; root, in a copy-on-write view of the host's root file system):
# puts rdma_rxe on a dummy netdev and runs, against the system rdma-core, the parts listed in guest.conf:
#   c     the software device's C conformance tests, built against the system libraries
#   java  the raw-verbs tests of the FFM layer and the transport tests, in one JVM (JUnit console launcher)
#   perf  perftest ib_send_lat / ib_write_bw, then the echo example, for the RdmaChannel / verbs RTT ratio
#   faults  the fault matrix (faults.sh) on a veth pair with an rxe device on each end: the rows of fault_rows
# Reports and logs go to the results directory given as $1 (shared with the host); summary.txt has one line
# per part. Exit status: 0 when every part passed, 1 otherwise.
set -u
out=$1
. "$out/guest.conf"

# The kernel's rdma_cm refuses loopback addresses, so the device sits on a dummy netdev with an address of the
# benchmarking range (RFC 2544) that exists only inside this NIC-less guest.
addr=198.18.0.1
device=rxe0
failed=0
export JAVA_HOME=$java_home
java=$java_home/bin/java

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }
summary() { printf '%-26s %-56s %s\n' "$1" "$2" "${3:+$3 s}" | tee -a "$out/summary.txt"; }
progress() { echo "[rxe-vm guest $(cut -d' ' -f1 /proc/uptime)] $*"; }

setup_rxe() {
  ulimit -l unlimited
  ip link set lo up
  ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy
  ip addr add "$addr/32" dev dummy0
  ip link set dummy0 up
  rdma link add "$device" type rxe netdev dummy0 || return 1
  {
    echo "kernel $(uname -r), rdma-core $(dpkg-query -W -f='${Version}' libibverbs1)"
    rdma link show
    ibv_devinfo -d "$device"
  } >"$out/device.txt" 2>&1
}

# JUnit XML for the C runner's PASS / FAIL / SKIP lines, so CI sees every part's results the same way.
c_junit_xml() {
  awk '
    function esc(s) {
      gsub(/&/, "\\&amp;", s); gsub(/</, "\\&lt;", s); gsub(/>/, "\\&gt;", s); gsub(/"/, "\\&quot;", s)
      return s
    }
    function testcase(name, time, child) {
      n++
      cases = cases sprintf("  <testcase classname=\"native.conformance\" name=\"%s\" time=\"%s\"", esc(name), time)
      cases = cases (child == "" ? "/>\n" : ">" child "</testcase>\n")
    }
    /^(PASS|FAIL) [^ ]+ \([0-9.]+s\)/ {
      time = $3; gsub(/[()s:]/, "", time)
      if ($1 == "PASS") { testcase($2, time, ""); next }
      msg = $0; sub(/^FAIL [^ ]+ \([0-9.]+s\): ?/, "", msg); failures++
      testcase($2, time, "<failure message=\"" esc(msg) "\"/>")
    }
    /^SKIP [^ ]+: / {
      name = $2; sub(/:$/, "", name); msg = $0; sub(/^SKIP [^ ]+: /, "", msg); skipped++
      testcase(name, 0, "<skipped message=\"" esc(msg) "\"/>")
    }
    END {
      print "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
      printf "<testsuite name=\"native.conformance\" tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"%d\">\n",
        n, failures, skipped
      printf "%s</testsuite>\n", cases
    }' "$1"
}

run_c() {
  local t0 log rc passed failed_n skipped
  t0=$(now)
  mkdir -p "$out/c"
  log=$out/c/conformance.log
  progress "C conformance tests (native/tests, system rdma-core)"
  timeout -k 10 900 "$project/native/scripts/rxe-kernel-tests.sh" >"$log" 2>&1
  rc=$?
  c_junit_xml "$log" >"$out/c/TEST-native-conformance.xml"
  passed=$(grep -c '^PASS ' "$log")
  failed_n=$(grep -c '^FAIL ' "$log")
  skipped=$(grep -c '^SKIP ' "$log")
  local result="$passed passed, $failed_n failed, $skipped skipped"
  if [ "$rc" -ne 0 ] || [ "$failed_n" -ne 0 ] || ! grep -q '^[0-9]* passed, [0-9]* failed$' "$log"; then
    [ "$rc" = 124 ] && result="$result, TIMED OUT"
    result="FAILED: $result"
    failed=1
    grep '^FAIL ' "$log"
  fi
  summary "1 C conformance" "$result" "$(since "$t0")"
  sed -n 's/^SKIP \([^ ]*\): \(.*\)/  skipped \1: \2/p' "$log" | tee -a "$out/summary.txt"
}

# passed / failed / skipped test cases of the classes whose name matches $2 in the JUnit XML report $1
junit_counts() {
  awk -v pattern="$2" '
    /<testcase / { match($0, /classname="[^"]*"/); cls = substr($0, RSTART + 11, RLENGTH - 12); state = "pass"
                   if ($0 ~ /\/>[[:space:]]*$/) { tally(); next } ; next }
    /<(failure|error)[ >\/]/ { state = "fail" }
    /<skipped[ >\/]/ { if (state != "fail") state = "skip" }
    /<\/testcase>/ { tally() }
    function tally() { if (cls ~ pattern) count[state]++; cls = "" }
    END { printf "%d passed, %d failed, %d skipped", count["pass"], count["fail"], count["skip"] }' "$1"
}

# JUnit selectors: the raw-verbs classes of the FFM layer (part 2); the transport's own tests and a sample of
# Netty's testsuite classes (part 3). SslEcho has 192 parameter sets: seven of them cover JDK and OpenSSL
# engines on either side, renegotiation from either side, and the boolean options off and on.
rdma=io.netty.contrib.channel.rdma
ssl_echo="$rdma.testsuite.RdmaSslEchoTest#testSslEcho(io.netty.handler.ssl.SslContext,io.netty.handler.ssl.SslContext"
ssl_echo="$ssl_echo,io.netty.testsuite.transport.socket.SocketSslEchoTest\$Renegotiation"
ssl_echo="$ssl_echo,boolean,boolean,boolean,boolean,boolean,org.junit.jupiter.api.TestInfo)"
# "class.method: reason" for every skipped test case of the JUnit XML report $1 (the reason's first line, which the
# report keeps in the element's text or in its message attribute)
junit_skips() {
  awk '
    /<testcase / { match($0, /name="[^"]*"/); name = substr($0, RSTART + 6, RLENGTH - 7)
                   match($0, /classname="[^"]*"/); cls = substr($0, RSTART + 11, RLENGTH - 12); sub(/.*\./, "", cls) }
    /<skipped/ { msg = $0
                 if (match(msg, /message="[^"]*"/)) msg = substr(msg, RSTART + 9, RLENGTH - 10)
                 else { sub(/.*<!\[CDATA\[/, "", msg); sub(/\]\]>.*/, "", msg); sub(/<skipped\/?>.*/, "", msg) }
                 sub(/^org\.opentest4j\.TestAbortedException: Assumption failed: /, "", msg)
                 printf "  skipped %s.%s: %s\n", cls, name, msg }' "$1"
}

java_selectors=(
  --select-class="$rdma.internal.verbs.RawVerbsTest"
  --select-class="$rdma.internal.verbs.ManualConnectionTest"
  --select-class="$rdma.internal.verbs.CmFlowTest"
  --select-class="$rdma.internal.verbs.BindingMisuseTest"
  --select-class="$rdma.RdmaEchoTest"
  --select-class="$rdma.RdmaChannelLifecycleTest"
  --select-class="$rdma.RdmaProtocolVersionTest"
  --select-class="$rdma.RdmaReceiveCopyTest"
  --select-class="$rdma.RdmaKernelRxeRingsTest"
  --select-class="$rdma.RdmaSealTest"
  --select-class="$rdma.RdmaWriteCoalescingTest"
  --select-class="$rdma.RdmaUnsignaledSendTest"
  --select-class="$rdma.RdmaDiagnosticsTest"
  --select-class="$rdma.RdmaFabricOptionsTest"
  --select-class="$rdma.RdmaTcpPathTest"
  --select-class="$rdma.RdmaPortCountersTest"
  --select-class="$rdma.RdmaHugePagesTest"
  --select-class="$rdma.RdmaPinnedMemoryTest"
  --select-class="$rdma.RdmaPortEventsTest"
  --select-class="$rdma.testsuite.process.TwoProcessEchoTest"
  --select-class="$rdma.testsuite.RdmaEchoTest"
  --select-class="$rdma.testsuite.RdmaStringEchoTest"
  --select-class="$rdma.testsuite.RdmaHalfClosedTest"
  --select-iteration="method:$ssl_echo[0,31,37,74,100,140,181]"
)

# The system's libibverbs / librdmacm, named by their directory (io.netty.contrib.rdma.libraryPath), so that no
# test JVM picks the bundled software device by default.
system_library_dir() {
  dirname "$(ldconfig -p | awk '$1 == "libibverbs.so.1" && /x86-64/ { print $NF; exit }')"
}

# What roce-capture.py saw while the Java tests ran ($1): DSCP 26 in RoCE v2 packets, or why nothing was seen.
roce_dscp_summary() {
  local total
  total=$(sed -n 's/^total: \([0-9]*\) .*/\1/p' "$1")
  if [ -z "$total" ]; then
    summary "3 DSCP on the wire" "capture FAILED (see java/roce-capture.txt)" ""
    failed=1
  elif [ "$total" = 0 ]; then
    # rxe hands a packet whose destination MAC is its own netdev's straight to its receive path (rxe_loopback),
    # before any netdev or netfilter hook: with both ends on one device nothing reaches a capture.
    summary "3 DSCP on the wire" "not observable: 0 RoCE v2 packets on netdevs (rxe loopback, one device)" ""
  elif grep -q '^tos 104 dscp 26' "$1"; then
    summary "3 DSCP on the wire" "$(grep '^tos 104 dscp 26' "$1"); all: java/roce-capture.txt" ""
  else
    summary "3 DSCP on the wire" "FAILED: $total packets, none with TOS 104 (java/roce-capture.txt)" ""
    failed=1
  fi
}

run_java() {
  local t0 cp rc xml verbs transport
  t0=$(now)
  mkdir -p "$out/java"
  cp="$project/netty-transport-rdma/target/test-classes:$project/testsuite/target/test-classes"
  cp="$cp:$(cat "$project/testsuite/target/rxe-vm-classpath.txt")"
  progress "Java tests (one JVM)"
  # RdmaFabricOptionsTest connects with IP_TOS 104 (DSCP 26): count the RoCE v2 packets on the netdevs by TOS
  local capture
  python3 "$project/testsuite/rxe-vm/roce-capture.py" >"$out/java/roce-capture.txt" 2>&1 &
  capture=$!
  # C1 only and the serial collector: under emulation C2 compilations and GC threads cost more than they give
  # back in a run this short.
  # RDMA_TEST_NETDEV: RdmaPortEventsTest takes the device's port down and up through its netdev
  RDMA_TEST_NETDEV=dummy0 timeout -k 10 1200 "$java" --enable-native-access=ALL-UNNAMED -Xss2m \
    -XX:ErrorFile="$out/java/hs_err_pid%p.log" \
    -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
    -Dlogback.configurationFile="$project/testsuite/rxe-vm/logback.xml" \
    -Dio.netty.contrib.rdma.libraryPath="$(system_library_dir)" -Dio.netty.contrib.rdma.test.address="$addr" \
    -Dio.netty.contrib.rdma.kernelRxeRings=true \
    -cp "$cp" org.junit.platform.console.ConsoleLauncher execute --disable-banner --disable-ansi-colors \
    --details=testfeed --reports-dir="$out/java" "${java_selectors[@]}" >"$out/java/console.log" 2>&1
  rc=$?
  kill -TERM "$capture" 2>/dev/null
  wait "$capture" 2>/dev/null
  xml=$out/java/TEST-junit-jupiter.xml
  if [ ! -f "$xml" ]; then
    failed=1
    summary "2+3 Java tests" "FAILED: no report (exit status $rc; see java/console.log)" "$(since "$t0")"
    return
  fi
  verbs=$(junit_counts "$xml" '\.internal\.verbs\.')
  transport=$(junit_counts "$xml" '^io\.netty\.contrib\.channel\.rdma\.([A-Z]|testsuite\.)')
  if [ "$rc" -ne 0 ]; then
    failed=1
    [ "$rc" = 124 ] && transport="$transport, TIMED OUT"
    verbs="FAILED: $verbs"
    transport="FAILED: $transport"
    grep -A 12 ':: FAILED' "$out/java/console.log" | head -80
  fi
  summary "2 Java raw verbs" "$verbs" ""
  summary "3 Java transport" "$transport" ""
  summary "  (2 and 3: one JVM)" "" "$(since "$t0")"
  junit_skips "$xml" | tee -a "$out/summary.txt"
  roce_dscp_summary "$out/java/roce-capture.txt"
  local unchecked
  unchecked=$(grep -c 'leak check skipped' "$xml")
  if [ "$unchecked" -gt 0 ]; then
    echo "  $unchecked raw-verbs tests ran without their leak check (software device object counters only)" |
      tee -a "$out/summary.txt"
  fi
}

# Starts a perftest server and runs the client against it, again while the server is not listening yet (a
# loaded guest starts it slowly); $1 = log name, rest = arguments.
perftest() {
  local name=$1 server rc=1
  shift
  timeout -k 5 180 "$@" >"$out/perf/$name-server.log" 2>&1 &
  server=$!
  for _ in $(seq 30); do
    sleep 1
    kill -0 "$server" 2>/dev/null || break
    timeout -k 5 120 "$@" "$addr" >"$out/perf/$name.log" 2>&1
    rc=$?
    [ "$rc" = 0 ] && break
  done
  wait "$server" || rc=1
  return $rc
}

# the value in column $2 of the result row (the line after the header with "#bytes") of perftest log $1
perftest_column() {
  awk -v col="$2" 'found { print $col; exit } /#bytes/ { found = 1 }' "$1"
}

run_perf() {
  local t0 lat bw rtt="" p50 ratio server ok=1 log
  t0=$(now)
  mkdir -p "$out/perf"
  progress "perftest and the echo example"
  if perftest ib_send_lat ib_send_lat -d "$device" -R -F -s 64 -n 5000; then
    lat=$(perftest_column "$out/perf/ib_send_lat.log" 5)
    rtt=$(awk -v l="$lat" 'BEGIN { printf "%.2f", 2 * l }')
    summary "4 ib_send_lat -R -F -s 64" "typical ${lat} us one way, so RTT ${rtt} us" ""
  else
    ok=0
    summary "4 ib_send_lat -R -F -s 64" "FAILED (see perf/ib_send_lat*.log)" ""
  fi
  if perftest ib_write_bw ib_write_bw -d "$device" -R -F -s 65536 -n 1000; then
    bw=$(perftest_column "$out/perf/ib_write_bw.log" 4)
    summary "4 ib_write_bw -R -F 64 KiB" "average ${bw} MB/s" ""
  else
    ok=0
    summary "4 ib_write_bw -R -F 64 KiB" "FAILED (see perf/ib_write_bw*.log)" ""
  fi

  # The echo example as users run it (default JVM flags, the adaptive loop), one message in flight. Busy-poll
  # is left out: two spinning loops on the guest's two CPUs starve the JIT compiler threads under emulation.
  # A connection's setup can take tens of seconds under emulation: hence the longer connect timeout.
  local cp="$project/examples/echo/target/classes:$(cat "$project/examples/echo/target/rxe-vm-classpath.txt")"
  local echo_java=("$java" --enable-native-access=ALL-UNNAMED -cp "$cp")
  timeout -k 5 900 "${echo_java[@]}" io.netty.contrib.channel.rdma.examples.echo.EchoServer --address "$addr" \
    >"$out/perf/echo-server.log" 2>&1 &
  server=$!
  for _ in $(seq 1800); do
    grep -q 'listening on' "$out/perf/echo-server.log" && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  log=$out/perf/echo-64B.log
  if timeout -k 5 600 "${echo_java[@]}" io.netty.contrib.channel.rdma.examples.echo.EchoClient --address "$addr" \
      --size 64 --count "$echo_count" --connect-timeout 180 >"$log" 2>&1; then
    p50=$(sed -n 's/^round trip: p50 \([0-9.]*\) us.*/\1/p' "$log")
    ratio=$([ -n "$rtt" ] && awk -v a="$p50" -v b="$rtt" 'BEGIN { printf "%.1f", a / b }')
    summary "4 echo example, 64 B" "RTT p50 ${p50} us = ${ratio:-?} x ib_send_lat RTT" ""
  else
    ok=0
    summary "4 echo example, 64 B" "FAILED (see perf/echo-64B.log, perf/echo-server.log)" ""
  fi
  kill "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  # What a user's first look shows here (README, Diagnose): the system's rdma-core on the kernel's rxe.
  "${echo_java[@]}" io.netty.contrib.channel.rdma.internal.Main diagnose "$addr" >"$out/perf/diagnose.txt" 2>&1
  summary "4 diagnose $addr" "exit status $? ($(grep -m1 '^Problems' "$out/perf/diagnose.txt"); perf/diagnose.txt)" ""
  [ "$ok" = 1 ] || failed=1
  summary "4 perftest + echo" "$([ "$ok" = 1 ] && echo done || echo FAILED)" "$(since "$t0")"
}

run_faults() {
  local t0 rc
  t0=$(now)
  progress "fault matrix: ${fault_rows:-all}"
  FAULT_ROWS=${fault_rows:-all} FAULT_OUT=$out/faults project=$project java_home=$java_home \
    timeout -k 10 2400 bash "$project/testsuite/rxe-vm/faults.sh" >"$out/faults.log" 2>&1
  rc=$?
  local rows_ok rows_all
  rows_all=$(grep -c '^| [a-z]' "$out/faults/table.md" 2>/dev/null)
  rows_ok=$(grep -c '| as expected |$' "$out/faults/table.md" 2>/dev/null)
  if [ "$rc" = 0 ]; then
    summary "5 fault matrix" "$rows_ok of $((rows_all - 1)) rows as expected (faults/table.md)" "$(since "$t0")"
  else
    failed=1
    summary "5 fault matrix" "FAILED (exit $rc): $rows_ok rows as expected (faults/table.md, faults.log)" "$(since "$t0")"
    grep 'NOT as expected\|FAILED' "$out/faults/table.md" | head -20
  fi
}

: >"$out/summary.txt"
summary "boot" "guest script started (kernel uptime)" "$(cut -d' ' -f1 /proc/uptime | cut -d. -f1)"
if ! setup_rxe >"$out/setup.log" 2>&1; then
  cat "$out/setup.log"
  summary "rxe setup" "FAILED: rdma link add $device type rxe netdev dummy0" ""
  exit 1
fi
case "$mode" in
  shell)
    echo "rxe device $device on dummy0 ($addr); results directory $out; leave with: exit"
    cd "$project" && bash -i
    exit 0 ;;
  script)
    cd "$project" && addr=$addr device=$device bash "$script"
    exit ;;
esac
for part in $parts; do
  case "$part" in
    c) run_c ;;
    java) run_java ;;
    perf) run_perf ;;
    faults) run_faults ;;
    *) summary "$part" "FAILED: unknown part (RDMA_RXE_VM_PARTS)" ""; failed=1 ;;
  esac
done
exit $failed
