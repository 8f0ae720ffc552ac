"""Streaming reader for lrstream's wire format (docs/wire-format.md).

Only msgpack and numpy are needed. A stream is a sequence of msgpack maps:
one ``header``, any number of ``batch`` messages, then ``end`` -- or an
``error`` message when the producer failed. :class:`StreamReader` reads
such a stream from a file, a path, a pipe or a socket and yields batches as
dicts whose numeric columns are numpy arrays viewing the received bytes
(no copy) and whose message columns are plain lists.
"""

from __future__ import annotations

import io
import mmap
import os
import re
import socket
import sys
from collections import deque
from typing import Any, BinaryIO, Dict, Iterator, Optional, Union

import msgpack
import numpy as np

FORMAT_PREFIX = "lrstream/"
SUPPORTED_MAJOR = 1

# Largest single message the reader accepts (msgpack's default is 100 MiB).
MAX_MESSAGE_BYTES = 2**31 - 1


class StreamError(RuntimeError):
    """The producer reported an error in-band (an ``error`` message)."""


class StreamInterrupted(StreamError):
    """lrstream was stopped by SIGINT/SIGTERM (Ctrl-C, a job scheduler, a
    supervisor) before the end of the stream: not a problem of the data.
    ``server_message`` is the in-band error as lrstream wrote it."""

    def __init__(self, message: str, server_message: Optional[str] = None):
        super().__init__(message)  # one argument: torch re-raises a worker's exception as type(e)(text)
        self.server_message = message if server_message is None else server_message


def stream_error(message: str) -> StreamError:
    """The exception for an in-band error message: StreamInterrupted when it
    says lrstream was interrupted (``lrstream stream was interrupted (...)``;
    ``interrupted`` at its start or after a ``: ``; ``context canceled``
    from lrstream stream before it said so;
    ``server shutting down`` from lrstream serve), else StreamError with
    lrstream's message."""
    m = message.strip()
    if re.match(r"lrstream \w+ was interrupted\b", m):  # lrstream's own wording: clear as it is
        return StreamInterrupted(message)
    if m.endswith("context canceled") or re.search(r"(^|: )interrupted\b", m, re.IGNORECASE):
        return StreamInterrupted(f"lrstream was interrupted (SIGINT/SIGTERM, e.g. Ctrl-C) before the end of the "
                                 f"stream; it said: {message}", message)
    if m.startswith("server shutting down"):
        return StreamInterrupted(f"lrstream serve was stopped (SIGINT/SIGTERM, e.g. Ctrl-C) while streaming; it "
                                 f"said: {message}", message)
    return StreamError(message)


class ProtocolError(ValueError):
    """The bytes do not follow the wire format."""


class TruncatedStreamError(ProtocolError):
    """The stream ended without an ``end`` message: the producer died, the
    connection dropped, or a file was cut short."""


class Batch(dict):
    """One batch: a dict from column name to value, plus the envelope.

    Attributes:
        seq: batch sequence number within the stream (from 0).
        epoch: epoch the batch belongs to.
        size: number of samples.
        resume: opaque resume token continuing after this batch, or None.
    """

    def __init__(self, columns: Dict[str, Any], seq: int, epoch: int, size: int, resume: Optional[str]):
        super().__init__(columns)
        self.seq = seq
        self.epoch = epoch
        self.size = size
        self.resume = resume

    def __reduce__(self):  # keep the envelope across pickling (DataLoader workers)
        return (Batch, (dict(self), self.seq, self.epoch, self.size, self.resume))


def decode_array(obj: Dict[bytes, Any], *, writable: bool = False) -> np.ndarray:
    """Decode a msgpack-numpy map (bin keys nd, type, kind, shape, data)
    into a numpy array. By default it is a read-only view of the received
    (immutable) bytes -- numpy refuses writes to it; ``writable=True`` gives
    a private, writable copy."""
    if b"data" not in obj and b"shm" in obj:
        raise ProtocolError("malformed lrstream message: an array in shared memory (key 'shm') on a "
                            "connection without a shared-memory arena")
    a = np.frombuffer(obj[b"data"], dtype=_np_dtype(obj[b"type"])).reshape(obj[b"shape"])
    return a.copy() if writable else a


def _decode_columns(columns: Dict[str, Any], writable: bool = False) -> Dict[str, Any]:
    # Only a batch's top-level column values can be arrays; converting them
    # here avoids an object_hook call for every message map.
    for k, v in columns.items():
        if type(v) is dict and v.get(b"nd") is True:
            columns[k] = decode_array(v, writable=writable)
    return columns


_NP_DTYPES: Dict[Any, np.dtype] = {}


def _np_dtype(t: Any) -> np.dtype:
    """numpy dtype of a msgpack-numpy type string (parsed once per string)."""
    dt = _NP_DTYPES.get(t)
    if dt is None:
        try:
            dt = np.dtype(t.decode() if isinstance(t, bytes) else t)
        except Exception as e:  # numpy raises TypeError, ValueError, even SyntaxError
            raise ProtocolError(f"malformed lrstream message: bad array type {t!r}: {e}") from None
        if len(_NP_DTYPES) < 256:
            _NP_DTYPES[t] = dt
    return dt


class _Fallback(Exception):
    """The walker met something it does not parse by hand."""


def _map_header(buf, pos: int):
    b = buf[pos]
    if 0x80 <= b <= 0x8F:
        return b & 0x0F, pos + 1
    if b == 0xDE:
        return int.from_bytes(buf[pos + 1:pos + 3], "big"), pos + 3
    if b == 0xDF:
        return int.from_bytes(buf[pos + 1:pos + 5], "big"), pos + 5
    raise _Fallback


def _raw(buf, pos: int):
    """A str or bin at pos: (start, end) of its bytes, and whether it is a str."""
    b = buf[pos]
    if 0xA0 <= b <= 0xBF:
        return pos + 1, pos + 1 + (b & 0x1F), True
    if b in (0xD9, 0xC4):
        n, h = buf[pos + 1], 2
    elif b in (0xDA, 0xC5):
        n, h = int.from_bytes(buf[pos + 1:pos + 3], "big"), 3
    elif b in (0xDB, 0xC6):
        n, h = int.from_bytes(buf[pos + 1:pos + 5], "big"), 5
    else:
        raise _Fallback
    return pos + h, pos + h + n, b >= 0xD9


def _str(buf, pos: int):
    a, e, is_str = _raw(buf, pos)
    if not is_str:
        raise _Fallback
    return buf[a:e].decode(), e


def _scalar(buf, pos: int):
    """nil, bool, int or str at pos."""
    b = buf[pos]
    if b <= 0x7F:
        return b, pos + 1
    if b >= 0xE0:
        return b - 0x100, pos + 1
    if b == 0xC0:
        return None, pos + 1
    if b in (0xC2, 0xC3):
        return b == 0xC3, pos + 1
    if 0xCC <= b <= 0xD3:
        n = 1 << ((b - 0xCC) & 3)
        return int.from_bytes(buf[pos + 1:pos + 1 + n], "big", signed=b >= 0xD0), pos + 1 + n
    if 0xA0 <= b <= 0xBF or 0xD9 <= b <= 0xDB:
        return _str(buf, pos)
    raise _Fallback


