# Sourced by demo.sh, test.sh and .ci/run: installs what a fresh Debian 12 machine lacks and selects JDK 25.
# Idempotent: does nothing when everything is present.

rdma_packages="gcc make libibverbs-dev librdmacm-dev ibverbs-providers ibverbs-utils rdmacm-utils perftest rdma-core iproute2"

missing=""
for p in $rdma_packages maven; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "installing Debian packages:$missing"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq $missing >/dev/null
fi

# JDK 25: keep a JAVA_HOME that already is 25, else take the first JDK 25 under /usr/lib/jvm.
java_major() { "$1/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p'; }
if [ -z "${JAVA_HOME:-}" ] || [ "$(java_major "$JAVA_HOME")" != 25 ]; then
  JAVA_HOME=""
  for d in /usr/lib/jvm/temurin-25-jdk-amd64 /usr/lib/jvm/*25*; do
    if [ -x "$d/bin/java" ] && [ "$(java_major "$d")" = 25 ]; then JAVA_HOME="$d"; break; fi
  done
  if [ -z "$JAVA_HOME" ]; then
    echo "JDK 25 not found under /usr/lib/jvm: install one (e.g. Temurin 25) and set JAVA_HOME" >&2
    exit 1
  fi
fi
export JAVA_HOME
export PATH="$JAVA_HOME/bin:$PATH"
