#!/bin/sh
# Every dynamic symbol the library defines starts with dlb_ (the version
# node DLBRIDGE_0 is not a symbol of the code).
set -eu
lib="$1"
bad=$(nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' | grep -v '^dlb_' || true)
count=$(nm -D --defined-only "$lib" | awk '$2 != "A"' | wc -l)
if [ -n "$bad" ]; then
  echo "symbols without the dlb_ prefix exported from $lib:"
  echo "$bad"
  exit 1
fi
[ "$count" -ge 35 ] || { echo "only $count symbols exported from $lib"; exit 1; }
echo "$count exported symbols, all dlb_"
