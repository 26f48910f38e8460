#!/usr/bin/env bash
# Stage: the Node.js binding as npm users get it. scripts/node-package makes
# the package tarball from the build (the prebuilt linux-x64 addon with the
# build's libdlbridge inside); then, each in a fresh folder, offline:
#   (b) the install line of docs/javascript.md (`npm install <tgz>`), with no
#       libdlbridge for pkg-config to find: the prebuilt addon; a CommonJS
#       and an ES module consumer; the suite (node --expose-gc --test
#       bindings/node/test/*.test.js) against the
#       installed package, tests/lang's native library and a Python process
#       (the build's package, /usr/bin/python3);
#   (a) `npm install <tgz>` with the build installed into a scratch prefix
#       that PKG_CONFIG_PATH names: the addon built from source against it;
#       the consumers again;
#   bad installs: no C compiler with a source build asked for, a prebuilt
#       addon needing a newer glibc than this machine's (a repacked
#       tarball), a failing rebuild over an installed package: each fails
#       naming what is missing, leaves no package behind and deletes no
#       addon built before;
#   tsc --noEmit --strict over bindings/node/types/example.ts against the
#       installed package's index.d.ts (TypeScript from scripts/node-env),
#       and the example compiled and run; docs/reference/javascript-api.md
#       checked against index.d.ts (scripts/node-api-reference --check).
# The guide's examples run in the docs stage (scripts/doc-examples). A
# missing Node, npm, node-gyp or Node headers is a skip, which fails under
# CI=true.
# timeout: 300
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
command -v node >/dev/null && command -v npm >/dev/null || { echo "59-node: node or npm is not installed"; exit 77; }
prefix=$(cd "$(dirname "$(readlink -f "$(command -v node)")")/.." && pwd)
[ -f "$prefix/include/node/node_api.h" ] || { echo "59-node: no Node headers in $prefix/include/node"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/dlb-node.XXXXXX")
chmod 755 "$work"   # the suite starts a receiver as nobody when run as root
trap 'rm -rf "$work"' EXIT
empty=$work/no-pkgconfig
mkdir -p "$empty"
npm_install() {  # npm_install DIR LOG ARGS...: a fresh project in DIR, npm install ARGS offline
  local dir=$1 log=$2
  shift 2
  mkdir -p "$dir"
  (cd "$dir" && npm init -y >/dev/null && npm install --offline --no-audit --no-fund --foreground-scripts "$@") \
    >"$log" 2>&1
}
fail() { echo "59-node: $*" >&2; exit 1; }

echo "== 59-node: the package tarball (scripts/node-package)"
tgz=$(scripts/node-package "$build" "$work/npm" | tail -n 1)
echo "$(basename "$tgz"): $(stat -c %s "$tgz") bytes"

echo "== 59-node: build the native library's test addon"
addon=$work/native_library.node
${CC:-cc} -shared -fPIC -std=gnu11 -O1 -Wall -Wextra -Werror -I"$prefix/include/node" -I"$root/include" \
  bindings/node/test/native_library_addon.c -L"$native_dir" -lnative_library -Wl,-rpath,"$native_dir" \
  -lpthread -o "$addon"

consumers() {  # consumers DIR: a CommonJS and an ES module program using the installed package
  cat >"$1/consumer.cjs" <<'JS'
const assert = require('node:assert/strict');
const dlb = require('dlbridge');
const b = dlb.DlbBuffer.wrap(new Float64Array([1, 2, 3]), 'float64', [3]);
const t = b.exportVersioned();
const back = dlb.DlbBuffer.fromTensor(t);
assert.equal(back.address, b.address);
assert.deepEqual(Array.from(back.typedArray()), [1, 2, 3]);
back.close();
b.close();
assert.throws(() => b.shape, (e) => e instanceof dlb.DlbError && e.code === dlb.codes.DLB_ERR_INVALID_ARGUMENT);
assert.equal(typeof Buffer.from, 'function');
console.log('cjs ok', dlb.version);
JS
  cat >"$1/consumer.mjs" <<'JS'
import assert from 'node:assert/strict';
import * as dlb from 'dlbridge';
import { DlbBuffer, liveExports, codes } from 'dlbridge';
const b = DlbBuffer.alloc('int32', [4]);
b.typedArray().set([1, 2, 3, 4]);
const t = b.exportLegacy();
assert.equal(liveExports(), 1);
assert.equal(dlb.liveExports(), 1);
t.close();
b.close();
assert.equal(dlb.liveExports(), 0);
assert.equal(codes.DLB_ERR_DELETED, 'DLB_ERR_DELETED');
console.log('esm ok', Object.keys(dlb).filter((k) => k !== 'default').sort().join(' '));
JS
  (cd "$1" && node consumer.cjs && node consumer.mjs)
}

echo "== 59-node: (b) the guide's install line, without a system libdlbridge: the prebuilt addon"
# docs/javascript.md's installation block (`<!-- install: npm -->`), run as
# written in a fresh folder holding the tarball; npm kept offline.
line=$(bash "$root/scripts/install-doc-block" npm docs/javascript.md) || fail "docs/javascript.md has no install line"
echo "\$ $line"
b=$work/prebuilt
mkdir -p "$b" && cp "$tgz" "$b/"
start=$(date +%s%N)
(cd "$b" && PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$empty npm_config_offline=true npm_config_foreground_scripts=true \
   bash -euo pipefail -c "$line") >"$work/b.log" 2>&1 || { cat "$work/b.log"; fail "the install line failed"; }
echo "installed in $(( ($(date +%s%N) - start) / 1000000 )) ms"
grep -q 'using the prebuilt addon' "$work/b.log" || { cat "$work/b.log"; fail "(b) did not use the prebuilt addon"; }
[ ! -e "$b/node_modules/dlbridge/build" ] || fail "(b) built an addon"
consumers "$b"

echo "== 59-node: node --test against the installed package"
DLBRIDGE_NODE=$b/node_modules/dlbridge DLB_TEST_NATIVE_ADDON=$addon DLB_TEST_PYTHONPATH=$build/python \
  node --expose-gc --test --test-reporter=spec bindings/node/test/*.test.js

echo "== 59-node: (a) npm install with libdlbridge installed (pkg-config): built from source"
meson install -C "$build" --destdir "$work/prefix" --quiet >"$work/meson-install.log" 2>&1 || {
  cat "$work/meson-install.log"; fail "meson install failed"; }
pc=$(find "$work/prefix" -name dlbridge.pc | head -n 1)
[ -n "$pc" ] || fail "meson install wrote no dlbridge.pc"
libprefix=$(sed -n 's/^prefix=//p' "$pc")
sed -i "s|^prefix=.*|prefix=$work/prefix$libprefix|" "$pc"   # relocated, as a packager would
export PKG_CONFIG_PATH=$(dirname "$pc")
a=$work/system
npm_install "$a" "$work/a.log" "$tgz" || { cat "$work/a.log"; fail "npm install failed"; }
grep -q "built build/Release/dlbridge_node.node against the system's libdlbridge" "$work/a.log" || {
  cat "$work/a.log"; fail "(a) did not build against the system's libdlbridge"; }
ldd "$a/node_modules/dlbridge/build/Release/dlbridge_node.node" | grep "$work/prefix" >/dev/null ||
  fail "(a) the addon does not link the installed libdlbridge"
consumers "$a"

echo "== 59-node: bad installs fail by name, leave nothing half-installed, delete nothing built"
c=$work/no-compiler
if DLBRIDGE_NODE_INSTALL=source CC=/nonexistent/cc npm_install "$c" "$work/c.log" "$tgz"; then
  fail "a source install without a compiler succeeded"
fi
grep -q 'missing a C compiler (/nonexistent/cc)' "$work/c.log" || { cat "$work/c.log"; fail "no message naming the compiler"; }
[ ! -e "$c/node_modules/dlbridge" ] || fail "a failed install left node_modules/dlbridge"

mkdir -p "$work/old-glibc" && tar -xzf "$tgz" -C "$work/old-glibc"
sed -i 's/"glibc": "[0-9.]*"/"glibc": "99.0"/' "$work/old-glibc/package/prebuilds/linux-x64/prebuild.json"
old=$(cd "$work/old-glibc/package" && npm pack --offline --silent --pack-destination "$work/old-glibc")
d=$work/glibc
if PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$empty npm_install "$d" "$work/d.log" "$work/old-glibc/$old"; then
  fail "an install with a prebuilt addon for glibc 99.0 and no libdlbridge succeeded"
fi
grep -q 'is older than the glibc 99.0 the prebuilt addon needs' "$work/d.log" || { cat "$work/d.log"; fail "no message naming glibc"; }
grep -q 'no libdlbridge found by pkg-config' "$work/d.log" || { cat "$work/d.log"; fail "no message naming libdlbridge"; }
[ ! -e "$d/node_modules/dlbridge" ] || fail "a failed install left node_modules/dlbridge"

before=$(sha256sum <"$a/node_modules/dlbridge/build/Release/dlbridge_node.node")
if (cd "$a" && DLBRIDGE_NODE_INSTALL=source CC=false npm rebuild --foreground-scripts dlbridge) >"$work/e.log" 2>&1; then
  fail "a rebuild with a failing compiler succeeded"
fi
grep -q 'node-gyp failed' "$work/e.log" || { cat "$work/e.log"; fail "no message naming the failed build"; }
[ "$(sha256sum <"$a/node_modules/dlbridge/build/Release/dlbridge_node.node")" = "$before" ] ||
  fail "a failed rebuild changed or deleted the addon built before"
[ -z "$(ls -d "$a"/node_modules/dlbridge/.build-* 2>/dev/null)" ] || fail "a failed rebuild left its scratch folder"
(cd "$a" && node consumer.cjs >/dev/null) || fail "the package no longer works after a failed rebuild"
echo "ok: no compiler, older glibc, failed rebuild"

echo "== 59-node: tsc --noEmit --strict over the typed example"
tools=$(bash scripts/node-env | tail -n 1)
ts=$work/typed
mkdir -p "$ts/node_modules"
cp bindings/node/types/example.ts bindings/node/types/tsconfig.json "$ts/"
echo '{"type": "module"}' >"$ts/package.json"
ln -s "$b/node_modules/dlbridge" "$ts/node_modules/dlbridge"
ln -s "$tools/node_modules/@types" "$ts/node_modules/@types"
ln -s "$tools/node_modules/undici-types" "$ts/node_modules/undici-types"
(cd "$ts" && "$tools/node_modules/.bin/tsc" --noEmit --strict -p tsconfig.json && "$tools/node_modules/.bin/tsc" -p tsconfig.json &&
   node out/example.js)

echo "== 59-node: the API reference is the declarations' (scripts/node-api-reference --check)"
node scripts/node-api-reference --check

echo "== 59-node: OK"
