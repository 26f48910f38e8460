#!/usr/bin/env bash
# Stage: sharing tensors across processes from Python and between programs:
# the example producer and consumer (examples/share_tensor.c, built by the
# tests) against each other, then the Python tests of tests/share (share,
# Unix sockets, multiprocessing with fork/spawn/forkserver, lifetimes when
# either side is killed, a Python consumer of the C producer, the example of
# docs/sharing.md) with Debian's python3, numpy and torch. The C tests of
# tests/share run in `meson test` (suite share).
#
#   bash scripts/test.d/47-share.sh <build-dir>
set -euo pipefail

build=${1:?usage: 47-share.sh <build-dir>}
[ -d "$build" ] || { echo "47-share: no build directory '$build'" >&2; exit 2; }
build=$(cd "$build" && pwd)
cd "$(dirname "$0")/../.."
example=$build/tests/share/share_tensor
[ -x "$example" ] || { echo "47-share: $example is missing (build the tests)" >&2; exit 1; }
[ -d "$build/python/dlbridge" ] || { echo "47-share: $build/python/dlbridge is missing (-Dpython)" >&2; exit 1; }
python=${PYTHON:-/usr/bin/python3}

echo "== 47-share: examples/share_tensor.c, producer and consumer"
sh tests/share/test_share_example.sh "$example"

echo "== 47-share: pytest tests/share"
PYTHONPATH=$build/python DLB_SHARE_EXAMPLE=$example PYTHONDONTWRITEBYTECODE=1 \
  "$python" -m pytest -q -p no:cacheprovider tests/share
