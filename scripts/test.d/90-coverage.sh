#!/usr/bin/env bash
# Stage: line and branch coverage per subsystem (src/core, src/copy,
# src/share, src/cuda, src/opencl, the device registry, the Python
# extension's C, the Python package),
# failing below the floors of docs/reliability-figures.json. No build or
# run of its own for the C and C++: scripts/test builds its plain build
# with -Db_coverage=true, so the build's counters already hold the meson
# suites and every stage before this one that ran the build's library or
# package (valgrind, the interop matrix, the exchange API, the engines,
# Rust, the conformance checker). This stage runs the Python suites once
# more under coverage.py, for the package's own Python, then sums it all
# (scripts/coverage --counted). Its summary line, repeated last as
# "90-coverage: ...", is what scripts/test's table shows; the HTML report is
# in <build>/coverage/.
#
#   bash scripts/test.d/90-coverage.sh <build-dir>
#
# A person runs scripts/coverage, which makes and runs build/coverage itself.
# timeout: 600
set -euo pipefail
build=${1:?usage: 90-coverage.sh <build-dir>}
cd "$(dirname "$0")/../.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
/usr/bin/python3 scripts/coverage --counted "$build" | tee "$log"
rc=${PIPESTATUS[0]}
set -e
echo "90-coverage: $(sed -n 's/^summary: //p' "$log" | tail -n 1)"
exit "$rc"
