#!/usr/bin/env bash
# Stage: the C library as a release ships it.
#   1. `meson dist --no-tests` of the committed tree (the release tarball,
#      dlbridge-<version>.tar.xz, with its .sha256sum), checked for the
#      files a build needs and for nothing of the work tree's build output;
#   2. the tarball unpacked elsewhere, configured with
#      -Ddefault_library=both (tests, benchmarks and the Python package
#      off), built and installed into a temporary prefix: libdlbridge.so
#      (the dlb_ symbols only) and libdlbridge.a side by side, and the
#      pkg-config and CMake files naming both;
#   3. tests/consumers/consumer.c (a C program: alloc, export, import,
#      deleters, live exports back to 0) linked three ways and run:
#      - CMake, find_package(dlbridge) + dlbridge::dlbridge_static: the
#        program needs no libdlbridge.so (NEEDED) and runs;
#      - CMake, dlbridge::dlbridge: the shared library (NEEDED);
#      - cc + `pkg-config --static --libs dlbridge` against an install
#        holding only the archive (what -Ddefault_library=static installs):
#        runs without libdlbridge.so; the same link without --static
#        fails (the archive needs the C++ runtime that Libs.private names).
#
#   bash scripts/test.d/41-c-release.sh <build-dir>
# timeout: 420
set -euo pipefail

