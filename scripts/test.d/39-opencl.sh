#!/usr/bin/env bash
# Stage: dlbridge and PyOpenCL on the real OpenCL driver (PoCL's CPU device,
# installed by scripts/install-deps): tests/opencl/python, with the
# interpreter of the PyOpenCL environment (scripts/opencl-env, made or
# found cached by 38-python-envs) and the build directory's working copy of
# the package. PyOpenCL is the independent producer and consumer (raw cl_mem
# handles) and its enqueue_copy the oracle of every value; then the two
# examples of docs/opencl.md (its first ```c block, built as strict C99 and
# run against the build's library, its output compared with the page's
# ```text block; its first ```python block). The C suites of the OpenCL
# backend (tests/opencl) run in the meson test stages, plain and under
# ASan+UBSan.
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
  "$py" -m pytest -q -p no:cacheprovider tests/opencl/python | tee "${TMPDIR:-/tmp}/dlbridge-opencl-pytest.log"
counts=$(tail -n 1 "${TMPDIR:-/tmp}/dlbridge-opencl-pytest.log" | sed 's/ in [0-9.]*s.*//')
rm -f "${TMPDIR:-/tmp}/dlbridge-opencl-pytest.log"

# first_block FILE LANG: the first fenced block of FILE opened with ```LANG.
first_block() {
  awk -v lang="$2" '
    !inside && $0 ~ "^```" lang "[[:space:]]*$" { inside = 1; next }
    inside && /^```/ { found = 1; exit }
    inside { print }
    END { exit found ? 0 : 1 }' "$1"
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlbridge-opencl.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
lib=$(cd "$build/src" && pwd)
echo "== 39-opencl: docs/opencl.md's C example"
first_block docs/opencl.md c > "$tmp/example.c"
cc -std=c99 -Wall -Wextra -pedantic -Werror -Iinclude "$tmp/example.c" -o "$tmp/example" -L"$lib" -ldlbridge \
  -Wl,-rpath,"$lib"
"$tmp/example" > "$tmp/out.txt"
first_block docs/opencl.md text > "$tmp/expected.txt"
diff -u "$tmp/expected.txt" "$tmp/out.txt" || { echo "39-opencl: docs/opencl.md's example prints other words than the page says" >&2; exit 1; }
echo "== 39-opencl: docs/opencl.md's Python example"
first_block docs/opencl.md python > "$tmp/example.py"
PYTHONPATH=$pkg PYTHONDONTWRITEBYTECODE=1 "$py" "$tmp/example.py"
echo "39-opencl: PyOpenCL suite $counts on $(clinfo -l 2>/dev/null | sed -n 's/.*Device #0: //p' | cut -d- -f1-2); docs/opencl.md's C and Python examples ran"
