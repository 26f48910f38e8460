#!/usr/bin/env bash
# Node.js: one export + release (b.exportVersioned().close()) against its
# N-API floor (a bare napi_create_external with a finalizer, and an empty
# addon call, bench/floor_addon.c) timed in the same process, and against C
# (bindings/bench/export_c.c) in the same run. The package is the npm
# tarball installed over the release build (scripts/bench-build;
# bindings/node/build.sh). ROUNDS fresh processes of each, interleaved;
# each process prints the median of its own rounds (after warm-up); this
# prints the median over the processes (min..max) and the ratios:
# export / external per process, and export / C.
#
#   [N=OPS] bash bindings/node/bench/run.sh [ROUNDS]      (default 5 rounds, N 1000000)
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds=${1:-5}
n=${N:-1000000}  # operations per round in the Node process (C: twice as many)
build=$(pwd)/$(scripts/bench-build 2>/dev/null | tail -n 1)
out=$build/bindings-bench
mkdir -p "$out"
cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Iinclude bindings/bench/export_c.c -L"$build/src" -ldlbridge \
  -Wl,-rpath,"$build/src" -o "$out/export_c"
bash bindings/node/build.sh "$build" >/dev/null
nodeinc=$(dirname "$(readlink -f "$(command -v node)")")/../include/node
cc -shared -fPIC -O2 -I"$nodeinc" bindings/node/bench/floor_addon.c -o "$out/floor_addon.node"

declare -A runs
for ((r = 1; r <= rounds; r++)); do
  runs[c]+=" $("$out/export_c" $((2 * n)) | awk '{print $2}')"
  o=$(DLBRIDGE_NODE=$build/node_modules/dlbridge DLB_BENCH_FLOOR_ADDON=$out/floor_addon.node \
      node bindings/node/bench/export.js "$n")
  runs[export]+=" $(echo "$o" | awk '$1 == "export" {print $2}')"
  runs[external]+=" $(echo "$o" | awk '$1 == "external" {print $2}')"
  runs[call]+=" $(echo "$o" | awk '$1 == "call" {print $2}')"
  runs[ratio]+=" $(echo "$o" | awk '$1 == "export" {e = $2} $1 == "external" {x = $2} END {printf "%.2f", e / x}')"
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {printf "%s (%s..%s)", v[int((NR + 1) / 2)], v[1], v[NR]}'; }
mid() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
c=$(echo "${runs[c]}" | mid)
echo "ns per operation, median over $rounds fresh processes (min..max); ratio to C"
for k in c export external call; do
  printf '%-9s %-28s %s\n' "$k" "$(echo "${runs[$k]}" | median)" \
    "$(awk -v a="$(echo "${runs[$k]}" | mid)" -v b="$c" 'BEGIN {printf "%.1f", a / b}')"
done
echo "export / external, per process: $(echo "${runs[ratio]}" | median)"