_ND_KEYS = (b"nd", b"type", b"kind", b"shape", b"data")


def _nd(buf, pos: int, end: int):
    """A msgpack-numpy map at pos, its data copied once into a new array."""
    if buf[pos] != 0x85:
        raise _Fallback
    pos += 1
    fields = {}
    for _ in range(5):
        a, e, _ = _raw(buf, pos)
        key = bytes(buf[a:e])
        pos = e
        if key == b"shape":
            b = buf[pos]
            if not 0x90 <= b <= 0x9F:
                raise _Fallback
            shape = []
            pos += 1
            for _ in range(b & 0x0F):
                v, pos = _scalar(buf, pos)
                if type(v) is not int or v < 0:
                    raise _Fallback
                shape.append(v)
            fields[key] = shape
        elif key == b"nd":
            v, pos = _scalar(buf, pos)
            fields[key] = v
        elif key in (b"type", b"kind", b"data"):
            a, e, _ = _raw(buf, pos)
            fields[key] = (a, e)
            pos = e
        else:
            raise _Fallback
    if len(fields) != 5 or fields[b"nd"] is not True:
        raise _Fallback
    ka, ke = fields[b"kind"]
    if ke != ka:  # object and structured arrays: msgpack-numpy's own path
        raise _Fallback
    ta, te = fields[b"type"]
    dt = _np_dtype(bytes(buf[ta:te]))
    shape = fields[b"shape"]
    da, de = fields[b"data"]
    count = 1
    for d in shape:
        count *= d
    if count * dt.itemsize != de - da or de > end:
        raise _Fallback  # the generic path reports it
    if count == 0:
        return np.empty(shape, dt), pos
    return np.frombuffer(buf, dt, count, da).reshape(shape).copy(), pos


def decode_batch_buffer(buf: Union[bytes, bytearray], start: int = 0, end: Optional[int] = None) -> Dict[str, Any]:
    """Decode the message in ``buf[start:end]`` (a whole msgpack map) with
    numeric columns (msgpack-numpy maps) as writable numpy arrays of their
    own, each copied once straight from ``buf`` -- msgpack would first copy
    every payload into a new ``bytes`` object, which for camera frames costs
    more than the copy itself (fresh memory, page by page). Values the walker
    does not parse by hand (message lists, ...) are decoded by msgpack."""
    end = len(buf) if end is None else end
    msg: Dict[str, Any] = {}
    try:
        n, pos = _map_header(buf, start)
    except (_Fallback, IndexError):
        raise ProtocolError("malformed lrstream message: not a map") from None
    i = 0
    cols: Optional[Dict[str, Any]] = None
    left = 0
    try:
        while i < n:
            k, p = _str(buf, pos)
            if k == "columns":
                left, p = _map_header(buf, p)
                cols = {}
                pos = p
                while left:
                    name, p = _str(buf, pos)
                    cols[name], pos = _nd(buf, p, end)
                    left -= 1
                msg["columns"] = cols
                cols = None
            else:
                msg[k], pos = _scalar(buf, p)
            i += 1
    except (_Fallback, IndexError):
        # The rest, from the first value not parsed by hand, through msgpack.
        u = msgpack.Unpacker(raw=False, max_buffer_size=MAX_MESSAGE_BYTES, max_bin_len=MAX_MESSAGE_BYTES,
                             max_str_len=MAX_MESSAGE_BYTES)
        with memoryview(buf) as mv:
            u.feed(mv[pos:end])
        try:
            if cols is not None:
                for _ in range(left):
                    name = u.unpack()
                    if type(name) is not str:
                        raise ProtocolError(f"malformed lrstream message: column name {name!r}")
                    cols[name] = u.unpack()
                msg["columns"] = cols
                i += 1
            for _ in range(n - i):
                k = u.unpack()
                if type(k) is not str:
                    raise ProtocolError(f"malformed lrstream message: key {k!r}")
                msg[k] = u.unpack()
            pos += u.tell()
            cols = msg.get("columns")
            if type(cols) is dict:  # msgpack-numpy maps the walker did not reach
                for k, v in cols.items():
                    if type(v) is dict and v.get(b"nd") is True and not v.get(b"kind"):
                        try:
                            cols[k] = decode_array(v, writable=True)
                        except (KeyError, TypeError, ValueError) as e:
                            raise ProtocolError(f"malformed lrstream message: column {k!r}: {e}") from e
        except msgpack.OutOfData:
            raise ProtocolError("malformed lrstream message: truncated") from None
        except (msgpack.FormatError, msgpack.StackError, ValueError, TypeError) as e:
            raise ProtocolError(f"malformed lrstream message: {e}") from e
    if pos != end:
        raise ProtocolError(f"malformed lrstream message: {end - pos} bytes after its end")
    if not isinstance(msg.get("type"), str):
        raise ProtocolError("malformed lrstream message: map without a type")
    return msg


def _frame(buf, pos: int, tail: int):
    """Where the msgpack value at buf[pos:] ends, walking it in Python
    without building it (bin and str payloads are jumped over): (end, 0),
    or (None, need) when buf[:tail] holds only part of it -- need is an
    offset that must be received before walking again is worthwhile."""
    end, need, _, _ = _frame_from(buf, pos, tail, 1)
    return end, need


def _frame_from(buf, pos: int, tail: int, todo: int):
    """_frame, resumable: walks todo values from pos. Returns (end, 0, end,
    0) when they are complete in buf[:tail], else (None, need, pos', todo'):
    the walk continues from pos' with todo' values once need is received
    (the values before pos' are not walked again)."""
    while todo:
        if pos >= tail:
            return None, pos + 1, pos, todo
        b = buf[pos]
        if b <= 0x7F or b >= 0xE0 or b == 0xC0 or b == 0xC2 or b == 0xC3:
            pos += 1
        elif b <= 0x8F:
            todo += 2 * (b & 0x0F)
            pos += 1
        elif b <= 0x9F:
            todo += b & 0x0F
            pos += 1
        elif b <= 0xBF:
            pos += 1 + (b & 0x1F)
        else:
            h = _HEADS.get(b)
            if h is None:
                raise ProtocolError(f"malformed lrstream stream: byte 0x{b:02x} at offset {pos}")
            size, kind = h
            if pos + 1 + size > tail:
                return None, pos + 1 + size, pos, todo
            n = int.from_bytes(buf[pos + 1:pos + 1 + size], "big") if size else 0
            if kind == "fixed":  # numbers: the payload follows the type byte
                pos += 1 + size
            elif kind == "fixext":
                pos += 2 + size
            elif kind == "raw":  # str, bin
                pos += 1 + size + n
            elif kind == "ext":
                pos += 2 + size + n
            elif kind == "array":
                todo += n
                pos += 1 + size
            else:  # map
                todo += 2 * n
                pos += 1 + size
        todo -= 1
    if pos > tail:
        return None, pos, pos, 0
    return pos, 0, pos, 0


