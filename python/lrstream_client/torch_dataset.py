"""PyTorch IterableDataset over ``lrstream serve`` (imports torch).

How batches travel (docs/python.md, "How it works"): a DataLoader worker
connects to the server, splits the stream into raw messages and hands each
batch to the main process as one ``bytes`` object (an :class:`LRStreamBatch`);
the batch is decoded in the main process on first use. Pickling one bytes
object is a memcpy, where pickling decoded message lists cost more than the
decoding itself. Streams of camera frames (batches of >= WALK_BYTES of
numeric data) are walked in the worker instead: each large payload is
received straight into a new tensor in shared memory (:func:`shared_alloc`),
which torch passes to the main process by file descriptor -- the kernel's
copy into the socket's reader is the only copy of the frames.

Positions: the main process counts the batches the training loop took (a
batch counts once the loop reads it). A DataLoader's main process receives a
rank's batches in worker round-robin order, which for consumers
``c = rank * W + w`` is the rank's batches in increasing global order; so
"k batches of epoch e consumed" is an exact position, and on resume worker
``w`` asks the server (hello ``epoch``/``next``) for the rank's batches
``k + w, k + w + W, ...`` -- read round-robin, they continue at batch k.
"""

from __future__ import annotations

import collections.abc
import ctypes
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from .reader import (
    SHM_BYTES,
    ProtocolError,
    RawMessages,
    StreamError,
    TruncatedStreamError,
    _peek_type,
    check_header,
    decode_batch_buffer,
    decode_message,
    hello,
    new_arena,
    start_stream,
)
from . import reader as _reader
from .positions import CUR_NW, EPOCH, OPEN, PEND, PER, PER_NW, PER_WORLD, Positions, consumed, prefix, streams_for

# Main-process position trackers, by dataset uid: (owner pid, dataset
# weakref). Batches decoded in another process (a worker) never count.
_TRACKERS: Dict[str, Any] = {}

_log = logging.getLogger("lrstream_client")

STATE_VERSION = 1


