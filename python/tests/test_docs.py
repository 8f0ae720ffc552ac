"""Every ```python block of docs/python.md runs as written, against the
embedded demo dataset, with the lrstream binary built from this checkout on
PATH (issue 16 item 14)."""

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

DOC = os.path.join(ROOT, "docs", "python.md")


def blocks():
    with open(DOC) as f:
        text = f.read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_doc_has_blocks():
    assert len(blocks()) >= 5


@pytest.mark.parametrize("i", range(len(blocks())))
def test_doc_block_runs(lrstream_bin, tmp_path, i):
    env = {**os.environ, "PATH": os.path.dirname(lrstream_bin) + os.pathsep + os.environ["PATH"],
           "PYTHONPATH": os.path.join(ROOT, "python")}
    env.pop("LRSTREAM_BIN", None)
    out = subprocess.run([sys.executable, "-c", blocks()[i]], capture_output=True, text=True, env=env,
                         cwd=str(tmp_path), timeout=120)
    assert out.returncode == 0, f"docs/python.md block {i} failed:\n{blocks()[i]}\n{out.stdout}\n{out.stderr}"