# type byte -> (bytes after it that hold a length or the value, kind)
_HEADS = {0xC4: (1, "raw"), 0xC5: (2, "raw"), 0xC6: (4, "raw"), 0xC7: (1, "ext"), 0xC8: (2, "ext"),
          0xC9: (4, "ext"), 0xCA: (4, "fixed"), 0xCB: (8, "fixed"), 0xCC: (1, "fixed"), 0xCD: (2, "fixed"),
          0xCE: (4, "fixed"), 0xCF: (8, "fixed"), 0xD0: (1, "fixed"), 0xD1: (2, "fixed"), 0xD2: (4, "fixed"),
          0xD3: (8, "fixed"), 0xD4: (1, "fixext"), 0xD5: (2, "fixext"), 0xD6: (4, "fixext"), 0xD7: (8, "fixext"),
          0xD8: (16, "fixext"), 0xD9: (1, "raw"), 0xDA: (2, "raw"), 0xDB: (4, "raw"), 0xDC: (2, "array"),
          0xDD: (4, "array"), 0xDE: (2, "map"), 0xDF: (4, "map")}


# Walk mode (RawMessages.walk): array payloads at least this large are
# received straight into their array's memory (recv_into / readinto), so
# that the kernel's copy is the only one; smaller ones are copied from the
# receive buffer.
DIRECT_BYTES = 1 << 16
# ArrayPool's default bound: the large arrays (camera frames) a reader
# keeps for reuse once the caller has dropped them.
POOL_BYTES = 256 << 20


class ArrayPool:
    """Walk-mode allocator (``RawMessages.walk(alloc=...)``) that reuses the
    large arrays of earlier batches once nothing references them any more.

    A camera column of a batch is tens of MB; a fresh array costs the
    kernel's zeroing of every page on first touch (as much CPU as receiving
    the bytes), so arrays the caller has dropped are received into again.
    An array is reused only when the pool holds the last reference to it
    (CPython's reference count): an array the caller still holds -- or a
    view of it, a tensor made by ``torch.from_numpy``, a memoryview -- is
    never written. The pool keeps at most ``max_bytes`` of arrays (the
    oldest are let go first); 0 disables it."""

    def __init__(self, max_bytes: int = POOL_BYTES):
        self._max = max_bytes
        self._arrays: list = []
        self._bytes = 0

    def __call__(self, shape, dt: np.dtype, nbytes: int):
        shape = tuple(shape)
        arrays = self._arrays
        for i in range(len(arrays)):
            # 2: the pool's reference and getrefcount's argument.
            if arrays[i].nbytes == nbytes and arrays[i].shape == shape and arrays[i].dtype == dt and \
                    sys.getrefcount(arrays[i]) == 2:
                arr = arrays.pop(i)
                arrays.append(arr)  # most recently used last
                return arr, memoryview(arr.reshape(-1).view(np.uint8))
        arr = np.empty(shape, dt)
        if 0 < nbytes <= self._max:
            arrays.append(arr)
            self._bytes += nbytes
            while self._bytes > self._max:
                self._bytes -= arrays.pop(0).nbytes
        return arr, memoryview(arr.reshape(-1).view(np.uint8))


# The default size of the shared-memory arena a socket client offers the
# server (connect(shm_bytes=...), LRStreamDataset(shm_bytes=...)); 0 turns
# the transport off. The server accepts 1 MiB to 64 GiB, a multiple of
# SHM_ALIGN (a size in between is rounded up to one).
SHM_BYTES = 512 << 20
SHM_MIN_BYTES = 1 << 20
SHM_MAX_BYTES = 64 << 30
SHM_ALIGN = 4096


def shm_supported() -> bool:
    """Whether this platform has what the shared-memory transport needs
    (Linux: memfd_create, file seals, SCM_RIGHTS through socket.send_fds)."""
    try:
        import fcntl
    except ImportError:
        return False
    return hasattr(os, "memfd_create") and hasattr(socket, "send_fds") and hasattr(fcntl, "F_ADD_SEALS")


