#!/usr/bin/env bash
# Stage: the C example programs of examples/. Each is compiled as strict C99
# against the built library, run, and its output checked: producer and
# consumer against examples/expected/ (addresses normalised), errors and
# backend_fallback by the status lines they must print; then the demo's
# tour (with Debian's numpy and torch, and PoCL's OpenCL device for its
# step 3), and each program again under valgrind, leak-checked. A missing
# numpy, torch or valgrind fails the stage.
#
#   bash scripts/test.d/55-examples.sh <build-dir>
set -euo pipefail

build=${1:?usage: 55-examples.sh <build-dir>}
[ -d "$build" ] || { echo "55-examples: no build directory '$build'" >&2; exit 2; }
root=$(pwd)
[ -f "$root/examples/producer.c" ] || { echo "55-examples: run from the repository root" >&2; exit 2; }
libdir=$(cd "$build/src" && pwd)
[ -e "$libdir/libdlbridge.so" ] || { echo "55-examples: $libdir/libdlbridge.so is missing" >&2; exit 1; }

command -v valgrind >/dev/null 2>&1 || { echo "55-examples: valgrind is not installed (scripts/install-deps)" >&2; exit 1; }
/usr/bin/python3 -c "import numpy, torch" >/dev/null 2>&1 \
  || { echo "55-examples: /usr/bin/python3 cannot import numpy and torch (scripts/install-deps)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlbridge-examples.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
CC=${CC:-cc}
failed=0
fail() { echo "55-examples: FAIL: $*" >&2; failed=1; }

programs="producer consumer errors backend_fallback"
for p in $programs; do
  echo "== 55-examples: $p"
  if ! "$CC" -std=c99 -Wall -Wextra -pedantic -Werror -I "$root/include" "$root/examples/$p.c" \
      -o "$tmp/$p" "$libdir/libdlbridge.so" 2>"$tmp/$p.cc.log"; then
    cat "$tmp/$p.cc.log" >&2
    fail "$p does not compile cleanly"
    continue
  fi
  if ! "$tmp/$p" >"$tmp/$p.out" 2>&1; then
    cat "$tmp/$p.out" >&2
    fail "$p exited with a failure"
    continue
  fi
  cat "$tmp/$p.out"
done

normalise() { sed -E 's/0x[0-9a-f]+/0xADDR/g' "$1"; }
for p in producer consumer; do
  [ -f "$tmp/$p.out" ] || continue
  if ! diff -u "$root/examples/expected/$p.txt" <(normalise "$tmp/$p.out"); then
    fail "$p output differs from examples/expected/$p.txt"
  fi
done

# Lines that must appear, fixed strings, one per line.
expect_lines() {
  local out=$1; shift
  local line
  for line in "$@"; do
    grep -qF -- "$line" "$out" || fail "$(basename "$out" .out): missing line '$line'"
  done
}
if [ -f "$tmp/errors.out" ]; then
  expect_lines "$tmp/errors.out" \
    "status:  DLB_ERR_MALFORMED (11)" "message: shape[1] is -3" \
    "status:  DLB_ERR_UNSUPPORTED_DTYPE (5)" \
    "status:  DLB_ERR_INVALID_ARGUMENT (1)" \
    "status:  DLB_ERR_DELETED (3)" \
    "status:  DLB_ERR_READ_ONLY (8)" \
    "status:  DLB_ERR_VERSION (9)" \
    "dlb_status_name(99) = DLB_UNKNOWN_STATUS" \
    "6 of 6 calls failed as documented; live exports: 0"
  if grep -qE '^  message: *$' "$tmp/errors.out"; then fail "errors: a failing call left an empty message"; fi
fi
if [ -f "$tmp/backend_fallback.out" ]; then
  expect_lines "$tmp/backend_fallback.out" \
    "export, copy=IF_NEEDED -> DLB_OK" \
    "device cpu:0, IS_COPIED yes, values 1.5 3 4.5 6 7.5 9" \
    "export, copy=NEVER -> DLB_ERR_NOT_ZERO_COPY" \
    "backend 'remote'" \
    "export after dlb_buffer_delete -> DLB_ERR_DELETED" \
    "remote: storage freed" \
    "live exports: 0"
fi

# The demo's tour (examples/demo_tour.py), when numpy and torch are there.
if [ -x "$tmp/backend_fallback" ]; then
  echo "== 55-examples: demo tour"
  if PYTHONPATH="$(dirname "$libdir")/python" \
      /usr/bin/python3 "$root/examples/demo_tour.py" "$tmp/backend_fallback" >"$tmp/tour.out" 2>&1; then
    [ "$(grep -c '(same address)' "$tmp/tour.out")" -eq 4 ] || fail "demo tour: expected 4 zero-copy addresses"
    expect_lines "$tmp/tour.out" \
      "torch writes g[0, 1] = 42  -> numpy a[0, 1] = 42, C array[0][1] = 42" \
      "torch.from_dlpack(tensor):  shape (3, 3), strides (1, 4)" \
      "IS_COPIED yes" "DLB_ERR_NOT_ZERO_COPY" "DLB_ERR_DELETED" \
      "memory of backend 'opencl:0', which the host cannot read" "== a: True" \
      "dlbridge.live_exports() = 0 in this process"
  else
    cat "$tmp/tour.out" >&2
    fail "demo tour exited with a failure"
  fi
fi

for p in $programs; do
  [ -x "$tmp/$p" ] || continue
  echo "== 55-examples: valgrind $p"
  valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
    "$tmp/$p" >"$tmp/$p.vg.out" 2>&1 || { cat "$tmp/$p.vg.out" >&2; fail "$p under valgrind"; }
done

if [ "$failed" -ne 0 ]; then
  echo "55-examples: FAILED" >&2
  exit 1
fi
echo "== 55-examples: OK"
