"""`lrstream serve`'s shared-memory transport with the Python client
(docs/python.md, "Shared memory"), on a camera dataset written by
`lrstream gen --videos` (two 240x320 cameras, batches of 8: 1.84 MB per
camera column): batches over shm equal the plain socket's, column for
column; arrays and tensors the caller holds keep their bytes while the ring
wraps; a tiny arena (smaller than a column) and a caller holding every batch
still give every batch, correct (inline); shm_bytes=0 is the plain socket;
LRStreamDataset with 0 and 2 DataLoader workers over shm gives the frames.

Needs go (to build lrstream) and FFmpeg (the videos); under CI=1 or
LRSTREAM_REQUIRE_FFMPEG=1 a missing FFmpeg fails instead of skipping.
"""

import mmap
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from lrstream_client import connect
from lrstream_client import reader as rd

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "testdata" / "demo-recipe.yaml"
CAMS = ["observation.images.front", "observation.images.wrist"]
H, W, B = 240, 320, 8
COLUMN = B * 3 * H * W  # bytes of one camera column
ARGS = ["--recipe", str(RECIPE), "--mode", "fallback", "--batch-size", str(B), "--shuffle", "--seed", "1",
        "--epochs", "0"]

pytestmark = pytest.mark.skipif(not rd.shm_supported(), reason="the shared-memory transport is Linux only")


@pytest.fixture(scope="module")
def dataset(lrstream_bin, tmp_path_factory) -> Path:
    if shutil.which("ffmpeg") is None:
        if os.environ.get("CI") or os.environ.get("LRSTREAM_REQUIRE_FFMPEG"):
            pytest.fail("CI: ffmpeg not found")
        pytest.skip("ffmpeg not found")
    out = tmp_path_factory.mktemp("ds") / "gen"
    subprocess.run([str(lrstream_bin), "gen", "--out", str(out), "--videos", "--video-size", f"{H}x{W}",
                    "--episodes", "4", "--min-frames", "40", "--max-frames", "50", "-q"], check=True)
    return out


@pytest.fixture(scope="module")
def server(lrstream_bin, dataset):
    """`lrstream serve` on a private socket; yields the path."""
    d = tempfile.mkdtemp(prefix="lrs-shm-")
    path = os.path.join(d, "s.sock")
    p = subprocess.Popen([str(lrstream_bin), "serve", "--socket", path, "--dataset", str(dataset), *ARGS],
                         stderr=subprocess.DEVNULL)
    for _ in range(400):
        if os.path.exists(path) or p.poll() is not None:
            break
        time.sleep(0.05)
    assert p.poll() is None, "lrstream serve exited"
    yield path
    p.terminate()
    p.wait(10)
    shutil.rmtree(d, ignore_errors=True)


def copy(batch):
    """A batch's columns, arrays copied (own memory)."""
    return {k: np.array(v) if isinstance(v, np.ndarray) else v for k, v in batch.items()}


@pytest.fixture(scope="module")
def plain(server):
    """Epoch 0 over the plain socket (shm_bytes=0): (header, batches)."""
    with connect(server, epoch=0, timeout=10, read_timeout=120, shm_bytes=0) as r:
        batches = [copy(b) for b in r]
        assert "shm" not in r.header
    assert len(batches) >= 20
    return r.header, batches


def over_arena(a):
    """Whether an array views an mmap (the arena)."""
    while a is not None:
        if isinstance(a, memoryview):
            return isinstance(a.obj, mmap.mmap)
        a = getattr(a, "base", None)
    return False


def same(got, want, where=""):
    assert got.keys() == want.keys(), where
    for k, v in want.items():
        if isinstance(v, np.ndarray):
            g = got[k]
            assert isinstance(g, np.ndarray) and g.dtype == v.dtype and g.shape == v.shape, f"{where} {k}"
            assert g.tobytes() == v.tobytes(), f"{where} {k}"
        else:
            assert got[k] == v, f"{where} {k}"


def test_shm_equals_plain(server, plain):
    """Every column of every batch over shm equals the plain socket's; the
    camera columns are arrays over the arena (writable, no copy)."""
    header, want = plain
    n = 0
    with connect(server, epoch=0, timeout=10, read_timeout=120) as r:
        assert r.header.get("shm") is True
        assert {k: v for k, v in r.header.items() if k != "shm"} == header
        for i, b in enumerate(r):
            same(b, want[i], f"batch {i}")
            for k in CAMS:
                n += over_arena(b[k])
                assert b[k].flags.writeable
            assert not over_arena(b["index"])
    assert n == 2 * len(want), f"{n} of {2 * len(want)} camera columns over the arena"


