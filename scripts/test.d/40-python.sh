#!/usr/bin/env bash
# Stage: the Python package as a Debian 12 user without a package index
# installs it: the offline route of docs/python.md, run as written
# (`pip install --no-build-isolation .` into a fresh virtual environment
# that sees Debian's meson-python 0.12, numpy, torch, cffi, pytest,
# hypothesis and mypy: --system-site-packages), with no index reachable
# (PIP_NO_INDEX). Checks what was installed, and from a directory outside
# the source tree runs `mypy --strict` over the installed package and the
# whole Python suite (the folders of tests/python-suites.txt: tests/python,
# tests/share) against it: the DLPack exchanges with
# numpy and torch, the buffer protocol, lifetimes (threads, no GIL, exit
# with exports alive), the cffi cdef, CUDA producers against the fake CUDA
# driver of tests/cuda, and the property tests with a fixed seed and a
# bounded example count, sharing across processes (the C example's
# producer and consumer, built by the tests, against Python).
#
#   bash scripts/test.d/40-python.sh <build-dir>
#
# 43-sdist.sh builds the sdist and the manylinux wheel in isolation and runs
# the suites with that wheel on every CPython of the machine.
set -euo pipefail

build=${1:?usage: 40-python.sh <build-dir>}
[ -d "$build" ] || { echo "40-python: no build directory '$build'" >&2; exit 2; }
build=$(cd "$build" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ -f "$root/pyproject.toml" ] || { echo "40-python: $root/pyproject.toml is missing" >&2; exit 2; }

py=/usr/bin/python3
for module in numpy torch cffi pytest hypothesis mypy mesonpy venv; do
  if ! "$py" -c "import $module" >/dev/null 2>&1; then
    echo "40-python: $py cannot import $module (scripts/install-deps installs it)" >&2
    exit 1
  fi
done
version=$(meson introspect --projectinfo "$build" | "$py" -c 'import json, sys; print(json.load(sys.stdin)["version"])')

outside=$(mktemp -d "${TMPDIR:-/tmp}/dlbridge-python.XXXXXX")
trap 'rm -rf "$outside"' EXIT
home=$outside/home
mkdir -p "$home"

echo "== 40-python: the offline route of docs/python.md, from $root"
block=$(bash "$root/scripts/install-doc-block" offline)
echo "$block" | sed 's/^/  $ /'
# ninja -j2 (two cores); no package index; the commands' ~ is $home.
log=$outside/offline.log
if ! (cd "$root" && env -u PYTHONPATH -u LD_LIBRARY_PATH HOME="$home" PATH=/usr/bin:/bin \
        PIP_NO_INDEX=1 PIP_CONFIG_SETTINGS=compile-args=-j2 PIP_DISABLE_PIP_VERSION_CHECK=1 \
        bash -euo pipefail -c "$block") >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "40-python: the offline route of docs/python.md failed" >&2
  exit 1
fi
printed=$(tail -n 1 "$log")
[ "$printed" = "$version" ] || { echo "40-python: the installed package says version '$printed', meson '$version'" >&2; exit 1; }
echo "  -> dlbridge $printed"
venv=$home/venv-dlbridge

echo "== 40-python: what was installed"
cd "$outside"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
where=$(env -u PYTHONPATH -u LD_LIBRARY_PATH "$venv/bin/python" -c \
  'import dlbridge, dlbridge._lib; print(dlbridge.__file__); print(dlbridge._lib.path)')
echo "$where" | sed 's/^/  /'
case "$(echo "$where" | sed -n 1p)" in
  "$site"/dlbridge/*) ;;
  *) echo "40-python: dlbridge was not imported from the venv's $site" >&2; exit 1 ;;
esac
case "$(echo "$where" | sed -n 2p)" in
  "$site"/.dlbridge.mesonpy.libs/libdlbridge.so*) ;;
  *) echo "40-python: the package did not load its bundled libdlbridge" >&2; exit 1 ;;
esac
fail=0
for want in dlbridge/__init__.py dlbridge/_glue.abi3.so dlbridge/_glue.pyi dlbridge/py.typed; do
  [ -e "$site/$want" ] || { echo "40-python: $want was not installed" >&2; fail=1; }
done
# A wheel carries no C development files or documentation.
extra=$(find "$venv" \( -name 'dlbridge.h' -o -name 'dlbridge.pc' -o -name 'dlbridgeConfig*.cmake' \
          -o -path '*/doc/dlbridge*' \) -print)
if [ -n "$extra" ]; then
  echo "$extra" >&2
  echo "40-python: C development files or documentation were installed (above)" >&2
  fail=1
fi
[ $fail -eq 0 ] || exit 1

runpath=$(readelf -d "$site/dlbridge/_glue.abi3.so" | sed -n 's/.*(RUNPATH).*\[\(.*\)\].*/\1/p')
if [ "$runpath" != '$ORIGIN/../.dlbridge.mesonpy.libs' ]; then
  echo "40-python: the installed extension's RUNPATH is '$runpath', not only the bundled library's" >&2
  exit 1
fi
echo "  extension RUNPATH: $runpath"

echo "== 40-python: mypy --strict over the installed package"
"$venv/bin/python" -m mypy --strict --no-incremental -p dlbridge

# The CUDA tests (test_cuda_fake.py) load the fake CUDA driver the build
# made (tests/cuda) in place of libcuda.so.1.
fake_cuda=$build/tests/cuda/libfake_cuda.so
[ -f "$fake_cuda" ] || { echo "40-python: $fake_cuda is missing (build the tests)" >&2; exit 1; }

share_example=$build/tests/share/share_tensor
[ -x "$share_example" ] || { echo "40-python: $share_example is missing (build the tests)" >&2; exit 1; }
suites=()
while read -r dir; do suites+=("$root/tests/$dir"); done < <(grep -v '^#' "$root/tests/python-suites.txt")

echo "== 40-python: pytest ${suites[*]#"$root/"} against the installed package (from $outside)"
env -u PYTHONPATH -u LD_LIBRARY_PATH PYTHONDONTWRITEBYTECODE=1 DLB_TEST_FAKE_CUDA="$fake_cuda" \
  DLB_SHARE_EXAMPLE="$share_example" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider --hypothesis-profile=ci "${suites[@]}"