class ShmArena:
    """The client side of ``serve``'s shared-memory transport
    (docs/wire-format.md, docs/python.md): a sealed memfd of ``nbytes``
    bytes that the server copies large columns (camera frames) into, mapped
    here; arrays are built over it without copying.

    Lifecycle: :meth:`send_hello` sends the hello with the memfd (one
    ``sendmsg`` with ``SCM_RIGHTS``); :meth:`start` reads the header's
    ``"shm"`` -- without ``true`` the arena is dropped and never used. Then
    :meth:`array` turns each ``shm`` column map into an array over the
    arena (regions in increasing position, tracked in a deque), the reader
    counts ``batches`` and calls :meth:`send_ack` before it reads the next
    message after a batch: ``[batches, released]``, where ``released`` ends
    the longest prefix of regions nothing outside the reader references any
    more (CPython's reference count, as :class:`ArrayPool`: an array, a view
    of it or a ``torch.from_numpy`` tensor keeps its region).

    ``copy_alloc`` (an allocator like ``ArrayPool``'s, e.g. a DataLoader
    worker's shared-memory tensors): each region is copied into a value it
    allocates and released at once.

    The mapping is never closed explicitly: arrays over it keep it alive
    (``mmap.close`` would fail while they exist); it goes when they do.
    """

    def __init__(self, nbytes: int, *, copy_alloc=None):
        if not SHM_MIN_BYTES <= nbytes <= SHM_MAX_BYTES or nbytes % SHM_ALIGN:
            raise ValueError(f"shm_bytes={nbytes}: the shared-memory arena must be 0 (off) or "
                             f"{SHM_MIN_BYTES} (1 MiB) to {SHM_MAX_BYTES} (64 GiB) bytes, a multiple of {SHM_ALIGN}")
        import fcntl

        fd = os.memfd_create("lrstream-shm", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, nbytes)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            self._mm: Optional[mmap.mmap] = mmap.mmap(fd, nbytes)  # MAP_SHARED, read-write
        except BaseException:
            os.close(fd)
            raise
        self.fd: Optional[int] = fd
        self.size = nbytes
        self.active = False  # the header said "shm": true
        self.batches = 0  # batch messages read completely
        self.released = 0  # end of the released prefix of regions
        self.copy_alloc = copy_alloc
        self._next = 0  # the last region's end: the next region starts there or later
        self._held: deque = deque()  # (end, flat array over the region, or None once copied), pos order
        self._sock: Optional[socket.socket] = None
        self._dead = False  # the peer closed: acks are no longer sent

    def close_fd(self) -> None:
        """Close this process's memfd descriptor (the mapping stays)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def send_hello(self, sock: socket.socket, hello_bytes: bytes) -> None:
        """Send the hello map and the memfd in one sendmsg (SCM_RIGHTS),
        then close the descriptor; acks go to ``sock`` later."""
        n = socket.send_fds(sock, [hello_bytes], [self.fd])
        if n < len(hello_bytes):  # the descriptor went with the first byte
            sock.sendall(hello_bytes[n:])
        self._sock = sock
        self.close_fd()

    def start(self, header: Dict[str, Any]) -> bool:
        """Whether the server uses the arena (header ``"shm": true``);
        if not, the arena is dropped and must not be used."""
        self.close_fd()
        if header.get("shm") is True:
            self.active = True
            return True
        self.drop()
        return False

    def drop(self) -> None:
        """Unmap the arena (no array may have been made over it)."""
        self.active = False
        self.close_fd()
        if self._mm is not None and not self._held:
            self._mm.close()
        self._mm = None

    def array(self, name: str, obj: Dict[bytes, Any]) -> Any:
        """The column value of a msgpack-numpy map whose bytes are in the
        arena (key ``shm`` = [pos, nbytes] instead of ``data``)."""
        if not self.active or self._mm is None:
            raise ProtocolError(f"malformed lrstream message: column {name!r} is in shared memory but the "
                                "server did not say it uses the arena")
        try:
            ref, shape, t = obj[b"shm"], obj[b"shape"], obj[b"type"]
            pos, nbytes = ref
            kind = obj.get(b"kind", b"")
        except (KeyError, TypeError, ValueError):
            raise ProtocolError(f"malformed lrstream message: column {name!r}: bad shared-memory array "
                                f"{ {k: v for k, v in obj.items() if k != b'data'}!r}") from None
        if type(pos) is not int or type(nbytes) is not int or pos < 0 or nbytes < 0:
            raise ProtocolError(f"malformed lrstream message: column {name!r}: bad shared-memory region {ref!r}")
        if kind not in (b"", ""):
            raise ProtocolError(f"malformed lrstream message: column {name!r}: kind {kind!r} in shared memory")
        if type(shape) is not list or any(type(d) is not int or d < 0 for d in shape):
            raise ProtocolError(f"malformed lrstream message: column {name!r}: bad shape {shape!r}")
        if not isinstance(t, (str, bytes)):
            raise ProtocolError(f"malformed lrstream message: column {name!r}: bad array type {t!r}")
        try:
            dt = _np_dtype(t)
        except ProtocolError as e:
            raise ProtocolError(f"malformed lrstream message: column {name!r}: "
                                f"{str(e).removeprefix('malformed lrstream message: ')}") from None
        if dt.hasobject or dt.itemsize == 0:
            raise ProtocolError(f"malformed lrstream message: column {name!r}: dtype {dt} in shared memory")
        count = 1
        for d in shape:
            count *= d
        if count * dt.itemsize != nbytes:
            raise ProtocolError(f"malformed lrstream message: column {name!r}: {nbytes} bytes in shared memory "
                                f"for shape {shape} of {dt.str}")
        if pos < self._next:
            raise ProtocolError(f"malformed lrstream message: column {name!r}: shared-memory region at {pos} "
                                f"starts before the previous one ends ({self._next})")
        off = pos % self.size
        if off + nbytes > self.size:
            raise ProtocolError(f"malformed lrstream message: column {name!r}: shared-memory region "
                                f"[{pos}, {pos + nbytes}) runs past the arena's end ({self.size} bytes)")
        self._next = end = pos + nbytes
        if not nbytes:
            self._held.append((end, None))
            return np.empty(shape, dt)
        # The array the reader tracks: views of the reshaped array (and
        # tensors over it) reference this one (numpy collapses view chains
        # to the last array before the mmap).
        flat = np.frombuffer(self._mm, dt, count, off)
        if self.copy_alloc is not None:
            out, dst = self.copy_alloc(shape, dt, nbytes)
            dst[:] = memoryview(flat.view(np.uint8))
            self._held.append((end, None))
            return out
        self._held.append((end, flat))
        return flat.reshape(shape)

    def release(self) -> int:
        """Advance ``released`` over the regions nothing references any
        more, in position order (stops at the first one still in use)."""
        held = self._held
        # 2: the deque entry's reference and getrefcount's argument.
        while held and (held[0][1] is None or sys.getrefcount(held[0][1]) == 2):
            self.released = held.popleft()[0]
        return self.released

    def ack(self) -> bytes:
        """The client message ``[batches, released]`` (after a release check)."""
        return msgpack.packb([self.batches, self.release()])

    def send_ack(self, send=None) -> None:
        """Send :meth:`ack` to the server (at a batch boundary, before the
        reader blocks on the next message). ``send(data)``, if given, sends
        (waiting as the reader's reads wait: see ``RawMessages.send``) and
        returns False when the peer closed; by default the socket's timeout
        (``connect``'s ``read_timeout``) bounds a blocked send. A peer that
        closed the connection is not an error here: the read that follows
        reports it."""
        sock = self._sock
        if sock is None or self._dead:
            return
        data = self.ack()
        if send is not None:
            self._dead = not send(data)
            return
        sent = 0
        while sent < len(data):
            try:
                sent += sock.send(data[sent:])
            except socket.timeout:
                # A server that stopped reading (its socket buffer is full).
                raise TimeoutError(f"lrstream server read nothing of this client's release messages for "
                                   f"{sock.gettimeout():g} s (read_timeout)") from None
            except (BrokenPipeError, ConnectionResetError):
                self._dead = True
                return


def check_shm_bytes(shm_bytes: int) -> None:
    """ValueError unless shm_bytes is 0 or 1 MiB..64 GiB."""
    if shm_bytes and not SHM_MIN_BYTES <= shm_bytes <= SHM_MAX_BYTES:
        raise ValueError(f"shm_bytes={shm_bytes}: the shared-memory arena must be 0 (off) or "
                         f"{SHM_MIN_BYTES} (1 MiB) to {SHM_MAX_BYTES} (64 GiB) bytes")


def new_arena(shm_bytes: int, *, copy_alloc=None) -> Optional[ShmArena]:
    """A :class:`ShmArena` of ``shm_bytes`` (rounded up to a multiple of
    SHM_ALIGN), or None when shm_bytes is 0 or the platform lacks
    memfd/SCM_RIGHTS (the plain socket is used then). A size outside
    1 MiB..64 GiB raises ValueError."""
    if not shm_bytes:
        return None
    check_shm_bytes(shm_bytes)
    if not shm_supported():
        return None
    try:
        return ShmArena(-(-int(shm_bytes) // SHM_ALIGN) * SHM_ALIGN, copy_alloc=copy_alloc)
    except OSError as e:  # e.g. memfd_create refused by a sandbox, no address space for the mapping
        import warnings

        warnings.warn(f"lrstream: no shared-memory arena of {shm_bytes} bytes ({e}); using the plain socket",
                      RuntimeWarning, stacklevel=3)
        return None


# Walk mode reads the rest of a message (everything but those payloads) in
# reads of at most this many bytes, so that little of a following payload
# lands in the receive buffer (what does is copied from there).
WALK_READ = 1 << 17


# A stream whose batches carry at least this many bytes of numeric data
# (camera frames, long action chunks; from the header) is read in walk mode
# (RawMessages.walk, StreamReader).
WALK_BYTES = 1 << 20


def _sample_bytes(f: Any) -> Optional[int]:
    """The bytes one sample of header feature f takes, or None when the
    header does not say (a malformed entry)."""
    try:
        n = np.dtype(f["dtype"]).itemsize
        for d in f.get("shape") or ():
            n *= int(d)
    except (TypeError, ValueError, KeyError, AttributeError):
        return None
    return n


def walk_stream(header: Dict[str, Any], walk_bytes: int = WALK_BYTES) -> bool:
    """Whether a stream's batches carry walk_bytes of numeric data (camera
    frames, long action chunks): from the header's features and batch size."""
    total = sum(_sample_bytes(f) or 0 for f in header.get("features") or ())
    return total * int(header.get("batch_size") or 1) >= walk_bytes


# The server places a column in the shared-memory arena only from this
# many payload bytes (sink.LargeArray, docs/wire-format.md).
SHM_LARGE_BYTES = 64 << 10


def shm_columns(header: Dict[str, Any]) -> bool:
    """Whether a batch column of the stream can be large enough for the
    server to place it in the shared-memory arena (from the header's
    features and batch size; a feature it cannot size counts as large).
    Only such streams need walk mode on an shm connection; the others keep
    their msgpack (or raw bytes) path."""
    bs = int(header.get("batch_size") or 1)
    for f in header.get("features") or ():
        n = _sample_bytes(f)
        if n is None or n * bs >= SHM_LARGE_BYTES:
            return True
    return False


def start_stream(header: Dict[str, Any], shm: Optional[ShmArena],
                 walk_bytes: int = WALK_BYTES) -> "tuple[Optional[ShmArena], bool]":
    """After a stream's header: the arena to use (None when there is none
    or the server did not take it -- then it is dropped and no release
    messages are sent) and whether to read the batches in walk mode: those
    of large columns, and those of an shm stream that may carry some in
    the arena (only walk mode resolves them)."""
    if shm is not None and not shm.start(header):
        shm = None  # an old server, or a replay: the plain socket, no acks
    return shm, walk_stream(header, walk_bytes) or (shm is not None and shm_columns(header))


class _More(Exception):
    """The bytes received so far end inside the value being parsed."""


class _Short(Exception):
    """The stream ended inside a message."""


def _nd_head(buf, pos: int, tail: int):
    """The head of a msgpack-numpy map at buf[pos:tail] in lrstream's
    layout (keys nd, type, kind, shape, data; empty kind; fixarray shape of
    ints): (dtype, shape, payload size, payload offset). Raises _More when
    buf[:tail] ends inside the head, _Fallback for any other layout."""

    def need(e: int) -> None:
        if e > tail:
            raise _More

    need(pos + 1)
    if buf[pos] != 0x85:
        raise _Fallback
    p = pos + 1
    dt = shape = None
    for key in _ND_KEYS:
        need(p + 1)
        a, e, _ = _raw(buf, p)
        need(e)
        if buf[a:e] != key:
            raise _Fallback
        p = e
        need(p + 1)
        if key == b"nd":
            if buf[p] != 0xC3:
                raise _Fallback
            p += 1
        elif key == b"shape":
            b = buf[p]
            if not 0x90 <= b <= 0x9F:
                raise _Fallback
            p += 1
            shape = []
            for _ in range(b & 0x0F):
                need(p + 1)
                b = buf[p]
                if b > 0x7F and not 0xCC <= b <= 0xCF:
                    raise _Fallback
                need(p + 1 + (0 if b <= 0x7F else 1 << (b - 0xCC)))
                v, p = _scalar(buf, p)
                shape.append(v)
        else:
            a, e, _ = _raw(buf, p)
            if key == b"data":
                need(a)
                return dt, shape, e - a, a
            need(e)
            if key == b"type":
                dt = _np_dtype(bytes(buf[a:e]))
                if dt.hasobject or dt.itemsize == 0:
                    raise _Fallback
            elif e != a:  # kind: object and structured arrays take msgpack-numpy's path
                raise _Fallback
            p = e
    raise _Fallback  # not reached: the loop returns at data


def decode_message(raw: bytes) -> Dict[str, Any]:
    """Decode one raw message (as yielded by :class:`RawMessages`)."""
    try:
        msg = msgpack.unpackb(raw, raw=False, max_bin_len=MAX_MESSAGE_BYTES, max_str_len=MAX_MESSAGE_BYTES)
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError) as e:
        raise ProtocolError(f"malformed lrstream message: {e}") from e
    if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
        raise ProtocolError(f"malformed lrstream message: {type(msg).__name__} without a type")
    return msg


