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

The record lives in shared memory (``multiprocessing.RawArray``): the main
process writes it when the loop consumes a batch, on ``set_epoch`` and
``load_state_dict``; workers read it when an iteration starts (fresh
workers of a new iteration, persistent workers' later iterations) and write
it only when they resume from a worker state of torchdata's
StatefulDataLoader (so that the main process and later iterations know
where the restored iteration started).

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
GROUP = 7     # id of the restored iteration whose workers filled NEXT, 0 = none
OPEN = 8      # 1: the last consumed batch came from an iteration of this process still running
CUR_NW = 9    # workers of the latest iteration (0 = none yet)
STATEFUL = 10  # 1: a worker was asked for its state (torchdata's StatefulDataLoader)
NEXT = 16
SEEN = NEXT + MAXW  # per worker id: the PEND it has used
SIZE = SEEN + MAXW

FAR = 1 << 62  # a stream not published yet

# Records of this process, copied before every fork: a DataLoader forks its
# workers before the loop consumes anything, and a fresh worker must start
# where the iteration started even if the loop consumed a sibling's batches
# before this worker got to run (the plain DataLoader does not wait for its
# workers to start).
_LIVE: "weakref.WeakSet[Positions]" = weakref.WeakSet()


def _snap_all() -> None:
    for p in list(_LIVE):
        p.snap = p._a[:]


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
        self._lock = multiprocessing.Lock()
        self.snap: Optional[List[int]] = None  # the record when this process was forked or pickled
        self.reset(0, [0])
        _LIVE.add(self)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["snap"] = self._a[:]  # a spawned worker: the record at its start
        return state

    # -- reading ------------------------------------------------------------
    def nexts(self, a: Optional[Sequence[int]] = None) -> List[int]:
        a = self._a if a is None else a
        return [a[NEXT + r] for r in range(max(1, a[NW]))]

    def get(self, field: int) -> int:
        return self._a[field]

    def per_epoch_for(self, nw: int, world: int, a: Optional[Sequence[int]] = None) -> int:
        a = self._a if a is None else a
        if a[PER] > 0 and a[PER_NW] == nw and a[PER_WORLD] == world:
            return a[PER]
        return 0

    # -- main process -------------------------------------------------------
    def reset(self, epoch: int, nexts: List[int], *, per: int = 0, cluster: Tuple[int, int] = (0, 0),
              pending: bool = False) -> None:
        """set_epoch / load_state_dict: a new position; batches of earlier
        iterations no longer count."""
        if len(nexts) > MAXW:
            raise ValueError(f"a position of {len(nexts)} workers' streams: at most {MAXW}")
        with self._lock:
            a = self._a
            a[GEN] += 1
            a[EPOCH] = int(epoch)
            a[NW] = len(nexts)
            for r, n in enumerate(nexts):
                a[NEXT + r] = int(n)
            a[PER], a[PER_NW], a[PER_WORLD] = int(per), int(cluster[0]), int(cluster[1])
            a[PEND] = int.from_bytes(os.urandom(7), "little") | 1 if pending else 0
            a[GROUP] = 0
            a[OPEN] = 0

    def consume(self, gen: int, epoch: int, index: int, nw: int, world: int, per: int, local: bool) -> bool:
        """The loop took batch `index` of `epoch` (an iteration of nw
        workers started at record generation gen). False: a batch of an
        older position (before set_epoch / load_state_dict), not counted."""
        with self._lock:
            a = self._a
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
        with self._lock:
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
        with self._lock:
            live = self._a
            a = self.snap if fresh and self.snap is not None else live
            live[CUR_NW] = nw
            epoch, gen, pend = a[EPOCH], a[GEN], a[PEND]
            streams = streams_for(self.nexts(a), nw)
            first = pend != 0 and live[SEEN + worker] != pend
            live[SEEN + worker] = pend
            per = self.per_epoch_for(nw, world, a)
        k = min(streams)
        if k > 0 and not first:
            if k >= (per or per_epoch(nw, world)):  # the header, outside the lock (a connection)
                return epoch + 1, worker, gen
        return epoch, streams[worker], gen

    def restored(self, group: int, epoch: int, nxt: int, nw: int, world: int, per: int) -> int:
        """A worker of a restored StatefulDataLoader iteration (group: that
        iteration's id) starts at (epoch, nxt): record it, so that the main
        process and later iterations know. Returns the record generation."""
        with self._lock:
            a = self._a
            if a[GROUP] != group:
                a[GEN] += 1
                a[GROUP], a[EPOCH], a[NW] = group, epoch, nw
                for r in range(nw):
                    a[NEXT + r] = FAR
                a[PEND], a[OPEN] = 0, 0
                a[PER], a[PER_NW], a[PER_WORLD] = per, nw, world
            a[NEXT + nxt % nw] = nxt
            a[CUR_NW] = nw
            return a[GEN]
