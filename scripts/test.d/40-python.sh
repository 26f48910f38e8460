#!/usr/bin/env bash
# Stage: the Python package (python/dlbridge) against the freshly built
# library, with the interpreter that has Debian's numpy, torch, cffi and
# pytest: the DLPack exchanges with numpy and torch, the buffer protocol,
# lifetimes (threads, no GIL, exit with exports alive) and the cffi cdef
# (checked against include/dlbridge/dlbridge.h, then driven in ABI mode).
#
#   bash scripts/test.d/40-python.sh <build-dir>
set -euo pipefail

build=${1:?usage: 40-python.sh <build-dir>}
[ -d "$build" ] || { echo "40-python: no build directory '$build'" >&2; exit 2; }
[ -f python/dlbridge/__init__.py ] || { echo "40-python: run from the repository root" >&2; exit 2; }
lib=$(cd "$build/src" && pwd)/libdlbridge.so
[ -e "$lib" ] || { echo "40-python: $lib is missing" >&2; exit 1; }

py=/usr/bin/python3
for module in numpy torch cffi pytest; do
  if ! "$py" -c "import $module" >/dev/null 2>&1; then
    echo "40-python: $py cannot import $module (install python3-$module)" >&2
    exit 1
  fi
done

echo "== 40-python: pytest tests/python (library: $lib)"
DLBRIDGE_LIBRARY=$lib PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1 \
  "$py" -m pytest -q -p no:cacheprovider tests/python
