"""Builds the nanobind_sum example extension with the running interpreter.

    PYTHONPATH=<build>/python python examples/nanobind_sum/build.py OUTDIR

needs nanobind (the peer environment pins it) and the dlbridge package: the
extension compiles nanobind's own sources in (nb_combined.cpp, built once
into OUTDIR and reused), includes dlbridge's headers from include/, and links
the libdlbridge.so that `import dlbridge` loads (dlbridge._lib.path), with
that folder as its run path, so the extension and the package share one
library. Prints the extension's path. Rebuilt when a source is newer.
"""

import os
import shlex
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s\n%s" % (" ".join(cmd), r.stderr[-4000:]))


def build(outdir):
    import nanobind

    import dlbridge._lib

    os.makedirs(outdir, exist_ok=True)
    cxx = shlex.split(os.environ.get("CXX") or "c++")
    flags = ["-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-fno-strict-aliasing",
             "-I" + sysconfig.get_paths()["include"], "-I" + nanobind.include_dir(),
             "-I" + os.path.join(os.path.dirname(nanobind.include_dir()), "ext", "robin_map", "include")]
    nb_obj = os.path.join(outdir, "nb_combined-%s.o" % nanobind.__version__)
    if not os.path.exists(nb_obj):
        _run(cxx + flags + ["-w", "-c", os.path.join(nanobind.source_dir(), "nb_combined.cpp"),
                            "-o", nb_obj + ".tmp"])
        os.replace(nb_obj + ".tmp", nb_obj)
    source = os.path.join(HERE, "nanobind_sum.cpp")
    target = os.path.join(outdir, "nanobind_sum" + sysconfig.get_config_var("EXT_SUFFIX"))
    lib = os.path.realpath(dlbridge._lib.path)
    inputs = [source, nb_obj, lib] + [os.path.join(ROOT, "include", "dlbridge", f)
                                      for f in os.listdir(os.path.join(ROOT, "include", "dlbridge"))]
    if os.path.exists(target) and os.path.getmtime(target) >= max(map(os.path.getmtime, inputs)):
        return target
    _run(cxx + flags + ["-Wall", "-Wextra", "-Werror", "-I" + os.path.join(ROOT, "include"), "-shared",
                        source, nb_obj, lib, "-Wl,-rpath," + os.path.dirname(lib), "-o", target + ".tmp"])
    os.replace(target + ".tmp", target)
    return target


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "nanobind_sum")))
