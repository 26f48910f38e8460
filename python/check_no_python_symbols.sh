#!/bin/sh
# libdlbridge has no Python in it: no dlb_py_* function, and no CPython
# symbol defined or needed (the Python binding's C side is the package's
# own extension module, dlbridge._glue in python/dlbridge/*.c).
set -eu
lib="$1"
bad=$(nm -D "$lib" | awk '{ print $NF }' | grep -E '^(_?Py|dlb_py_)' || true)
if [ -n "$bad" ]; then
  echo "Python symbols in $lib:"
  echo "$bad"
  exit 1
fi
needed=$(readelf -d "$lib" | grep NEEDED | grep -i python || true)
if [ -n "$needed" ]; then
  echo "$lib needs a Python library: $needed"
  exit 1
fi
echo "no Python symbol in $lib"
