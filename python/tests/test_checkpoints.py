"""Checkpoints that hold at every step (issue 26 items 1-4): real torch
DataLoader and torchdata StatefulDataLoader training loops against a real
`lrstream serve` on the demo dataset (147 global batches an epoch: 146 with
2 workers, 144 with 4). Each test stops a run at a step, saves the state
(pickled, as a checkpoint file would be), resumes it in a new dataset and
loader, and compares the concatenated `index` sequence with the
uninterrupted order of the same epochs -- no batch lost, none repeated --
for both common epoch loops: the loop's own counter (torchdata's usual
pattern) and `while ds.epoch < N`."""

import pickle

import pytest
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

from lrstream_client import LRStreamDataset

EPOCHS = 2

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")


def order(server, epoch, nw):
    """Epoch `epoch` as a loader with `nw` workers serves it (the global order,
    less the last B mod nw batches)."""
    ds = LRStreamDataset(server)
    ds.set_epoch(epoch)
    return [tuple(b["index"].tolist()) for b in DataLoader(ds, batch_size=None, num_workers=nw)]


def train(server, kind, nw, *, persistent=False, loop="counter", stop=None, ckpt=None, in_order=True,
          epochs=EPOCHS):
    """A training loop over `epochs` epochs; stops after `stop` batches of
    this run (returns the checkpoint), or resumes from `ckpt`. Returns
    (indices read, checkpoint or None)."""
    ds = LRStreamDataset(server, num_workers=nw)
    Loader = DataLoader if kind == "plain" else StatefulDataLoader
    kw = dict(batch_size=None, num_workers=nw, persistent_workers=persistent and nw > 0)
    if not in_order:
        kw["in_order"] = False
    loader = Loader(ds, **kw)
    start = 0
    if ckpt is not None:
        ckpt = pickle.loads(ckpt)
        start = ckpt["epoch"]
        (ds if kind == "plain" else loader).load_state_dict(ckpt["data"])
    got = []

    def save(epoch):
        data = ds.state_dict() if kind == "plain" else loader.state_dict()
        return pickle.dumps({"epoch": epoch, "data": data})

    if loop == "counter":
        for epoch in range(start, epochs):
            for b in loader:
                got.append(tuple(b["index"].tolist()))
                if len(got) == stop:
                    return got, save(epoch)
        return got, None
    loops = 0
    while ds.epoch < epochs:
        loops += 1
        assert loops <= epochs + 2, f"ds.epoch stays {ds.epoch}: the loop never ends"
        for b in loader:
            got.append(tuple(b["index"].tolist()))
            if len(got) == stop:
                return got, save(ds.epoch)
    return got, None


def check(server, kind, nw, stop, *, resume_nw=None, **kw):
    resume_nw = nw if resume_nw is None else resume_nw
    first, ckpt = train(server, kind, nw, stop=stop, **kw)
    assert ckpt is not None and len(first) == stop
    rest, _ = train(server, kind, resume_nw, ckpt=ckpt, **kw)
    # The first run's batches are a prefix of its epochs' order; the resumed
    # run continues the same global order (its epochs are resume_nw's).
    e0, k = divmod(stop, len(order(server, 0, nw)))
    want = []
    for e in range(EPOCHS):
        if e < e0:
            want += order(server, e, nw)
        elif e == e0:
            want += order(server, e, nw)[:k] + order(server, e, resume_nw)[k:]
        else:
            want += order(server, e, resume_nw)
    got = first + rest
    assert len(got) == len(want), (len(first), len(rest), len(want))
    assert got == want


@pytest.mark.parametrize("loop", ["counter", "ds.epoch"])
def test_elastic_resume_past_epoch_end(server, loop):
    """Item 1: 2 workers stopped after 145 of 146 batches, resumed with 4
    (144 batches an epoch): epoch 0 is over for 4 workers, the next loop
    serves epoch 1 (before: every later loop was empty, ds.epoch stayed 0)."""
    check(server, "plain", 2, 145, resume_nw=4, loop=loop)


