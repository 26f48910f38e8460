#!/usr/bin/env bash
# Stage: the Node.js binding (bindings/node, an N-API addon): copied into
# <build-dir>/node_modules/dlbridge and built there offline by the node-gyp
# that npm bundles (--nodedir=/usr), the native library's test addon built
# with cc, then node --expose-gc --test on bindings/node/test/*.test.js
# against the build's libdlbridge, tests/lang's native library and a Python
# process (the build's package, /usr/bin/python3), then docs/javascript.md's
# first example, run as written. A missing Node, node-gyp or Node headers
# is a skip, which fails under CI=true.
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
command -v node >/dev/null || { echo "59-node: skipped: node is not installed"; exit 77; }
nodedir=${DLB_NODEDIR:-/usr}
[ -f "$nodedir/include/node/node_api.h" ] || { echo "59-node: skipped: no Node headers in $nodedir/include/node"; exit 77; }
# The node-gyp npm bundles, next to this node; else one on PATH.
gyp=$(dirname "$(readlink -f "$(command -v node)")")/../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js
if [ -f "$gyp" ]; then gyp=(node "$gyp"); elif command -v node-gyp >/dev/null; then gyp=(node-gyp); else
  echo "59-node: skipped: node-gyp not found (npm bundles it)"; exit 77
fi

pkg=$build/node_modules/dlbridge
echo "== 59-node: build the addon ($(node --version), ${gyp[*]: -1})"
rm -rf "$pkg"
mkdir -p "$pkg"
cp -r bindings/node/package.json bindings/node/binding.gyp bindings/node/index.js bindings/node/src "$pkg/"
(cd "$pkg" && DLBRIDGE_LIB_DIR="$build/src" DLBRIDGE_INCLUDE_DIR="$root/include" \
   "${gyp[@]}" rebuild --nodedir="$nodedir" --jobs 2 --loglevel warn)

echo "== 59-node: build the native library's test addon"
addon=$build/bindings/node-test/native_library.node
mkdir -p "$(dirname "$addon")"
${CC:-cc} -shared -fPIC -std=gnu11 -O1 -Wall -Wextra -Werror -I"$nodedir/include/node" -I"$root/include" \
  bindings/node/test/native_library_addon.c -L"$native_dir" -lnative_library -Wl,-rpath,"$native_dir" \
  -lpthread -o "$addon"

echo "== 59-node: node --test"
DLBRIDGE_NODE=$pkg DLB_TEST_NATIVE_ADDON=$addon DLB_TEST_PYTHONPATH=$build/python \
  node --expose-gc --test --test-reporter=spec bindings/node/test/*.test.js

echo "== 59-node: docs/javascript.md example"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlbridge-node.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
awk '!inside && /^```js[[:space:]]*$/ { inside = 1; next } inside && /^```/ { found = 1; exit }
     inside { print } END { exit found ? 0 : 1 }' docs/javascript.md > "$tmp/example.js" \
  || { echo "59-node: docs/javascript.md has no \`\`\`js block" >&2; exit 1; }
NODE_PATH=$build/node_modules node "$tmp/example.js" | tee "$tmp/out"
[ "$(tail -n 1 "$tmp/out")" = ok ] || { echo "59-node: the example did not end with 'ok'" >&2; exit 1; }
echo "== 59-node: OK"
