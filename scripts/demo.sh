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
trap 'kill "$server" 2>/dev/null || true; rm -f "$log" "$cpfile"' EXIT
for _ in $(seq 300); do
  grep -q 'listening on' "$log" && break
  kill -0 "$server" 2>/dev/null || { cat "$log"; echo "echo server failed to start" >&2; exit 1; }
  sleep 0.1
done
cat "$log"

echo "== 64-byte messages"
"${java_cmd[@]}" io.netty.contrib.channel.rdma.examples.echo.EchoClient --port "$port" --size 64 --count 20000
echo "== 64 KiB messages (RDMA WRITE WITH IMMEDIATE into the receive ring)"
"${java_cmd[@]}" io.netty.contrib.channel.rdma.examples.echo.EchoClient --port "$port" --size 65536 --count 2000 \
  --concurrency 4
echo "demo finished: every echo verified"
