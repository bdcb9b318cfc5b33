# RdmaPortEventsTest on kernel rxe, taking rxe's port down and up through its netdev (dummy0), then
# RdmaDeviceEventsTest to see whether the device still connects afterwards:
#   testsuite/rxe-vm/run.sh --script testsuite/rxe-vm/port-events.sh      (reports in <results>/port-events/)
# RdmaPortEventsTest runs in the guest's Java part as well (since connections closed while the port is down send no
# CM message: docs/ARCHITECTURE.md, "No CM message while a port is down"); this runs the two alone.
out=${out:-$PWD/testsuite/target/rxe-vm}
mkdir -p "$out/port-events"
lib=$(dirname "$(ldconfig -p | awk '$1 == "libibverbs.so.1" && /x86-64/ { print $NF; exit }')")
cp="$PWD/netty-transport-rdma/target/test-classes:$PWD/testsuite/target/test-classes"
cp="$cp:$(cat "$PWD/testsuite/target/rxe-vm-classpath.txt")"
RDMA_TEST_NETDEV=dummy0 timeout -k 10 900 "${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}/bin/java" \
  --enable-native-access=ALL-UNNAMED -Xss2m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
  -Dlogback.configurationFile="$PWD/testsuite/rxe-vm/logback.xml" \
  -Dio.netty.contrib.rdma.libraryPath="$lib" -Dio.netty.contrib.rdma.test.address="$addr" \
  -cp "$cp" org.junit.platform.console.ConsoleLauncher execute --disable-banner --disable-ansi-colors \
  --details=tree --reports-dir="$out/port-events" \
  --select-class=io.netty.contrib.channel.rdma.RdmaPortEventsTest \
  --select-class=io.netty.contrib.channel.rdma.RdmaDeviceEventsTest 2>&1 | tee "$out/port-events/console.log"