def check_header(msg: Dict[str, Any]) -> Dict[str, Any]:
    """Check a header message's type and format version; return it."""
    if msg.get("type") != "header":
        raise ProtocolError(f"lrstream stream starts with {msg.get('type')!r}, want 'header'")
    fmt = msg.get("format", "")
    if not isinstance(fmt, str) or not fmt.startswith(FORMAT_PREFIX):
        raise ProtocolError(f"not an lrstream stream (format {fmt!r})")
    try:
        major = int(fmt[len(FORMAT_PREFIX):].split(".")[0])
    except ValueError:
        raise ProtocolError(f"bad lrstream format version {fmt!r}") from None
    if major != SUPPORTED_MAJOR:
        raise ProtocolError(f"unsupported lrstream format {fmt!r}; this client reads {FORMAT_PREFIX}{SUPPORTED_MAJOR}")
    return msg


def _peek_type(raw: bytes) -> Optional[str]:
    """The value of a message's leading "type" key without decoding it
    (lrstream writes "type" first), or None if the bytes do not look so."""
    b0 = raw[0]
    h = 1 if 0x80 <= b0 <= 0x8F else 3 if b0 == 0xDE else 5 if b0 == 0xDF else 0
    if h == 0 or raw[h:h + 5] != b"\xa4type" or (raw[h + 5] & 0xE0) != 0xA0:
        return None
    n = raw[h + 5] & 0x1F
    return raw[h + 6:h + 6 + n].decode("ascii", "replace")


