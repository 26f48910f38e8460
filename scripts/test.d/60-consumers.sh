#!/usr/bin/env bash
# Stage: install dlbridge into a temporary prefix, check the installed
# layout, then build and run the three consumer projects of tests/consumers
# (CMake find_package, plain cc + pkg-config, meson subproject).
#
#   bash scripts/test.d/60-consumers.sh <build-dir>
#
# <build-dir> is the already built tree scripts/test passes; the staged
# install is configured separately (tests and benchmarks off) so that it has
# its own prefix.
set -euo pipefail

build=${1:?usage: 60-consumers.sh <build-dir>}
[ -d "$build" ] || { echo "60-consumers: no build directory '$build'" >&2; exit 2; }
root=$(pwd)
[ -f "$root/include/dlbridge/dlbridge.h" ] || { echo "60-consumers: run from the repository root" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlbridge-consumers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
pydir=$prefix/lib/python3/dist-packages
failed=0
fail() { echo "60-consumers: FAIL: $*" >&2; failed=1; }
step() { echo "== 60-consumers: $*"; }

step "staging an install into $prefix"
meson setup "$tmp/build" --prefix="$prefix" -Dtests=disabled -Dbenchmarks=disabled \
  -Dpython_installdir="$pydir" >"$tmp/setup.log" 2>&1 \
  || { cat "$tmp/setup.log" >&2; echo "60-consumers: meson setup failed" >&2; exit 1; }
ninja -C "$tmp/build" -j2 >"$tmp/ninja.log" 2>&1 \
  || { cat "$tmp/ninja.log" >&2; echo "60-consumers: build failed" >&2; exit 1; }
meson install -C "$tmp/build" --no-rebuild >"$tmp/install.log" 2>&1 \
  || { cat "$tmp/install.log" >&2; echo "60-consumers: meson install failed" >&2; exit 1; }

# ---------------------------------------------------------------- layout
step "checking the installed layout"
so=$(find "$prefix" -name libdlbridge.so | head -n 1)
[ -n "$so" ] || { find "$prefix" >&2; echo "60-consumers: no libdlbridge.so installed" >&2; exit 1; }
libdir=$(dirname "$so")
echo "libdir: ${libdir#"$prefix"/}"

soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[ -n "$soname" ] || fail "libdlbridge.so has no SONAME"
[ -L "$so" ] || fail "libdlbridge.so is not a symlink (development link)"
if [ -n "$soname" ]; then
  [ -L "$libdir/$soname" ] || fail "SONAME link $soname missing or not a symlink"
  [ "$(readlink "$so")" = "$soname" ] || fail "libdlbridge.so points to $(readlink "$so"), not $soname"
  real=$(readlink "$libdir/$soname" || true)
  [ -f "$libdir/$real" ] && [ ! -L "$libdir/$real" ] \
    || fail "$soname does not point to the real library file (got '$real')"
fi
exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | grep -v '^dlb_' || true)
[ -z "$exported" ] || fail "symbols without the dlb_ prefix exported: $exported"

[ -f "$prefix/include/dlbridge/dlbridge.h" ] || fail "include/dlbridge/dlbridge.h missing"
[ -f "$libdir/pkgconfig/dlbridge.pc" ] || fail "pkgconfig/dlbridge.pc missing"
for f in dlbridgeConfig.cmake dlbridgeConfigVersion.cmake; do
  [ -f "$libdir/cmake/dlbridge/$f" ] || fail "cmake/dlbridge/$f missing"
done

docdir=$prefix/share/doc/dlbridge
for f in concepts.md c.md python.md rust.md troubleshooting.md; do
  if [ -f "$root/docs/$f" ] && [ ! -f "$docdir/$f" ]; then
    fail "share/doc/dlbridge/$f missing (is subdir('docs') in meson.build?)"
  fi
done
if command -v doxygen >/dev/null 2>&1 && [ -d "$docdir" ]; then
  [ -f "$docdir/api/html/index.html" ] || fail "share/doc/dlbridge/api/html/index.html missing"
fi

if [ -f "$root/python/dlbridge/__init__.py" ]; then
  init=$(find "$prefix" -path '*/dlbridge/__init__.py' | head -n 1)
  if [ -z "$init" ]; then
    fail "the Python package dlbridge was not installed"
  else
    step "importing the installed Python package from ${init#"$prefix"/}"
    PYTHONPATH=$(dirname "$(dirname "$init")") \
      /usr/bin/python3 -c 'import dlbridge; t = dlbridge.empty((2, 3), "float32"); assert tuple(t.shape) == (2, 3); del t; assert dlbridge.live_exports() == 0; print("python package: ok")' \
      || fail "the installed Python package does not work"
  fi
fi

