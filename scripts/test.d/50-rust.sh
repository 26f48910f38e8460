#!/usr/bin/env bash
# Stage: the Rust workspace (rust/: dlbridge-sys, the declarations;
# dlbridge, the safe layer and its pyo3 feature; dlbridge-pytest, a test
# extension module) against the freshly built library, found the way users
# find it: pkg-config (the build's meson-uninstalled dlbridge.pc).
#   1. cargo test --offline --locked: the crates' tests, with
#      dlbridge-sys's tests/bindgen.rs (bindgen reads dlbridge.h; every
#      function, struct and constant compared with the hand-written
#      declarations) and the layout test (its C program compiled with cc,
#      or $CC); the CUDA sharing test loads the fake driver of tests/cuda;
#   2. cargo clippy -D warnings and cargo fmt --check (both required);
#   3. dlbridge-sys's build script without pkg-config and DLBRIDGE_LIB_DIR
#      stops with the message naming both;
#   4. cargo publish --dry-run of dlbridge-sys and dlbridge together (cargo
#      packages both, then verifies dlbridge against the packaged
#      dlbridge-sys in a local registry; asks crates.io's index);
#   5. the pyo3 feature from Python: dlbridge-pytest built, imported by the
#      peer environment's CPython 3.12 (scripts/peers-env), and its pytest
#      suite run with numpy 2, torch 2, JAX and this build's dlbridge
#      Python package as producers and consumers.
# Crates come from scripts/rust-env (fetched once into a cargo home under
# /var/cache/dlbridge, with a shared target directory there): warm, about
# 2 minutes on 2 cores; cold (pyo3, bindgen and syn compiled), about 6.
# timeout: 900
#
#   bash scripts/test.d/50-rust.sh <build-dir>
set -euo pipefail

build=${1:?usage: 50-rust.sh <build-dir>}
[ -d "$build" ] || { echo "50-rust: no build directory '$build'" >&2; exit 2; }
root=$(pwd)
[ -f "$root/rust/Cargo.toml" ] || { echo "50-rust: run from the repository root" >&2; exit 2; }
build=$(cd "$build" && pwd)
libdir=$build/src
[ -e "$libdir/libdlbridge.so" ] || { echo "50-rust: $libdir/libdlbridge.so is missing" >&2; exit 1; }
[ -f "$build/meson-uninstalled/dlbridge-uninstalled.pc" ] || { echo "50-rust: $build/meson-uninstalled has no dlbridge-uninstalled.pc" >&2; exit 1; }

PATH=$PATH:$HOME/.cargo/bin
if ! command -v cargo >/dev/null 2>&1; then
  echo "50-rust: cargo is not installed" >&2
  exit 1
fi
for tool in clippy fmt; do
  cargo "$tool" --version >/dev/null 2>&1 || { echo "50-rust: cargo $tool is not installed (rustup component add ${tool/fmt/rustfmt}, or Debian's rust-clippy / rustfmt)" >&2; exit 1; }
done

env_out=$(scripts/rust-env) || { echo "50-rust: scripts/rust-env failed" >&2; exit 1; }
export CARGO_HOME=$(tail -n 2 <<<"$env_out" | head -n 1)
export CARGO_TARGET_DIR=$(tail -n 1 <<<"$env_out")

# tests/cuda_share.rs loads the fake CUDA driver the build made in place of
# libcuda.so.1.
fake_cuda=$build/tests/cuda/libfake_cuda.so
[ -f "$fake_cuda" ] || { echo "50-rust: $fake_cuda is missing (build the tests)" >&2; exit 1; }
export DLB_TEST_FAKE_CUDA=$fake_cuda
# The Python package of this build, for the tests that hand tickets to and
# from a Python process (tests/share_tickets.rs).
export DLB_TEST_PYTHONPATH=$build/python
export DLBRIDGE_INCLUDE_DIR=$root/include
# The library as pkg-config finds it (dlbridge-sys's build script); a
# dlbridge.pc installed elsewhere comes after this one.
export PKG_CONFIG_PATH=$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
unset DLBRIDGE_LIB_DIR DLBRIDGE_NO_PKG_CONFIG
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
export CARGO_TERM_COLOR=never
cd "$root/rust"

echo "== 50-rust: cargo test --offline --locked (library: pkg-config, $libdir)"
cargo test --offline --locked
echo "== 50-rust: the bindgen comparison"
cargo test --offline --locked -p dlbridge-sys --test bindgen -q -- --nocapture 2>&1 | grep -E "^compared|test result"

