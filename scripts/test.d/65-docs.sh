#!/usr/bin/env bash
# Stage: the API reference builds with every public symbol documented, and
# the runnable example at the top of each language guide works: the first
# ```c block of docs/c.md and of README.md and ```rust of docs/rust.md are
# extracted, built against <build-dir> and run (docs/python.md's runs in
# tests/python/test_docs.py, against the installed package); the counts and
# lists the guides state are what scripts/doc-facts computes; and
# docs/layout.md names every tracked source file (scripts/check-layout-doc).
#
#   bash scripts/test.d/65-docs.sh <build-dir>
set -euo pipefail

build=${1:?usage: 65-docs.sh <build-dir>}
root=$(pwd)
build=$(cd "$build" && pwd)
lib=$build/src/libdlbridge.so
[ -f "$lib" ] || { echo "65-docs: $lib not found (is '$1' a built dlbridge tree?)" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlbridge-docs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "65-docs: FAIL: $*" >&2; failed=1; }
step() { echo "== 65-docs: $*"; }

# first_block FILE LANG: prints the first fenced block opened with ```LANG.
first_block() {
  awk -v lang="$2" '
    !inside && $0 ~ "^```" lang "[[:space:]]*$" { inside = 1; next }
    inside && /^```/ { found = 1; exit }
    inside { print }
    END { exit found ? 0 : 1 }' "$1"
}

step "docs/layout.md names every source file (scripts/check-layout-doc)"
bash scripts/check-layout-doc || fail "docs/layout.md does not name every tracked source file"

step "counts and lists of the guides (scripts/doc-facts --check)"
python3 scripts/doc-facts --check "$build" || fail "a count or list in the guides is stale (scripts/doc-facts)"

step "API reference (scripts/docs --check)"
bash scripts/docs --check --output "$tmp/api" || fail "the API reference has undocumented symbols or doxygen warnings"

for doc in docs/c.md README.md; do
  step "$doc C example"
  if first_block "$doc" c > "$tmp/example.c"; then
    if cc -std=c99 -Wall -Wextra -pedantic -Werror -Iinclude "$tmp/example.c" -o "$tmp/example_c" \
         -L"$build/src" -ldlbridge -Wl,-rpath,"$build/src"; then
      "$tmp/example_c" || fail "$doc C example exited with $?"
    else
      fail "$doc C example does not compile"
    fi
  else
    fail "$doc has no \`\`\`c block"
  fi
done

step "docs/rust.md example"
if first_block docs/rust.md rust > "$tmp/main.rs"; then
  if [ -f rust/dlbridge/Cargo.toml ]; then
    mkdir -p "$tmp/rust-example/src"
    mv "$tmp/main.rs" "$tmp/rust-example/src/main.rs"
    cat > "$tmp/rust-example/Cargo.toml" <<TOML
[package]
name = "dlbridge-guide-example"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
dlbridge = { path = "$root/rust/dlbridge" }

[workspace]
TOML
    # The crate's build script gives rpaths to its own tests only (cargo does
    # not pass link arguments on to dependents), hence LD_LIBRARY_PATH here.
    (cd "$tmp/rust-example" && CARGO_TARGET_DIR="$tmp/rust-target" DLBRIDGE_LIB_DIR="$build/src" \
       DLBRIDGE_INCLUDE_DIR="$root/include" LD_LIBRARY_PATH="$build/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
       cargo run --offline --quiet) \
      || fail "docs/rust.md example failed"
  else
    fail "rust/dlbridge is missing, cannot run the docs/rust.md example"
  fi
else
  fail "docs/rust.md has no \`\`\`rust block"
fi

if [ "$failed" != 0 ]; then
  echo "65-docs: FAILED" >&2
  exit 1
fi
echo "65-docs: reference complete, guide examples ran"
