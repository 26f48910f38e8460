#!/usr/bin/env bash
# ThreadSanitizer over the CUDA backend with the test suite's fake driver:
# threads allocating, exporting to their own streams and to the per-thread
# default stream, and copying, while one shared buffer's stream changes under
# them. Uses the TSan build of stage 22 (build-rel-tsan), set up here if that
# stage did not run. Only the tests without deliberate races: the test that
# shows unordered reads seeing stale data is a race by design.
# Usage: 24-cuda-tsan.sh <build dir> (not used: own build).
# timeout: 1500
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=build-rel-tsan
if [[ ! -f $dir/build.ninja ]]; then
  meson setup "$dir" -Db_sanitize=thread -Db_lundef=false -Dbenchmarks=disabled -Dpython=disabled \
    >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; exit 1; }
fi
# A build without the CUDA backend (-Dcuda=disabled) has no CUDA tests: a
# skip. Any other build error is a failure.
if ! meson introspect --targets "$dir" | grep '"name": "test_cuda"' >/dev/null; then
  echo "24-cuda-tsan: skipped: $dir has no CUDA tests (configured with -Dcuda=disabled)"
  exit 77
fi
ninja -C "$dir" -j2 tests/cuda/test_cuda tests/cuda/libfake_cuda.so
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
run=()
if command -v setarch >/dev/null && setarch "$(uname -m)" -R true 2>/dev/null; then
  run=(setarch "$(uname -m)" -R)
fi
DLB_TEST_CUDA_DRIVER=$PWD/$dir/tests/cuda/libfake_cuda.so "${run[@]}" "$dir/tests/cuda/test_cuda" \
  --gtest_filter='CudaTest.Threads:CudaTest.ExportTo*:CudaTest.BufferAllocOfCudaMemory:CudaTest.Import*:FakeCudaTest.*'
