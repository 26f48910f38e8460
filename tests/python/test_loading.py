"""How the package finds libdlbridge, and the README's three-line example."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import dlbridge

PACKAGE = os.path.dirname(dlbridge.__file__)
LIBRARY = dlbridge._lib.path


def run_python(code, env_extra, pythonpath):
    env = {k: v for k, v in os.environ.items() if k != "DLBRIDGE_LIBRARY"}
    env.update(env_extra)
    env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)


def copy_package(tmp_path):
    dest = tmp_path / "site" / "dlbridge"
    shutil.copytree(PACKAGE, dest, ignore=shutil.ignore_patterns("__pycache__", "*.in",
                                                                 "libdlbridge.so*"))
    return dest


def test_environment_variable_wins_and_a_bad_one_fails_clearly(tmp_path):
    proc = run_python("import dlbridge", {"DLBRIDGE_LIBRARY": str(tmp_path / "missing.so")},
                      os.path.dirname(PACKAGE))
    assert proc.returncode != 0
    assert "DLBRIDGE_LIBRARY" in proc.stderr and "missing.so" in proc.stderr


def test_library_next_to_the_package(tmp_path):
    dest = copy_package(tmp_path)
    shutil.copy(LIBRARY, dest / "libdlbridge.so.0")
    proc = run_python("import dlbridge; print(dlbridge._lib.path)", {}, str(dest.parent))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(dest / "libdlbridge.so.0")


def test_library_from_the_recorded_install_path(tmp_path):
    dest = copy_package(tmp_path)
    libdir = tmp_path / "lib"
    libdir.mkdir()
    shutil.copy(LIBRARY, libdir / "libdlbridge.so.0")
    (dest / "_install_paths.py").write_text("LIBDIR = %r\n" % str(libdir))
    proc = run_python("import dlbridge; print(dlbridge._lib.path)", {}, str(dest.parent))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(libdir / "libdlbridge.so.0")


def test_readme_three_lines():
    torch = pytest.importorskip("torch")
    t = dlbridge.empty((2, 3), "float32")               # or dlbridge.from_buffer(bytearray(24))
    a, g = np.from_dlpack(t), torch.from_dlpack(t)      # zero-copy: same memory
    back = dlbridge.from_dlpack(g.T)                    # and back, strides kept
    assert a.ctypes.data == g.data_ptr() == back.data_ptr == t.data_ptr
    assert back.shape == (3, 2) and back.strides == (1, 3)
