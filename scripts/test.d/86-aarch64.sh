#!/usr/bin/env bash
# Stage: dlbridge on aarch64, under emulation (Debian's qemu-user-static,
# `qemu-aarch64-static -L <arm64 root>`; the root is Debian 12 arm64 with
# python3, python3-numpy, python3-pytest and python3-cffi, made and cached
# by scripts/arm64-root).
#   1. The C contract tests: the library and the core suite's tests
#      (tests/core: errors, buffers, bad input, concurrency, export, import,
#      backends, devices, storage, sub-byte types) and the copy engine's
#      (tests/copy), cross-built with Zig for aarch64-linux-gnu.2.28
#      (scripts/zig-cross; meson 1.12 of scripts/zig-env; ccache under
#      /var/cache/dlbridge/ccache), run by `meson test` through qemu as the
#      exe wrapper. Not run there: the copy suite's
#      CopySplit.StreamedTransposeIsSplitBySourceRows, which expects the
#      split of x86's streaming (non-temporal) stores.
#   2. libdlbridge.a for aarch64 (-Ddefault_library=both): a C program
#      (tests/consumers/consumer.c) linked against it, run under qemu.
#   3. The aarch64 manylinux_2_28 wheel (scripts/python-wheel OUT aarch64),
#      installed by pip for manylinux_2_28_aarch64 / CPython 3.11 into a
#      directory the emulated python3 finds (PYTHONPATH), runs the Python
#      suite's folders (tests/python-suites.txt) on the emulated CPython
#      3.11 with numpy 1.24. What cannot run there: tests that start
#      another aarch64 program (another Python, the sharing example):
#      qemu-user does not follow an emulated process's exec, so the kernel
#      refuses it ("Exec format error"); the stage counts and names those,
#      and fails on any other failure. Tests that need torch, JAX or the
#      peers skip themselves, as on any machine without them.
# Names what ran; fails on any failure; exit 77 when the root, Zig or the
# packaging tools cannot be installed (no archive or index).
#
#   bash scripts/test.d/86-aarch64.sh <build-dir>
# timeout: 900
set -euo pipefail

