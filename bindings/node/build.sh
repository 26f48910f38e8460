#!/usr/bin/env bash
# Installs the npm package of the Node.js binding into <build-dir>/node_modules/
# dlbridge (so NODE_PATH=<build-dir>/node_modules finds it) as a user would:
# scripts/node-package makes the tarball from the meson build (the prebuilt
# addon with the build's libdlbridge beside it) into <build-dir>/npm, then
# `npm install --offline` of that tarball with the prebuilt addon.
# Exit 77 when Node, npm, its node-gyp or the Node headers are missing.
#
#   bash bindings/node/build.sh <build-dir>
set -euo pipefail

build=${1:?usage: build.sh <build-dir>}
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
command -v node >/dev/null && command -v npm >/dev/null || { echo "build.sh: node or npm is not installed"; exit 77; }
prefix=$(cd "$(dirname "$(readlink -f "$(command -v node)")")/.." && pwd)
[ -f "$prefix/include/node/node_api.h" ] || { echo "build.sh: no Node headers in $prefix/include/node"; exit 77; }
[ -f "$prefix/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js" ] || { echo "build.sh: no node-gyp (npm bundles it)"; exit 77; }

tgz=$("$root/scripts/node-package" "$build" "$build/npm" | tail -n 1)
rm -rf "$build/node_modules/dlbridge"
(cd "$build" && DLBRIDGE_NODE_INSTALL=prebuilt npm install --offline --no-save --no-package-lock --no-audit \
   --no-fund --loglevel error "$tgz")
echo "build.sh: installed $(basename "$tgz") into $build/node_modules/dlbridge"
