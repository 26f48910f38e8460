#!/usr/bin/env bash
# ThreadSanitizer: a separate build (build-rel-tsan) of the library and its
# tests with -fsanitize=thread, running the core suite (concurrency tests:
# one buffer exported, released and deleted from many threads, deleters on
# other threads, concurrent imports, last-error isolation) and the
# reliability suite, and the copy threads (copy_pool: split copies from
# many threads while the setting changes). Usage: 22-tsan.sh <build dir> (not used: own build).
# timeout: 1500
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=build-rel-tsan
if [[ ! -f $dir/build.ninja ]]; then
  meson setup "$dir" -Db_sanitize=thread -Db_lundef=false -Dbenchmarks=disabled -Dpython=disabled \
    >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; exit 1; }
fi
ninja -C "$dir" -j2
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
export DLB_TEST_ITERATIONS=${DLB_TEST_ITERATIONS:-20000}
# Newer kernels map memory where gcc 12's TSan does not expect it; running
# without address randomisation avoids "unexpected memory mapping".
run=()
if command -v setarch >/dev/null && setarch "$(uname -m)" -R true 2>/dev/null; then
  run=(setarch "$(uname -m)" -R)
fi
"${run[@]}" meson test -C "$dir" --suite core --suite reliability --suite copy_pool --print-errorlogs --num-processes 1 \
  --timeout-multiplier 5
