#!/usr/bin/env bash
# Stage: the Python package as an index ships it, and as users on any
# machine install it.
#   1. scripts/python-wheel: the sdist, and from it the manylinux_2_28
#      wheels for x86-64 and aarch64 (cross-built with Zig in an isolated
#      environment with pyproject.toml's build requirements, from the package
#      index), `auditwheel repair --plat manylinux_2_28_<arch>`, `twine check`;
#   2. the artifacts checked: names, sizes and contents, the version
#      (meson.build's) in all three, `auditwheel show` of each wheel (its
#      verdict no newer than manylinux_2_28 and of the wheel's architecture),
#      and every binary in the wheels read with readelf: the libraries it
#      needs (glibc's and the bundled libdlbridge only; no libstdc++ nor
#      libc++), its newest GLIBC_ symbol version (2.28 at most), and that
#      libdlbridge takes memcpy, memmove and memset from glibc;
#   2b. bad input: pip refuses each wheel where it does not fit, by its tag
#      (the x86-64 wheel for manylinux2014 (glibc 2.17) and for aarch64, the
#      aarch64 wheel on this machine) and takes the x86-64 one for
#      manylinux_2_28_x86_64; the x86-64 wheel's package imports and copies
#      (values checked) on an emulated CPU without AVX2 (qemu-x86_64 -cpu
#      Nehalem, Debian's qemu-user-static), and on one with it (Haswell);
#   3. the installation blocks of docs/python.md "From a wheel" and "From
#      the sdist", run as written from a directory outside the repository
#      (the sdist one builds the sdist again, isolated, with Debian's python3);
#   4. the x86-64 wheel, installed with `pip install --no-index --no-deps` into
#      a fresh venv of every CPython here (pyenv 3.10 to 3.13 and Debian's
#      3.11), runs the Python suite (the folders of tests/python-suites.txt):
#      on the pyenv interpreters the tests that need only the standard
#      library (the others skip themselves; pytest comes from Debian through
#      a .pth file); on Debian's, seeing its
#      numpy 1.24, torch, cffi and hypothesis (--system-site-packages), the
#      whole suite; and the whole suite again with numpy 2 from the peer
#      environment (scripts/peers-env), whose packages a .pth file adds
#      to a fresh venv of its interpreter (the shared environment is only
#      read): there the JAX, tvm-ffi and torch 2 tests run too, JAX with four
#      CPU devices (XLA_FLAGS), and a pinned peer missing fails them.
# Without the packaging tools (no package index) the stage is skipped
# (exit 77); 40-python.sh covers the offline route. A CPython of the list or
# the peer environment missing here: the rest runs, then the stage says
# what it skipped (exit 77).
#
#   bash scripts/test.d/43-sdist.sh <build-dir>
# timeout: 1800
set -euo pipefail

