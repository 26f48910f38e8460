"""The example docs/sharing.md opens with runs as written."""

import os
import re
import subprocess
import sys

import pytest

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "sharing.md")


def test_the_python_example_of_docs_sharing_md(tmp_path):
    pytest.importorskip("numpy")
    pytest.importorskip("torch")
    with open(DOC) as f:
        text = f.read()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    script = tmp_path / "example.py"
    script.write_text(block)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