# A consumer must run against the staged library, not some other copy.
check_resolves_to_prefix() {
  local exe=$1 lib
  lib=$(LD_LIBRARY_PATH="$libdir" ldd "$exe" | awk '/libdlbridge/ {print $3}')
  case "$lib" in
    "$prefix"/*) ;;
    *) fail "$exe loads libdlbridge from '$lib', not from the staged prefix" ;;
  esac
}

# ------------------------------------------------------------ pkg-config
step "consumer: cc \$(pkg-config --cflags --libs dlbridge)"
mkdir -p "$tmp/pkgconfig"
if PKG_CONFIG_PATH="$libdir/pkgconfig" bash tests/consumers/pkgconfig/build.sh "$tmp/pkgconfig/consumer"; then
  check_resolves_to_prefix "$tmp/pkgconfig/consumer"
  LD_LIBRARY_PATH="$libdir" "$tmp/pkgconfig/consumer" || fail "pkg-config consumer failed"
else
  fail "pkg-config consumer did not build"
fi

# The C++ layer, installed beside the C header: the example of docs/cpp.md
# built with the installed headers only.
step "consumer: c++ -std=c++17 tests/cpp/example.cpp \$(pkg-config --cflags --libs dlbridge)"
[ -f "$prefix/include/dlbridge/dlbridge.hpp" ] || fail "include/dlbridge/dlbridge.hpp missing"
# shellcheck disable=SC2046  # the flags are meant to be split
if c++ -std=c++17 -Wall -Wextra -Werror -o "$tmp/pkgconfig/example_hpp" tests/cpp/example.cpp \
     $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs dlbridge); then
  LD_LIBRARY_PATH="$libdir" "$tmp/pkgconfig/example_hpp" >/dev/null || fail "the installed C++ layer's example failed"
else
  fail "the installed C++ layer's example did not build"
fi

# ----------------------------------------------------------------- CMake
step "consumer: CMake find_package(dlbridge CONFIG REQUIRED)"
cmake_gen=()
command -v ninja >/dev/null 2>&1 && cmake_gen=(-G Ninja)
if cmake -S tests/consumers/cmake -B "$tmp/cmake" "${cmake_gen[@]}" \
     -DCMAKE_PREFIX_PATH="$prefix" -DDLBRIDGE_MIN_VERSION=0.1 >"$tmp/cmake.log" 2>&1 \
   && cmake --build "$tmp/cmake" -j 2 >>"$tmp/cmake.log" 2>&1; then
  grep -- '-- dlbridge ' "$tmp/cmake.log" || true
  check_resolves_to_prefix "$tmp/cmake/consumer"
  LD_LIBRARY_PATH="$libdir" "$tmp/cmake/consumer" || fail "CMake consumer failed"
else
  cat "$tmp/cmake.log" >&2
  fail "CMake consumer did not build"
fi
# The version file must refuse a newer major than the one installed.
if cmake -S tests/consumers/cmake -B "$tmp/cmake-v99" -DCMAKE_PREFIX_PATH="$prefix" \
     -DDLBRIDGE_MIN_VERSION=99 >"$tmp/cmake-v99.log" 2>&1; then
  fail "find_package(dlbridge 99) succeeded; dlbridgeConfigVersion.cmake accepts any version"
fi

# ------------------------------------------------------ meson subproject
step "consumer: meson subproject with dependency('dlbridge')"
msp=$tmp/meson-subproject
cp -r tests/consumers/meson-subproject "$msp"
cp tests/consumers/consumer.c "$msp/"
mkdir -p "$msp/subprojects/dlbridge"
# The working tree's sources, without build directories or other ignored files.
git ls-files -z --cached --others --exclude-standard \
  | (cd "$root" && xargs -0 -r sh -c 'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done' sh) \
  | tar -C "$root" --null -T - -cf - | tar -C "$msp/subprojects/dlbridge" -xf -
if meson setup "$msp/build" "$msp" --force-fallback-for=dlbridge >"$tmp/msp.log" 2>&1 \
   && ninja -C "$msp/build" -j2 >>"$tmp/msp.log" 2>&1; then
  lib=$(ldd "$msp/build/consumer" | awk '/libdlbridge/ {print $3}')
  case "$lib" in
    "$msp/build/subprojects/dlbridge"/*) ;;
    *) fail "meson consumer loads libdlbridge from '$lib', not from the subproject" ;;
  esac
  "$msp/build/consumer" || fail "meson subproject consumer failed"
else
  cat "$tmp/msp.log" >&2
  fail "meson subproject consumer did not build"
fi

if [ "$failed" != 0 ]; then
  echo "60-consumers: FAILED" >&2
  exit 1
fi
echo "60-consumers: all three consumers built and ran against the staged install"