build=${1:?usage: 43-sdist.sh <build-dir>}
[ -d "$build" ] || { echo "43-sdist: no build directory '$build'" >&2; exit 2; }
build=$(cd "$build" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
debian_py=/usr/bin/python3
version=$(meson introspect --projectinfo "$build" | "$debian_py" -c 'import json, sys; print(json.load(sys.stdin)["version"])')

fake_cuda=$build/tests/cuda/libfake_cuda.so
[ -f "$fake_cuda" ] || { echo "43-sdist: $fake_cuda is missing (build the tests)" >&2; exit 1; }
share_example=$build/tests/share/share_tensor
[ -x "$share_example" ] || { echo "43-sdist: $share_example is missing (build the tests)" >&2; exit 1; }
suites=()
while read -r dir; do suites+=("$root/tests/$dir"); done < <(grep -v '^#' "$root/tests/python-suites.txt")

out=$build/python-dist
echo "== 43-sdist: sdist and wheel (scripts/python-wheel $out)"
set +e
artifacts=$(bash "$root/scripts/python-wheel" "$out")
rc=$?
set -e
if [ $rc -eq 3 ]; then
  echo "43-sdist: skipped: the packaging tools (python/requirements/build.txt) not installable here"
  exit 77
fi
[ $rc -eq 0 ] || exit 1
sdist=$(echo "$artifacts" | sed -n 1p)
wheel=$(echo "$artifacts" | sed -n 2p)
wheel_arm=$(echo "$artifacts" | sed -n 3p)
tools=$(bash "$root/scripts/build-tools-env" --path)
for f in "$sdist" "$wheel" "$wheel_arm"; do
  echo "  $(basename "$f")  $(stat -c %s "$f") bytes"
done
echo "  twine check: $(grep -c PASSED "$out/logs/twine.log") of 3 PASSED"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlbridge-sdist.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
problem() { echo "43-sdist: $*" >&2; fail=1; }

for w in "$wheel" "$wheel_arm"; do
  arch=$(basename "$w" .whl | sed 's/.*_2_28_//')
  echo "== 43-sdist: auditwheel show $(basename "$w")"
  "$tools/bin/auditwheel" show "$w" >"$tmp/show-$arch.txt"
  sed 's/^/  /' "$tmp/show-$arch.txt"
  verdict=$(tr '\n' ' ' <"$tmp/show-$arch.txt" | sed -n 's/.*is consistent with the following platform tag: "\([^"]*\)".*/\1/p')
  name_tag=$(basename "$w" .whl | cut -d- -f5)
  [ "$name_tag" = "manylinux_2_28_$arch" ] || problem "$(basename "$w") is tagged '$name_tag', not manylinux_2_28_$arch"
  if [[ $verdict =~ ^manylinux_2_([0-9]+)_${arch}$ ]]; then
    [ "${BASH_REMATCH[1]}" -le 28 ] || problem "auditwheel says $(basename "$w") needs $verdict, newer than manylinux_2_28"
  else
    problem "auditwheel names no manylinux tag of $arch for $(basename "$w") ('$verdict')"
  fi
  [ "$(basename "$w")" = "dlbridge-$version-cp310-abi3-manylinux_2_28_$arch.whl" ] \
    || problem "the wheel is $(basename "$w"), not dlbridge-$version-cp310-abi3-manylinux_2_28_$arch.whl"
done
verdict=manylinux_2_28_x86_64
[ "$(basename "$sdist")" = "dlbridge-$version.tar.gz" ] || problem "the sdist is $(basename "$sdist"), not dlbridge-$version.tar.gz"

echo "== 43-sdist: what the wheels' binaries link (readelf)"
for w in "$wheel" "$wheel_arm"; do
  d=$tmp/elf-$(basename "$w" .whl)
  mkdir -p "$d"
  (cd "$d" && python3 -m zipfile -e "$w" .)
  while read -r so; do
    rel=${so#"$d"/}
    needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
    newest=$(readelf -V --wide "$so" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -u -V | tail -n 1)
    echo "  $(basename "$w" .whl | sed 's/.*_2_28_//') $rel: newest $newest; needs $needed"
    for n in $needed; do
      case $n in
        libc.so.6|libm.so.6|libpthread.so.0|libdl.so.2|librt.so.1|ld-linux-x86-64.so.2|ld-linux-aarch64.so.1|libdlbridge.so.0) ;;
        *) problem "$rel in $(basename "$w") needs $n (not glibc's, not the bundled library)" ;;
      esac
    done
    if readelf -V --wide "$so" | grep -E 'GLIBCXX_|CXXABI_' >/dev/null; then
      problem "$rel in $(basename "$w") needs libstdc++ symbol versions"
    fi
    if [ -n "$newest" ] && [ "$(printf '%s\n' GLIBC_2.28 "$newest" | sort -V | tail -n 1)" != GLIBC_2.28 ]; then
      problem "$rel in $(basename "$w") uses $newest, newer than glibc 2.28"
    fi
    # The copy engine's memcpy, memmove and memset are the C library's
    # (tuned for the CPU at run time), never a compiler runtime's copy
    # bound inside the library (Zig's compiler_rt has its own, weak and
    # hidden, linked in whenever something else of it is needed).
    case $rel in
      *libdlbridge.so*)
        undefined=$(nm -D --undefined-only "$so" | awk '{print $2}' | sed 's/@.*//')
        for f in memcpy memmove memset; do
          grep -qx "$f" <<<"$undefined" || problem "$rel in $(basename "$w") does not take $f from the C library"
        done
        ;;
    esac
  done < <(find "$d" -name '*.so*' -type f | sort)
done

