#!/usr/bin/env bash
# Builds the Node.js addon offline, with the node-gyp that npm bundles,
# against the installed Node's headers and a meson build of dlbridge: the
# package lands in <build-dir>/node_modules/dlbridge (so NODE_PATH=
# <build-dir>/node_modules finds it) and links <build-dir>/src/libdlbridge.
# Exit 77 when Node, its headers or node-gyp are missing.
#
#   bash bindings/node/build.sh <build-dir>
set -euo pipefail

build=${1:?usage: build.sh <build-dir>}
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
command -v node >/dev/null || { echo "build.sh: node is not installed"; exit 77; }
nodedir=${DLB_NODEDIR:-/usr}
[ -f "$nodedir/include/node/node_api.h" ] || { echo "build.sh: no Node headers in $nodedir/include/node"; exit 77; }
# The node-gyp npm bundles, next to this node; else one on PATH.
gyp=$(dirname "$(readlink -f "$(command -v node)")")/../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js
if [ -f "$gyp" ]; then gyp=(node "$gyp"); elif command -v node-gyp >/dev/null; then gyp=(node-gyp); else
  echo "build.sh: node-gyp not found (npm bundles it)"; exit 77
fi

pkg=$build/node_modules/dlbridge
echo "build.sh: building the addon into $pkg ($(node --version), ${gyp[*]: -1})"
rm -rf "$pkg"
mkdir -p "$pkg"
cp -r "$here/package.json" "$here/binding.gyp" "$here/index.js" "$here/src" "$pkg/"
(cd "$pkg" && DLBRIDGE_LIB_DIR="$build/src" DLBRIDGE_INCLUDE_DIR="$root/include" \
   "${gyp[@]}" rebuild --nodedir="$nodedir" --jobs 2 --loglevel warn)
