"""The shared position record's arithmetic (lrstream_client/positions.py),
without a server: prefix positions, consumed counts, streams per worker
count, and the record's consume / plan rules."""

import pytest

from lrstream_client.positions import CUR_NW, EPOCH, Positions, consumed, prefix, streams_for


@pytest.mark.parametrize("nexts,per,want", [
    ([0], 0, 0),
    ([7], 0, 7),
    ([8, 7], 0, 7),          # 2 workers after 7 batches: worker of residue 0 next 8, residue 1 next 7
    ([8, 9], 0, 8),
    ([10, 7], 0, None),      # residue 0 ran ahead (in_order=False or an unread batch)
    ([4, 5, 6, 3], 0, 3),
    ([4, 9, 6, 3], 0, None),
    ([148, 147], 146, 146),  # past the end: the whole epoch
    ([146, 147], 146, 146),
])
def test_prefix(nexts, per, want):
    assert prefix(nexts, per) == want


@pytest.mark.parametrize("nexts,per,want", [
    ([0], 0, 0), ([7], 0, 7), ([8, 7], 0, 7), ([10, 7], 0, 8), ([148, 147], 146, 146),
    ([4, 9, 6, 3], 0, 1 + 2 + 1 + 0),
])
def test_consumed(nexts, per, want):
    assert consumed(nexts, per) == want


@pytest.mark.parametrize("nexts,nw,want", [
    ([7], 2, [7, 8]), ([7], 3, [7, 8, 9]), ([8, 7], 1, [7]), ([8, 7], 4, [7, 8, 9, 10]),
    ([10, 7], 2, [7, 10]),   # out of order: the same streams, the smallest next first
])
def test_streams_for(nexts, nw, want):
    assert streams_for(nexts, nw) == want


def test_streams_for_refuses_another_worker_count_out_of_order():
    with pytest.raises(ValueError, match="resume with num_workers=2"):
        streams_for([10, 7], 4)


def test_record_consume_and_plan():
    p = Positions()
    gen = p.get(0)
    per = lambda nw, world: 10  # noqa: E731
    assert p.plan(0, 2, 1, per, fresh=False) == (0, 0, gen) and p.plan(1, 2, 1, per, fresh=False) == (0, 1, gen)
    assert p.get(CUR_NW) == 2
    for i in range(4):
        assert p.consume(gen, 0, i, 2, 1, 10, local=False)
    assert p.nexts() == [4, 5] and prefix(p.nexts()) == 4
    assert not p.consume(gen - 1, 0, 4, 2, 1, 10, local=False)  # a batch from before the last reset
    for i in range(4, 10):
        p.consume(gen, 0, i, 2, 1, 10, local=False)
    # the epoch is complete: a new iteration starts the next one
    assert p.plan(0, 2, 1, per, fresh=False) == (1, 0, gen) and p.plan(1, 2, 1, per, fresh=False) == (1, 1, gen)
    # a pending resume of a complete epoch: the first iteration of each worker serves its rest (nothing) ...
    p.reset(0, [10], per=10, cluster=(2, 1), pending=True)
    g2 = p.get(0)
    assert p.plan(0, 2, 1, per, fresh=False) == (0, 10, g2) and p.plan(1, 2, 1, per, fresh=False) == (0, 11, g2)
    # ... and later iterations start the next epoch
    assert p.plan(0, 2, 1, per, fresh=False) == (1, 0, g2)
    assert p.get(EPOCH) == 0


def test_record_restored_workers():
    """Workers restored from StatefulDataLoader states announce where they
    start, each in its residue's slot; once every slot is in, the record
    reads as their streams, under the next generation."""
    p = Positions()
    g = p.restored(77, 3, 9, 2, 1, 10)
    assert p.restored(77, 3, 8, 2, 1, 10) == g and p.get(EPOCH) == 3 and prefix(p.nexts()) == 8
    assert p.restored(78, 4, 0, 1, 1, 10) == g and p.nexts() == [0] and p.get(EPOCH) == 4  # another one
    # the main process folds the announcement in when the loop consumes the restored iteration's batch
    assert p.consume(g, 4, 0, 1, 1, 10, local=False) and p.nexts() == [1] and p.get(0) == g
