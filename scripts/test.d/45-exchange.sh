#!/usr/bin/env bash
# Stage: the DLPack 1.3 C exchange API between Python extensions. Builds the
# independent test producer (tests/exchange/xproducer.c) and the example
# consumer (examples/exchange_consumer.c) with /usr/bin/python3's own
# compiler and include directory, then runs tests/exchange with it against
# the freshly built library and the build directory's working copy of the
# package (<build-dir>/python/dlbridge, with its dlbridge._glue extension).
# The exchange tables against real peers (torch 2, tvm-ffi) are tested by
# tests/python/test_peers_torch2.py and test_peers_tvm_ffi.py, in
# 43-sdist.sh's peer-environment suite.
#
#   bash scripts/test.d/45-exchange.sh <build-dir>
set -euo pipefail

build=${1:?usage: 45-exchange.sh <build-dir>}
[ -d "$build" ] || { echo "45-exchange: no build directory '$build'" >&2; exit 2; }
[ -f tests/exchange/xproducer.c ] || { echo "45-exchange: run from the repository root" >&2; exit 2; }
lib=$(cd "$build/src" && pwd)/libdlbridge.so
[ -e "$lib" ] || { echo "45-exchange: $lib is missing" >&2; exit 1; }
pkg=$(cd "$build" && pwd)/python
[ -f "$pkg/dlbridge/__init__.py" ] || { echo "45-exchange: $pkg/dlbridge is missing (configure with -Dpython=enabled)" >&2; exit 1; }

py=/usr/bin/python3
inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$inc/Python.h" ] || { echo "45-exchange: $inc/Python.h is missing (install python3-dev)" >&2; exit 1; }
for module in pytest numpy; do
  "$py" -c "import $module" >/dev/null 2>&1 || { echo "45-exchange: $py cannot import $module" >&2; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlbridge-exchange.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "== 45-exchange: building the test extensions with $py ($inc)"
"$py" tests/exchange/build_ext.py "$tmp"

echo "== 45-exchange: pytest tests/exchange (library: $lib, package: $pkg)"
DLB_EXCHANGE_EXT_DIR=$tmp DLBRIDGE_LIBRARY=$lib PYTHONPATH=$pkg PYTHONDONTWRITEBYTECODE=1 \
  "$py" -m pytest -q -p no:cacheprovider tests/exchange

