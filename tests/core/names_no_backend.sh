#!/bin/sh
# The core names no backend: no file under src/core/ mentions CUDA or
# OpenCL (in code, messages or comments). Backends register with the core
# (src/core/device_backend.hpp, src/device_backends.cpp); DLPack's own names
# of its device types live in src/devices/device_types.hpp.
set -eu
root=${1:?usage: names_no_backend.sh <source root>}
[ -d "$root/src/core" ] || { echo "no $root/src/core"; exit 2; }
if found=$(grep -rniE 'cuda|opencl|cl_mem' "$root/src/core"); then
  echo "src/core names a backend (register it instead, src/core/device_backend.hpp):"
  echo "$found"
  exit 1
fi
echo "src/core names no backend ($(ls "$root/src/core" | wc -l) files)"