@pytest.mark.parametrize("loop", ["counter", "ds.epoch"])
@pytest.mark.parametrize("kind,nw,persistent,stops", [
    ("stateful", 2, False, [144, 145, 146]),
    ("stateful", 4, False, [141, 142, 143, 144]),
    ("stateful", 2, True, [145, 146]),
    ("stateful", 0, False, [146, 147]),
    ("plain", 0, False, [146, 147]),
    ("plain", 2, False, [145]),
])
def test_checkpoint_in_last_batches_of_epoch(server, kind, nw, persistent, stops, loop):
    """Item 2: a checkpoint in an epoch's last num_workers batches, or right
    after its last one, resumes exactly: the state says what the loop
    consumed (before: a worker's state pointed at the next epoch after its
    final batch -- an extra epoch, or 732 samples lost with 4 workers)."""
    for stop in stops:
        check(server, kind, nw, stop, persistent=persistent, loop=loop)


@pytest.mark.parametrize("reiterate", ["break", "set_epoch"])
@pytest.mark.parametrize("stop", [0, 1, 3])
def test_stateful_persistent_checkpoint_after_reiteration(server, reiterate, stop):
    """Item 3: StatefulDataLoader + persistent workers: a checkpoint soon
    after a re-iteration (a break then a new for, or set_epoch) restores the
    new iteration's positions (before: the previous iteration's, lost or
    repeated batches). torchdata asks the workers for their state as soon as
    the iteration starts."""
    nw = 2
    ds = LRStreamDataset(server, num_workers=nw)
    loader = StatefulDataLoader(ds, batch_size=None, num_workers=nw, persistent_workers=True)
    got = []
    for b in loader:
        got.append(tuple(b["index"].tolist()))
        if len(got) == 20:
            break
    epoch = 0
    if reiterate == "set_epoch":
        ds.set_epoch(1)
        got, epoch = [], 1
    it = iter(loader)
    for _ in range(stop):
        got.append(tuple(next(it)["index"].tolist()))
    state = pickle.dumps(loader.state_dict())
    del it, loader
    ds2 = LRStreamDataset(server, num_workers=nw)
    l2 = StatefulDataLoader(ds2, batch_size=None, num_workers=nw, persistent_workers=True)
    l2.load_state_dict(pickle.loads(state))
    rest = [tuple(b["index"].tolist()) for b in l2]
    assert got + rest == order(server, epoch, nw)


def test_out_of_order_loader(server):
    """Item 4: DataLoader(in_order=False) delivers batches as workers finish
    them: a checkpoint still names exactly what the loop read (per worker
    stream), so the resumed run serves the same epochs' batches, none lost
    or repeated (the order may differ)."""
    nw = 4
    first, ckpt = train(server, "plain", nw, stop=40, in_order=False)
    rest, _ = train(server, "plain", nw, ckpt=ckpt, in_order=False)
    per = len(order(server, 0, nw))
    got = first + rest
    assert len(got) == 2 * per
    assert sorted(got[:per]) == sorted(order(server, 0, nw)) and sorted(got[per:]) == sorted(order(server, 1, nw))


def test_out_of_order_stateful_loader_refused(server):
    """Item 4: StatefulDataLoader(in_order=False) skips its snapshots when
    batches arrive out of order and replays batches on resume (lost 216,
    repeated 144 with 4 workers): refused with a clear error as soon as a
    batch arrives out of order."""
    import time

    class Slow(LRStreamDataset):  # worker 0 slow: the others' batches overtake its
        def __iter__(self):
            it = super().__iter__()
            from torch.utils.data import get_worker_info
            slow = get_worker_info().id == 0
            for b in it:
                if slow:
                    time.sleep(0.05)
                yield b

    ds = Slow(server, num_workers=4)
    loader = StatefulDataLoader(ds, batch_size=None, num_workers=4, in_order=False)
    with pytest.raises(ValueError, match=r"StatefulDataLoader\(in_order=False\) cannot checkpoint"):
        for b in loader:
            b["index"]


