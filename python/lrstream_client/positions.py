"""The position of an LRStreamDataset's training loop, shared by the main
process and its DataLoader workers (no torch import).

A rank's batches of an epoch form its *rank sequence* (indices 0, 1, ...,
``per_epoch - 1``); with ``W`` workers, an iteration's worker ``w`` serves
one *residue stream*: indices ``n, n + W, n + 2W, ...``. The record keeps,
per residue ``r`` of ``W``, the next index of that stream the loop has not
consumed. With an in-order DataLoader the consumed indices are a prefix
``[0, k)`` (``next[r] = k + (r - k) mod W``) and ``k`` alone is the position,
valid for any ``W``; with ``in_order=False`` (or batches the loop never
read) they need not be, and the record keeps the streams (a resume then
needs the same ``W``).

The record lives in shared memory (``multiprocessing.RawArray``, no lock:
whatever context the DataLoader's workers use): only the main process
writes the position, when the loop consumes a batch, on ``set_epoch`` and
``load_state_dict``; workers read it when an iteration starts (fresh
workers of a new iteration from the record as it was at their fork,
persistent workers' later iterations from the live one). Workers restored
from torchdata StatefulDataLoader states announce where they start, each
in its own residue's slot (one writer per word); readers fold a complete
announcement into the position, so that the main process and later
iterations know where the restored iteration started.

An epoch is *complete* when every stream is past ``per_epoch``. A new
iteration from a complete epoch starts the next epoch -- except the first
iteration after ``load_state_dict`` of a checkpoint taken while that
epoch's loop was still running ("pending"): it serves the rest of the
epoch, nothing, as a map-style dataset's resumed StatefulDataLoader does,
so that a loop that keeps its own epoch counter stays in step.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import weakref
from typing import List, Optional, Sequence, Tuple

MAXW = 256  # residue streams (DataLoader workers) a record can hold

# Record fields (int64).
GEN = 0       # bumped by set_epoch / load_state_dict / a restored iteration: older batches do not count
EPOCH = 1
NW = 2        # residue streams in NEXT (1: a prefix position k = NEXT[0])
PER = 3       # batches per epoch of cluster (PER_NW, PER_WORLD), 0 = unknown
PER_NW = 4
PER_WORLD = 5
PEND = 6      # id of a pending resume (first iteration serves the rest of EPOCH), 0 = none
GROUP = 7     # id of a restored iteration announced in R_* (not folded into the record yet), 0 = none
OPEN = 8      # 1: the last consumed batch came from an iteration of this process still running
CUR_NW = 9    # workers of the latest iteration (0 = none yet)
STATEFUL = 10  # 1: a worker was asked for its state (torchdata's StatefulDataLoader)
R_EPOCH = 11  # the announced restored iteration: epoch, workers, batches per epoch, world size
R_NW = 12
R_PER = 13
R_WORLD = 14
NEXT = 16
SEEN = NEXT + MAXW  # per worker id: the PEND it has used
R_GROUP = SEEN + MAXW  # per residue: the restored iteration that wrote R_NEXT
R_NEXT = R_GROUP + MAXW
SIZE = R_NEXT + MAXW

FAR = 1 << 62  # a stream not published yet

# Records of this process, copied before every fork: a DataLoader forks its
# workers before the loop consumes anything, and a fresh worker must start
# where the iteration started even if the loop consumed a sibling's batches
# before this worker got to run (the plain DataLoader does not wait for its
# workers to start).
_LIVE: "weakref.WeakSet[Positions]" = weakref.WeakSet()


def _snap_all() -> None:
    try:
        for p in list(_LIVE):
            p.snap = p._a[:]
    except Exception:  # never in the way of a fork (a worker then reads the live record)
        pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_snap_all)


def prefix(nexts: List[int], per: int = 0) -> Optional[int]:
    """k if the consumed indices are exactly [0, k) (streams capped at
    ``per`` when known), else None."""
    w = len(nexts)
    if per > 0 and all(n >= per for n in nexts):
        return per
    k = min(nexts)
    if all(n == k + (r - k) % w for r, n in enumerate(nexts)):
        return k
    return None


def consumed(nexts: List[int], per: int) -> int:
    """Batches consumed: per residue r of W, the indices below its next
    (capped at per when known)."""
    w = len(nexts)
    total = 0
    for r, n in enumerate(nexts):
        if per > 0:
            n = min(n, per + (r - per) % w)
        total += max(0, (n - r + w - 1) // w)
    return total


def streams_for(nexts: List[int], nw: int) -> List[int]:
    """The record's streams as nw residue streams, worker w's first: the
    prefix form converts to any nw; other forms need the same nw (else
    ValueError). Worker w takes the stream that holds the w-th smallest
    next, so that round-robin reading continues a prefix in order."""
    k = prefix(nexts)
    if k is not None:
        return [k + w for w in range(nw)]
    if len(nexts) != nw:
        raise ValueError(
            f"the position holds {len(nexts)} workers' streams with batches consumed out of order "
            f"(DataLoader(in_order=False), or batches the loop never read): resume with num_workers={len(nexts)}")
    return sorted(nexts)


class Positions:
    """The shared record (see the module docstring)."""

    def __init__(self) -> None:
        self._a = multiprocessing.RawArray(ctypes.c_int64, SIZE)
        self.snap: Optional[List[int]] = None  # the record when this process was forked or pickled
        self.reset(0, [0])
        _LIVE.add(self)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["snap"] = self._a[:]  # a spawned worker: the record at its start
        return state

    # -- reading ------------------------------------------------------------
    @staticmethod
    def _restored(a: Sequence[int]) -> bool:
        """A restored iteration announced all its streams, not folded yet."""
        g = a[GROUP]
        return g != 0 and all(a[R_GROUP + r] == g for r in range(a[R_NW]))

    def view(self, a: Optional[Sequence[int]] = None) -> Tuple[int, List[int], int, int, int, int, int]:
        """(gen, nexts, epoch, per, per_nw, per_world, pend) of the record
        (the live one, or a snapshot), a complete restored announcement
        folded in."""
        a = self._a if a is None else a
        if self._restored(a):
            return (a[GEN] + 1, [a[R_NEXT + r] for r in range(a[R_NW])], a[R_EPOCH], a[R_PER], a[R_NW],
                    a[R_WORLD], 0)
        return a[GEN], [a[NEXT + r] for r in range(max(1, a[NW]))], a[EPOCH], a[PER], a[PER_NW], a[PER_WORLD], a[PEND]

    def nexts(self) -> List[int]:
        return self.view()[1]

    def get(self, field: int) -> int:
        """A field of the live record (restored announcement folded in for EPOCH, PER*, PEND)."""
        v = self.view()
        return {GEN: v[0], EPOCH: v[2], PER: v[3], PER_NW: v[4], PER_WORLD: v[5], PEND: v[6]}.get(field, self._a[field])

    def per_epoch_for(self, nw: int, world: int) -> int:
        _, _, _, per, pnw, pworld, _ = self.view()
        return per if per > 0 and pnw == nw and pworld == world else 0

    # -- main process -------------------------------------------------------
    def _write(self, gen: int, epoch: int, nexts: List[int], per: int, cluster: Tuple[int, int], pend: int) -> None:
        a = self._a
        a[GROUP] = 0  # an announcement, if any, is folded in or superseded
        a[EPOCH] = int(epoch)
        a[NW] = len(nexts)
        for r, n in enumerate(nexts):
            a[NEXT + r] = int(n)
        a[PER], a[PER_NW], a[PER_WORLD] = int(per), int(cluster[0]), int(cluster[1])
        a[PEND] = pend
        a[OPEN] = 0
        a[GEN] = gen

    def reset(self, epoch: int, nexts: List[int], *, per: int = 0, cluster: Tuple[int, int] = (0, 0),
              pending: bool = False) -> None:
        """set_epoch / load_state_dict: a new position; batches of earlier
        iterations no longer count."""
        if len(nexts) > MAXW:
            raise ValueError(f"a position of {len(nexts)} workers' streams: at most {MAXW}")
        gen = self.view()[0] + 1
        self._write(gen, epoch, nexts, per, cluster, int.from_bytes(os.urandom(7), "little") | 1 if pending else 0)

    def consume(self, gen: int, epoch: int, index: int, nw: int, world: int, per: int, local: bool) -> bool:
        """The loop took batch `index` of `epoch` (an iteration of nw
        workers started at record generation gen). False: a batch of an
        older position (before set_epoch / load_state_dict), not counted."""
        a = self._a
        if self._restored(a):  # fold a restored iteration's announcement in
            g, nexts, e, p, pnw, pworld, _ = self.view()
            self._write(g, e, nexts, p, (pnw, pworld), 0)
        if gen != a[GEN]:
            return False
        if a[EPOCH] != epoch or a[NW] != nw:
            if a[EPOCH] == epoch:
                cur = streams_for(self.nexts(), nw)  # same epoch, another form: as nw streams
            elif epoch > a[EPOCH]:
                cur = list(range(nw))  # the next epoch, from its start
            else:
                return False
            a[EPOCH], a[NW] = epoch, nw
            for r in range(nw):
                a[NEXT + cur[r] % nw] = cur[r]
        if a[STATEFUL] and nw > 1 and index < max(self.nexts()) - nw:
            raise ValueError(
                "StatefulDataLoader(in_order=False) cannot checkpoint LRStreamDataset exactly: batches arrive out "
                "of order and torchdata then skips its snapshots and replays batches on resume (lost and "
                "repeated batches). Use in_order=True, or the plain torch DataLoader(in_order=False) with "
                "ds.state_dict() / ds.load_state_dict(), which are exact")
        r = NEXT + index % nw
        if index + nw > a[r]:
            a[r] = index + nw
        a[PER], a[PER_NW], a[PER_WORLD] = per, nw, world
        a[PEND] = 0
        a[OPEN] = 1 if local else 0
        return True

    def mark_stateful(self) -> None:
        """A worker was asked for its state: the loader is torchdata's."""
        self._a[STATEFUL] = 1

    def close(self, gen: int) -> None:
        """An iteration of this process ended (its stream's end)."""
        if self._a[GEN] == gen:
            self._a[OPEN] = 0

    # -- workers (and the main process when it iterates itself) --------------
    def plan(self, worker: int, nw: int, world: int, per_epoch, fresh: bool) -> Tuple[int, int, int]:
        """(epoch, next, gen) for worker `worker` of a new iteration of nw
        workers; per_epoch(nw, world) gives the batches per epoch when the
        record does not hold them. fresh: the first iteration of a worker
        process, which starts from the record as it was at the fork (see
        _LIVE); later iterations of persistent workers read the live record
        (the DataLoader waits for every worker to restart before it goes on)."""
        if worker >= MAXW:
            raise ValueError(f"DataLoader worker {worker}: LRStreamDataset supports at most {MAXW} workers")
        live = self._a
        gen, nexts, epoch, per, pnw, pworld, pend = self.view(self.snap if fresh and self.snap is not None else live)
        live[CUR_NW] = nw
        streams = streams_for(nexts, nw)
        first = pend != 0 and live[SEEN + worker] != pend
        live[SEEN + worker] = pend
        k = min(streams)
        if k > 0 and not first:
            if k >= (per if per > 0 and pnw == nw and pworld == world else per_epoch(nw, world)):
                return epoch + 1, worker, gen
        return epoch, streams[worker], gen

    def restored(self, group: int, epoch: int, nxt: int, nw: int, world: int, per: int) -> int:
        """A worker of a restored StatefulDataLoader iteration (group: that
        iteration's id) starts at (epoch, nxt): announce it in its residue's
        slot. Returns the record generation its batches carry (the one the
        announcement gets when folded in)."""
        a = self._a
        r = nxt % nw
        a[R_NEXT + r] = nxt
        a[R_GROUP + r] = group
        # The same values from every worker of the iteration.
        a[R_EPOCH], a[R_NW], a[R_PER], a[R_WORLD] = epoch, nw, per, world
        a[GROUP] = group
        a[CUR_NW] = nw
        return a[GEN] + 1
