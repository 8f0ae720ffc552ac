"""The Python client receives camera frames straight into the tensors it
hands over (docs/python.md, "How it works"): on a dataset written by
LeRobot's writer (image features, 240x320, two cameras: 3.7 MB per batch of
8, so the client walks the batches), the tensors of LRStreamDataset
(DataLoader with 0 and 2 workers) and StreamReader's arrays over a pipe are
the pixels of ``lrstream stream`` decoded by msgpack, each its own memory
(batches received later, or written to, do not change earlier ones), and a
stream cut inside a frame raises instead of yielding a partial batch.

Needs go (to build lrstream); no FFmpeg (image features are PNG bytes).
"""

import io
import os
import subprocess
import threading
from pathlib import Path

import msgpack
import numpy as np
import pytest

from lrstream_client.reader import StreamReader, TruncatedStreamError, decode_array, walk_stream
from make_lerobot_dataset import CAMERAS, make_dataset

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "testdata" / "demo-recipe.yaml"
H, W = 240, 320


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("ds") / "image", annotate_mode="none", codec="image",
                        height=H, width=W, episodes=3, fps=30, repo_id="lrstream/camera_receive")


ARGS = ["--mode", "fallback", "--batch-size", "8"]


@pytest.fixture(scope="module")
def recorded(lrstream_bin, dataset):
    """`lrstream stream` bytes, and every sample's frames decoded by msgpack."""
    p = subprocess.run([str(lrstream_bin), "stream", "--dataset", str(dataset), "--recipe", str(RECIPE), *ARGS],
                       capture_output=True, check=True)
    frames = {}
    msgs = list(msgpack.Unpacker(io.BytesIO(p.stdout), raw=False, max_buffer_size=1 << 30))
    assert walk_stream(msgs[0]), "the stream is too small to be walked"
    for m in msgs:
        if m["type"] == "batch":
            cols = {k: decode_array(m["columns"][k]) for k in ["index", *CAMERAS]}
            for i, idx in enumerate(cols["index"]):
                frames[int(idx)] = {k: cols[k][i] for k in CAMERAS}
    assert msgs[-1]["type"] == "end" and len(frames) == msgs[-1]["samples"]
    return p.stdout, frames


def check_private(batches, frames, to_numpy):
    """Every batch holds its samples' frames; writing to later batches does
    not change earlier ones."""
    for b in batches:
        for i, idx in enumerate(to_numpy(b["index"])):
            for k in CAMERAS:
                np.testing.assert_array_equal(to_numpy(b[k])[i], frames[int(idx)][k], f"index {idx} {k}")
    for b in batches[1:]:
        for k in CAMERAS:
            to_numpy(b[k])[...] = 0
    for i, idx in enumerate(to_numpy(batches[0]["index"])):
        for k in CAMERAS:
            np.testing.assert_array_equal(to_numpy(batches[0][k])[i], frames[int(idx)][k])


@pytest.mark.parametrize("nw", [0, 2])
def test_loader_tensors(lrstream_bin, dataset, recorded, nw):
    import torch
    from torch.utils.data import DataLoader

    from lrstream_client import LRStreamDataset

    _, frames = recorded
    ds = LRStreamDataset(serve_args=["--dataset", str(dataset), "--recipe", str(RECIPE), *ARGS, "--shuffle"],
                         lrstream=str(lrstream_bin), num_workers=nw)
    try:
        batches = []
        for b in DataLoader(ds, batch_size=None, num_workers=nw):
            for k in CAMERAS:
                t = b[k]
                assert isinstance(t, torch.Tensor) and t.dtype == torch.uint8 and t.shape[1:] == (3, H, W)
                # Workers receive the frames into shared memory, passed to this process by descriptor.
                assert t.is_shared() == (nw > 0)
            batches.append(b)
        seen = [int(i) for b in batches for i in b["index"]]
        assert len(batches) == len(ds) and len(set(seen)) == len(seen)  # an epoch: all 5 batches, or 4 with 2 workers
        check_private(batches, frames, lambda t: t.numpy())
    finally:
        ds.close()


