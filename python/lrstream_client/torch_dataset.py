"""PyTorch IterableDataset over ``lrstream serve`` (imports torch)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from typing import Any, Dict, Iterator, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from .reader import Batch, connect


def _dist_rank_world() -> tuple:
    """Rank and world size from torch.distributed, else torchrun's env."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:  # pragma: no cover - defensive
        pass
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def to_torch(batch: Batch, *, copy: bool = False) -> Dict[str, Any]:
    """Convert a batch's numpy arrays to torch tensors (lists stay lists).

    Without ``copy`` the tensors share the received bytes; they are then
    formally read-only (torch's warning about it is silenced): do not write
    to them in place -- ``.to(device)``, ``.float()`` etc. are fine.
    """
    out: Dict[str, Any] = {}
    for k, v in batch.items():
        if isinstance(v, np.ndarray):
            if copy:
                out[k] = torch.from_numpy(v.copy())
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    out[k] = torch.from_numpy(v)
        else:
            out[k] = v
    return out


class LRStreamDataset(IterableDataset):
    """Batches from ``lrstream serve`` as an IterableDataset.

    Use with ``DataLoader(ds, batch_size=None, num_workers=N)``: batches are
    already collated by lrstream. Each DataLoader worker (and each
    distributed rank) connects on its own and sends the hello
    ``{worker, num_workers, rank, world_size[, resume]}``, so the server
    gives it a disjoint share of the episodes.

    Either pass ``socket_path`` of a running ``lrstream serve --socket``,
    or ``serve_args`` (e.g. ``["--dataset", "lerobot/pusht",
    "--recipe", "recipe.yaml", "--batch-size", "64"]``) to spawn
    ``lrstream serve`` on a private socket; the spawned server lives as
    long as the dataset object in the process that created it.

    Every yielded batch is a dict of torch tensors (numeric columns) and
    lists (task, messages, message_streams, target_message_indices, raw
    language), plus, unless ``meta_key`` is None, ``batch[meta_key] =
    {"seq", "epoch", "resume", "worker", "rank"}``.

    ``state_dict()`` / ``load_state_dict()`` hold the last resume token
    (torchdata StatefulDataLoader style; each worker keeps its own).
    """

    def __init__(
        self,
        socket_path: Optional[str] = None,
        *,
        serve_args: Optional[Sequence[str]] = None,
        lrstream: str = "lrstream",
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        resume: Optional[str] = None,
        copy: bool = False,
        meta_key: Optional[str] = "_lrstream",
        connect_timeout: float = 60.0,
    ):
        super().__init__()
        if (socket_path is None) == (serve_args is None):
            raise ValueError("pass exactly one of socket_path or serve_args")
        self.socket_path = socket_path
        self.rank = rank
        self.world_size = world_size
        self.copy = copy
        self.meta_key = meta_key
        self.connect_timeout = connect_timeout
        self._resume = resume
        self._proc: Optional[subprocess.Popen] = None
        self._owner = os.getpid()
        self._tmpdir: Optional[str] = None
        if serve_args is not None:
            self._spawn(lrstream, list(serve_args))

    # -- server lifecycle ------------------------------------------------
    def _spawn(self, lrstream: str, args: list) -> None:
        self._tmpdir = tempfile.mkdtemp(prefix="lrstream-")
        self.socket_path = os.path.join(self._tmpdir, "serve.sock")
        self._proc = subprocess.Popen([lrstream, "serve", "--socket", self.socket_path, *args])
        atexit.register(self.close)

    def close(self) -> None:
        """Stop a spawned server (only in the process that spawned it)."""
        if os.getpid() != self._owner:
            return
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_proc"] = None  # Popen objects do not pickle; workers only connect
        return state

    def _connect(self, **hello):
        deadline = time.monotonic() + self.connect_timeout
        while True:
            try:
                return connect(self.socket_path, timeout=self.connect_timeout, **hello)
            except (FileNotFoundError, ConnectionRefusedError):
                if self._proc is not None and self._proc.poll() is not None:
                    raise RuntimeError(f"lrstream serve exited with status {self._proc.returncode}") from None
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no lrstream server on {self.socket_path} after {self.connect_timeout}s") from None
                time.sleep(0.05)

    # -- iteration -------------------------------------------------------
    def __iter__(self) -> Iterator[Dict[str, Any]]:
        info = get_worker_info()
        worker, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        rank, world_size = _dist_rank_world()
        if self.rank is not None:
            rank = self.rank
        if self.world_size is not None:
            world_size = self.world_size
        reader = self._connect(worker=worker, num_workers=num_workers, rank=rank,
                               world_size=world_size, resume=self._resume)
        with reader:
            for batch in reader:
                out = to_torch(batch, copy=self.copy)
                if self.meta_key is not None:
                    out[self.meta_key] = {"seq": batch.seq, "epoch": batch.epoch, "resume": batch.resume,
                                          "worker": worker, "rank": rank}
                if batch.resume is not None:
                    self._resume = batch.resume
                yield out

    # -- checkpointing ---------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """The position to resume from: the last batch's resume token."""
        return {"resume": self._resume}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resume after the batch whose token ``state`` holds."""
        self._resume = state.get("resume")
