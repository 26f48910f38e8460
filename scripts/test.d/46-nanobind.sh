#!/usr/bin/env bash
# Stage: the nanobind example extension (examples/nanobind_sum): built with
# the peer environment's interpreter and nanobind (scripts/peers-env) against
# the build directory's libdlbridge and package, then its tests against
# numpy 2, torch 2 and JAX arrays. nanobind's own sources are compiled once
# into <build-dir>/nanobind_sum and reused. The pins name those peers: a
# peer environment that cannot be made fails the stage.
#
#   bash scripts/test.d/46-nanobind.sh <build-dir>
set -euo pipefail

build=${1:?usage: 46-nanobind.sh <build-dir>}
[ -d "$build" ] || { echo "46-nanobind: no build directory '$build'" >&2; exit 2; }
[ -f examples/nanobind_sum/nanobind_sum.cpp ] || { echo "46-nanobind: run from the repository root" >&2; exit 2; }
build=$(cd "$build" && pwd)
pkg=$build/python
[ -f "$pkg/dlbridge/__init__.py" ] || { echo "46-nanobind: $pkg/dlbridge is missing (configure with -Dpython=enabled)" >&2; exit 1; }

set +e
env_dir=$(scripts/peers-env | tail -n 1)
rc=$?
set -e
[ "$rc" -eq 0 ] || { echo "46-nanobind: FAILED: no peer environment (scripts/peers-env exit $rc), although python/requirements/peers.txt names nanobind, torch 2 and JAX" >&2; exit 1; }

echo "== 46-nanobind: pytest examples/nanobind_sum ($env_dir/bin/python, package: $pkg)"
env -u LD_LIBRARY_PATH DLB_NANOBIND_SUM_DIR="$build/nanobind_sum" XLA_FLAGS=--xla_force_host_platform_device_count=2 \
  JAX_PLATFORMS=cpu PYTHONPATH="$pkg" PYTHONDONTWRITEBYTECODE=1 \
  "$env_dir/bin/python" -m pytest -q -p no:cacheprovider -rs examples/nanobind_sum
