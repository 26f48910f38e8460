"""The example docs/python.md opens with runs as written."""

import os
import re
import subprocess
import sys

import pytest

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "python.md")


def test_the_first_python_block_of_docs_python_md(tmp_path):
    pytest.importorskip("numpy")
    if not os.path.exists(DOC):
        pytest.skip("docs/python.md is not next to the tests")
    with open(DOC) as f:
        text = f.read()
    # (an example marker, scripts/doc-examples', may stand above the first block)
    opening = re.sub(r"^<!-- example: [^\n]*-->\n", "", text, count=1, flags=re.M)
    assert opening.startswith("# Using dlbridge from Python\n\n```sh\npython3 -m pip install")
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    script = tmp_path / "example.py"
    script.write_text(block)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("ok")
