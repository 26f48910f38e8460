#!/usr/bin/env bash
# Stage: the DLPack conformance checker (python/dlbridge/check): its tests
# against deliberately broken producers (tests/check), then the reports in
# docs/conformance/ regenerated (scripts/conformance: every subject it
# knows). Fails when a test fails, when dlbridge's own report has a failed
# rule, or when a regenerated report differs from the committed one. Run
# with the interpreter that has Debian's numpy, torch and pytest.
#
#   bash scripts/test.d/70-conformance.sh <build-dir>
set -euo pipefail

build=${1:?usage: 70-conformance.sh <build-dir>}
[ -d "$build" ] || { echo "70-conformance: no build directory '$build'" >&2; exit 2; }
[ -f scripts/conformance ] || { echo "70-conformance: run from the repository root" >&2; exit 2; }

# How the package is found: the one place to change when that changes. The
# build directory holds a working copy of the package next to its extension.
package_env=("PYTHONPATH=$(cd "$build" && pwd)/python")

py=/usr/bin/python3
for module in numpy torch pytest; do
  if ! "$py" -c "import $module" >/dev/null 2>&1; then
    echo "70-conformance: $py cannot import $module (install python3-$module)" >&2
    exit 1
  fi
done

echo "== 70-conformance: pytest tests/check"
env "${package_env[@]}" PYTHONDONTWRITEBYTECODE=1 "$py" -m pytest -q -p no:cacheprovider tests/check

echo "== 70-conformance: scripts/conformance (docs/conformance/)"
set +e
env "${package_env[@]}" PYTHONDONTWRITEBYTECODE=1 "$py" scripts/conformance --require-ok dlbridge
rc=$?
set -e
# Exit 3: the peers' pages were not made (no peer environment); their
# pages and the summary (README.md), which lists them skipped, are left
# out of the comparison below.
[ $rc -eq 0 ] || [ $rc -eq 3 ] || exit 1
# The reports are tracked: one that the run changed (or a new one) means the
# committed report no longer says what the checker finds today.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  drift=$(git status --porcelain -- docs/conformance | { if [ $rc -eq 3 ]; then grep -v 'docs/conformance/README.md$'; else cat; fi; } || true)
  if [ -n "$drift" ]; then
    echo "$drift" | sed 's/^/  /'
    git diff --stat -- docs/conformance
    echo "70-conformance: the reports in docs/conformance drifted from what the checker finds (above);" \
      "review git diff docs/conformance and commit them" >&2
    exit 1
  fi
  echo "70-conformance: the reports in docs/conformance match what the checker finds"
  if [ $rc -eq 3 ]; then
    echo "70-conformance: skipped: the peers' reports (scripts/peers-env made no environment here)"
    exit 77
  fi
else
  echo "70-conformance: skipped: not a git work tree, the reports cannot be compared with the committed ones"
  exit 77
fi
