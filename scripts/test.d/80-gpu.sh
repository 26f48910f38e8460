#!/usr/bin/env bash
# Stage: the checks that need a real GPU (scripts/gpu-check: the CUDA
# backend's tests and CUDA IPC across processes against the machine's
# driver). scripts/test starts it only on a machine kind with an NVIDIA
# device; elsewhere it counts as skipped, in CI too.
#
#   bash scripts/test.d/80-gpu.sh <build-dir>   (the argument is not used: own build)
# needs: gpu
# timeout: 600
set -euo pipefail
cd "$(dirname "$0")/../.."
exec bash scripts/gpu-check