# The peer environment's interpreter: pyo3's build reads its configuration
# (clippy of dlbridge-pytest too).
peers_rc=0
peers_out=$(cd "$root" && scripts/peers-env) || peers_rc=$?
[ "$peers_rc" -eq 0 ] || { echo "50-rust: FAILED: no peer environment (scripts/peers-env exit $peers_rc)" >&2; exit 1; }
python=$(tail -n 1 <<<"$peers_out")/bin/python
export PYO3_PYTHON=$python

echo "== 50-rust: cargo clippy --offline --locked --workspace --all-targets -- -D warnings"
cargo clippy --offline --locked --workspace --all-targets -- -D warnings
echo "== 50-rust: cargo fmt --all --check"
cargo fmt --all --check

echo "== 50-rust: dlbridge-sys's build script without pkg-config or DLBRIDGE_LIB_DIR"
probe_log=$(mktemp)
trap 'rm -f "$probe_log"; rm -rf "${pymod:-}"' EXIT
if DLBRIDGE_NO_PKG_CONFIG=1 CARGO_TARGET_DIR=$CARGO_TARGET_DIR-probe cargo build --offline --locked -p dlbridge-sys >"$probe_log" 2>&1; then
  echo "50-rust: the build found a library with neither pkg-config nor DLBRIDGE_LIB_DIR" >&2
  exit 1
fi
grep -q "pkg-config does not know the package 'dlbridge'.*DLBRIDGE_LIB_DIR is not set" "$probe_log" ||
  { cat "$probe_log" >&2; echo "50-rust: the failure does not name pkg-config and DLBRIDGE_LIB_DIR" >&2; exit 1; }
grep -o "cargo::error=.*" "$probe_log" | cut -c1-160

echo "== 50-rust: cargo publish --dry-run -p dlbridge-sys -p dlbridge"
dirty=()
[ "${CI:-}" = "true" ] || dirty=(--allow-dirty)
# target/package/ and the uplifted libdlbridge_pytest.so below are one path
# for every clone sharing the target directory: each step holds a lock.
lock=$CARGO_TARGET_DIR/.dlbridge-stage.lock
flock "$lock" cargo publish --dry-run --locked "${dirty[@]}" -p dlbridge-sys -p dlbridge

echo "== 50-rust: docs/rust.md's install line in a fresh cargo project"
# The ```sh block after `<!-- install: cargo -->`, run as written but for
# its placeholder /path/to/dlbridge, which names this checkout; then the
# project builds and runs against the crate it added.
app=$(mktemp -d)/app
cargo new --quiet --vcs none "$app"
line=$(bash "$root/scripts/install-doc-block" cargo docs/rust.md)
echo "  \$ $line"
(cd "$app" && CARGO_NET_OFFLINE=true bash -euo pipefail -c "${line//\/path\/to\/dlbridge/$root}")
cat >"$app/src/main.rs" <<'RS'
fn main() {
    let b = dlbridge::Buffer::alloc(dlbridge::DLDataType::F32, &[2, 3]).expect("alloc");
    println!("{} elements, live exports {}", b.numel(), dlbridge::live_exports());
}
RS
(cd "$app" && cargo run --offline --quiet)
rm -rf "$(dirname "$app")"

echo "== 50-rust: the python feature from Python ($("$python" --version))"
pymod=$(mktemp -d)
flock "$lock" bash -c 'cargo build --offline --locked -p dlbridge-pytest &&
  cp "$CARGO_TARGET_DIR/debug/libdlbridge_pytest.so" "$1/dlbridge_pytest.abi3.so"' _ "$pymod"
# The build's Python package beside it: tensors both ways, one library.
pytest_log=$pymod/pytest.log
(cd "$root/rust/dlbridge-pytest" && PYTHONPATH=$pymod:$build/python "$python" -m pytest -q -p no:cacheprovider -rs tests/test_python.py) | tee "$pytest_log"
# The peer environment has every producer: a skipped test is a failure here.
if grep -q "skipped" "$pytest_log"; then
  echo "50-rust: FAILED: a producer of the pyo3 tests is missing (skipped above)" >&2
  exit 1
fi
echo "50-rust: OK (cargo test, bindgen comparison, clippy, fmt, publish --dry-run of both crates, pyo3 from Python)"