echo "== 43-sdist: pip refuses a wheel where its tag does not fit"
pip_target() {  # pip_target PLATFORM WHEEL: pip's verdict for that platform, installing into a scratch dir
  rm -rf "$tmp/pip-target"
  "$tools/bin/python" -m pip install --disable-pip-version-check --no-index --no-deps --only-binary=:all: \
    --python-version 3.10 --platform "$1" --target "$tmp/pip-target" "$2" 2>&1
}
for case in "manylinux2014_x86_64 $wheel refuse" "manylinux_2_27_x86_64 $wheel refuse" \
            "manylinux_2_28_aarch64 $wheel refuse" "manylinux_2_28_x86_64 $wheel_arm refuse" \
            "manylinux_2_28_x86_64 $wheel take" "manylinux_2_28_aarch64 $wheel_arm take"; do
  read -r platform w want <<<"$case"
  if said=$(pip_target "$platform" "$w"); then got=take; else got=refuse; fi
  echo "  --platform $platform, $(basename "$w"): $got$( [ $got = refuse ] && echo ": $(grep -m1 ERROR <<<"$said")")"
  [ "$got" = "$want" ] || { echo "$said" | tail -n 5 >&2; problem "pip should $want $(basename "$w") for $platform"; }
  if [ "$got" = refuse ] && ! grep -q "is not a supported wheel on this platform" <<<"$said"; then
    problem "pip refused $(basename "$w") for $platform, but not for its tag: $said"
  fi
done
python3 -m venv "$tmp/venv-here"
if said=$("$tmp/venv-here/bin/python" -m pip install --disable-pip-version-check --no-index --no-deps "$wheel_arm" 2>&1); then
  problem "pip installed the aarch64 wheel on this x86-64 machine"
else
  echo "  this machine (x86-64), $(basename "$wheel_arm"): refuse: $(grep -m1 ERROR <<<"$said")"
  grep -q "is not a supported wheel on this platform" <<<"$said" || problem "pip refused the aarch64 wheel, but not for its tag: $said"
fi

echo "== 43-sdist: the x86-64 wheel on a CPU without AVX2 (qemu-x86_64 -cpu Nehalem)"
qemu=$(command -v qemu-x86_64-static || command -v qemu-x86_64 || true)
if [ -z "$qemu" ]; then
  problem "qemu-x86_64 is not installed (qemu-user-static, scripts/install-deps)"
else
  # pip installs the wheel into a folder; Debian's python3 (numpy 1.24)
  # finds it through PYTHONPATH (under qemu-user a venv's interpreter does
  # not find its pyvenv.cfg: /proc/self/exe is qemu).
  "$tools/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps \
    --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp \
    --target "$tmp/site-nehalem" "$wheel"
  for cpu in Nehalem Haswell; do
    # qemu warns on stderr about CPU features TCG lacks; only stdout is the verdict.
    if ! said=$(cd "$tmp" && env -u LD_LIBRARY_PATH PYTHONPATH="$tmp/site-nehalem" "$qemu" -cpu "$cpu" \
                  /usr/bin/python3 - "$cpu" 2>"$tmp/qemu-$cpu.err" <<'PY'
import os, sys
import numpy as np
import dlbridge, dlbridge._lib

cpu = sys.argv[1]
assert dlbridge._lib.path.startswith(os.environ["PYTHONPATH"] + os.sep), dlbridge._lib.path
a = np.arange(300 * 200, dtype=np.float64).reshape(300, 200)
for src in (a, a.T, a[::2, ::3]):
    t = dlbridge.from_dlpack(src, copy=True)
    got = np.from_dlpack(t)
    assert got.shape == src.shape and np.array_equal(got, src), (cpu, src.strides)
    assert got.ctypes.data != src.ctypes.data
print("%s: dlbridge %s imported, 3 copies (contiguous, transposed, strided) equal"
      % (cpu, dlbridge.__version__))
PY
    ); then
      echo "$said" | tail -n 20 >&2
      grep -v "TCG doesn't support requested feature" "$tmp/qemu-$cpu.err" | tail -n 20 >&2
      problem "the x86-64 wheel failed under qemu-x86_64 -cpu $cpu"
    else
      echo "  $said"
    fi
  done
fi
echo "== 43-sdist: contents"
"$debian_py" - "$wheel" "$sdist" "$version" "$verdict" <<'PY' || fail=1
import sys, tarfile, zipfile

wheel, sdist, version, platform = sys.argv[1:]
bad = []
names = zipfile.ZipFile(wheel).namelist()
for want in ("dlbridge/__init__.py", "dlbridge/_glue.abi3.so", "dlbridge/_glue.pyi", "dlbridge/py.typed",
             "dlbridge/check/__main__.py", ".dlbridge.mesonpy.libs/libdlbridge.so.0"):
    if want not in names:
        bad.append("the wheel lacks " + want)