class RawMessages:
    """Splits a stream arriving on a socket (or a pipe, a file: any binary
    file object with ``readinto``) into its messages' exact bytes, without
    decoding batches (so a DataLoader worker can hand them to the main
    process as one ``bytes`` object each). With ``decode``, next() returns
    decoded messages instead: msgpack decodes them as they arrive, or after
    :meth:`walk` (streams of large numeric columns, e.g. camera frames) the
    reader walks each message as it arrives and receives every large array
    payload straight into the memory of a new numpy array (``recv_into`` /
    ``readinto``): the kernel's copy is the only one.

    ``read_timeout`` bounds each wait for data on a socket, in seconds;
    ``check`` (if given) is called every ``poll`` seconds while waiting and
    may raise (it checks that the server is still alive and not stopped).
    A file object waits as its reads do.
    """

    def __init__(self, sock: Any, *, read_timeout: Optional[float] = None,
                 check=None, poll: float = 0.25, what: str = "lrstream server", decode: bool = False):
        self._sock = sock
        if isinstance(sock, socket.socket):
            self._readinto = None
            sock.settimeout(poll)
        else:  # a file: readinto1 returns what one read gives (a pipe: what has arrived)
            self._readinto = getattr(sock, "readinto1", None) or sock.readinto
        self._unpacker = msgpack.Unpacker(raw=False, max_buffer_size=MAX_MESSAGE_BYTES)
        # The receive buffer, reused (fresh memory for every recv or every
        # message costs page faults): recv_into writes at _tail; with _keep,
        # bytes from the next message's start on stay until it is complete
        # (walk mode: from the walk's position on).
        self._buf = bytearray(1 << 20)
        self._mv = memoryview(self._buf)
        self._base = 0  # stream offset of _buf[0]
        self._tail = 0  # received bytes in _buf
        self._start = 0  # stream offset of the next message (walk mode: of the walk)
        self._read_timeout = read_timeout
        self._check = check
        self._poll = poll
        self._what = what
        self._eof = False
        self._decode = decode  # next() returns decoded messages
        self._keep = True  # received bytes are kept in _buf (raw mode, walk mode; decode mode until walk(False))
        self._walk = False  # decode mode: messages walked as they arrive, arrays received into their memory
        self._expect = 0  # the last message's size (raw mode)
        self._alloc = None  # walk mode: allocator of large arrays (see walk)
        self.shm: Optional[ShmArena] = None  # walk mode: the arena of shm columns (see ShmArena)

    def walk(self, on: bool, alloc=None) -> None:
        """Decode mode, at a message boundary: walk the next messages as
        they arrive, receiving large array payloads straight into their
        arrays (on), or decode them with msgpack alone (off: received bytes
        are no longer kept).

        ``alloc(shape, dtype, nbytes)``, if given, allocates the arrays whose
        payload is received straight from the kernel (``DIRECT_BYTES`` and
        more): it returns the column's value (e.g. a tensor in shared
        memory) and a writable ``nbytes``-byte memoryview of its memory.
        Walk mode works on a raw-mode reader too (next() then returns the
        walked messages)."""
        if on:
            self._alloc = alloc
            if not self._keep:
                raise ValueError("RawMessages.walk(True) after walk(False)")
            self._walk = True
            self._expect = 0
        elif self._decode:
            self._walk = self._keep = False

    def _room(self, want: int = 0) -> None:
        """Free space at the end of _buf for the next read (at least want
        bytes): drop the bytes before the next message (all of them when
        nothing is kept), moving the rest to the front -- early in a
        message, while that is little, if the message would not fit
        otherwise (the last one's size is the guess) -- or grow _buf."""
        keep_from = self._start - self._base if self._keep else self._tail
        live = self._tail - keep_from
        cap = len(self._buf)
        room = max(1 << 18, want)
        if cap - self._tail >= room and (keep_from == 0 or cap - keep_from >= self._expect):
            return
        if live:
            self._mv[:live] = self._mv[keep_from:self._tail]  # memmove
        self._base += keep_from
        self._tail = live
        if cap - live < max(room, self._expect - live + (1 << 18)):
            new = bytearray(max(2 * cap, self._expect + (1 << 20), live + room + (1 << 20)))
            new[:live] = self._mv[:live]
            self._mv.release()
            self._buf, self._mv = new, memoryview(new)

    def _recv(self, mv: memoryview) -> int:
        """One read into mv: the bytes read, 0 at the end of the stream."""
        if self._readinto is not None:
            try:
                return self._readinto(mv) or 0
            except socket.timeout:  # a socket file (connect) with read_timeout as its timeout
                raise TimeoutError(f"{self._what} sent nothing within the socket's timeout (read_timeout)") from None
        waited = 0.0
        while True:
            try:
                return self._sock.recv_into(mv)
            except ConnectionResetError:
                # The peer died with unread bytes (e.g. SIGKILL): for the
                # reader that is an end of stream; the caller reports a
                # truncated stream and why (the server's state).
                return 0
            except socket.timeout:
                waited += self._poll
                if self._check is not None:
                    self._check(waited)
                if self._read_timeout is not None and waited >= self._read_timeout:
                    raise TimeoutError(f"{self._what} sent nothing for {self._read_timeout:g} s (read_timeout)") from None

    def send(self, data: bytes) -> bool:
        """Send data on the socket (a shared-memory release message), waiting
        while the server does not read as a read waits for data: ``check``
        every ``poll`` seconds, ``read_timeout``. False if the peer closed
        the connection (the next read reports why)."""
        mv = memoryview(data)
        waited = 0.0
        while mv:
            try:
                mv = mv[self._sock.send(mv):]
            except socket.timeout:
                waited += self._poll
                if self._check is not None:
                    self._check(waited)
                if self._read_timeout is not None and waited >= self._read_timeout:
                    raise TimeoutError(f"{self._what} read nothing for {self._read_timeout:g} s (read_timeout)") from None
            except (BrokenPipeError, ConnectionResetError):
                return False
        return True

    def _fill(self, want: int = 0) -> bool:
        """Receive more bytes at _tail (walk mode: at most max(want,
        WALK_READ)); False at the end of the stream."""
        self._room(want)
        stop = len(self._buf)
        if self._walk:
            stop = min(stop, self._tail + max(want, WALK_READ))
        n = self._recv(self._mv[self._tail:stop])
        if not n:
            self._eof = True
            return False
        if not self._walk:  # walk mode parses the bytes itself
            self._unpacker.feed(self._mv[self._tail:self._tail + n])
        self._tail += n
        return True

    def next(self) -> Any:
        """The next message's bytes (with ``decode``: the decoded message),
        None at the end of the connection, b"" after a partial message."""
        if self._walk:
            first = self._start
            try:
                return self._walk_message()
            except _Short:
                return b"" if self._base + self._tail != first else None
        if self._decode:
            while True:
                try:
                    msg = self._unpacker.unpack()
                except msgpack.OutOfData:
                    if self._eof or not self._fill():
                        return b"" if self._base + self._tail != self._start else None
                    continue
                except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError) as e:
                    raise ProtocolError(f"malformed lrstream stream: {e}") from e
                if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
                    raise ProtocolError(f"malformed lrstream message: {type(msg).__name__} without a type")
                self._start = self._unpacker.tell()
                return msg
        while True:
            try:
                self._unpacker.skip()
            except msgpack.OutOfData:
                if self._eof or not self._fill():
                    if self._start != self._base + self._tail:
                        return b""  # a partial message: truncated
                    return None
                continue
            except (msgpack.FormatError, msgpack.StackError, ValueError) as e:
                raise ProtocolError(f"malformed lrstream stream: {e}") from e
            end = self._unpacker.tell()
            a, b = self._start - self._base, end - self._base
            out = bytes(self._mv[a:b])
            self._start = end
            self._expect = b - a
            return out

    # -- walk mode: a message parsed as it arrives -------------------------
    def _have(self, n: int) -> int:
        """Receive until n bytes from the walk's position are in _buf; their
        offset in _buf. Raises _Short at the end of the stream."""
        while True:
            a = self._start - self._base
            have = self._tail - a
            if have >= n:
                return a
            if self._eof or not self._fill(n - have):
                raise _Short

    def _map_len(self) -> Optional[int]:
        """The size of the map at the walk's position (its head consumed), or
        None if the value there is not a map."""
        a = self._have(1)
        b = self._buf[a]
        if 0x80 <= b <= 0x8F:
            self._start += 1
            return b & 0x0F
        if b in (0xDE, 0xDF):
            h = 3 if b == 0xDE else 5
            a = self._have(h)
            self._start += h
            return int.from_bytes(self._buf[a + 1:a + h], "big")
        return None

    def _value(self) -> Any:
        """The msgpack value at the walk's position, decoded by msgpack."""
        at, todo = self._start, 1  # where the framing walk resumes (stream offset), values left
        while True:
            a = self._start - self._base
            end, need, p, todo = _frame_from(self._buf, at - self._base, self._tail, todo)
            if end is not None:
                break
            at = self._base + p
            self._have(need - a)
        try:
            v = msgpack.unpackb(self._mv[a:end], raw=False, max_bin_len=MAX_MESSAGE_BYTES,
                                max_str_len=MAX_MESSAGE_BYTES)
        except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError) as e:
            raise ProtocolError(f"malformed lrstream message: {e}") from e
        self._start += end - a
        return v

    def _column(self, name: str) -> Any:
        """A column's value: a msgpack-numpy map in lrstream's layout becomes
        a new array, its payload received into the array's memory (a large
        one straight from the kernel); anything else is decoded by msgpack."""
        a = self._have(1)
        while True:
            try:
                dt, shape, size, p = _nd_head(self._buf, a, self._tail)
                break
            except (_More, IndexError):
                a = self._have(self._tail - a + 64)
            except _Fallback:
                v = self._value()
                if type(v) is dict and v.get(b"nd") is True and b"shm" in v and b"data" not in v:
                    if self.shm is None:
                        raise ProtocolError(f"malformed lrstream message: column {name!r} is in shared memory "
                                            "but this connection has no arena")
                    return self.shm.array(name, v)
                if type(v) is dict and v.get(b"nd") is True and not v.get(b"kind"):
                    try:
                        v = decode_array(v, writable=True)
                    except (KeyError, TypeError, ValueError) as e:
                        raise ProtocolError(f"malformed lrstream message: column {name!r}: {e}") from e
                return v
        count = 1
        for d in shape:
            count *= d
        if count * dt.itemsize != size or size > MAX_MESSAGE_BYTES:
            raise ProtocolError(f"malformed lrstream message: column {name!r}: {size} bytes of data for "
                                f"shape {shape} of {dt.str}")
        self._start += p - a
        alloc = self._alloc
        if alloc is not None and size >= DIRECT_BYTES:
            arr, dst = alloc(shape, dt, size)
        else:
            arr = np.empty(shape, dt)
            if not size:
                return arr
            dst = memoryview(arr.reshape(-1).view(np.uint8))
        if size < DIRECT_BYTES:
            a = self._have(size)
            dst[:] = self._mv[a:a + size]
            self._start += size
            return arr
        a = self._start - self._base
        k = min(self._tail - a, size)
        dst[:k] = self._mv[a:a + k]  # what the last read of the walk brought
        if k == size:
            self._start += size
            return arr
        # The rest straight from the kernel into the array. _buf is empty
        # now (everything received was the array's); the stream continues
        # after the payload.
        got = k
        while got < size:
            n = self._recv(dst[got:])
            if not n:
                self._eof = True
                self._base += self._tail + (got - k)
                self._tail = 0
                raise _Short
            got += n
        self._base += self._tail + (size - k)
        self._tail = 0
        self._start = self._base
        return arr

    def _walk_message(self) -> Dict[str, Any]:
        n = self._map_len()
        if n is None:
            raise ProtocolError("malformed lrstream message: not a map")
        msg: Dict[str, Any] = {}
        for _ in range(n):
            k = self._value()
            if type(k) is not str:
                raise ProtocolError(f"malformed lrstream message: key {k!r}")
            if k != "columns":
                msg[k] = self._value()
                continue
            left = self._map_len()
            if left is None:
                msg[k] = self._value()
                continue
            cols: Dict[str, Any] = {}
            for _ in range(left):
                name = self._value()
                if type(name) is not str:
                    raise ProtocolError(f"malformed lrstream message: column name {name!r}")
                cols[name] = self._column(name)
            msg[k] = cols
        if not isinstance(msg.get("type"), str):
            raise ProtocolError("malformed lrstream message: map without a type")
        return msg


