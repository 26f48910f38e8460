#!/usr/bin/env bash
# Stage: the interop matrix (tests/interop): numpy 2, JAX, tvm-ffi,
# TensorFlow, Paddle, pyarrow, array-api-strict, torch 2, mlx, onnxruntime
# and dlbridge, each producer against each consumer, directly and through
# dlbridge, each exchange zero-copy, a correct copy or a failure (its
# values checked by the value oracle, tests/values/oracle.py), against the
# table of expected failures and copies (tests/interop/expectations.py). Runs with the peer environment's
# interpreter (scripts/peers-env) and the build directory's working copy of
# the package. The pins name every framework of the matrix, so a peer
# environment that cannot be made fails the stage.
#
#   bash scripts/test.d/42-interop.sh <build-dir>
set -euo pipefail

build=${1:?usage: 42-interop.sh <build-dir>}
[ -d "$build" ] || { echo "42-interop: no build directory '$build'" >&2; exit 2; }
[ -f tests/interop/matrix.py ] || { echo "42-interop: run from the repository root" >&2; exit 2; }
pkg=$(cd "$build" && pwd)/python
[ -f "$pkg/dlbridge/__init__.py" ] || { echo "42-interop: $pkg/dlbridge is missing (configure with -Dpython=enabled)" >&2; exit 1; }

set +e
env_dir=$(scripts/peers-env | tail -n 1)
rc=$?
set -e
[ "$rc" -eq 0 ] || { echo "42-interop: FAILED: no peer environment (scripts/peers-env exit $rc), although python/requirements/peers.txt names the matrix's frameworks" >&2; exit 1; }
py=$env_dir/bin/python

echo "== 42-interop: pytest tests/interop ($py, package: $pkg)"
PYTHONPATH=$pkg PYTHONDONTWRITEBYTECODE=1 TF_CPP_MIN_LOG_LEVEL=3 \
  "$py" -m pytest -q -p no:cacheprovider -rs tests/interop
