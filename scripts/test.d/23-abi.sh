#!/usr/bin/env bash
# ABI check: compares the library in the given build directory with the
# committed baseline abi/libdlbridge.abi (abidw dump, abigail-tools 2.2).
# Added functions and types are allowed; a removed or changed symbol or
# type fails (abidiff --no-added-syms exits 4 for a change, 12 for an
# incompatible one such as a removal). Regenerate the baseline on purpose
# with scripts/update-abi. Usage: 23-abi.sh <built meson build directory>
set -uo pipefail
build=$(cd "$1" && pwd)
cd "$(dirname "$0")/../.."
lib=$build/src/libdlbridge.so
[[ -e $lib ]] || { echo "abi: $lib not found"; exit 1; }
abidiff --no-added-syms --headers-dir1 include/dlbridge --headers-dir2 include/dlbridge \
  abi/libdlbridge.abi "$lib"
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "abi: the library's ABI differs from abi/libdlbridge.abi (abidiff exit $rc:" \
    "$( ((rc & 8)) && echo incompatible change)$( ((rc & 4)) && echo ' change')$( ((rc & 1)) && echo ' tool error'))"
  echo "abi: if the change is intended (and the SONAME/version says so), run scripts/update-abi"
  exit 1
fi
echo "abi: $(grep -c "<elf-symbol name='dlb_" abi/libdlbridge.abi) exported dlb_ symbols match the baseline"
