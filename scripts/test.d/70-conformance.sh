#!/usr/bin/env bash
# Stage: the DLPack conformance checker (python/dlbridge/check): its tests
# against deliberately broken producers (tests/check), then the reports in
# docs/conformance/ regenerated on numpy, torch and dlbridge. Fails when a
# test fails or when dlbridge's own report has a failed rule. Run with the
# interpreter that has Debian's numpy, torch and pytest.
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
env "${package_env[@]}" PYTHONDONTWRITEBYTECODE=1 "$py" scripts/conformance --require-ok dlbridge
if command -v git >/dev/null && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  if ! git diff --quiet -- docs/conformance; then
    echo "70-conformance: the reports changed (git diff docs/conformance); commit them if expected"
  fi
fi
