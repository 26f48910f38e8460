#!/usr/bin/env bash
# Stage: a few-second run of bench/copy_numpy.py --quick against the built
# library: dlb_copy_to_contiguous through ctypes on contiguous, transposed
# and reversed numpy views, each result compared with numpy's own copy.
# Timings are printed but not judged.
#
#   bash scripts/test.d/35-copy-numpy-smoke.sh <build-dir>
set -euo pipefail

build=${1:?usage: 35-copy-numpy-smoke.sh <build-dir>}
[ -d "$build" ] || { echo "35-copy-numpy-smoke: no build directory '$build'" >&2; exit 2; }
[ -f bench/copy_numpy.py ] || { echo "35-copy-numpy-smoke: run from the repository root" >&2; exit 2; }
lib=$(cd "$build/src" && pwd)/libdlbridge.so
[ -e "$lib" ] || { echo "35-copy-numpy-smoke: $lib is missing" >&2; exit 1; }

py=/usr/bin/python3
"$py" -c "import numpy" >/dev/null 2>&1 || { echo "35-copy-numpy-smoke: $py cannot import numpy" >&2; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== 35-copy-numpy-smoke: bench/copy_numpy.py --quick (library: $lib)"
if ! PYTHONDONTWRITEBYTECODE=1 "$py" bench/copy_numpy.py --quick --lib "$lib" --out "$out/copy"; then
  echo "35-copy-numpy-smoke: FAILED (a view was refused or differed from numpy; see above)" >&2
  exit 1
fi
echo "35-copy-numpy-smoke: every view copied and matched numpy"
