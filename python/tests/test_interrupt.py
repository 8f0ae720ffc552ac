"""lrstream stopped by SIGINT/SIGTERM reaches the client as
StreamInterrupted (a StreamError) saying so, not as
StreamError("context canceled")."""

import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from lrstream_client import LRStreamDataset, StreamError, StreamInterrupted, StreamReader, connect
from lrstream_client.reader import stream_error

ARGS = ["--batch-size", "8", "--epochs", "0", "--shuffle", "--cameras", "none"]


@pytest.mark.parametrize("message,interrupted", [
    ("context canceled", True),                                    # stream, before it said "interrupted"
    ("reading data/chunk-000/file-000.parquet: context canceled", True),
    ("lrstream stream was interrupted (interrupt signal received): the stream stops here, before its end", True),
    ("interrupted", True),
    ("interrupted (SIGTERM)", True),
    ("lrstream stream: interrupted", True),
    ("server shutting down", True),                                # serve on SIGINT/SIGTERM
    ("recipe x.yaml: unknown resolver", False),
    ("episode 3: the uninterrupted span is short", False),
    ("server full: 8 clients are being served", False),
])
def test_stream_error(message, interrupted):
    e = stream_error(message)
    assert isinstance(e, StreamError)
    assert isinstance(e, StreamInterrupted) == interrupted, e
    if interrupted:
        assert "interrupted" in str(e) or "stopped" in str(e), e
        assert message in str(e) and e.server_message == message
        assert "SIGINT/SIGTERM" in str(e) or str(e) == message
        assert type(e)(str(e)).server_message == str(e)  # torch re-raises a worker's exception with one argument
    else:
        assert str(e) == message


def test_stream_interrupted(lrstream_bin):
    """`lrstream stream` on a pipe, SIGINT after 20 batches."""
    p = subprocess.Popen([lrstream_bin, "stream", *ARGS], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # lrstream's message, or (before it said so, "context canceled") the client's
        with pytest.raises(StreamInterrupted, match=r"lrstream (stream )?was interrupted \("):
            with StreamReader(p.stdout) as r:
                for i, _ in enumerate(r):
                    if i == 20:
                        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 130, err
    assert b"interrupted" in err, err


@pytest.fixture(scope="module")
def long_epoch(lrstream_bin, tmp_path_factory):
    """A dataset whose epoch (20,000 one-frame batches) the server cannot
    have written ahead into the socket when it is stopped."""
    out = str(tmp_path_factory.mktemp("long") / "ds")
    subprocess.run([lrstream_bin, "gen", "--out", out, "--episodes", "100", "--min-frames", "200",
                    "--max-frames", "200", "--cameras", ""], check=True, capture_output=True, timeout=300)
    return out


def serve(lrstream_bin, d, dataset):
    path = os.path.join(d, "s.sock")
    p = subprocess.Popen([lrstream_bin, "serve", "--socket", path, "--dataset", dataset, "--client-buffer", "1KiB",
                          *ARGS, "--batch-size", "1"], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not os.path.exists(path) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    return p, path


@pytest.mark.parametrize("client", ["connect", "LRStreamDataset"])
def test_serve_interrupted(lrstream_bin, long_epoch, client):
    """`lrstream serve` SIGTERMed while a client reads."""
    d = tempfile.mkdtemp(prefix="lrs-intr-")
    p, path = serve(lrstream_bin, d, long_epoch)
    try:
        with pytest.raises(StreamInterrupted, match=r"lrstream serve was stopped \(SIGINT/SIGTERM"):
            if client == "connect":
                with connect(path) as r:
                    for i, _ in enumerate(r):
                        if i == 20:
                            p.send_signal(signal.SIGTERM)
            else:
                ds = LRStreamDataset(path)
                for i, _ in enumerate(ds):
                    if i == 20:
                        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        shutil.rmtree(d, ignore_errors=True)