build=${1:?usage: 41-c-release.sh <build-dir>}
[ -d "$build" ] || { echo "41-c-release: no build directory '$build'" >&2; exit 2; }
build=$(cd "$build" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
version=$(meson introspect --projectinfo "$build" | python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlbridge-release.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
problem() { echo "41-c-release: $*" >&2; fail=1; }
step() { echo "== 41-c-release: $*"; }
quiet() {  # quiet LOG COMMAND...: the output goes to LOG, shown on failure
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { tail -n 40 "$log" >&2; echo "41-c-release: '$*' failed" >&2; exit 1; }
}

if [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  echo "41-c-release: note: the work tree has uncommitted changes; the tarball holds the last commit"
fi
step "meson dist --no-tests"
# meson dist writes into <build>/meson-dist; a dirty work tree is allowed
# (the tarball is the commit, as the note above says).
allow_dirty=()
meson dist --help 2>/dev/null | grep -q -- --allow-dirty && allow_dirty=(--allow-dirty)
quiet "$tmp/dist.log" meson dist -C "$build" --no-tests --formats xztar "${allow_dirty[@]}"
tarball=$build/meson-dist/dlbridge-$version.tar.xz
[ -f "$tarball" ] || { echo "41-c-release: no $tarball" >&2; exit 1; }
(cd "$build/meson-dist" && sha256sum -c "dlbridge-$version.tar.xz.sha256sum" >/dev/null) \
  || problem "the tarball does not match its .sha256sum"
echo "  $(basename "$tarball")  $(stat -c %s "$tarball") bytes, $(tar -tJf "$tarball" | wc -l) entries"
tar -tJf "$tarball" >"$tmp/list"
for want in meson.build meson_options.txt src/meson.build src/dlbridge.map include/dlbridge/dlbridge.h \
            cmake/dlbridgeConfig.cmake.in README.md; do
  grep -qx "dlbridge-$version/$want" "$tmp/list" || problem "the tarball lacks $want"
done
if grep -E "^dlbridge-$version/(build/|\.git/)" "$tmp/list" | head -n 3 | grep -q .; then
  problem "the tarball holds build output or git data: $(grep -E "^dlbridge-$version/(build/|\.git/)" "$tmp/list" | head -n 3 | tr '\n' ' ')"
fi

step "building the tarball with -Ddefault_library=both"
tar -xJf "$tarball" -C "$tmp"
prefix=$tmp/prefix
quiet "$tmp/setup.log" meson setup "$tmp/build" "$tmp/dlbridge-$version" --prefix="$prefix" --libdir=lib \
  -Ddefault_library=both -Dtests=disabled -Dbenchmarks=disabled -Dpython=disabled
quiet "$tmp/ninja.log" ninja -C "$tmp/build" -j2
quiet "$tmp/install.log" meson install -C "$tmp/build" --no-rebuild
lib=$prefix/lib
for f in libdlbridge.a libdlbridge.so.0 pkgconfig/dlbridge.pc cmake/dlbridge/dlbridgeConfig.cmake; do
  [ -e "$lib/$f" ] || problem "the install lacks lib/$f"
done
[ $fail -eq 0 ] || exit 1
exported=$(nm -D --defined-only "$lib/libdlbridge.so.0" | awk '{print $3}' | grep -vE '^(dlb_|DLBRIDGE_[0-9]+$)' || true)
[ -z "$exported" ] || problem "libdlbridge.so exports more than dlb_ symbols: $(echo "$exported" | head -n 5 | tr '\n' ' ')"
archive_symbols=$(nm -g --defined-only "$lib/libdlbridge.a" 2>/dev/null)
grep -q ' T dlb_export_versioned$' <<<"$archive_symbols" || problem "libdlbridge.a does not define dlb_export_versioned"
echo "  libdlbridge.so.0 $(stat -L -c %s "$lib/libdlbridge.so.0") bytes ($(nm -D --defined-only "$lib/libdlbridge.so.0" | grep -c ' dlb_') dlb_ symbols), libdlbridge.a $(stat -c %s "$lib/libdlbridge.a") bytes"
grep -q '^Libs.private:.*-lstdc++' "$lib/pkgconfig/dlbridge.pc" || problem "dlbridge.pc names no C++ runtime in Libs.private"

needs_libdlbridge() { readelf -d "$1" | grep 'NEEDED.*libdlbridge' >/dev/null; }
consumer=$root/tests/consumers/consumer.c

step "CMake: dlbridge::dlbridge_static and dlbridge::dlbridge"
mkdir -p "$tmp/cmake-src"
cat >"$tmp/cmake-src/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.13)
project(dlbridge_static_consumer LANGUAGES C CXX)
find_package(dlbridge $version CONFIG REQUIRED)
if(NOT dlbridge_HAS_STATIC OR NOT dlbridge_HAS_SHARED)
  message(FATAL_ERROR "dlbridge_HAS_STATIC='\${dlbridge_HAS_STATIC}' dlbridge_HAS_SHARED='\${dlbridge_HAS_SHARED}'")
endif()
add_executable(consumer_static "$consumer")
target_link_libraries(consumer_static PRIVATE dlbridge::dlbridge_static)
add_executable(consumer_shared "$consumer")
target_link_libraries(consumer_shared PRIVATE dlbridge::dlbridge)
EOF
quiet "$tmp/cmake-configure.log" cmake -S "$tmp/cmake-src" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$prefix"
quiet "$tmp/cmake-build.log" cmake --build "$tmp/cmake-build" -j2
if needs_libdlbridge "$tmp/cmake-build/consumer_static"; then
  problem "consumer_static (dlbridge::dlbridge_static) needs libdlbridge.so"
elif ! "$tmp/cmake-build/consumer_static"; then
  problem "consumer_static failed"
else
  echo "  consumer_static: no libdlbridge.so needed, ran"
fi
if ! needs_libdlbridge "$tmp/cmake-build/consumer_shared"; then
  problem "consumer_shared (dlbridge::dlbridge) does not need libdlbridge.so"
elif ! "$tmp/cmake-build/consumer_shared"; then
  problem "consumer_shared failed"
else
  echo "  consumer_shared: libdlbridge.so.0 needed, ran"
fi

step "cc + pkg-config --static, against the archive alone"
static_prefix=$tmp/static-prefix
mkdir -p "$static_prefix/lib/pkgconfig"
cp -r "$prefix/include" "$static_prefix/"
cp "$lib/libdlbridge.a" "$static_prefix/lib/"
sed "s|^prefix=.*|prefix=$static_prefix|" "$lib/pkgconfig/dlbridge.pc" >"$static_prefix/lib/pkgconfig/dlbridge.pc"
export PKG_CONFIG_PATH=$static_prefix/lib/pkgconfig
flags=$(pkg-config --cflags --static --libs dlbridge)
echo "  pkg-config --cflags --static --libs dlbridge: $flags"
# shellcheck disable=SC2086  # the flags are meant to be split
if cc -std=c99 -Wall -Wextra -pedantic -Werror -o "$tmp/pc-static" "$consumer" $flags >"$tmp/pc-static.log" 2>&1; then
  if needs_libdlbridge "$tmp/pc-static"; then problem "the pkg-config --static consumer needs libdlbridge.so"
  elif ! "$tmp/pc-static"; then problem "the pkg-config --static consumer failed"
  else echo "  pc-static: no libdlbridge.so needed, ran"
  fi
else
  cat "$tmp/pc-static.log" >&2
  problem "the pkg-config --static consumer did not link"
fi
# shellcheck disable=SC2046
if cc -std=c99 -o "$tmp/pc-plain" "$consumer" $(pkg-config --cflags --libs dlbridge) >"$tmp/pc-plain.log" 2>&1; then
  problem "linking the archive without --static's Libs.private worked: is libdlbridge.a still C++ inside?"
else
  echo "  without --static: the link fails as expected ($(grep -c 'undefined reference' "$tmp/pc-plain.log") undefined references)"
fi

[ $fail -eq 0 ] || exit 1
echo "41-c-release: dlbridge-$version.tar.xz built with both libraries; the static library linked from CMake and pkg-config --static, the shared from CMake"
