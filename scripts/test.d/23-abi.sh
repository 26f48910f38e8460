#!/usr/bin/env bash
# ABI check: compares the library in the given build directory with the
# committed baseline abi/libdlbridge.abi (abidw dump, abigail-tools 2.2).
# Every dlb_ symbol the library exports must be in the baseline (abidiff
# --no-added-syms would let a new one through unchecked); a removed or
# changed symbol or type fails (abidiff exits 4 for a change, 12 for an
# incompatible one such as a removal). Regenerate the baseline on purpose
# with scripts/update-abi. Usage: 23-abi.sh <built meson build directory>
set -uo pipefail
build=$(cd "$1" && pwd)
cd "$(dirname "$0")/../.."
lib=$build/src/libdlbridge.so
[[ -e $lib ]] || { echo "abi: $lib not found"; exit 1; }

exported=$(nm -D --defined-only "$lib" | awk '$2 != "A" && $3 ~ /^dlb_/ { sub(/@.*/, "", $3); print $3 }' | sort -u)
baseline=$(sed -n "s/.*<elf-symbol name='\(dlb_[A-Za-z0-9_]*\)'.*/\1/p" abi/libdlbridge.abi | sort -u)
missing=$(comm -23 <(echo "$exported") <(echo "$baseline"))
if [[ -n $missing ]]; then
  echo "abi: exported but not in abi/libdlbridge.abi (nothing checks their ABI):"
  echo "$missing" | sed 's/^/  /'
  echo "abi: run scripts/update-abi and commit the baseline with the change that adds them"
  exit 1
fi

abidiff --no-added-syms --headers-dir1 include/dlbridge --headers-dir2 include/dlbridge \
  abi/libdlbridge.abi "$lib"
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "abi: the library's ABI differs from abi/libdlbridge.abi (abidiff exit $rc:" \
    "$( ((rc & 8)) && echo incompatible change)$( ((rc & 4)) && echo ' change')$( ((rc & 1)) && echo ' tool error'))"
  echo "abi: if the change is intended (and the SONAME/version says so), run scripts/update-abi"
  exit 1
fi
echo "abi: the $(echo "$exported" | wc -l) exported dlb_ symbols are all in the baseline, which matches"
