#!/usr/bin/env bash
# Stage: the one wheel on the other CPython interpreters of the machine.
# The wheel 40-python.sh built (<build-dir>/python-wheel/dist; built here if
# missing) is installed with `pip install --no-index` into a fresh venv of
# each pyenv CPython 3.10, 3.12 and 3.13 (~/.pyenv/versions), and the tests
# that need neither numpy nor torch run there (the others skip themselves).
# pytest comes from Debian (/usr/lib/python3/dist-packages, pure Python):
# only its own packages are put on the venv's path, through a .pth file.
# An interpreter that is not installed is reported and skipped.
#
#   bash scripts/test.d/41-python-versions.sh <build-dir>
set -euo pipefail

build=${1:?usage: 41-python-versions.sh <build-dir>}
[ -d "$build" ] || { echo "41-python-versions: no build directory '$build'" >&2; exit 2; }
build=$(cd "$build" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

dist=$build/python-wheel/dist
wheel=$(ls "$dist"/dlbridge-*-abi3-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  echo "== 41-python-versions: no wheel from 40-python; building it"
  wheel=$(bash "$root/scripts/python-wheel" "$dist")
fi
echo "wheel: $(basename "$wheel")"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlbridge-pyversions.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Debian's pytest and what it imports, and nothing else of dist-packages.
debian=/usr/lib/python3/dist-packages
mkdir -p "$tmp/pytest-lib"
for name in pytest _pytest pluggy iniconfig py.py py packaging attr attrs exceptiongroup tomli; do
  [ -e "$debian/$name" ] && ln -s "$debian/$name" "$tmp/pytest-lib/$name"
done

ran=0
failed=0
for version in 3.10 3.12 3.13; do
  interpreter=$(ls -d "$HOME"/.pyenv/versions/"$version".*/bin/python3 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$interpreter" ]; then
    echo "== 41-python-versions: CPython $version is not installed here (~/.pyenv/versions/$version.*): skipped"
    continue
  fi
  echo "== 41-python-versions: CPython $version ($interpreter)"
  venv=$tmp/venv-$version
  "$interpreter" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --no-index --no-deps --disable-pip-version-check "$wheel"
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$tmp/pytest-lib" > "$site/debian-pytest.pth"
  if (cd "$tmp" && env -u PYTHONPATH -u LD_LIBRARY_PATH PYTHONDONTWRITEBYTECODE=1 \
        "$venv/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning \
        "$root/tests/python"); then
    ran=$((ran + 1))
  else
    echo "41-python-versions: FAILED on CPython $version" >&2
    failed=1
  fi
done
[ $failed -eq 0 ] || exit 1
echo "41-python-versions: passed on $ran interpreter(s)"
