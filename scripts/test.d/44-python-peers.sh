#!/usr/bin/env bash
# Stage: the Python package against the modern peers of the pinned peer
# environment (scripts/peers-env: CPython 3.12, numpy 2, JAX, tvm-ffi, ...):
# from_dlpack's host-copy cure against real JAX arrays sharded over four CPU
# devices (XLA_FLAGS, set before jax is imported), deleted and donated
# arrays, the DLPack C exchange API with tvm-ffi in both directions, and the
# files of tests/python that hold under numpy 2, all with the peer
# interpreter and the build directory's working copy of the package
# (PYTHONPATH=<build-dir>/python; the extension is abi3).
#
#   bash scripts/test.d/44-python-peers.sh <build-dir>
#
# Without a peer environment (scripts/peers-env exits 3) the stage says
# which peers are not installable here and passes as skipped.
set -euo pipefail

build=${1:?usage: 44-python-peers.sh <build-dir>}
[ -d "$build" ] || { echo "44-python-peers: no build directory '$build'" >&2; exit 2; }
build=$(cd "$build" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
pkg=$build/python
[ -f "$pkg/dlbridge/__init__.py" ] || { echo "44-python-peers: $pkg/dlbridge is missing (configure with -Dpython=enabled)" >&2; exit 1; }

set +e
env_dir=$(bash "$root/scripts/peers-env" | tail -n 1)
rc=$?
set -e
if [ $rc -eq 3 ]; then
  echo "44-python-peers: skipped: jax, apache-tvm-ffi, numpy 2 not installable here (scripts/peers-env: no environment)"
  exit 0
fi
[ $rc -eq 0 ] || { echo "44-python-peers: scripts/peers-env failed ($rc)" >&2; exit 1; }
py=$env_dir/bin/python
for module in pytest numpy jax tvm_ffi; do
  "$py" -c "import $module" >/dev/null 2>&1 || { echo "44-python-peers: $py cannot import $module" >&2; exit 1; }
done

# The files of tests/python that speak for numpy 2 as well as for numpy 1.24
# (test_numpy.py pins numpy 1.x behaviour; torch, cffi and hypothesis are
# not in the peer environment).
tests=(test_peers_jax.py test_peers_refusals.py test_peers_tvm_ffi.py test_cure.py test_refusals.py test_buffer.py test_glue.py test_protocol.py)

outside=$(mktemp -d "${TMPDIR:-/tmp}/dlbridge-peers.XXXXXX")
trap 'rm -rf "$outside"' EXIT
cd "$outside"
echo "== 44-python-peers: $("$py" -c 'import sys, numpy, jax, tvm_ffi; print("Python %s, numpy %s, jax %s, tvm-ffi %s" % (sys.version.split()[0], numpy.__version__, jax.__version__, tvm_ffi.__version__))')"
echo "== 44-python-peers: pytest ${tests[*]} (package: $pkg)"
env -u LD_LIBRARY_PATH XLA_FLAGS=--xla_force_host_platform_device_count=4 JAX_PLATFORMS=cpu \
  PYTHONPATH="$pkg" PYTHONDONTWRITEBYTECODE=1 \
  "$py" -m pytest -q -p no:cacheprovider -rs "${tests[@]/#/$root/tests/python/}"