def _dist_rank_world() -> tuple:
    """Rank and world size from torch.distributed, else torchrun's env."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def to_torch(columns: Dict[str, Any]) -> Dict[str, Any]:
    """Numpy arrays to torch tensors (writable, private memory); lists stay.

    An array that is not writable (a view of msgpack's immutable bytes, as
    ``decode_array`` returns by default) is copied first: a tensor over it
    would let an in-place write corrupt shared bytes."""
    out: Dict[str, Any] = {}
    for k, v in columns.items():
        if isinstance(v, np.ndarray):
            out[k] = torch.from_numpy(v if v.flags.writeable else v.copy())
        else:
            out[k] = v
    return out


_NP_DTYPES: Dict[Any, np.dtype] = {}


def _tensor(obj: Dict[bytes, Any]) -> torch.Tensor:
    """A msgpack-numpy map to a writable tensor with its own memory (one copy
    of the received bytes; the dtype is parsed once per distinct string)."""
    if b"data" not in obj:
        return torch.from_numpy(_reader.decode_array(obj))  # raises ProtocolError (e.g. a stray 'shm' key)
    t = obj[b"type"]
    dt = _NP_DTYPES.get(t)
    if dt is None:
        dt = _NP_DTYPES[t] = np.dtype(t.decode() if isinstance(t, bytes) else t)
    return torch.from_numpy(np.frombuffer(obj[b"data"], dt).reshape(obj[b"shape"]).copy())


def _columns_to_torch(columns: Dict[str, Any]) -> Dict[str, Any]:
    # In place: only top-level column values can be arrays (msgpack-numpy
    # maps, or arrays of their own from decode_batch_buffer).
    for k, v in columns.items():
        if type(v) is dict and v.get(b"nd") is True:
            columns[k] = _tensor(v)
        elif type(v) is np.ndarray:
            columns[k] = torch.from_numpy(v)
    return columns


_TORCH_DTYPES: Dict[np.dtype, Any] = {}


def shared_alloc(shape, dt: np.dtype, nbytes: int):
    """Walk-mode allocator (``RawMessages.walk(alloc=...)``) of a DataLoader
    worker: a new tensor whose storage is in shared memory (its own, never
    reused), and a byte view of it that the payload is received into. A
    dtype torch lacks gets a numpy array (pickled by value)."""
    td = _TORCH_DTYPES.get(dt)
    if td is None:
        try:
            td = torch.from_numpy(np.empty(0, dt)).dtype
        except (TypeError, ValueError):
            td = False
        if len(_TORCH_DTYPES) < 256:
            _TORCH_DTYPES[dt] = td
    if td is False:
        arr = np.empty(shape, dt)
        return arr, memoryview(arr.reshape(-1).view(np.uint8))
    new_shared = getattr(torch.UntypedStorage, "_new_shared", None)
    if new_shared is not None:
        t = torch.empty((0,), dtype=td).set_(new_shared(nbytes), 0, tuple(shape))
    else:
        # A torch without the (private) constructor of shared storages:
        # allocate, then move into shared memory (one copy of the zeros).
        t = torch.empty(tuple(shape), dtype=td).share_memory_()
    return t, memoryview(t.numpy().reshape(-1).view(np.uint8))


# A batch message at least this large is decoded by decode_batch_buffer
# (numeric columns copied once from the received bytes; a worker's batches)
# or walked as it arrives (no workers); smaller ones by msgpack alone, which
# is faster for message lists.
WALK_BYTES = _reader.WALK_BYTES


class LRStreamBatch(collections.abc.Mapping):
    """One batch as a DataLoader yields it: a read-only mapping
    (``collections.abc.Mapping``) from column name to a ``torch.Tensor``
    (numeric columns; writable, own memory -- from a worker, camera columns
    are tensors in shared memory of their own) or a list (task, messages,
    ...), decoded on first access in the main process; a numeric column
    becomes a tensor when it is first read (a training step reads a few of a
    batch's columns). ``batch.to(device, non_blocking=True)`` moves its
    tensors (what accelerate's ``send_to_device`` and Lightning's
    ``move_data_to_device`` call). ``dict(batch)`` or ``batch.to_dict()``
    gives a plain dict.

    torch's ``default_convert`` (the DataLoader's collate_fn with
    ``batch_size=None``) would walk a Mapping -- every message dict, in the
    worker: this module makes it pass LRStreamBatch through unchanged.
    """

    __slots__ = ("raw", "uid", "epoch", "index", "per_epoch", "fingerprint", "worker", "rank", "num_workers",
                 "world_size", "meta_key", "gen", "start", "local", "_cols", "_counted")

    def __init__(self, raw: bytes, uid: str, epoch: int, index: int, per_epoch: int, fingerprint: str,
                 worker: int, rank: int, num_workers: int, world_size: int, meta_key: Optional[str],
                 gen: int = 0, start: int = 0):
        self.raw = raw
        self.uid = uid
        self.epoch = epoch
        self.index = index  # index in the rank's batch sequence of the epoch
        self.per_epoch = per_epoch
        self.fingerprint = fingerprint
        self.worker = worker
        self.rank = rank
        self.num_workers = num_workers
        self.world_size = world_size
        self.meta_key = meta_key
        self.gen = gen  # the position record's generation when the iteration started (positions.py)
        self.start = start  # unused (kept for pickles of older batches)
        self.local = False  # made by an iteration of this process (not a worker's)
        self._cols: Optional[Dict[str, Any]] = None
        self._counted = False

    def __reduce__(self):
        raw = self.raw
        if self._cols is not None:  # decoded (a transform ran in the worker): the columns by value
            raw = {"type": "batch", "seq": self.index, "epoch": self.epoch, "columns": self._cols}
        return (LRStreamBatch, (raw, self.uid, self.epoch, self.index, self.per_epoch, self.fingerprint,
                                self.worker, self.rank, self.num_workers, self.world_size, self.meta_key,
                                self.gen, self.start))

    def _with(self, cols: Dict[str, Any]) -> "LRStreamBatch":
        """A batch with the same position and other columns (already decoded)."""
        b = LRStreamBatch(b"", self.uid, self.epoch, self.index, self.per_epoch, self.fingerprint, self.worker,
                          self.rank, self.num_workers, self.world_size, self.meta_key, self.gen, self.start)
        b._cols, b._counted, b.local = cols, self._counted, self.local
        return b

    def to(self, *args, **kwargs) -> "LRStreamBatch":
        """The batch with every tensor moved/converted by ``Tensor.to(*args,
        **kwargs)`` (e.g. ``batch.to("cuda", non_blocking=True)``); lists
        stay. Counts the batch as consumed."""
        return self._with({k: v.to(*args, **kwargs) if isinstance(v, torch.Tensor) else v
                           for k, v in self._all().items()})

    def _decode(self) -> Dict[str, Any]:
        raw = self.raw
        if type(raw) is dict:
            msg = raw
        elif len(raw) >= WALK_BYTES:
            msg = decode_batch_buffer(raw)
        else:
            msg = decode_message(raw)
        if msg["type"] != "batch":
            raise ProtocolError(f"expected a batch message, got {msg['type']!r}")
        seq = msg.get("seq")
        if seq != self.index or msg.get("epoch") != self.epoch:
            raise ProtocolError(f"batch carries epoch {msg.get('epoch')} seq {seq}, "
                                f"want epoch {self.epoch} index {self.index} (server without hello positions?)")
        cols = msg["columns"]  # numeric columns become tensors when read (_column)
        if self.meta_key is not None:
            cols[self.meta_key] = {"epoch": self.epoch, "index": self.index, "worker": self.worker,
                                   "rank": self.rank, "size": msg.get("size")}
        self.raw = b""
        return cols

    def _use(self) -> Dict[str, Any]:
        cols = self._cols
        if cols is None:
            cols = self._cols = self._decode()
        if not self._counted:  # the first access counts the batch as consumed (once)
            self._counted = True
            t = _TRACKERS.get(self.uid)
            if t is not None and t[0] == os.getpid():
                ds = t[1]()
                if ds is not None:
                    ds._consumed(self)
        return cols

    def _all(self) -> Dict[str, Any]:
        return _columns_to_torch(self._use())

    def _transformed(self, fn) -> "LRStreamBatch":
        """The batch fn(columns) makes (LRStreamDataset(transform=)); does not
        count this batch as consumed."""
        if self._cols is None:
            self._cols = self._decode()
        out = fn(_columns_to_torch(self._cols))
        if not isinstance(out, collections.abc.Mapping):
            raise TypeError(f"LRStreamDataset transform must return a mapping of columns, got {type(out).__name__}")
        return self._with(dict(out))

    # Mapping protocol (every access counts the batch as consumed). Mapping's
    # __eq__ compares the decoded columns; a batch is not hashable.
    def __getitem__(self, key: str) -> Any:
        cols = self._cols if self._counted else self._use()
        v = cols[key]
        t = type(v)
        if t is dict and v.get(b"nd") is True:
            v = cols[key] = _tensor(v)
        elif t is np.ndarray:
            v = cols[key] = torch.from_numpy(v)
        return v

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._use() else default

    def keys(self):
        return self._use().keys()

    def values(self):
        return self._all().values()

    def items(self):
        return self._all().items()

    def __iter__(self):
        return iter(self._use())

    def __len__(self) -> int:
        return len(self._use())

    def __contains__(self, key: object) -> bool:
        return key in self._use()

    def to_dict(self) -> Dict[str, Any]:
        """The batch as a plain dict."""
        return dict(self._all())

    def pin_memory(self, device: Optional[str] = None) -> "LRStreamBatch":
        """DataLoader(pin_memory=True) hook: decode (in the pin-memory thread)
        and pin the tensors; does not count the batch as consumed."""
        if self._cols is None:
            self._cols = self._decode()
        for k, v in _columns_to_torch(self._cols).items():
            if isinstance(v, torch.Tensor):
                self._cols[k] = v.pin_memory(device) if device else v.pin_memory()
        return self

    def __repr__(self) -> str:
        return f"LRStreamBatch(epoch={self.epoch}, index={self.index}, worker={self.worker}, rank={self.rank})"


def _refuse_default_collate(batch, *, collate_fn_map=None):
    raise TypeError(
        "LRStreamDataset batches are already collated by lrstream: create the loader with "
        "DataLoader(ds, batch_size=None, ...) (torch's default batch_size=1 tried to collate "
        f"{len(batch)} lrstream batch(es) again)")


try:  # detect DataLoader(ds) without batch_size=None, with a clear error
    from torch.utils.data._utils.collate import default_collate_fn_map

    default_collate_fn_map[LRStreamBatch] = _refuse_default_collate
except ImportError:  # pragma: no cover - older torch
    pass


# torch's default_convert (the DataLoader's collate_fn with batch_size=None)
# would rebuild a Mapping as a dict of converted values: every column
# decoded, every message dict walked, in the worker. The DataLoader (and
# torchdata's) take _utils.collate.default_convert when constructed, and its
# recursion looks the name up there too: it is replaced, once, by a
# module-level function (picklable: spawned workers get it by reference)
# that passes LRStreamBatch through unchanged.
from torch.utils.data._utils import collate as _collate  # noqa: E402

_torch_default_convert = getattr(_collate.default_convert, "_lrstream_wraps", _collate.default_convert)


def default_convert(data):
    if type(data) is LRStreamBatch:
        return data
    return _torch_default_convert(data)


default_convert._lrstream_wraps = _torch_default_convert
default_convert.__doc__ = _torch_default_convert.__doc__
_collate.default_convert = default_convert


class ServerGoneError(RuntimeError):
    """The lrstream server died, or is stopped, while a client waited for it."""


def _pdeathsig(parent: int):
    """preexec_fn (Linux): the server gets SIGTERM when the thread that
    spawned it ends -- with the process, whatever killed it (SIGKILL too).
    If the parent died before prctl took effect, the child exits at once."""
    libc = ctypes.CDLL(None, use_errno=True)

    def set_pdeathsig() -> None:  # runs in the child between fork and exec
        if libc.prctl(1, int(signal.SIGTERM), 0, 0, 0) != 0:  # PR_SET_PDEATHSIG
            return
        if os.getppid() != parent:
            os._exit(1)

    return set_pdeathsig


_PARENT_WATCH = "lrstream-parent-watch"


def _exit_with_parent(every: float = 0.5) -> None:
    """In a DataLoader worker: exit when the process that started it dies.

    torch's workers notice a dead parent only between fetches, and a worker
    whose pickled batch waits in a full pipe to the dead parent never exits
    (its queue's feeder thread blocks forever). A daemon thread polls
    getppid(): when the worker is reparented, its parent (the training
    process, or forkserver, which exits with it) is gone and the worker
    exits at once (os._exit: the blocked feeder is not joined). Idempotent
    per process (the thread is found by name)."""
    if any(t.name == _PARENT_WATCH for t in threading.enumerate()):
        return
    ppid = os.getppid()

    def watch() -> None:
        while os.getppid() == ppid and ppid != 1:
            time.sleep(every)
        sys.stderr.write(f"lrstream_client: DataLoader worker (pid {os.getpid()}): its parent (pid {ppid}) is gone; "
                         "exiting\n")
        sys.stderr.flush()
        os._exit(1)

    threading.Thread(target=watch, name=_PARENT_WATCH, daemon=True).start()


def _stop_server(proc: subprocess.Popen, tmpdir: str, owner: int) -> None:
    if os.getpid() != owner:
        return
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    shutil.rmtree(tmpdir, ignore_errors=True)


def _proc_state(pid: int) -> Optional[str]:
    """The state letter of /proc/PID/stat (R, S, T, Z, ...), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:
        return "?"
    return data[data.rindex(b")") + 2:data.rindex(b")") + 3].decode()


def _peer_pid(sock: socket.socket) -> Optional[int]:
    try:
        import struct

        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", creds)[0]
    except (OSError, AttributeError):
        return None


def _tail(path: Optional[str], n: int = 2000) -> str:
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


class LRStreamDataset(IterableDataset):
    """Batches from ``lrstream serve`` as an IterableDataset.

    Use ``DataLoader(ds, batch_size=None, num_workers=N)``: batches are
    already collated by lrstream. Pass ``socket_path`` of a running
    ``lrstream serve --socket`` or ``serve_args`` to spawn a private server
    (it ends with the dataset, at interpreter exit, or when this process
    dies). ``lrstream`` names the binary to spawn (default: the one bundled
    in the wheel, else ``lrstream`` on PATH).

    ``shm_bytes`` is the size of the shared-memory arena each connection
    offers the server (Linux; see ``connect`` and docs/python.md); 0: off.
    By default (None) the main process offers ``SHM_BYTES`` (512 MiB) and
    camera tensors are views of it (no copy), while DataLoader workers
    offer none: a worker would copy each frame column from its arena into
    a shared-memory tensor of its own anyway (the DataLoader hands tensors
    over by descriptor), which measured slower than receiving into that
    tensor from the socket and keeps an arena resident per worker. An
    explicit size applies to workers too.

    Epochs: one ``for batch in loader`` is one epoch. ``set_epoch(e)``
    selects it; without it the next loop continues where the previous one
    stopped (the next epoch after a complete one, the rest of the epoch
    after a ``break``). Every batch comes from the server's training order,
    identical for any ``num_workers``.

    Checkpoints: ``state_dict()`` / ``load_state_dict()`` (see
    docs/python.md): in the main process, the batches the training loop
    consumed; in a worker (torchdata StatefulDataLoader), that worker's
    next batch.

    ``transform(columns) -> columns`` (optional) runs on every batch where
    it is made -- in the DataLoader worker, so augmentation runs in parallel,
    or in the main process without workers: ``columns`` is a dict of the
    batch's tensors and lists; return a mapping (the batch the loop gets,
    still an LRStreamBatch with its position).

    ``reconnect_timeout`` (seconds; default None: off): when a server you
    run yourself (``socket_path``) goes away mid-stream -- killed,
    restarted by a supervisor -- wait up to that long for a server on the
    same socket and continue with the next batch the iteration has not
    served (same run: the fingerprint is checked). A spawned server's
    death stays final.

    ``len(ds)`` is the number of batches one epoch gives this rank; it needs
    ``num_workers`` (the DataLoader's) because the last
    ``batches mod (world_size * num_workers)`` global batches of an epoch
    are not served.
    """

    def __init__(
        self,
        socket_path: Optional[str] = None,
        *,
        serve_args: Optional[Sequence[str]] = None,
        lrstream: Optional[str] = None,
        num_workers: Optional[int] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        meta_key: Optional[str] = "_lrstream",
        connect_timeout: float = 30.0,
        read_timeout: Optional[float] = 600.0,
        stopped_timeout: float = 1.5,
        shm_bytes: Optional[int] = None,
        transform: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = None,
        reconnect_timeout: Optional[float] = None,
    ):
        super().__init__()
        if (socket_path is None) == (serve_args is None):
            raise ValueError("pass exactly one of socket_path or serve_args")
        self.socket_path = socket_path
        self.num_workers = num_workers
        self.rank = rank
        self.world_size = world_size
        self.meta_key = meta_key
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.stopped_timeout = stopped_timeout
        if shm_bytes is not None:
            _reader.check_shm_bytes(shm_bytes)  # here: a bad size fails at construction, not in a worker
            shm_bytes = int(shm_bytes)
        self.shm_bytes = shm_bytes
        self.transform = transform
        self.reconnect_timeout = reconnect_timeout
        self._uid = uuid.uuid4().hex
        # The training loop's position, in shared memory: the main process
        # writes it as the loop consumes batches, workers read it when an
        # iteration starts (positions.py).
        self._positions = Positions()
        self._gen = 0  # this process's iterations (persistent workers iterate several times)
        self._fp = multiprocessing.RawArray(ctypes.c_char, 64)
        self._resume_cluster: Optional[tuple] = None
        self._worker_state: Optional[Dict[str, Any]] = None
        self._worker_resume = False
        self._header: Optional[Dict[str, Any]] = None
        self._server_pid: Optional[int] = None
        self._server_log: Optional[str] = None
        self._proc: Optional[subprocess.Popen] = None
        self._owner = os.getpid()
        _TRACKERS[self._uid] = (self._owner, weakref.ref(self))
        weakref.finalize(self, _TRACKERS.pop, self._uid, None)
        if serve_args is not None:
            self._spawn(lrstream, list(serve_args))

    # -- server lifecycle ------------------------------------------------
    def _spawn(self, lrstream: Optional[str], args: List[str]) -> None:
        from ._binary import find_lrstream, is_client_script

        try:
            if lrstream is None:
                lrstream = find_lrstream()  # never this package's console script (it would exec itself)
            elif is_client_script(shutil.which(lrstream) or lrstream):
                raise FileNotFoundError(f"lrstream={lrstream!r} is lrstream-client's console script, not the "
                                        "lrstream binary")
        except FileNotFoundError as e:
            raise FileNotFoundError(f"LRStreamDataset(serve_args=...) cannot start a server: {e}") from None
        if not any(a == "--epochs" or a.startswith("--epochs=") for a in args):
            args = [*args, "--epochs", "0"]  # the loop picks epochs (set_epoch); the server serves any
        tmpdir = tempfile.mkdtemp(prefix="lrstream-")
        self.socket_path = os.path.join(tmpdir, "serve.sock")
        self._server_log = os.path.join(tmpdir, "serve.log")
        with open(self._server_log, "wb") as log:
            # PR_SET_PDEATHSIG is tied to the spawning thread: only from the
            # main thread (a worker thread's exit would stop the server).
            tie = sys.platform == "linux" and threading.current_thread() is threading.main_thread()
            self._proc = subprocess.Popen([lrstream, "serve", "--socket", self.socket_path, *args],
                                          stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                          preexec_fn=_pdeathsig(os.getpid()) if tie else None)
        self._server_pid = self._proc.pid
        self._finalizer = weakref.finalize(self, _stop_server, self._proc, tmpdir, self._owner)

    def close(self) -> None:
        """Stop a spawned server (only in the process that spawned it)."""
        f = getattr(self, "_finalizer", None)
        if f is not None and os.getpid() == self._owner:
            f()

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_proc"] = None  # workers never wait on the server: it is not their child
        state["_finalizer"] = None
        return state

    def _server_problem(self, pid: Optional[int], waited: float = 0.0) -> Optional[str]:
        """Why the server cannot answer (dead, stopped), or None."""
        if self._proc is not None and os.getpid() == self._owner:
            rc = self._proc.poll()
            if rc is not None:
                how = f"was killed by signal {-rc}" if rc < 0 else f"exited with status {rc}"
                return f"lrstream serve (pid {self._proc.pid}) {how}"
        if pid is None:
            return None
        st = _proc_state(pid)
        if st is None or st in "ZX":
            return f"lrstream serve (pid {pid}) is gone"
        if st in "Tt" and waited >= self.stopped_timeout:
            return f"lrstream serve (pid {pid}) is stopped (SIGSTOP or a debugger) and sent nothing for {waited:g} s"
        return None

    def _fail(self, problem: str, cause: Optional[BaseException] = None) -> RuntimeError:
        log = _tail(self._server_log)
        msg = problem + (f"; its output ends with:\n{log}" if log else "")
        return ServerGoneError(msg)

    def _connect(self, h: bytes, what: str, decode: bool = False, shm=None,
                 timeout: Optional[float] = None) -> RawMessages:
        """A connection that sent the hello h (with shm's memfd, if given);
        waits up to timeout (default connect_timeout) for the socket."""
        timeout = self.connect_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.settimeout(max(0.1, min(5.0, self.connect_timeout)))
                s.connect(self.socket_path)
                if shm is not None:
                    shm.send_hello(s, h)
                else:
                    s.sendall(h)
                break
            except (FileNotFoundError, ConnectionRefusedError) as e:
                s.close()
                problem = self._server_problem(self._server_pid)
                if problem:
                    raise self._fail(problem) from None
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no lrstream server on {self.socket_path} after {timeout:g} s "
                                       f"(connect_timeout / reconnect_timeout): {e}") from None
                time.sleep(0.05)
            except BaseException:
                s.close()
                raise
        pid = _peer_pid(s) or self._server_pid

        def check(waited: float) -> None:
            problem = self._server_problem(pid, waited)
            if problem:
                raise self._fail(problem)

        return RawMessages(s, read_timeout=self.read_timeout, check=check, what=what, decode=decode)

    # -- stream header ---------------------------------------------------
    def _where(self):
        info = get_worker_info()
        worker, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        rank, world = _dist_rank_world()
        if self.rank is not None:
            rank = self.rank
        if self.world_size is not None:
            world = self.world_size
        return worker, nw, rank, world, info is not None

    def _read_header(self, rm: RawMessages) -> Dict[str, Any]:
        raw = rm.next()
        if not raw:
            raise self._truncated(rm, "before its header")
        msg = raw if type(raw) is dict else decode_message(raw)
        if msg["type"] == "error":
            raise _reader.stream_error(msg.get("message", "unknown error"))
        check_header(msg)
        if not isinstance(msg.get("training"), dict):
            raise ProtocolError("the lrstream server sent no 'training' header key: it predates hello positions; "
                                "use an lrstream binary of the same version as this client")
        return msg

    def _truncated(self, rm: RawMessages, where: str) -> BaseException:
        problem = self._server_problem(_peer_pid(rm._sock) or self._server_pid, 1e9)
        if problem:
            return self._fail(problem)
        return TruncatedStreamError(f"lrstream stream from {self.socket_path} ended {where} (server died or closed the connection)")

    @property
    def header(self) -> Dict[str, Any]:
        """The stream header (features, fps, tools, recipe, revision, training...),
        read once through a short connection."""
        if self._header is None:
            _, _, rank, world, _ = self._where()
            rm = self._connect(hello(0, 1, rank, world, epoch=self._positions.get(EPOCH)), "lrstream server")
            try:
                self._header = self._read_header(rm)
            finally:
                rm._sock.close()
        return self._header

    features = property(lambda self: self.header["features"], doc="Numeric columns: [{name, dtype, shape}].")
    fps = property(lambda self: self.header["fps"], doc="Dataset fps.")
    tools = property(lambda self: self.header["tools"], doc="The tools catalog.")
    recipe = property(lambda self: self.header["recipe"], doc="Recipe name (\"\" for a stream without a recipe).")
    has_messages = property(lambda self: self.header["mode"] != "none",
                            doc="False for a stream made without a recipe (header mode \"none\"): its batches carry "
                                "no messages, message_streams or target_message_indices, like LeRobotDataset "
                                "frames without a RenderMessagesStep.")
    recipe_sha256 = property(lambda self: self.header["recipe_sha256"], doc="SHA-256 of the recipe.")
    revision = property(lambda self: self.header["revision"], doc="Resolved dataset revision.")
    dataset = property(lambda self: self.header["dataset"], doc="Dataset id.")
    batch_size = property(lambda self: self.header["batch_size"], doc="Samples per batch.")
    @property
    def cameras(self) -> List[str]:
        """Camera columns carried by the batches: the header's decoded cameras,
        whatever their key (LeRobot datasets also name cameras e.g. "image")."""
        h = self.header
        if "cameras" in h:
            return [c["key"] for c in h["cameras"] or [] if c.get("decoded")]
        return [f["name"] for f in h["features"] if f["name"].startswith("observation.images.")]

    def __len__(self) -> int:
        if self.num_workers is None:
            raise TypeError("len(LRStreamDataset) needs the DataLoader's worker count: pass "
                            "LRStreamDataset(..., num_workers=N) with the same N as DataLoader(num_workers=N)")
        _, _, _, world, _ = self._where()
        w = max(1, self.num_workers)
        return int(self.header["training"]["epoch_batches"]) // (world * w) * w

    # -- epochs and positions --------------------------------------------
    def _per_epoch(self, nw: int, world: int) -> int:
        """Batches one epoch gives a rank of world ranks x nw workers."""
        return int(self.header["training"]["epoch_batches"]) // (world * nw) * nw

    @property
    def epoch(self) -> int:
        """The epoch the next loop iterates: the epoch of the last consumed
        batch, the next one once the loop consumed all of it."""
        p = self._positions
        e, nexts = p.get(EPOCH), p.nexts()
        if min(nexts) == 0:
            return e
        nw = max(1, self.num_workers) if self.num_workers is not None else (p.get(CUR_NW) or p.get(PER_NW) or 1)
        world = self._where()[3]
        per = p.per_epoch_for(nw, world) or self._per_epoch(nw, world)
        return e + 1 if min(streams_for(nexts, nw)) >= per else e

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``for batch in loader`` iterate epoch ``epoch`` from
        its start (call it in the main process, before the loop)."""
        if epoch < 0:
            raise ValueError(f"epoch {epoch} < 0")
        self._positions.reset(epoch, [0])
        self._resume_cluster = None

    def _consumed(self, b: LRStreamBatch) -> None:
        if self._positions.consume(b.gen, b.epoch, b.index, b.num_workers, b.world_size, b.per_epoch, b.local):
            if self._fp.value != b.fingerprint.encode():
                self._fp.value = b.fingerprint.encode()

    def state_dict(self) -> Dict[str, Any]:
        """The position to resume from. In the main process: the epoch and
        the batches of it this rank's training loop consumed (all of them
        once the loop consumed the epoch's last batch). In a DataLoader
        worker (torchdata StatefulDataLoader): this worker's next batch."""
        if get_worker_info() is not None:
            self._positions.mark_stateful()
            if self._worker_state is None:  # before iterating: where this worker would start
                worker, nw, _, world, _ = self._where()
                return {"version": STATE_VERSION, "epoch": self._positions.get(EPOCH),
                        "next": streams_for(self._positions.nexts(), nw)[worker],
                        "fingerprint": self._fp.value.decode(), "num_workers": nw, "world_size": world}
            return dict(self._worker_state)
        p = self._positions
        nexts, per = p.nexts(), p.get(PER)
        k = prefix(nexts, per)
        state = {"version": STATE_VERSION, "epoch": p.get(EPOCH),
                 "batches": k if k is not None else consumed(nexts, per),
                 "fingerprint": self._fp.value.decode(), "num_workers": p.get(PER_NW) or None,
                 "world_size": p.get(PER_WORLD) or None, "epoch_batches": per or None,
                 # the loop was inside the epoch: a resume serves its rest first (even if empty)
                 "open": bool(p.get(PEND) or p.get(OPEN) or not per or min(nexts) < per)}
        if k is None:
            state["streams"] = nexts
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from ``state`` (from :meth:`state_dict`)."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"not an LRStreamDataset state (version {state.get('version')!r}): {state!r}")
        if "next" in state:  # a worker's own state (StatefulDataLoader)
            self._worker_state = dict(state)
            self._worker_resume = True
            return
        nexts = [int(n) for n in state.get("streams") or [state["batches"]]]
        cluster = (state.get("num_workers") or 0, state.get("world_size") or 0)
        per = int(state.get("epoch_batches") or 0)
        self._resume_cluster = (state.get("num_workers"), state.get("world_size"))
        world = self._where()[3]
        if cluster[1] and cluster[1] != world and max(nexts) > 0 and self._partitioned():
            nexts = [self._rescaled(nexts, cluster[1], world)]
            cluster, per, self._resume_cluster = (0, 0), 0, None
        self._positions.reset(state["epoch"], nexts, per=per, cluster=cluster, pending=bool(state.get("open", True)))
        self._fp.value = (state.get("fingerprint") or "").encode()

    def _partitioned(self) -> bool:
        """The server serves --order partitioned (from the header's options)."""
        return (self.header.get("options") or {}).get("order") == "partitioned"

    @staticmethod
    def _rescaled(nexts: List[int], sworld: int, world: int) -> int:
        """Under --order partitioned a rank's index m is global batch m x
        world_size + rank: after a DDP step every rank consumed k batches,
        the global batches [0, k x sworld). On world ranks each rank resumes
        at that global position / world -- when it divides evenly, so that
        every rank keeps the same number of batches (DDP)."""
        k = prefix(nexts)
        if k is None:
            raise ValueError("a checkpoint whose batches were consumed out of order (in_order=False) resumes only "
                             f"with its own world_size {sworld}")
        g = k * sworld
        if g % world:
            raise ValueError(f"checkpoint of {k} batches x world_size {sworld} = {g} global batches cannot resume on "
                             f"world_size {world} (--order partitioned): each rank must resume at the same step, so "
                             f"the new world_size must divide {g}; resume with such a world_size, or at an epoch boundary")
        return g // world

    def _check_resume_cluster(self, nw: int, world: int) -> None:
        saved = self._resume_cluster
        if not saved or saved[0] is None or min(self._positions.nexts()) == 0:
            return
        snw, sworld = saved
        if sworld != world:
            raise ValueError(f"checkpoint taken mid-epoch with world_size {sworld} cannot resume with world_size {world}: "
                             "the ranks' shares of the epoch differ; resume with the same world_size, or at an epoch boundary")
        if world > 1 and snw != nw and not self._partitioned():  # partitioned: index m is global m x world + rank
            raise ValueError(f"checkpoint taken mid-epoch with num_workers {snw} x world_size {world} cannot resume with "
                             f"num_workers {nw}: with several ranks the worker count decides each rank's batches; "
                             "resume with the same num_workers, or at an epoch boundary")

    # -- iteration -------------------------------------------------------
    def __iter__(self) -> Iterator[LRStreamBatch]:
        # Not a generator: the start position is taken, and the worker state
        # set, now -- when the DataLoader (re)starts the iteration and
        # torchdata asks for the state at once -- not at the first next().
        worker, nw, rank, world, in_worker = self._where()
        if self.num_workers is not None and max(1, self.num_workers) != nw and (in_worker or self.num_workers > 0):
            raise ValueError(f"LRStreamDataset(num_workers={self.num_workers}) but the DataLoader runs "
                             f"{nw if in_worker else 0} workers: pass the same number to both")
        ws = self._worker_state if self._worker_resume else None
        self._worker_resume = False
        if ws is not None:
            if ws.get("num_workers") != nw or ws.get("world_size") != world:
                raise ValueError(f"worker state for {ws.get('num_workers')} workers x {ws.get('world_size')} ranks "
                                 f"cannot resume with {nw} x {world}")
            epoch, nxt, fp = int(ws["epoch"]), int(ws["next"]), ws.get("fingerprint") or ""
            gen = self._positions.restored(self._iteration_id(), epoch, nxt, nw, world,
                                           int(ws.get("epoch_batches") or 0))
        else:
            self._check_resume_cluster(nw, world)
            epoch, nxt, gen = self._positions.plan(worker, nw, world, self._per_epoch, in_worker and self._gen == 0)
            fp = self._fp.value.decode()
        self._gen += 1
        st = self._worker_state = {"version": STATE_VERSION, "epoch": epoch, "next": nxt, "fingerprint": fp,
                                   "num_workers": nw, "world_size": world}
        return self._stream(worker, nw, rank, world, st, gen, in_worker)

    def _iteration_id(self) -> int:
        """The same for every worker of one DataLoader iteration, different
        for another: the DataLoader's base seed (worker seed - id) and this
        worker's iteration count."""
        info = get_worker_info()
        base = (info.seed - info.id) if info is not None else int.from_bytes(os.urandom(7), "little")
        return ((base * 1000003 + self._gen) & ((1 << 62) - 1)) | 1

    def _open(self, worker, nw, rank, world, st, in_worker, timeout=None):
        """Connect at st's position (epoch, next) and read the header:
        (connection, arena, batches per epoch)."""
        where = f"lrstream server {self.socket_path} (rank {rank}, worker {worker})"
        if in_worker:
            _exit_with_parent()  # the worker exits when the training process dies
        # The shared-memory arena: without workers the camera tensors are
        # views of it; a worker copies each region into a shared-memory
        # tensor of its own (the DataLoader passes those by descriptor).
        size = self.shm_bytes
        if size is None:
            size = 0 if in_worker else SHM_BYTES
        shm = new_arena(size, copy_alloc=shared_alloc if in_worker else None)
        try:
            rm = self._connect(hello(worker, nw, rank, world, epoch=st["epoch"], next=st["next"],
                                     fingerprint=st["fingerprint"] or None, shm=shm.size if shm is not None else None),
                               where, decode=not in_worker, shm=shm, timeout=timeout)
        except BaseException:
            if shm is not None:
                shm.drop()
            raise
        try:
            header = self._read_header(rm)
            if self._header is None:
                self._header = header
            shm, walk = start_stream(header, shm, WALK_BYTES)
            rm.shm = shm
            # In a worker, batches stay raw bytes (decoded in the main
            # process), except walked ones: camera frames, received straight
            # into tensors in shared memory, which the DataLoader hands to the
            # main process by file descriptor. Without workers batches are
            # decoded as they arrive.
            if not in_worker:
                rm.walk(walk)
            elif walk:
                rm.walk(True, alloc=shared_alloc)
            tr = header["training"]
            per_epoch = int(tr["epoch_batches"]) // int(tr["consumers"]) * nw
            st.update(fingerprint=tr["fingerprint"], epoch_batches=per_epoch)
            return rm, shm, per_epoch
        except BaseException:
            rm._sock.close()
            raise

    def _reconnect(self, e: BaseException, rm, worker, nw, rank, world, st, in_worker):
        """After a lost server (reconnect_timeout set): a new connection at
        the next batch this iteration has not served, else e."""
        if not self.reconnect_timeout or isinstance(e, StreamError) or self._server_log is not None:
            raise e
        rm._sock.close()
        _log.warning("lrstream server %s lost (%s); reconnecting at epoch %d, batch %d (up to %g s)",
                     self.socket_path, str(e).splitlines()[0], st["epoch"], st["next"], self.reconnect_timeout)
        try:
            return self._open(worker, nw, rank, world, st, in_worker, timeout=self.reconnect_timeout)
        except TimeoutError as t:
            raise t from e

    def _stream(self, worker, nw, rank, world, st, gen, in_worker) -> Iterator[LRStreamBatch]:
        """The iteration's batches; st is its worker state (updated in place:
        the next batch to serve, never past the epoch)."""
        rm, shm, per_epoch = self._open(worker, nw, rank, world, st, in_worker)
        try:
            while True:
                try:
                    if shm is not None and shm.batches:
                        shm.send_ack(rm.send)  # after a batch, before blocking on the next message
                    raw = rm.next()
                    if not raw:
                        raise self._truncated(rm, "without an 'end' message")
                except (TruncatedStreamError, ServerGoneError, ConnectionError) as e:
                    rm, shm, per_epoch = self._reconnect(e, rm, worker, nw, rank, world, st, in_worker)
                    continue
                t = raw["type"] if type(raw) is dict else _peek_type(raw)
                if t == "batch":
                    b = LRStreamBatch(raw, self._uid, st["epoch"], st["next"], per_epoch, st["fingerprint"], worker,
                                      rank, nw, world, self.meta_key, gen)
                    b.local = not in_worker
                    if self.transform is not None:
                        b = b._transformed(self.transform)
                    raw = None  # only the batch references its arrays (the arena's release check)
                    st["next"] += nw  # after the epoch's last batch: past its end, never the next epoch
                    if shm is not None:
                        shm.batches += 1
                    yield b
                    b = None
                    continue
                msg = raw if type(raw) is dict else decode_message(raw)
                if msg["type"] == "end":
                    if not in_worker:
                        self._positions.close(gen)
                    return
                if msg["type"] == "error":
                    raise _reader.stream_error(msg.get("message", "unknown error"))
                raise ProtocolError(f"unexpected lrstream message type {msg['type']!r}")
        finally:
            rm._sock.close()