@pytest.fixture(scope="module")
def partitioned(lrstream_bin):
    from conftest import SERVE_ARGS, serving

    yield from serving(lrstream_bin, *SERVE_ARGS, "--order", "partitioned", "--partitions", "4")


def rank_run(server, world, rank, nw=0, stop=None, state=None):
    ds = LRStreamDataset(server, rank=rank, world_size=world, num_workers=nw)
    if state is not None:
        ds.load_state_dict(pickle.loads(state))
    got = []
    for b in DataLoader(ds, batch_size=None, num_workers=nw):
        got.append(tuple(b["index"].tolist()))
        if len(got) == stop:
            break
    return got, pickle.dumps(ds.state_dict())


@pytest.mark.parametrize("k,world2,nw2", [(2, 1, 0), (2, 4, 0), (4, 1, 2), (4, 4, 1), (3, 1, 4)])
def test_partitioned_elastic_resume(partitioned, k, world2, nw2):
    """Item 7: under --order partitioned a rank's batch m is global batch
    m x world_size + rank, so a mid-epoch checkpoint of 2 ranks (k batches
    each, a synchronous DDP step) resumes on another number of ranks (and
    workers): together they serve exactly the rest of the epoch's global
    sequence, each rank the same number of batches."""
    glob = order(partitioned, 0, 0)  # one rank, no workers: the global sequence
    first = [rank_run(partitioned, 2, r, stop=k) for r in range(2)]
    done = [b for m in range(k) for b in (first[0][0][m], first[1][0][m])]  # DDP steps, rank 0 then 1
    assert done == glob[:2 * k]
    rest = [rank_run(partitioned, world2, r, nw=nw2, state=first[0][1])[0] for r in range(world2)]
    assert len({len(x) for x in rest}) == 1, "ranks resumed with different batch counts"
    resumed = [b for m in range(len(rest[0])) for b in (x[m] for x in rest)]
    assert resumed == glob[2 * k:2 * k + len(resumed)] and len(glob) - len(done + resumed) < world2 * max(1, nw2)


def test_partitioned_elastic_resume_refused_when_uneven(partitioned):
    """3 batches x 2 ranks = 6 global batches cannot be split evenly over 4
    ranks: refused, with a message saying why (and under the global order
    any mid-epoch world_size change is refused)."""
    _, state = rank_run(partitioned, 2, 0, stop=3)
    ds = LRStreamDataset(partitioned, rank=0, world_size=4)
    with pytest.raises(ValueError, match="must divide 6"):
        ds.load_state_dict(pickle.loads(state))


@pytest.mark.parametrize("kind", ["plain", "stateful"])
def test_spawned_workers(server, kind):
    """Workers started with the spawn context (the dataset, its shared
    position and the DataLoader's collate function are pickled, not
    forked): a checkpoint resumes exactly too."""
    Loader = DataLoader if kind == "plain" else StatefulDataLoader
    kw = dict(batch_size=None, num_workers=2, multiprocessing_context="spawn")
    want = order(server, 0, 2)
    ds = LRStreamDataset(server, num_workers=2)
    loader = Loader(ds, **kw)
    got = []
    for b in loader:
        got.append(tuple(b["index"].tolist()))
        if len(got) == 9:
            break
    state = pickle.dumps(ds.state_dict() if kind == "plain" else loader.state_dict())
    ds2 = LRStreamDataset(server, num_workers=2)
    l2 = Loader(ds2, **kw)
    (ds2 if kind == "plain" else l2).load_state_dict(pickle.loads(state))
    got += [tuple(b["index"].tolist()) for b in l2]
    assert got == want and ds2.epoch == 1
