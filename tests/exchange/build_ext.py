"""Builds the small CPython extensions of the exchange tests and benchmark
with the running interpreter's own compiler, include directory and
extension suffix (what `python3-config --includes` and
`--extension-suffix` print)."""

import os
import shlex
import subprocess
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# name -> (source or list of sources, extra include directories), relative
# to the repository. A module is rebuilt when any of its sources, or a
# header beside its first source, is newer than it.
EXTENSIONS = {
    # The independent producer: its own DLPack 1.3 declarations, no dlbridge.
    "xproducer": (["tests/exchange/xproducer.c", "tests/exchange/xproducer_table.c",
                   "tests/exchange/xproducer_tensor.c"], ["tests/header/dlpack13"]),
    # The example for C extension authors: dlbridge.h for the declarations.
    "exchange_consumer": ("examples/exchange_consumer.c", ["include"]),
    # The benchmark's C loops.
    "exchange_loops": ("bench/exchange_loops.c", ["include"]),
}


def build(name, outdir):
    """Compiles extension `name` into `outdir` (skipped when up to date)."""
    sources, includes = EXTENSIONS[name]
    if isinstance(sources, str):
        sources = [sources]
    sources = [os.path.join(ROOT, s) for s in sources]
    here = os.path.dirname(sources[0])
    inputs = sources + [os.path.join(here, f) for f in os.listdir(here) if f.endswith(".h")]
    target = os.path.join(outdir, name + sysconfig.get_config_var("EXT_SUFFIX"))
    if os.path.exists(target) and os.path.getmtime(target) >= max(os.path.getmtime(f) for f in inputs):
        return target
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    cmd = cc + ["-shared", "-fPIC", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror",
                "-I" + sysconfig.get_paths()["include"]]
    cmd += ["-I" + os.path.join(ROOT, d) for d in includes]
    cmd += sources + ["-o", target]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError("building %s failed:\n%s\n%s" % (name, " ".join(cmd), result.stderr))
    return target


def build_all(outdir, names=None):
    os.makedirs(outdir, exist_ok=True)
    for name in names or EXTENSIONS:
        build(name, outdir)
    if outdir not in sys.path:
        sys.path.insert(0, outdir)


if __name__ == "__main__":
    build_all(sys.argv[1] if len(sys.argv) > 1 else "build/exchange-ext")
