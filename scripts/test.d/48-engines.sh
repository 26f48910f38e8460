#!/usr/bin/env bash
# Stage: dlbridge tensors through the engines of the pinned engine
# environment (scripts/engines-env: CPython 3.12, Ray, Dask distributed,
# numpy 2, JAX): pickle protocol 5 with out-of-band buffers
# (tests/engines/test_pickle5.py, hypothesis included), a local Ray
# (ray.init(num_cpus=2)) with its object store, tasks and actors, a Dask
# LocalCluster of two worker processes, and the example of docs/engines.md.
# Everything listens on the loopback address only
# (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes Ray use 127.0.0.1; the Dask
# cluster is started on 127.0.0.1).
#
#   bash scripts/test.d/48-engines.sh <build-dir>
#
# No environment, or a package of python/requirements/engines.txt missing
# or at another version, fails the stage: it never skips.
set -euo pipefail

build=${1:?usage: 48-engines.sh <build-dir>}
[ -d "$build" ] || { echo "48-engines: no build directory '$build'" >&2; exit 2; }
build=$(cd "$build" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
pkg=$build/python
[ -f "$pkg/dlbridge/__init__.py" ] || { echo "48-engines: $pkg/dlbridge is missing (configure with -Dpython=enabled)" >&2; exit 1; }

set +e
env_dir=$(bash "$root/scripts/engines-env" | tail -n 1)
rc=$?
set -e
[ $rc -eq 0 ] || { echo "48-engines: FAIL: scripts/engines-env made no environment ($rc)" >&2; exit 1; }
py=$env_dir/bin/python

# Every pin present at its version (a package named in the lock and absent fails).
"$py" - "$root/python/requirements/engines.txt" <<'EOF' || exit 1
import sys
from importlib import metadata

wrong = []
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, version = line.split("==")
    try:
        found = metadata.version(name)
    except metadata.PackageNotFoundError:
        found = None
    if found != version:
        wrong.append("%s==%s (found: %s)" % (name, version, found or "absent"))
if wrong:
    sys.exit("48-engines: FAIL: the engine environment lacks " + ", ".join(wrong))
EOF

outside=$(mktemp -d "${TMPDIR:-/tmp}/dlbridge-engines.XXXXXX")
trap 'rm -rf "$outside"' EXIT
cd "$outside"
export PYTHONPATH=$pkg PYTHONDONTWRITEBYTECODE=1 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 \
  XLA_FLAGS=--xla_force_host_platform_device_count=2 JAX_PLATFORMS=cpu
echo "== 48-engines: $("$py" -c 'import sys, numpy, ray, distributed, jax; print("Python %s, numpy %s, ray %s, distributed %s, jax %s" % (sys.version.split()[0], numpy.__version__, ray.__version__, distributed.__version__, jax.__version__))')"

echo "== 48-engines: docs/engines.md example"
awk '!inside && /^```python[[:space:]]*$/ { inside = 1; next }
     inside && /^```/ { exit }
     inside { print }' "$root/docs/engines.md" > example.py
[ -s example.py ] || { echo "48-engines: FAIL: docs/engines.md has no \`\`\`python block" >&2; exit 1; }
env -u LD_LIBRARY_PATH "$py" example.py

echo "== 48-engines: pytest tests/engines (package: $pkg)"
env -u LD_LIBRARY_PATH "$py" -m pytest -q -p no:cacheprovider "$root/tests/engines"