for name in names:
    if name.endswith((".h", ".pc", ".cmake")) or "/doc/" in name or ".data/" in name:
        bad.append("the wheel holds a C development file or documentation: " + name)
    if name.startswith("dlbridge/") and name.endswith(".so") and name != "dlbridge/_glue.abi3.so":
        bad.append("the wheel holds another extension module: " + name)
zf = zipfile.ZipFile(wheel)
meta = zf.read("dlbridge-%s.dist-info/METADATA" % version).decode()
tag = zf.read("dlbridge-%s.dist-info/WHEEL" % version).decode()
if "\nVersion: %s\n" % version not in meta:
    bad.append("the wheel's METADATA does not say Version: " + version)
if "Tag: cp310-abi3-%s" % platform not in tag:
    bad.append("the wheel's WHEEL file does not say Tag: cp310-abi3-" + platform)
top = "dlbridge-%s/" % version
with tarfile.open(sdist) as tf:
    members = tf.getnames()
    info = tf.extractfile(top + "PKG-INFO").read().decode()
if "\nVersion: %s\n" % version not in info:
    bad.append("the sdist's PKG-INFO does not say Version: " + version)
for want in ("pyproject.toml", "meson.build", "meson_options.txt", "python/build_backend/dlbridge_build.py",
             "python/meson.build", "python/dlbridge/meson.build", "python/dlbridge/_module.c", "src/meson.build",
             "src/dlbridge.map", "include/dlbridge/dlbridge.h", "docs/python.md", "README.md"):
    if top + want not in members:
        bad.append("the sdist lacks " + want)
for name in members:
    rest = name[len(top):]
    if not name.startswith(top) or rest.startswith(("build", ".mesonpy", ".git/")) or "__pycache__" in rest:
        bad.append("the sdist holds " + name)
