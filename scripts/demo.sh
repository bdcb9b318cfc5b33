#!/usr/bin/env bash
# The echo demo: an RDMA echo server and client in two JVMs. On a machine without an RDMA device both run on the
# bundled software RDMA device (they say so). Installs missing prerequisites first.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/prereqs.sh

mvn -B -ntp -q -DskipTests -pl examples/echo -am install
cpfile=$(mktemp)
log=$(mktemp)
mvn -B -ntp -q -pl examples/echo dependency:build-classpath -Dmdep.outputFile="$cpfile" >/dev/null
java_cmd=(java --enable-native-access=ALL-UNNAMED -cp "examples/echo/target/classes:$(cat "$cpfile")")
port=${DEMO_PORT:-7474}

"${java_cmd[@]}" io.netty.contrib.channel.rdma.examples.echo.EchoServer --port "$port" >"$log" 2>&1 &
server=$!
tcp_log=$(mktemp)
# The same echo over Netty's epoll and TCP loopback, for the comparison printed at the end.
"${java_cmd[@]}" io.netty.contrib.channel.rdma.examples.echo.EchoServer --port "$((port + 1))" --transport epoll \
  >"$tcp_log" 2>&1 &
tcp_server=$!
trap 'kill "$server" "$tcp_server" 2>/dev/null || true; rm -f "$log" "$log.rdma" "$log.tcp" "$tcp_log" "$cpfile"' EXIT
for f in "$log" "$tcp_log"; do
  for _ in $(seq 300); do
    grep -q 'listening on' "$f" && break
    if ! kill -0 "$server" 2>/dev/null || ! kill -0 "$tcp_server" 2>/dev/null; then
      cat "$f"; echo "echo server failed to start" >&2; exit 1
    fi
    sleep 0.1
  done
done
cat "$log" "$tcp_log"

# Both JVMs compile the echo path during the first ten thousand or so round trips: those are sent first and
# checked, but not measured (--warmup), over RDMA and over TCP alike.
echo "== 64-byte messages over RDMA"
"${java_cmd[@]}" io.netty.contrib.channel.rdma.examples.echo.EchoClient --port "$port" --size 64 --warmup 20000 \
  --count 20000 | tee "$log.rdma"
echo "== 64-byte messages over TCP loopback (Netty epoll), the same client and server"
"${java_cmd[@]}" io.netty.contrib.channel.rdma.examples.echo.EchoClient --port "$((port + 1))" --transport epoll \
  --size 64 --warmup 20000 --count 20000 | tee "$log.tcp"
echo "== 64 KiB messages (RDMA WRITE WITH IMMEDIATE into the receive ring)"
"${java_cmd[@]}" io.netty.contrib.channel.rdma.examples.echo.EchoClient --port "$port" --size 65536 --warmup 500 \
  --count 2000 --concurrency 4
p50() { sed -n 's/^round trip: p50 \([0-9.]*\) us.*/\1/p' "$1"; }
echo "64 B round trip p50: RDMA $(p50 "$log.rdma") us, TCP (epoll) $(p50 "$log.tcp") us"
echo "demo finished: every echo verified"