def test_stream_reader_pipe(lrstream_bin, dataset, recorded):
    _, frames = recorded
    p = subprocess.Popen([str(lrstream_bin), "stream", "--dataset", str(dataset), "--recipe", str(RECIPE), *ARGS],
                         stdout=subprocess.PIPE)
    with p.stdout, StreamReader(p.stdout) as r:  # the pipe too (a ResourceWarning otherwise)
        batches = list(r)
        assert r.end["samples"] == len(frames)
    assert p.wait() == 0
    for b in batches:
        for k in CAMERAS:
            assert b[k].flags.writeable and b[k].flags.owndata
    check_private(batches, frames, lambda a: a)


def test_cut_inside_a_frame(recorded):
    """A pipe that ends inside a camera payload: the complete batches, then
    TruncatedStreamError; the partial batch is never yielded."""
    raw, frames = recorded
    first = raw.index(b"observation.images")  # in the header
    second_batch = raw.index(b"\xa5batch", raw.index(b"\xa5batch") + 1)
    cut = raw.index(CAMERAS[1].encode(), second_batch) + 5000  # inside the second batch's second camera
    r, w = os.pipe()

    def write():
        with os.fdopen(w, "wb") as f:
            f.write(raw[:cut])

    t = threading.Thread(target=write)
    t.start()
    got = []
    with os.fdopen(r, "rb") as f, pytest.raises(TruncatedStreamError, match="truncated"):
        for b in StreamReader(f):
            got.append(b)
    t.join()
    assert first < second_batch and len(got) == 1


def _batches_one_at_a_time(data, frames, keep=None, **kw):
    """Reads the recorded stream batch by batch, checking each batch's
    frames while it is the current one; returns the camera arrays' data
    addresses. keep(batch), when given, may hold on to parts of a batch."""
    addrs = []
    with StreamReader(io.BytesIO(data), **kw) as r:
        for b in r:
            for i, idx in enumerate(b["index"]):
                for k in CAMERAS:
                    np.testing.assert_array_equal(b[k][i], frames[int(idx)][k], f"index {idx} {k}")
            addrs.extend(b[k].__array_interface__["data"][0] for k in CAMERAS)
            if keep is not None:
                keep(b)
    return addrs


def test_pool_reuses_dropped_arrays(recorded):
    """Camera arrays of batches the caller has dropped are received into
    again (no fresh pages per batch), and every batch still holds exactly
    its own frames; with pool_bytes=0 every array is new."""
    data, frames = recorded
    addrs = _batches_one_at_a_time(data, frames)
    assert len(set(addrs)) < len(addrs), "no camera array was reused"
    assert len(set(addrs)) <= 3 * len(CAMERAS), f"{len(set(addrs))} distinct arrays for {len(addrs)}"
    fresh = []
    with StreamReader(io.BytesIO(data), pool_bytes=0) as r:
        for b in r:
            fresh.append(b[CAMERAS[0]])  # held: addresses stay distinct
    assert len({a.__array_interface__["data"][0] for a in fresh}) == len(fresh)


def test_pool_never_writes_held_arrays(recorded):
    """Arrays the caller still references -- the array, a view of it, or a
    torch tensor made from it -- are never received into again."""
    torch = pytest.importorskip("torch")
    data, frames = recorded
    held = []

    def keep(b):
        idx = b["index"].copy()
        held.append((idx, torch.from_numpy(b[CAMERAS[0]]), b[CAMERAS[1]][1:]))

    _batches_one_at_a_time(data, frames, keep=keep)
    for idx, t, view in held:
        for i, x in enumerate(idx):
            np.testing.assert_array_equal(t[i].numpy(), frames[int(x)][CAMERAS[0]])
            if i >= 1:
                np.testing.assert_array_equal(view[i - 1], frames[int(x)][CAMERAS[1]])
