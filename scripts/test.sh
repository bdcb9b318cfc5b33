#!/usr/bin/env bash
# Runs the whole test suite: the software device's C conformance tests, the library's unit and
# integration tests, and the testsuite module. Installs missing prerequisites first.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/prereqs.sh
exec mvn -B -ntp verify "$@"
