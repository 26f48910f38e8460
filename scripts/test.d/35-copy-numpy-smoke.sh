#!/usr/bin/env bash
# Stage: a few-second run of bench/copy_peers.py --quick against the built
# library: dlbridge.from_dlpack(view, copy=True) beside numpy and torch on
# contiguous, transposed, reversed and every-other views of float32,
# float64 and complex128 matrices, each dlbridge result compared with
# numpy's own copy. Timings are printed but not judged.
#
#   bash scripts/test.d/35-copy-numpy-smoke.sh <build-dir>
set -euo pipefail

build=${1:?usage: 35-copy-numpy-smoke.sh <build-dir>}
[ -d "$build" ] || { echo "35-copy-numpy-smoke: no build directory '$build'" >&2; exit 2; }
[ -f bench/copy_peers.py ] || { echo "35-copy-numpy-smoke: run from the repository root" >&2; exit 2; }
pkg=$(cd "$build/python" && pwd)
[ -e "$pkg/dlbridge/__init__.py" ] || { echo "35-copy-numpy-smoke: no built package in $pkg" >&2; exit 1; }

py=/usr/bin/python3
"$py" -c "import numpy" >/dev/null 2>&1 || { echo "35-copy-numpy-smoke: $py cannot import numpy" >&2; exit 1; }

echo "== 35-copy-numpy-smoke: bench/copy_peers.py --quick (package: $pkg/dlbridge)"
if ! PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$pkg" "$py" bench/copy_peers.py --quick --sizes 256,512x384; then
  echo "35-copy-numpy-smoke: FAILED (a copy differed from numpy's; see above)" >&2
  exit 1
fi
echo "35-copy-numpy-smoke: every view copied and matched numpy"
