#!/usr/bin/env bash
# Stage: the Python package as a user gets it. Builds the wheel once
# (scripts/python-wheel, into <build-dir>/python-wheel), checks what it
# holds, installs it into a fresh virtual environment that sees Debian's
# numpy, torch, cffi, pytest, hypothesis and mypy (--system-site-packages),
# and from a directory outside the source tree runs `mypy --strict` over the
# installed package and the whole Python suite (tests/python) against it:
# the DLPack exchanges with numpy and torch, the buffer protocol, lifetimes
# (threads, no GIL, exit with exports alive), the cffi cdef, CUDA producers
# against the fake CUDA driver of tests/cuda, and the property tests with a
# fixed seed and a bounded example count.
#
#   bash scripts/test.d/40-python.sh <build-dir>
#
# 41-python-versions.sh installs the same wheel into other interpreters.
set -euo pipefail

build=${1:?usage: 40-python.sh <build-dir>}
[ -d "$build" ] || { echo "40-python: no build directory '$build'" >&2; exit 2; }
build=$(cd "$build" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ -f "$root/pyproject.toml" ] || { echo "40-python: $root/pyproject.toml is missing" >&2; exit 2; }

py=/usr/bin/python3
for module in numpy torch cffi pytest hypothesis mypy mesonpy build venv; do
  if ! "$py" -c "import $module" >/dev/null 2>&1; then
    echo "40-python: $py cannot import $module (scripts/install-deps installs it)" >&2
    exit 1
  fi
done

work=$build/python-wheel
echo "== 40-python: building the wheel (scripts/python-wheel)"
wheel=$(bash "$root/scripts/python-wheel" "$work/dist")
echo "wheel: ${wheel#"$build"/}"

echo "== 40-python: wheel contents"
listing=$("$py" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$wheel")
echo "$listing" | sed 's/^/  /'
fail=0
for want in 'dlbridge/__init__.py' 'dlbridge/_glue.abi3.so' 'dlbridge/_glue.pyi' 'dlbridge/py.typed' \
            '.dlbridge.mesonpy.libs/libdlbridge.so'; do
  echo "$listing" | grep -q "^$want" || { echo "40-python: the wheel lacks $want" >&2; fail=1; }
done
if echo "$listing" | grep -E '(\.h$|\.pc$|cmake|/doc/|\.data/)'; then
  echo "40-python: the wheel holds C development files or documentation (above)" >&2
  fail=1
fi
[ $fail -eq 0 ] || exit 1

echo "== 40-python: installing into a fresh venv (--system-site-packages)"
venv=$work/venv
rm -rf "$venv"
"$py" -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install --quiet --no-index --no-deps "$wheel"

outside=$(mktemp -d "${TMPDIR:-/tmp}/dlbridge-python.XXXXXX")
trap 'rm -rf "$outside"' EXIT
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

runpath=$(readelf -d "$site/dlbridge/_glue.abi3.so" | sed -n 's/.*(RUNPATH).*\[\(.*\)\].*/\1/p')
if [ "$runpath" != '$ORIGIN/../.dlbridge.mesonpy.libs' ]; then
  echo "40-python: the installed extension's RUNPATH is '$runpath', not only the bundled library's" >&2
  exit 1
fi

echo "== 40-python: mypy --strict over the installed package"
"$venv/bin/python" -m mypy --strict --no-incremental -p dlbridge

# The CUDA tests (test_cuda_fake.py) load the fake CUDA driver the build
# made (tests/cuda) in place of libcuda.so.1.
fake_cuda=$build/tests/cuda/libfake_cuda.so
[ -f "$fake_cuda" ] || { echo "40-python: $fake_cuda is missing (build the tests)" >&2; exit 1; }

echo "== 40-python: pytest tests/python against the installed package (from $outside)"
env -u PYTHONPATH -u LD_LIBRARY_PATH PYTHONDONTWRITEBYTECODE=1 DLB_TEST_FAKE_CUDA="$fake_cuda" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider --hypothesis-profile=ci "$root/tests/python"
