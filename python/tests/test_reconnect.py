"""A server that restarts mid-epoch (issue 26 item 7): with
reconnect_timeout the client reconnects to the new server on the same
socket and continues with the next batch it had not served -- the loop
sees the uninterrupted epoch, nothing lost or repeated; without it the loop
gets the failure."""

import os
import signal
import subprocess
import tempfile
import time

import pytest
from torch.utils.data import DataLoader

from lrstream_client import LRStreamDataset

# Samples of ~10 KB (a 200-step action chunk): an epoch cannot sit whole in
# the socket and client buffers when the server is killed.
ARGS = ["--batch-size", "2", "--mode", "fallback", "--shuffle", "--seed", "5", "--epochs", "0",
        "--delta-timestamps", "action=0:200/10"]


class Server:
    def __init__(self, lrstream_bin, path):
        self.bin, self.path, self.proc = lrstream_bin, path, None

    def start(self):
        self.proc = subprocess.Popen([self.bin, "serve", "--socket", self.path, *ARGS], stderr=subprocess.DEVNULL)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture
def restartable(lrstream_bin):
    d = tempfile.mkdtemp(prefix="lrs-reconnect-")
    srv = Server(lrstream_bin, os.path.join(d, "s.sock"))
    srv.start()
    yield srv
    srv.stop()


def epoch0(path, nw):
    ds = LRStreamDataset(path, num_workers=nw)
    return [tuple(b["index"].tolist()) for b in DataLoader(ds, batch_size=None, num_workers=nw)]


@pytest.mark.parametrize("nw", [0, 2])
def test_reconnect_after_server_restart(restartable, nw, caplog):
    want = epoch0(restartable.path, nw)
    caplog.set_level("WARNING", logger="lrstream_client")
    ds = LRStreamDataset(restartable.path, num_workers=nw, reconnect_timeout=30, read_timeout=60)
    got = []
    for b in DataLoader(ds, batch_size=None, num_workers=nw):
        got.append(tuple(b["index"].tolist()))
        if len(got) == 20:
            restartable.kill()
            time.sleep(0.3)
            restartable.start()  # same socket path, same run
    assert len(got) == len(want) and got == want
    assert ds.state_dict()["batches"] == len(want)
    if nw == 0:  # (workers log in their own processes)
        assert "reconnecting at epoch 0" in caplog.text


def test_no_reconnect_by_default(restartable):
    ds = LRStreamDataset(restartable.path, read_timeout=60)
    it = iter(DataLoader(ds, batch_size=None))
    next(it)
    restartable.kill()
    with pytest.raises(RuntimeError, match=r"lrstream serve \(pid \d+\) is gone|ended without an 'end'"):
        for _ in it:
            pass
