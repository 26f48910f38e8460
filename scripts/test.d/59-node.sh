#!/usr/bin/env bash
# Stage: the Node.js binding (bindings/node, an N-API addon): copied into
# <build-dir>/node_modules/dlbridge and built there offline by the node-gyp
# that npm bundles (--nodedir=/usr), the native library's test addon built
# with cc, then node --expose-gc --test on bindings/node/test/*.test.js
# against the build's libdlbridge, tests/lang's native library and a Python
# process (the build's package, /usr/bin/python3). The guide's examples run
# in the docs stage (scripts/doc-examples). A missing Node, node-gyp or Node
# headers is a skip, which fails under CI=true.
# timeout: 240
#
#   bash scripts/test.d/59-node.sh <build-dir>
set -euo pipefail

build=${1:?usage: 59-node.sh <build-dir>}
[ -d "$build" ] || { echo "59-node: no build directory '$build'" >&2; exit 2; }
[ -f bindings/node/binding.gyp ] || { echo "59-node: run from the repository root" >&2; exit 2; }
root=$(pwd)
build=$(cd "$build" && pwd)
native_dir=$build/tests/lang
for f in "$build/src/libdlbridge.so" "$native_dir/libnative_library.so" "$build/python/dlbridge/__init__.py"; do
  [ -e "$f" ] || { echo "59-node: $f is missing (a build with tests and the Python package)" >&2; exit 1; }
done
nodedir=${DLB_NODEDIR:-/usr}
echo "== 59-node: build the addon (bindings/node/build.sh)"
bash bindings/node/build.sh "$build" || exit $?
pkg=$build/node_modules/dlbridge

echo "== 59-node: build the native library's test addon"
addon=$build/bindings/node-test/native_library.node
mkdir -p "$(dirname "$addon")"
${CC:-cc} -shared -fPIC -std=gnu11 -O1 -Wall -Wextra -Werror -I"$nodedir/include/node" -I"$root/include" \
  bindings/node/test/native_library_addon.c -L"$native_dir" -lnative_library -Wl,-rpath,"$native_dir" \
  -lpthread -o "$addon"

echo "== 59-node: node --test"
DLBRIDGE_NODE=$pkg DLB_TEST_NATIVE_ADDON=$addon DLB_TEST_PYTHONPATH=$build/python \
  node --expose-gc --test --test-reporter=spec bindings/node/test/*.test.js

echo "== 59-node: OK"
