"""How the package finds its C side and libdlbridge, and the README's example."""

import os
import subprocess
import sys

import pytest

import dlbridge
from dlbridge import _lib


def run_python(code, **env_extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DLBRIDGE_LIBRARY", "LD_LIBRARY_PATH", "LD_PRELOAD")}
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)


def test_the_library_is_found_without_environment():
    proc = run_python("import dlbridge, dlbridge._lib; print(dlbridge._lib.path); "
                      "print(dlbridge.__version__)")
    assert proc.returncode == 0, proc.stderr
    path, version = proc.stdout.split()
    assert os.path.basename(os.path.realpath(path)).startswith("libdlbridge.so")
    assert os.path.isfile(path)
    assert version == dlbridge.__version__


def test_no_environment_variable_is_read():
    # DLBRIDGE_LIBRARY chose the library before the package bundled it; a
    # stale value must not matter now.
    proc = run_python("import dlbridge, dlbridge._lib; print(dlbridge._lib.path)",
                      DLBRIDGE_LIBRARY="/nonexistent/libdlbridge.so")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == _lib.path


def test_the_library_is_loaded_once():
    # One libdlbridge in the process, the one the extension links.
    with open("/proc/self/maps") as maps:
        files = {line.split()[-1] for line in maps if "libdlbridge.so" in line}
    assert len({os.path.realpath(f) for f in files}) == 1
    assert os.path.realpath(_lib.path) in {os.path.realpath(f) for f in files}


def test_readme_three_lines():
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    t = dlbridge.empty((2, 3), "float32")               # or dlbridge.from_buffer(bytearray(24))
    a, g = np.from_dlpack(t), torch.from_dlpack(t)      # zero-copy: same memory
    back = dlbridge.from_dlpack(g.T)                    # and back, strides kept
    assert a.ctypes.data == g.data_ptr() == back.data_ptr == t.data_ptr
    assert back.shape == (3, 2) and back.strides == (1, 3)
