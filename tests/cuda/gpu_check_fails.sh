#!/usr/bin/env bash
# scripts/gpu-check on a machine without a usable CUDA driver: exit 1 and a
# one-line FAIL summary that says why, for a missing driver and for the
# toolkit's link stub. Usage: gpu_check_fails.sh <source root>
set -uo pipefail
root=$1
check() {
  local driver=$1 want=$2 out rc
  out=$(DLB_TEST_CUDA_DRIVER=$driver bash "$root/scripts/gpu-check" 2>&1)
  rc=$?
  last=$(echo "$out" | tail -n 1)
  if [[ $rc -ne 1 ]]; then echo "driver $driver: exit $rc, want 1; output: $out"; return 1; fi
  if [[ $last != "gpu-check: FAIL ("*"$want"* ]]; then
    echo "driver $driver: last line \"$last\" does not say \"$want\""
    return 1
  fi
  echo "driver $driver: $last"
}
status=0
check /nonexistent/libcuda.so.1 "no CUDA driver" || status=1
stub=/usr/local/cuda/lib64/stubs/libcuda.so
if [[ -e $stub ]]; then check "$stub" "cuInit failed" || status=1; fi
exit $status
