#!/usr/bin/env bash
# Stage: dlbridge and PyOpenCL on the real OpenCL driver (PoCL's CPU device,
# installed by scripts/install-deps): tests/opencl/python, with the
# interpreter of the PyOpenCL environment (scripts/opencl-env, made or
# found cached by 38-python-envs) and the build directory's working copy of
# the package. PyOpenCL is the independent producer and consumer (raw cl_mem
# handles) and its enqueue_copy the oracle of every value. The C suites of
# the OpenCL backend (tests/opencl) run in the meson test stages, plain and
# under ASan+UBSan.
#
#   bash scripts/test.d/39-opencl.sh <build-dir>
# timeout: 120
set -euo pipefail

build=${1:?usage: 39-opencl.sh <build-dir>}
[ -d "$build" ] || { echo "39-opencl: no build directory '$build'" >&2; exit 2; }
[ -f tests/opencl/python/test_pyopencl.py ] || { echo "39-opencl: run from the repository root" >&2; exit 2; }
pkg=$(cd "$build" && pwd)/python
[ -f "$pkg/dlbridge/__init__.py" ] || { echo "39-opencl: $pkg/dlbridge is missing (configure with -Dpython=enabled)" >&2; exit 1; }
command -v clinfo >/dev/null && [ -n "$(clinfo -l 2>/dev/null)" ] ||
  { echo "39-opencl: no OpenCL platform (clinfo -l lists none): run scripts/install-deps (pocl-opencl-icd)" >&2; exit 1; }

set +e
env_dir=$(scripts/opencl-env | tail -n 1)
rc=$?
set -e
[ "$rc" -eq 0 ] || { echo "39-opencl: FAILED: no PyOpenCL environment (scripts/opencl-env exit $rc)" >&2; exit 1; }
py=$env_dir/bin/python

echo "== 39-opencl: $(clinfo -l 2>/dev/null | tr -s ' ' | paste -sd ' ')"
echo "== 39-opencl: pytest tests/opencl/python ($py, package: $pkg)"
PYTHONPATH=$pkg PYTHONDONTWRITEBYTECODE=1 POCL_CACHE_DIR=${TMPDIR:-/tmp}/dlbridge-pocl-cache \
  "$py" -m pytest -q -p no:cacheprovider tests/opencl/python