print("  wheel: %d files; sdist: %d files; version %s in both" % (len(names), len(members), version))
for b in bad:
    print("43-sdist:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
[ $fail -eq 0 ] || exit 1

# Prints the installed package's place and the library it loaded, and fails
# unless both are the venv's and the versions agree.
check_installed() {  # check_installed PYTHON
  env -u PYTHONPATH -u LD_LIBRARY_PATH "$1" - "$version" <<'PY'
import importlib.metadata, os, sys, sysconfig
import dlbridge, dlbridge._lib
site = sysconfig.get_paths()["platlib"]
want = sys.argv[1]
assert dlbridge.__file__.startswith(os.path.join(site, "dlbridge") + os.sep), (dlbridge.__file__, site)
assert dlbridge._lib.path.startswith(os.path.join(site, ".dlbridge.mesonpy.libs") + os.sep), dlbridge._lib.path
assert dlbridge.__version__ == importlib.metadata.version("dlbridge") == want, (dlbridge.__version__, want)
print("  dlbridge %s from %s, library %s" % (dlbridge.__version__, os.path.dirname(dlbridge.__file__),
                                           os.path.basename(dlbridge._lib.path)))
PY
}

# The documented commands, as written, in a directory that holds only the
# artifact, with a fresh home (~) and the system's python3; pip keeps its
# usual cache, and runs ninja with -j2.
doc_run() {  # doc_run NAME ARTIFACT
  local dir=$tmp/doc-$1 block log
  mkdir -p "$dir/home"
  cp "$2" "$dir/"
  block=$(bash "$root/scripts/install-doc-block" "$1")
  echo "$block" | sed 's/^/  $ /'
  log=$dir/run.log
  if ! (cd "$dir" && env -u PYTHONPATH -u LD_LIBRARY_PATH HOME="$dir/home" PATH=/usr/bin:/bin \
          PIP_CACHE_DIR="${PIP_CACHE_DIR:-$HOME/.cache/pip}" PIP_CONFIG_SETTINGS=compile-args=-j2 \
          PIP_DISABLE_PIP_VERSION_CHECK=1 bash -euo pipefail -c "$block") >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    problem "the '$1' installation of docs/python.md failed"
    return 0
  fi
  [ "$(tail -n 1 "$log")" = "$version" ] || problem "the '$1' installation printed '$(tail -n 1 "$log")', not $version"
  (cd "$dir" && check_installed "$dir/home/venv-dlbridge/bin/python") || problem "the '$1' installation is not the venv's"
}
echo "== 43-sdist: docs/python.md, from a wheel"
doc_run wheel "$wheel"
echo "== 43-sdist: docs/python.md, from the sdist (an isolated build)"
doc_run sdist "$sdist"
[ $fail -eq 0 ] || exit 1

# Debian's pytest and what it imports, and nothing else of dist-packages.
debian=/usr/lib/python3/dist-packages
mkdir -p "$tmp/pytest-lib"
for name in pytest _pytest pluggy iniconfig py.py py packaging attr attrs exceptiongroup tomli; do
  [ -e "$debian/$name" ] && ln -s "$debian/$name" "$tmp/pytest-lib/$name"
done

ran=()
skips=()
peers_required=  # set for the peer environment's run (below)
suite() {  # suite LABEL PYTHON VENV_ARGS PTH_LINE PYTEST_ARGS...
  local label=$1 interpreter=$2 venv_args=$3 pth=$4
  shift 4
  local venv=$tmp/venv-${label//[^A-Za-z0-9.]/_} site
  echo "== 43-sdist: $label ($interpreter)"
  # shellcheck disable=SC2086
  "$interpreter" -m venv $venv_args "$venv"
  "$venv/bin/python" -m pip install --quiet --no-index --no-deps --disable-pip-version-check "$wheel"
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  [ -z "$pth" ] || echo "$pth" >"$site/extra-packages.pth"
  (cd "$tmp" && check_installed "$venv/bin/python") || { problem "not the venv's package: $label"; return 0; }
  if (cd "$tmp" && env -u PYTHONPATH -u LD_LIBRARY_PATH PYTHONDONTWRITEBYTECODE=1 DLB_TEST_FAKE_CUDA="$fake_cuda" \
        XLA_FLAGS=--xla_force_host_platform_device_count=4 JAX_PLATFORMS=cpu DLB_SHARE_EXAMPLE="$share_example" \
        DLBRIDGE_PEERS_REQUIRED="$peers_required" \
        "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs "$@" "${suites[@]}") >"$venv.log" 2>&1; then
    ran+=("$label")
    echo "  $(tail -n 1 "$venv.log")"
  else
    tail -n 60 "$venv.log" >&2
    problem "the suite failed: $label"
  fi
}

for v in 3.10 3.11 3.12 3.13; do
  interpreter=$(ls -d "$HOME"/.pyenv/versions/"$v".*/bin/python"$v" 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$interpreter" ]; then
    echo "== 43-sdist: CPython $v is not installed here (~/.pyenv/versions/$v.*): skipped"
    skips+=("CPython $v")
    continue
  fi
  suite "CPython $v, standard library only" "$interpreter" "" "$tmp/pytest-lib" -W ignore::DeprecationWarning
done

suite "Debian CPython 3.11, numpy $("$debian_py" -c 'import numpy; print(numpy.__version__)'), torch" \
  "$debian_py" --system-site-packages "" --hypothesis-profile=ci

peers=$(bash "$root/scripts/peers-env" --path)
if [ -f "$peers/ok" ] && [ -x "$peers/bin/python" ]; then
  peers_base=$(sed -n 's/^home = //p' "$peers/pyvenv.cfg")/python3
  peers_site=$("$peers/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  peers_numpy=$("$peers/bin/python" -c 'import numpy; print(numpy.__version__)')
  for module in pytest numpy jax tvm_ffi torch mlx.core; do
    "$peers/bin/python" -c "import $module" >/dev/null 2>&1 \
      || problem "the peer environment ($peers) cannot import $module, which python/requirements/peers.txt pins"
  done
  hyp=()
  "$peers/bin/python" -c 'import hypothesis' 2>/dev/null && hyp=(--hypothesis-profile=ci)
  # The tests that pin numpy 1.24's limits skip themselves under numpy 2;
  # the peer tests fail, rather than skip, where a pinned peer is missing.
  peers_required=1
  suite "CPython $("$peers/bin/python" -c 'import platform; print(platform.python_version())'), numpy $peers_numpy (peer environment)" \
    "$peers_base" "" "$peers_site" "${hyp[@]}"
else
  echo "== 43-sdist: numpy 2: skipped: the peer environment not installable here ($peers)"
  skips+=("numpy 2, JAX and tvm-ffi (no peer environment)")
fi

[ $fail -eq 0 ] || exit 1
echo "43-sdist: $(basename "$wheel") passed on ${#ran[@]} interpreter setups: $(IFS=';'; echo "${ran[*]}")"
if [ ${#skips[@]} -gt 0 ]; then
  echo "43-sdist: skipped: $(IFS=';'; echo "${skips[*]}")"
  exit 77
fi
