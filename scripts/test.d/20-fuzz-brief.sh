#!/usr/bin/env bash
# Fuzzing, briefly: replays every committed corpus input (seeds and the
# reproducers of fixed bugs, regress-*) once, then fuzzes each target for
# DLB_FUZZ_BRIEF_SECONDS (default 15) under ASan + UBSan. The targets are
# built by scripts/fuzz from the sources (the build directory argument is
# not needed). Long runs: scripts/fuzz 600.
# timeout: 1200
set -euo pipefail
cd "$(dirname "$0")/../.."
export DLB_FUZZ_BUILD=${DLB_FUZZ_BUILD:-build-rel-fuzz}
scripts/fuzz --regress
# A fixed seed: the brief run in the test command explores the same
# inputs every time, so a red run means a change broke something, not
# that chance found an old bug (the long runs of scripts/fuzz explore).
DLB_FUZZ_SEED=${DLB_FUZZ_SEED:-20261202} scripts/fuzz "${DLB_FUZZ_BRIEF_SECONDS:-15}"