class _Prefixed:
    """File adapter: read(n) returns the given bytes first, then what the
    file's read1 (or read) gives."""

    __slots__ = ("_head", "_read")

    def __init__(self, head: bytes, f):
        self._head = head
        self._read = getattr(f, "read1", None) or f.read

    def read(self, n: int) -> bytes:
        if self._head:
            h, self._head = self._head[:n], self._head[n:]
            return h
        return self._read(n)


Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, BinaryIO, socket.socket]


class StreamReader:
    """Reads one lrstream stream.

    ``source`` is a path, a bytes-like object holding a whole stream, a
    binary file-like object (a pipe such as ``subprocess.Popen.stdout``,
    ``sys.stdin.buffer``, an open file) or a connected socket.

    Iterating yields :class:`Batch` objects. ``header`` is read on first
    access (or when iteration starts); ``end`` holds the end message's
    counts once the stream is exhausted. An ``error`` message raises
    :class:`StreamError`; a stream that stops before ``end`` raises
    :class:`TruncatedStreamError`.

    Numeric columns are read-only numpy arrays over the bytes msgpack
    received, except in streams whose batches carry at least
    ``WALK_BYTES`` of numeric data (camera frames; from the header) read
    from a file object with ``readinto`` (pipes, files, sockets): there each
    array is a writable array of its own, large payloads received straight
    into it (see :class:`RawMessages`); the large ones are taken from an
    :class:`ArrayPool` of ``pool_bytes`` (arrays of earlier batches that
    nothing references any more; 0: always new arrays).

    On a connection made by :func:`connect` with a shared-memory arena
    (whose header says ``"shm": true``), camera columns are writable arrays
    over the arena instead (no copy); see :class:`ShmArena`.
    """

    def __init__(self, source: Source, *, read_size: int = 1 << 20, pool_bytes: int = POOL_BYTES,
                 _shm: Optional[ShmArena] = None):
        self._pool = ArrayPool(pool_bytes) if pool_bytes > 0 else None
        self._shm = _shm
        self._close = None
        if isinstance(source, (str, os.PathLike)):
            f = open(source, "rb")
            self._close = f.close
        elif isinstance(source, (bytes, bytearray, memoryview)):
            f = io.BytesIO(source)
        elif isinstance(source, socket.socket):
            # Unbuffered: read() returns whatever has arrived.
            f = source.makefile("rb", buffering=0)
            self._close = f.close
        else:
            f = source
        self._file = f
        self._read_size = read_size
        self._unpacker: Optional[msgpack.Unpacker] = None
        # Files with readinto: the header is read by RawMessages, which
        # then walks the batches of a stream of camera frames.
        self._raw: Optional[RawMessages] = None
        if hasattr(f, "readinto1") or hasattr(f, "readinto"):
            self._raw = RawMessages(f, decode=True)
        else:
            self._unpacker = self._msgpack(b"")
        self._header: Optional[Dict[str, Any]] = None
        self.end: Optional[Dict[str, Any]] = None
        self._done = False

    def _msgpack(self, head: bytes) -> msgpack.Unpacker:
        return msgpack.Unpacker(_Prefixed(head, self._file), raw=False, read_size=self._read_size,
                                max_buffer_size=MAX_MESSAGE_BYTES)

    # -- context manager -------------------------------------------------
    def __enter__(self) -> "StreamReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the underlying file if the reader opened it."""
        if self._close is not None:
            self._close()
            self._close = None

    # -- reading ---------------------------------------------------------
    def _next_message(self) -> Optional[Dict[str, Any]]:
        if self._unpacker is None:
            msg = self._raw.next()
            if not isinstance(msg, dict):  # None: the end; b"": a partial message
                if msg == b"":
                    self._done = True
                    raise TruncatedStreamError("lrstream stream ended inside a message (truncated)")
                return None
        else:
            try:
                msg = next(self._unpacker)
            except StopIteration:
                return None
            except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError) as e:
                raise ProtocolError(f"malformed lrstream stream: {e}") from e
            if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
                raise ProtocolError(f"malformed lrstream message: {type(msg).__name__} without a type")
        if msg["type"] == "error":
            self._done = True
            raise stream_error(msg.get("message", "unknown error"))
        return msg

    @property
    def header(self) -> Dict[str, Any]:
        """The header message (format, dataset, revision, fps, recipe,
        recipe_sha256, mode, batch_size, features, tools, options, ...)."""
        if self._header is None:
            msg = self._next_message()
            if msg is None:
                raise TruncatedStreamError("lrstream stream ended before its header")
            self._header = check_header(msg)
            shm, walk = start_stream(self._header, self._shm)
            self._shm = shm
            rm = self._raw
            if shm is not None and rm is None:
                raise ValueError("StreamReader: a shared-memory arena needs a socket source")
            if rm is not None:
                if walk:
                    rm.walk(True, alloc=self._pool)
                    rm.shm = shm
                else:  # msgpack reads the rest, from the bytes after the header
                    self._unpacker = self._msgpack(bytes(rm._mv[rm._start - rm._base:rm._tail]))
                    self._raw = None
        return self._header

    def __iter__(self) -> Iterator[Batch]:
        try:
            yield from self._batches()
        finally:
            if self._done:
                self.close()  # the stream is over (end, in-band error, truncation): release what it opened

    def _batches(self) -> Iterator[Batch]:
        self.header
        shm = self._shm
        while not self._done:
            if shm is not None and shm.batches:
                shm.send_ack()  # after a batch, before blocking on the next message
            msg = self._next_message()
            if msg is None:
                self._done = True
                raise TruncatedStreamError("lrstream stream ended without an 'end' message (truncated)")
            t = msg["type"]
            if t == "batch":
                if shm is None:
                    yield Batch(_decode_columns(msg["columns"]), msg.get("seq", 0), msg.get("epoch", 0), msg.get("size", 0), msg.get("resume"))
                    continue
                shm.batches += 1
                b = Batch(_decode_columns(msg["columns"]), msg.get("seq", 0), msg.get("epoch", 0), msg.get("size", 0), msg.get("resume"))
                msg = None  # no reference of this frame may keep the batch's arrays (release check)
                yield b
                b = None
            elif t == "end":
                self.end = msg
                self._done = True
            else:
                raise ProtocolError(f"unexpected lrstream message type {t!r}")


