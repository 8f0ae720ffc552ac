"""Shared fixtures: the lrstream binary built from this checkout (once per
session) and a server on the embedded demo dataset."""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# test_go_fixtures reads streams written by the Go sinks: have go test write
# them (at import, before the test modules are collected).
if not os.environ.get("LRSTREAM_FIXTURES"):
    _fixtures = tempfile.mkdtemp(prefix="lrs-fixtures-")
    atexit.register(shutil.rmtree, _fixtures, ignore_errors=True)
    subprocess.run(["go", "test", "./sink", "-run", "^TestPythonClient$", "-count=1"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, env={**os.environ, "LRSTREAM_WRITE_FIXTURES": _fixtures,
                                                   "LRSTREAM_PYTHON": sys.executable})
    os.environ["LRSTREAM_FIXTURES"] = _fixtures


@pytest.fixture(scope="session")
def lrstream_bin(tmp_path_factory):
    """`go build` of cmd/lrstream (go is required: scripts/test.sh has it)."""
    out = str(tmp_path_factory.mktemp("bin") / "lrstream")
    subprocess.run(["go", "build", "-o", out, "./cmd/lrstream"], cwd=ROOT, check=True)
    return out


# The training order the tests use: the demo dataset, 8-sample batches,
# shuffled, any number of epochs; without the demo's camera frames (the
# camera tests make their own streams).
SERVE_ARGS = ["--batch-size", "8", "--mode", "fallback", "--shuffle", "--seed", "3", "--epochs", "0", "--cameras", "none"]


def serving(lrstream_bin, *args):
    """Runs `lrstream serve ARGS` on a private socket; yields the path, then
    stops the server and removes the socket's directory."""
    d = tempfile.mkdtemp(prefix="lrs-test-")
    path = os.path.join(d, "s.sock")
    p = subprocess.Popen([lrstream_bin, "serve", "--socket", path, *args], stderr=subprocess.DEVNULL)
    for _ in range(200):
        if os.path.exists(path):
            break
        time.sleep(0.05)
    yield path
    p.terminate()
    p.wait(10)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def server(lrstream_bin):
    """A running `lrstream serve` on a private socket; yields the path."""
    yield from serving(lrstream_bin, *SERVE_ARGS)
