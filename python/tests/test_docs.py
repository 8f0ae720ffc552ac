"""Every ```python block of docs/python.md runs as written, against the
embedded demo dataset, with the lrstream binary built from this checkout on
PATH (issue 16 item 14). A checkpoint example (a block defining
train(ckpt=None, stop_after=None) that resumes with load_state_dict) is
also run uninterrupted, and the batches of its interrupted + resumed runs
must be exactly those of the uninterrupted one (issue 26 item 5)."""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

DOC = os.path.join(ROOT, "docs", "python.md")

# Appended to a checkpoint example: the same loop, uninterrupted.
RESUME_CHECK = """
import json as _json
_full, _ = train()
print("LRSTREAM-RESUME " + _json.dumps([first, resumed, _full, ckpt is not None]))
"""


def blocks():
    with open(DOC) as f:
        text = f.read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def is_checkpoint_example(code):
    return "load_state_dict(" in code and "def train(" in code


def test_doc_has_blocks():
    assert len(blocks()) >= 5
    assert sum(map(is_checkpoint_example, blocks())) >= 2, "the checkpoint examples are gone"


@pytest.mark.parametrize("i", range(len(blocks())))
def test_doc_block_runs(lrstream_bin, tmp_path, i):
    env = {**os.environ, "PATH": os.path.dirname(lrstream_bin) + os.pathsep + os.environ["PATH"],
           "PYTHONPATH": os.path.join(ROOT, "python")}
    env.pop("LRSTREAM_BIN", None)
    code = blocks()[i]
    check = is_checkpoint_example(code)
    out = subprocess.run([sys.executable, "-c", code + (RESUME_CHECK if check else "")], capture_output=True,
                         text=True, env=env, cwd=str(tmp_path), timeout=240)
    assert out.returncode == 0, f"docs/python.md block {i} failed:\n{code}\n{out.stdout}\n{out.stderr}"
    if check:
        line = [l for l in out.stdout.splitlines() if l.startswith("LRSTREAM-RESUME ")]
        assert line, out.stdout
        first, resumed, full, saved = json.loads(line[0].split(" ", 1)[1])
        assert saved and first and resumed, "the example must stop, save a checkpoint and resume"
        assert first + resumed == full, (f"block {i}: interrupted {len(first)} + resumed {len(resumed)} batches "
                                         f"are not the uninterrupted {len(full)}")