build=${1:?usage: 86-aarch64.sh <build-dir>}
[ -d "$build" ] || { echo "86-aarch64: no build directory '$build'" >&2; exit 2; }
build=$(cd "$build" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${DLBRIDGE_ENV_CACHE:-/var/cache/dlbridge}
fail=0
problem() { echo "86-aarch64: $*" >&2; fail=1; }
step() { echo "== 86-aarch64: $* ($((SECONDS)) s)"; }
quiet() {  # quiet LOG COMMAND...: the output goes to LOG, shown on failure
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { tail -n 60 "$log" >&2; echo "86-aarch64: '$*' failed (log: $log)" >&2; return 1; }
}

qemu=$(command -v qemu-aarch64-static || true)
[ -n "$qemu" ] || { echo "86-aarch64: skipped: qemu-aarch64-static is not installed (scripts/install-deps)"; exit 77; }
step "the arm64 root"
set +e
arm_root=$(bash "$root/scripts/arm64-root" | tail -n 1)
rc=$?
set -e
[ $rc -ne 3 ] || { echo "86-aarch64: skipped: the arm64 root could not be made (scripts/arm64-root)"; exit 77; }
[ $rc -eq 0 ] || exit 1
echo "  $arm_root: $(wc -l <"$arm_root/versions.txt") packages; $(grep -E '^(python3.11|python3-numpy|libc6) ' "$arm_root/versions.txt" | tr '\n' ';')"

work=$build/aarch64
mkdir -p "$work"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlbridge-aarch64.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# ------------------------------------------------------------ C, cross-built
step "cross-building the library and the C tests for aarch64 (Zig)"
set +e
zig_bin=$(bash "$root/scripts/zig-env" | tail -n 1)
rc=$?
set -e
[ $rc -eq 0 ] || { echo "86-aarch64: skipped: the Zig toolchain could not be installed (scripts/zig-env)"; exit 77; }
cross=$(bash "$root/scripts/zig-cross" aarch64 "$work/cross" | tail -n 1)
# The exe wrapper runs the tests under qemu; ccache keeps the objects
# (gtest is compiled into every test program) for the next run.
cat >"$work/cross/emulation.ini.new" <<EOF
[binaries]
c = ['ccache', '$work/cross/aarch64-cc']
cpp = ['ccache', '$work/cross/aarch64-c++']
exe_wrapper = ['$qemu', '-L', '$arm_root']
EOF
# Replaced only when its text changes: the build is not reconfigured for nothing.
if cmp -s "$work/cross/emulation.ini.new" "$work/cross/emulation.ini"; then
  rm -f "$work/cross/emulation.ini.new"
else
  mv -f "$work/cross/emulation.ini.new" "$work/cross/emulation.ini"
fi
export CCACHE_DIR=$cache/ccache CCACHE_COMPILERCHECK=content CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=2G
command -v ccache >/dev/null || sed -i "s/^c = \['ccache', /c = [/; s/^cpp = \['ccache', /cpp = [/" "$work/cross/emulation.ini"
cbuild=$work/build
if [ ! -f "$cbuild/build.ninja" ]; then
  quiet "$work/setup.log" "$zig_bin/meson" setup "$cbuild" "$root" --cross-file "$cross" \
    --cross-file "$work/cross/emulation.ini" -Ddefault_library=both -Dtests=enabled -Dbenchmarks=disabled \
    -Dpython=disabled -Dwerror=false -Dbuildtype=debugoptimized || exit 1
fi
# The core suite's and the copy suite's programs, the fake CUDA driver and
# the sharing example the Python tests use, and the two libraries.
targets=$(cd "$cbuild" && "$zig_bin/meson" introspect --tests | python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    if set(t["suite"]) & {"dlbridge:core", "dlbridge:copy", "core", "copy"} and t["cmd"][0].startswith(os.getcwd()):
        print(os.path.relpath(t["cmd"][0]))
' | sort -u)
targets="$targets tests/cuda/libfake_cuda.so tests/share/share_tensor src/libdlbridge.so.0.1.0 src/libdlbridge.a"
ccache -z >/dev/null 2>&1 || true
# shellcheck disable=SC2086
quiet "$work/ninja.log" "$zig_bin/ninja" -C "$cbuild" -j2 $targets || exit 1
echo "  built $(echo "$targets" | wc -w) targets; ccache: $(ccache -s 2>/dev/null | grep -E 'Hits|Misses' | tr -s ' ' | tr '\n' ';' || echo none)"
readelf -h "$cbuild/src/libdlbridge.so.0.1.0" | grep 'AArch64' >/dev/null || problem "the cross-built library is not AArch64"

step "meson test --suite core --suite copy, under qemu-aarch64"
# One test of the copy suite expects the x86 streaming-store split
# (non-temporal stores are SSE2 instructions; aarch64 has the scalar
# kernels, which do not stream): it runs on x86-64 only (named below).
x86_only=CopySplit.StreamedTransposeIsSplitBySourceRows
if quiet "$work/test.log" "$zig_bin/meson" test -C "$cbuild" --no-rebuild --suite core --suite copy \
     --no-suite copy_pool --print-errorlogs --num-processes 2 --timeout-multiplier 4 \
   && quiet "$work/test-pool.log" "$zig_bin/meson" test -C "$cbuild" --no-rebuild --suite copy_pool \
     --print-errorlogs --timeout-multiplier 4 --test-args="--gtest_filter=-$x86_only"; then
  grep -hE '^ *[0-9]+/[0-9]+ ' "$work/test.log" "$work/test-pool.log" | sed 's/^ */  /'
  echo "  not run on aarch64: $x86_only (x86 streaming stores)"
else
  problem "the C tests failed under emulation"
fi

step "libdlbridge.a for aarch64: a C program linked statically, run under qemu"
if quiet "$work/consumer.log" "$work/cross/aarch64-cc" -std=c99 -O1 -I"$root/include" -isystem "$work/cross/include" \
     -o "$tmp/consumer" "$root/tests/consumers/consumer.c" "$cbuild/src/libdlbridge.a" -lc++ -lpthread -ldl; then
  if readelf -d "$tmp/consumer" | grep 'NEEDED.*libdlbridge' >/dev/null; then
    problem "the static consumer needs libdlbridge.so"
  elif "$qemu" -L "$arm_root" "$tmp/consumer"; then
    echo "  consumer.c with libdlbridge.a (aarch64): ran, $(stat -c %s "$tmp/consumer") bytes"
  else
    problem "the static aarch64 consumer failed under qemu"
  fi
else
  problem "the static aarch64 consumer did not link"
fi

# --------------------------------------------------------- the aarch64 wheel
step "the aarch64 wheel (scripts/python-wheel $work/dist aarch64)"
set +e
artifacts=$(bash "$root/scripts/python-wheel" "$work/dist" aarch64)
rc=$?
set -e
[ $rc -ne 3 ] || { echo "86-aarch64: skipped: the packaging tools could not be installed"; exit 77; }
[ $rc -eq 0 ] || exit 1
wheel=$(echo "$artifacts" | sed -n 2p)
echo "  $(basename "$wheel"), $(stat -c %s "$wheel") bytes"
tools=$(bash "$root/scripts/build-tools-env" --path)
site=$tmp/site
quiet "$tmp/pip.log" "$tools/bin/python" -m pip install --disable-pip-version-check --no-index --no-deps \
  --only-binary=:all: --platform manylinux_2_28_aarch64 --python-version 3.11 --implementation cp \
  --target "$site" "$wheel" || exit 1

# CC for the tests that compile a C program against the library: Zig's cc
# for aarch64 (with the DLPack header), a script the kernel runs natively.
printf '#!/bin/sh\nexec "%s" -isystem "%s" "$@"\n' "$work/cross/aarch64-cc" "$work/cross/include" >"$tmp/cc-aarch64"
chmod +x "$tmp/cc-aarch64"
emulated() {  # emulated ARGS...: the arm64 root's python3 under qemu, seeing the installed wheel
  env -i PATH=/usr/bin:/bin HOME="$tmp" PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 CC="$tmp/cc-aarch64" \
    DLB_TEST_FAKE_CUDA="$cbuild/tests/cuda/libfake_cuda.so" DLB_SHARE_EXAMPLE="$cbuild/tests/share/share_tensor" \
    "$qemu" -L "$arm_root" "$arm_root/usr/bin/python3" "$@"
}
step "import dlbridge on the emulated aarch64 CPython"
said=$(cd "$tmp" && emulated - <<'PY'
import platform
import numpy as np
import dlbridge, dlbridge._lib
a = np.arange(24.0).reshape(4, 6)
t = dlbridge.from_dlpack(a.T, copy=True)
assert np.array_equal(np.from_dlpack(t), a.T)
print("%s: dlbridge %s from %s, library %s; a transposed copy is equal"
      % (platform.machine(), dlbridge.__version__, dlbridge.__file__, dlbridge._lib.path))
PY
) || { echo "$said" >&2; problem "import dlbridge failed on aarch64"; }
echo "  $said"
[[ $said == aarch64:* ]] || problem "the emulated interpreter is not aarch64: $said"

step "the Python suite on the emulated aarch64 CPython 3.11 (numpy $(grep '^python3-numpy ' "$arm_root/versions.txt" | cut -d' ' -f2))"
suites=()
while read -r dir; do suites+=("$root/tests/$dir"); done < <(grep -v '^#' "$root/tests/python-suites.txt")
# Every test runs. A test that starts another program for aarch64 (another
# Python through sys.executable, the sharing example) cannot work under
# qemu-user: the kernel is asked to run an aarch64 program natively and
# says "Exec format error" (errno 8). Such failures, and only those, are
# counted apart and named; any other failure fails the stage.
(cd "$tmp" && emulated -m pytest -q -p no:cacheprovider -rs --junitxml="$work/pytest.xml" "${suites[@]}") \
  >"$work/pytest.log" 2>&1 || true
if ! python3 - "$work/pytest.xml" >"$work/pytest-verdict.txt" <<'PY'; then
import sys
import xml.etree.ElementTree as ET

root = ET.parse(sys.argv[1]).getroot()
counts = {"passed": 0, "skipped": 0, "exec": 0, "failed": 0}
exec_names, failed_names = [], []
for case in root.iter("testcase"):
    name = "%s::%s" % (case.get("classname"), case.get("name"))
    bad = case.find("failure") if case.find("failure") is not None else case.find("error")
    if bad is not None:
        text = (bad.get("message") or "") + (bad.text or "")
        if "Exec format error" in text or "[Errno 8]" in text:
            counts["exec"] += 1
            exec_names.append(name)
        else:
            counts["failed"] += 1
            failed_names.append(name)
    elif case.find("skipped") is not None:
        counts["skipped"] += 1
    else:
        counts["passed"] += 1
print("%(passed)d passed, %(skipped)d skipped, %(exec)d not runnable under qemu-user (they start an aarch64 program),"
      " %(failed)d failed" % counts)
for n in exec_names:
    print("  not runnable under qemu-user: " + n)
for n in failed_names:
    print("  FAILED: " + n)
sys.exit(1 if failed_names or counts["passed"] == 0 else 0)
PY
  cat "$work/pytest-verdict.txt"
  tail -n 80 "$work/pytest.log" >&2
  problem "the Python suite failed on aarch64 (log: $work/pytest.log)"
else
  sed 's/^/  /' "$work/pytest-verdict.txt"
fi

[ $fail -eq 0 ] || exit 1
echo "86-aarch64: on emulated aarch64: the core and copy C tests, a static libdlbridge.a consumer, and the Python suite of $(basename "$wheel") ($(head -n 1 "$work/pytest-verdict.txt"))"
