"""Streams without a recipe (`--recipe none`, or a --dataset without
--recipe): nothing is rendered, every frame is kept, and the batches carry
no messages -- as LeRobotDataset frames without a RenderMessagesStep.
Compared with the demo recipe's server (conftest `server`, same order and
flags): the same batches minus the rendered columns, through DataLoader,
StatefulDataLoader resume, the pipe reader and lerobot_collate_fn."""

import io
import subprocess

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

from conftest import SERVE_ARGS, serving
from lrstream_client import LRStreamDataset, read_stream

RENDERED = ("messages", "message_streams", "target_message_indices")


@pytest.fixture(scope="module")
def bare_server(lrstream_bin):
    """`lrstream serve --recipe none` on the demo dataset, with the flags
    of conftest's `server` (demo recipe)."""
    yield from serving(lrstream_bin, "--recipe", "none", *SERVE_ARGS)


def same_column(got, want):
    if isinstance(want, torch.Tensor):
        return isinstance(got, torch.Tensor) and got.dtype == want.dtype and torch.equal(got, want)
    return got == want


def assert_bare(got, want):
    """`got` (no recipe) is `want` (demo recipe) without its rendered columns."""
    assert all(k in want for k in RENDERED)
    assert not any(k in got for k in RENDERED)
    assert list(got.keys()) == [k for k in want.keys() if k not in RENDERED]
    for k in got.keys():
        assert same_column(got[k], want[k]), k


@pytest.mark.parametrize("nw", [0, 2])
def test_dataloader_without_recipe(server, bare_server, nw):
    ds, ref = LRStreamDataset(bare_server, num_workers=nw), LRStreamDataset(server, num_workers=nw)
    assert ds.has_messages is False and ds.recipe == "" and ds.header["mode"] == "none"
    assert ref.has_messages is True and ref.recipe == "demo-recipe.yaml"
    assert ds.features == ref.features
    ds.set_epoch(1)
    ref.set_epoch(1)
    got = list(DataLoader(ds, batch_size=None, num_workers=nw))
    want = list(DataLoader(ref, batch_size=None, num_workers=nw))
    assert len(got) == len(want) == len(ds) > 0
    for g, w in zip(got, want):
        assert_bare(g, w)
        n = len(g["index"])
        assert 0 < n <= 8 and g["action"].shape == (n, 6) and g["action"].dtype == torch.float32
        assert isinstance(g["task"], list) and all(isinstance(t, str) and t for t in g["task"])
        assert g.get("messages") is None
        with pytest.raises(KeyError):
            g["messages"]


def test_resume_without_recipe(bare_server):
    """StatefulDataLoader checkpoint after 3 batches: the resumed loader
    continues exactly."""
    kw = dict(batch_size=None, num_workers=2)
    whole = [b["index"].tolist() for b in StatefulDataLoader(LRStreamDataset(bare_server, num_workers=2), **kw)]
    loader = StatefulDataLoader(LRStreamDataset(bare_server, num_workers=2), **kw)
    got = []
    for i, b in enumerate(loader):
        got.append(b["index"].tolist())
        if i == 2:
            break
    state = loader.state_dict()
    loader = StatefulDataLoader(LRStreamDataset(bare_server, num_workers=2), **kw)
    loader.load_state_dict(state)
    got += [b["index"].tolist() for b in loader]
    assert got == whole


def test_batches_are_lerobot_collate_output(bare_server):
    """A batch is what lerobot_collate_fn makes of its samples: tensors
    stacked, task a list, no rendered key (it keeps none absent on every
    sample). meta_key=None: no "_lrstream" position dict (docs/python.md)."""
    from lerobot.utils.collate import lerobot_collate_fn

    b = next(iter(DataLoader(LRStreamDataset(bare_server, meta_key=None), batch_size=None))).to_dict()
    n = len(b["index"])
    ref = lerobot_collate_fn([{k: v[i] for k, v in b.items()} for i in range(n)])
    assert list(ref) == list(b)
    for k in b:
        assert same_column(b[k], ref[k]), k


def test_pipe_reader_without_recipe(lrstream_bin):
    """`lrstream stream --recipe none` read with read_stream: numpy columns,
    no rendered key, every frame kept, the same columns as with the recipe."""
    def run(*args):
        p = subprocess.run([lrstream_bin, "stream", "--batch-size", "64", "-q", *args], capture_output=True, check=True)
        return list(read_stream(io.BytesIO(p.stdout)))

    got, want = run("--recipe", "none"), run()
    assert len(got) == len(want) and sum(len(b["index"]) for b in got) == 1175
    for g, w in zip(got, want):
        assert not any(k in g for k in RENDERED) and all(k in w for k in RENDERED)
        assert list(g) == [k for k in w if k not in RENDERED]
        for k in g:
            if isinstance(g[k], np.ndarray):
                np.testing.assert_array_equal(g[k], w[k], err_msg=k)
            else:
                assert g[k] == w[k], k
