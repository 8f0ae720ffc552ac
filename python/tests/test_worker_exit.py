"""DataLoader workers of an LRStreamDataset exit when the training process
dies (SIGTERM), also when a pickled batch (< 1 MiB of numeric data) waits
in a full pipe to the dead parent: torch's workers then stayed alive,
reparented, forever."""

import os
import signal
import subprocess
import sys
import time

from conftest import ROOT, serving

SCRIPT = """
import sys, time
sys.path.insert(0, {python!r})
from torch.utils.data import DataLoader
from lrstream_client import LRStreamDataset
ds = LRStreamDataset({sock!r}, num_workers=2)
it = iter(DataLoader(ds, batch_size=None, num_workers=2))
for _ in range(2):
    next(it)
print(" ".join(str(w.pid) for w in it._workers), flush=True)
time.sleep(600)
"""


def alive(pid):
    """Whether pid runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except FileNotFoundError:
        return False


def test_workers_exit_with_the_training_process(lrstream_bin, tmp_path):
    # 128-sample batches: pickled (no shared-memory tensors), larger than
    # the pipe, so a worker's queue blocks once the parent stops reading.
    gen = serving(lrstream_bin, "--batch-size", "128", "--mode", "fallback", "--epochs", "0", "--cameras", "none")
    sock = next(gen)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(python=os.path.join(ROOT, "python"), sock=sock))
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    workers = []
    try:
        line = p.stdout.readline()
        workers = [int(w) for w in line.split()]
        assert len(workers) == 2, (line, p.stderr.read() if p.poll() is not None else "")
        time.sleep(2)  # the workers fill their prefetch slots and block on the pipe
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        assert p.returncode == -signal.SIGTERM, (p.returncode, err)
        deadline = time.monotonic() + 15
        while any(alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [w for w in workers if alive(w)]
        assert not left, f"DataLoader workers {left} outlived the training process"
    finally:
        for w in workers:
            if alive(w):
                os.kill(w, signal.SIGKILL)
        if p.poll() is None:
            p.kill()
            p.communicate()
        next(gen, None)  # stops the server