def read_stream(source: Source) -> Iterator[Batch]:
    """Shorthand: iterate over the batches of ``source`` (see StreamReader)."""
    with StreamReader(source) as r:
        yield from r


def hello(worker: int = 0, num_workers: int = 1, rank: int = 0, world_size: int = 1,
          resume: Optional[str] = None, *, epoch: Optional[int] = None, next: Optional[int] = None,
          fingerprint: Optional[str] = None, shm: Optional[int] = None) -> bytes:
    """Encode the socket hello map a client sends once after connecting.

    ``epoch`` (with optional ``next`` and ``fingerprint``) asks for that one
    epoch of the training order, starting at index ``next`` of the rank's
    batch sequence and then every ``num_workers``-th (docs/wire-format.md).
    ``shm`` is the size of the shared-memory arena sent with the hello
    (:class:`ShmArena`); None leaves the key out.
    """
    m: Dict[str, Any] = {"worker": int(worker), "num_workers": int(num_workers),
                         "rank": int(rank), "world_size": int(world_size)}
    if resume is not None:
        m["resume"] = resume
    if epoch is not None:
        m["epoch"] = int(epoch)
        if next is not None:
            m["next"] = int(next)
        if fingerprint:
            m["fingerprint"] = fingerprint
    if shm is not None:
        m["shm"] = int(shm)
    return msgpack.packb(m, use_bin_type=True)


def connect(path: str, *, worker: int = 0, num_workers: int = 1, rank: int = 0, world_size: int = 1,
            resume: Optional[str] = None, timeout: Optional[float] = None,
            read_timeout: Optional[float] = None, pool_bytes: int = POOL_BYTES, shm_bytes: int = SHM_BYTES,
            **position: Any) -> StreamReader:
    """Connect to ``lrstream serve --socket PATH``, send the hello and return
    a StreamReader over this client's share of the stream.

    ``timeout`` (seconds) bounds connecting; ``read_timeout`` each wait for
    data (``TimeoutError``; None waits as long as the server takes).
    ``pool_bytes`` bounds the reader's :class:`ArrayPool` (0: none).
    ``shm_bytes`` is the size of the shared-memory arena offered to the
    server (Linux; 0: the plain socket): a server that takes it puts camera
    columns there and the reader's arrays view them without a copy
    (:class:`ShmArena`, docs/python.md).
    ``epoch=``, ``next=`` and ``fingerprint=`` add an exact start position
    to the hello (docs/wire-format.md).
    """
    arena = new_arena(shm_bytes)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(path)
        s.settimeout(read_timeout)
        h = hello(worker, num_workers, rank, world_size, resume, shm=arena.size if arena else None, **position)
        if arena is not None:
            arena.send_hello(s, h)
        else:
            s.sendall(h)
        reader = StreamReader(s, pool_bytes=pool_bytes, _shm=arena)
    except BaseException:
        s.close()
        if arena is not None:
            arena.drop()
        raise
    # The reader's file object keeps the connection alive; closing it
    # closes the socket.
    orig_close = reader.close

    def close() -> None:
        orig_close()
        s.close()

    reader.close = close  # type: ignore[method-assign]
    return reader
