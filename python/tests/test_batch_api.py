"""What a training engineer expects of a batch (issue 26 item 7): a
collections.abc.Mapping with .to(device, non_blocking=), moved by the real
accelerate send_to_device and Lightning move_data_to_device; a per-batch
transform hook that keeps positions exact."""

import collections.abc
import pickle

import pytest
import torch
from torch.utils.data import DataLoader

from lrstream_client import LRStreamDataset
from lrstream_client.torch_dataset import LRStreamBatch


def first_batch(server, nw=0, **kw):
    ds = LRStreamDataset(server, **kw)
    return ds, next(iter(DataLoader(ds, batch_size=None, num_workers=nw)))


@pytest.mark.parametrize("nw", [0, 2])
def test_batch_is_a_mapping_with_to(server, nw):
    ds, b = first_batch(server, nw)
    assert isinstance(b, LRStreamBatch) and isinstance(b, collections.abc.Mapping)
    assert set(b) == set(b.keys()) and "observation.state" in b and len(b) == len(dict(b))
    moved = b.to("meta", non_blocking=True)
    assert isinstance(moved, LRStreamBatch) and moved["_lrstream"] == b["_lrstream"]
    assert moved["observation.state"].device.type == "meta" and b["observation.state"].device.type == "cpu"
    assert moved["observation.state"].shape == b["observation.state"].shape
    assert moved["messages"] is b["messages"]  # lists stay
    assert b.to(torch.float64)["observation.state"].dtype == torch.float64
    assert ds.state_dict()["batches"] == 1


def test_accelerate_send_to_device(server):
    from accelerate.utils import send_to_device

    ds, b = first_batch(server)
    moved = send_to_device(b, "meta", non_blocking=True)
    assert isinstance(moved, LRStreamBatch)
    assert all(v.device.type == "meta" for v in moved.values() if isinstance(v, torch.Tensor))
    assert moved["index"].shape == (8,)


def test_lightning_move_data_to_device(server):
    from lightning_fabric.utilities.apply_func import move_data_to_device

    ds, b = first_batch(server)
    moved = move_data_to_device(b, torch.device("meta"))
    assert isinstance(moved, LRStreamBatch)
    assert all(v.device.type == "meta" for v in moved.values() if isinstance(v, torch.Tensor))
    # nested, as a LightningModule's batch may be
    out = move_data_to_device({"batch": b, "n": 1}, torch.device("meta"))
    assert out["batch"]["action"].device.type == "meta"


def double_state(cols):  # module level: picklable for workers
    cols = dict(cols)
    cols["state2"] = cols["observation.state"] * 2
    return cols


@pytest.mark.parametrize("nw", [0, 2])
def test_transform_hook(server, nw):
    """The transform runs where the batch is made (in the worker with
    workers); the loop gets its columns; checkpoints stay exact."""
    ds = LRStreamDataset(server, num_workers=nw, transform=double_state)
    ds.set_epoch(1)
    plain = LRStreamDataset(server, num_workers=nw)
    plain.set_epoch(1)
    want = [b["index"].tolist() for b in DataLoader(plain, batch_size=None, num_workers=nw)]
    got = []
    for b in DataLoader(ds, batch_size=None, num_workers=nw):
        assert isinstance(b, LRStreamBatch)
        assert torch.equal(b["state2"], b["observation.state"] * 2)
        got.append(b["index"].tolist())
        if len(got) == 5:
            break
    state = pickle.loads(pickle.dumps(ds.state_dict()))
    ds2 = LRStreamDataset(server, num_workers=nw, transform=double_state)
    ds2.load_state_dict(state)
    got += [b["index"].tolist() for b in DataLoader(ds2, batch_size=None, num_workers=nw)]
    assert got == want


def test_transform_must_return_a_mapping(server):
    ds = LRStreamDataset(server, transform=lambda cols: [1])
    with pytest.raises(TypeError, match="must return a mapping"):
        next(iter(ds))
