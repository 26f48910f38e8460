#!/usr/bin/env bash
# Stage: the Rust workspace (rust/: dlbridge-sys, the declarations, and
# dlbridge, the safe layer) against the freshly built library: cargo test
# --offline (the layout test compiles its C program with cc, or $CC; the
# CUDA sharing test, tests/cuda_share.rs, loads the fake CUDA driver of
# tests/cuda named by DLB_TEST_FAKE_CUDA), then cargo clippy -D warnings and
# cargo fmt --check (both required: a missing tool fails the stage).
#
#   bash scripts/test.d/50-rust.sh <build-dir>
set -euo pipefail

build=${1:?usage: 50-rust.sh <build-dir>}
[ -d "$build" ] || { echo "50-rust: no build directory '$build'" >&2; exit 2; }
root=$(pwd)
[ -f "$root/rust/Cargo.toml" ] || { echo "50-rust: run from the repository root" >&2; exit 2; }
libdir=$(cd "$build/src" && pwd)
[ -e "$libdir/libdlbridge.so" ] || { echo "50-rust: $libdir/libdlbridge.so is missing" >&2; exit 1; }

if ! command -v cargo >/dev/null 2>&1; then
  echo "50-rust: cargo is not installed" >&2
  exit 1
fi

# tests/cuda_share.rs loads the fake CUDA driver the build made in place of
# libcuda.so.1.
fake_cuda=$(cd "$build" && pwd)/tests/cuda/libfake_cuda.so
[ -f "$fake_cuda" ] || { echo "50-rust: $fake_cuda is missing (build the tests)" >&2; exit 1; }
export DLB_TEST_FAKE_CUDA=$fake_cuda
# The Python package of this build, for the tests that hand tickets to and
# from a Python process (tests/share_tickets.rs).
export DLB_TEST_PYTHONPATH=$(cd "$build" && pwd)/python
export DLBRIDGE_LIB_DIR=$libdir
export DLBRIDGE_INCLUDE_DIR=$root/include
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
export CARGO_TERM_COLOR=never
cd "$root/rust"

echo "== 50-rust: cargo test --offline --workspace (library: $libdir)"
cargo test --offline --workspace

for tool in clippy fmt; do
  cargo "$tool" --version >/dev/null 2>&1 || { echo "50-rust: cargo $tool is not installed (rustup component add ${tool/fmt/rustfmt}, or Debian's rust-clippy / rustfmt)" >&2; exit 1; }
done
echo "== 50-rust: cargo clippy --offline --workspace --all-targets -- -D warnings"
cargo clippy --offline --workspace --all-targets -- -D warnings
echo "== 50-rust: cargo fmt --all --check"
cargo fmt --all --check
echo "== 50-rust: OK"
