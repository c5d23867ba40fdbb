#!/usr/bin/env bash
# `make test`: the tools, format and vet checks and manifests, then the suites under test/; the
# unit tests (test-units) run beside all of it at a low CPU priority. The suites wait on real time
# much of the while and the tools' builds on downloads; the unit tests, CPU-bound, take the idle
# cores then and yield them back when the suites' path needs them. The unit tests' output follows
# the suites' once both are done (bin/test-units.log while they run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p bin
run=("${MAKE:-make}" --no-print-directory)
stage=hack/stage.sh
units_log=bin/test-units.log

# A session of its own, so that a failure of the path below stops the unit tests' processes too.
setsid nice -n 19 "${run[@]}" test-units > "$units_log" 2>&1 &
units=$!
trap 'kill -- "-$units" 2>/dev/null || true' EXIT

"$stage" tools "${run[@]}" test-tools
"$stage" verify "${run[@]}" verify
"$stage" manifests "${run[@]}" manifests
rc=0
"$stage" suites "${run[@]}" test-suites || rc=$?

echo "waiting for the unit tests (bin/test-units.log)..."
wait "$units" || rc=$?
trap - EXIT
cat "$units_log"
exit "$rc"
