#!/usr/bin/env bash
# Stage: the documentation. The site builds with warnings as errors
# (scripts/docs --check: a broken link or reference, a C or Python name the
# guides cite that no longer exists, an undocumented public C symbol, a
# Doxygen or rustdoc warning); every code block of the guides runs
# (scripts/doc-examples, against <build-dir>); headless Chromium opens the
# site, follows every internal link and takes screenshots of the index, the
# Python guide and the Python API page into build/docs/screenshots
# (scripts/check-site); the
# counts and lists the guides state are what scripts/doc-facts computes; and
# docs/layout.md names every tracked source file (scripts/check-layout-doc).
# docs/maintainers/docs-site.md says how a page joins the site.
# timeout: 600
#
#   bash scripts/test.d/65-docs.sh <build-dir>
set -euo pipefail

build=${1:?usage: 65-docs.sh <build-dir>}
root=$(pwd)
build=$(cd "$build" && pwd)
lib=$build/src/libdlbridge.so
[ -f "$lib" ] || { echo "65-docs: $lib not found (is '$1' a built dlbridge tree?)" >&2; exit 2; }

# The Rust examples and `cargo doc` build offline from the cargo home of
# scripts/rust-env (the crates of rust/Cargo.lock).
CARGO_HOME=$(bash scripts/rust-env | tail -n 2 | head -n 1)
export CARGO_HOME DLBRIDGE_NO_PKG_CONFIG=1

failed=0
fail() { echo "65-docs: FAIL: $*" >&2; failed=1; }
step() { echo "== 65-docs: $* ($SECONDS s)"; }

step "docs/layout.md names every source file (scripts/check-layout-doc)"
bash scripts/check-layout-doc || fail "docs/layout.md does not name every tracked source file"

step "counts and lists of the guides (scripts/doc-facts --check)"
/usr/bin/python3 scripts/doc-facts --check "$build" || fail "a count or list in the guides is stale (scripts/doc-facts)"

step "the site, warnings as errors (scripts/docs --check)"
bash scripts/docs --check --build "$build" --output "$root/build/docs" \
  || fail "the site has broken references, warnings or undocumented symbols (above)"

step "every example of the guides (scripts/doc-examples)"
/usr/bin/python3 scripts/doc-examples "$build" || fail "an example of the guides failed (above)"

step "the site in headless Chromium (scripts/check-site)"
if [ -f "$root/build/docs/html/index.html" ]; then
  /usr/bin/python3 scripts/check-site --screenshots "$root/build/docs/screenshots" "$root/build/docs/html" \
    || fail "a page does not render or a link is dead (above)"
else
  fail "no site to open"
fi

if [ "$failed" != 0 ]; then
  echo "65-docs: FAILED" >&2
  exit 1
fi
echo "65-docs: site built without warnings, examples ran, links followed in Chromium ($SECONDS s)"