def test_held_arrays_while_the_ring_wraps(server, plain):
    """A 3-batch arena over two epochs (the ring wraps many times): arrays,
    torch tensors and views held for the next 2 batches keep their bytes
    (checked when dropped); most camera columns still come over the arena."""
    import torch

    _, want = plain
    n = len(want)
    size = 3 * 2 * COLUMN
    window, checked, over = [], 0, 0
    for epoch in range(2):
        with connect(server, epoch=epoch, timeout=10, read_timeout=120, shm_bytes=size) as r:
            for i, b in enumerate(r):
                a, w = b[CAMS[0]], b[CAMS[1]]
                over += over_arena(a) + over_arena(w)
                window.append((epoch, i, b["index"].copy(), torch.from_numpy(a), w[:, 1:]))
                del a, w, b
                if len(window) > 2:
                    e, j, idx, t, v = window.pop(0)
                    if e == 0:  # epoch 1's order differs: check epoch 0 against the plain batches
                        assert t.numpy().tobytes() == want[j][CAMS[0]].tobytes(), f"batch {j} {CAMS[0]}"
                        assert v.tobytes() == want[j][CAMS[1]][:, 1:].tobytes(), f"batch {j} {CAMS[1]}"
                        checked += 1
                    del t, v
            pos = r._shm._next
    assert checked == n
    assert pos > 3 * size, f"the ring did not wrap (last region ends at {pos}, arena {size})"
    assert over >= 2 * n, f"only {over} of {4 * n} camera columns over the arena"


def test_held_every_batch(server, plain):
    """Holding every batch with a 3-batch arena: no deadlock (the server
    sends columns inline once the arena is full and every batch is read),
    every batch correct, the first ones over the arena."""
    _, want = plain
    with connect(server, epoch=0, timeout=10, read_timeout=120, shm_bytes=3 * 2 * COLUMN) as r:
        got = list(r)
    for i, b in enumerate(got):
        same(b, want[i], f"batch {i}")
    assert over_arena(got[0][CAMS[0]]) and not over_arena(got[-1][CAMS[0]])


def test_tiny_arena(server, plain):
    """An arena smaller than one camera column (1 MiB < 1.84 MB): every
    column inline, every batch correct."""
    _, want = plain
    with connect(server, epoch=0, timeout=10, read_timeout=120, shm_bytes=1 << 20) as r:
        assert r.header.get("shm") is True
        for i, b in enumerate(r):
            same(b, want[i], f"batch {i}")
            assert not any(over_arena(b[k]) for k in CAMS)


@pytest.mark.parametrize("nw", [0, 2])
def test_loader_over_shm(server, plain, nw, monkeypatch):
    """LRStreamDataset over shm with 0 and 2 DataLoader workers (the
    default without workers; asked for explicitly with them): every
    sample's frames; without workers the tensors view the arena, with
    workers they are shared-memory tensors of their own, copied from the
    worker's arena (counted across the forked workers)."""
    import multiprocessing

    import torch
    from torch.utils.data import DataLoader

    from lrstream_client import LRStreamDataset

    placed = multiprocessing.Value("i", 0)
    orig = rd.ShmArena.array

    def counted(self, name, obj):
        with placed.get_lock():
            placed.value += 1
        return orig(self, name, obj)

    monkeypatch.setattr(rd.ShmArena, "array", counted)
    _, want = plain
    frames = {int(x): [b[k][i] for k in CAMS] for b in want for i, x in enumerate(b["index"])}
    ds = LRStreamDataset(server, num_workers=nw, **({"shm_bytes": 64 << 20} if nw else {}))
    seen = []
    over = 0
    for b in DataLoader(ds, batch_size=None, num_workers=nw):
        if nw == 0:  # the columns before their first read: arrays over the arena
            over += sum(over_arena(b._use()[k]) for k in CAMS)
        for i, x in enumerate(b["index"].tolist()):
            for k, f in zip(CAMS, frames[x]):
                t = b[k]
                assert isinstance(t, torch.Tensor) and t.is_shared() == (nw > 0)
                assert t[i].numpy().tobytes() == f.tobytes(), f"index {x} {k}"
            seen.append(x)
    assert len(seen) == len(set(seen)) and len(seen) >= B * (len(want) - 1)
    if nw == 0:
        assert over == 2 * len(want)
    assert placed.value >= 2 * (len(want) - 1), f"{placed.value} camera columns over the arena"


def test_loader_workers_default_plain(server, plain, monkeypatch):
    """By default DataLoader workers offer no arena (the main process
    does): with 2 workers no arena is made in them and no column comes
    over shared memory, and the frames are still every sample's."""
    import multiprocessing

    import torch
    from torch.utils.data import DataLoader

    from lrstream_client import LRStreamDataset

    arenas = multiprocessing.Value("i", 0)
    orig = rd.ShmArena.__init__

    def counted(self, *a, **kw):
        with arenas.get_lock():
            arenas.value += 1
        orig(self, *a, **kw)

    monkeypatch.setattr(rd.ShmArena, "__init__", counted)
    _, want = plain
    frames = {int(x): [b[k][i] for k in CAMS] for b in want for i, x in enumerate(b["index"])}
    n = 0
    for b in DataLoader(LRStreamDataset(server, num_workers=2), batch_size=None, num_workers=2):
        for i, x in enumerate(b["index"].tolist()):
            for k, f in zip(CAMS, frames[x]):
                assert isinstance(b[k], torch.Tensor) and b[k][i].numpy().tobytes() == f.tobytes()
            n += 1
    assert n >= B * (len(want) - 1)
    assert arenas.value == 0, f"{arenas.value} arenas made in the workers"
