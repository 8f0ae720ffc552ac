"""The client side of serve's shared-memory transport (docs/python.md,
"Shared memory"), against a fake server written here from the protocol:
it receives the memfd with the hello, checks its seals and size, copies
large columns into the arena where the client's acks leave room (inline
otherwise), sends the rest inline, and records every ack. The real server
is tested in python/interop/test_shm_serve.py.
"""

import fcntl
import mmap
import os
import socket
import tempfile
import threading

import msgpack
import numpy as np
import pytest

import _util  # noqa: F401  (puts the package on sys.path)
from _util import end, header, nd

import lrstream_client as lc
from lrstream_client import reader as rd

pytestmark = pytest.mark.skipif(not rd.shm_supported(), reason="shared memory transport is Linux only")

CAM = "observation.images.top"
SHAPE = (2, 3, 96, 128)  # 73,728 bytes per camera column: the server places columns from 64 KiB
COL = 2 * 3 * 96 * 128


def batches(n, seed=0):
    """n batches: index, state, a uint8 camera column, messages."""
    rng = np.random.default_rng(seed)
    out = []
    for s in range(n):
        out.append({"index": np.arange(2 * s, 2 * s + 2, dtype="<i8"),
                    "observation.state": rng.standard_normal((2, 3)).astype("<f4"),
                    CAM: rng.integers(0, 256, SHAPE, dtype=np.uint8),
                    "task": [f"t{s}"] * 2})
    return out


class FakeServer:
    """Serves `cols` (a list of batches) to one client. With an arena, the
    columns in `big` go into it at increasing positions while the client's
    released prefix leaves room (the client acks after every batch: it has
    read all of them, so no room means inline, as the real server does);
    `script(pos, nbytes, N)` may override the region of each shm column
    (bad-region tests). `shm_header=False` ignores the arena (an old server)."""

    def __init__(self, cols, big=(CAM,), shm_header=True, script=None, bad_first=None):
        self.cols, self.big, self.shm_header, self.script = cols, big, shm_header, script
        self.d = tempfile.mkdtemp(prefix="lrs-shm-")
        self.path = os.path.join(self.d, "s.sock")
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(1)
        self.hello = None
        self.fds = 0
        self.seals = None
        self.size = None
        self.acks = []
        self.regions = []  # (batch, pos, nbytes)
        self.inline = []  # (batch, column) of big columns sent inline
        self.extra = b""  # bytes the client sent after the last ack
        self.error = None
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        try:
            self._serve()
        except BaseException as e:  # reported by join()
            self.error = e

    def join(self):
        self.t.join(10)
        self.srv.close()
        os.unlink(self.path)
        os.rmdir(self.d)
        assert not self.t.is_alive(), "the fake server hangs"
        if self.error:
            raise self.error

    def _serve(self):
        conn, _ = self.srv.accept()
        conn.settimeout(10)
        with conn:
            data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 4)
            self.fds = len(fds)
            u = msgpack.Unpacker(raw=False)
            u.feed(data)
            self.hello = next(u)
            mm = None
            if fds:
                self.seals = fcntl.fcntl(fds[0], fcntl.F_GET_SEALS)
                self.size = os.fstat(fds[0]).st_size
                if self.shm_header:
                    mm = mmap.mmap(fds[0], self.size)
                for fd in fds:
                    os.close(fd)
            h = header(batch_size=2)
            if self.big:
                h["features"] = [*h["features"], {"name": CAM, "dtype": "|u1", "shape": list(SHAPE[1:])}]
            if mm is not None:
                h["shm"] = True
            conn.sendall(msgpack.packb(h, use_bin_type=True))
            n = self.size or 0
            pos, released, seen = 0, 0, 0
            for s, cols in enumerate(self.cols):
                out = {}
                for k, v in cols.items():
                    if isinstance(v, np.ndarray) and k in self.big and mm is not None:
                        b = v.tobytes()
                        p = pos if pos % n + len(b) <= n else (pos // n + 1) * n  # never wraps past N
                        if self.script is not None:
                            p, ln = self.script(s, p, len(b), n)
                        else:
                            ln = len(b)
                        if self.script is not None or p + ln - released <= n:
                            if ln == len(b) and p % n + ln <= n:
                                mm[p % n:p % n + ln] = b
                            out[k] = {b"nd": True, b"type": v.dtype.str, b"kind": b"", b"shape": list(v.shape),
                                      b"shm": [p, ln]}
                            self.regions.append((s, p, ln))
                            pos = p + ln
                            continue
                        self.inline.append((s, k))
                    out[k] = nd(v) if isinstance(v, np.ndarray) else v
                conn.sendall(msgpack.packb({"type": "batch", "seq": s, "epoch": 0, "size": 2, "columns": out},
                                           use_bin_type=True))
                if mm is None:
                    continue
                # The client acks before it reads the next message.
                while True:
                    try:
                        a = u.unpack()
                        break
                    except msgpack.OutOfData:
                        chunk = conn.recv(64)
                        if not chunk:
                            return  # the client stopped (an error on its side)
                        u.feed(chunk)
                self.acks.append(a)
                seen, released = a
            conn.sendall(msgpack.packb(end(2 * len(self.cols)), use_bin_type=True))
            conn.settimeout(2)
            try:
                while True:  # nothing more may come (no ack after end); EOF when the client closes
                    chunk = conn.recv(64)
                    if not chunk:
                        break
                    self.extra += chunk
            except socket.timeout:
                pass
            self.extra += bytes(u.read_bytes(1 << 20))


def over_arena(a):
    """Whether an array views an mmap (the arena)."""
    while a is not None:
        if isinstance(a, memoryview):
            return isinstance(a.obj, mmap.mmap)
        a = getattr(a, "base", None)
    return False


def check(got, want):
    for g, w in zip(got, want):
        assert g.keys() == w.keys()
        for k, v in w.items():
            if isinstance(v, np.ndarray):
                assert g[k].dtype == v.dtype and g[k].shape == v.shape, k
                np.testing.assert_array_equal(g[k], v, k)
            else:
                assert g[k] == v


def test_arena_batches():
    """Camera columns come as arrays over the arena, equal to what was
    sent; every ack counts the batches read and releases every region of
    the batches the caller dropped; the hello carries the sealed memfd."""
    want = batches(12)
    srv = FakeServer(want)
    seen = []
    with lc.connect(srv.path, timeout=5, read_timeout=10, shm_bytes=1 << 20) as r:
        for b in r:
            check([b], [want[b.seq]])
            a = b[CAM]
            assert a.flags.writeable and not a.flags.owndata and isinstance(a.base.base.obj, mmap.mmap)
            seen.append(b.seq)
        assert r.end["samples"] == 24
    srv.join()
    assert seen == list(range(12))
    assert srv.hello["shm"] == 1 << 20 and srv.fds == 1 and srv.size == 1 << 20
    assert srv.seals & (fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL) == \
        fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
    assert not srv.inline and len(srv.regions) == 12
    # Ack k (sent before reading message k+1) comes after batch k: k+1
    # batches read; the loop's variable still holds batch k, so the
    # regions up to batch k-1's are released.
    ends = [p + n for _, p, n in srv.regions]
    assert srv.acks == [[k + 1, ends[k - 1] if k else 0] for k in range(12)]
    assert srv.extra == b""
    assert [p for _, p, _ in srv.regions] == [COL * k for k in range(12)]


def test_held_arrays_keep_content_while_the_ring_wraps():
    """Arrays, views and torch tensors the caller holds keep their bytes
    while the ring wraps many times: each batch is held (as an array, a
    tensor over it, a view) for the next 3 batches and checked when
    dropped; the server never writes a held region."""
    torch = pytest.importorskip("torch")
    want = batches(100, seed=1)
    srv = FakeServer(want)
    window, checked = [], 0
    with lc.connect(srv.path, timeout=5, read_timeout=10, shm_bytes=1 << 20) as r:  # 28 camera columns fit
        for b in r:
            s = b.seq
            kind = s % 3
            a = b[CAM]
            window.append((s, a if kind == 0 else torch.from_numpy(a) if kind == 1 else a[1:]))
            del a, b
            if len(window) > 3:
                s0, x = window.pop(0)
                x = x.numpy() if hasattr(x, "numpy") else x
                np.testing.assert_array_equal(x, want[s0][CAM][1:] if s0 % 3 == 2 else want[s0][CAM], f"batch {s0}")
                del x
                checked += 1
    srv.join()
    assert checked == 97
    assert not srv.inline and len(srv.regions) == 100
    assert srv.regions[-1][1] > 3 * (1 << 20), "the ring should wrap several times"
    # Released trails the window: after batch k it ends batch k-3's region.
    ends = [p + n for _, p, n in srv.regions]
    assert [rel for _, rel in srv.acks[3:]] == ends[:97]


def test_arrays_held_to_the_end():
    """Arrays of the first batches held until the end keep their bytes;
    the released prefix stops before them, so once the arena is full the
    later camera columns come inline (correct, slower)."""
    want = batches(40, seed=7)
    srv = FakeServer(want)
    held = []
    with lc.connect(srv.path, timeout=5, read_timeout=10, shm_bytes=1 << 20) as r:
        for b in r:
            if b.seq < 2:
                held.append(b[CAM])
            else:
                check([b], [want[b.seq]])
    srv.join()
    for s, a in enumerate(held):
        np.testing.assert_array_equal(a, want[s][CAM])
    assert all(rel == 0 for _, rel in srv.acks)
    assert len(srv.regions) == (1 << 20) // COL and srv.inline


def test_release_prefix_order():
    """released is the end of the longest prefix of unreferenced regions:
    holding batch 1 stops it before batch 1's region, whatever comes after;
    dropping it moves it past every later dropped region at once."""
    want = batches(6, seed=2)
    srv = FakeServer(want)
    keep = None
    with lc.connect(srv.path, timeout=5, read_timeout=10, shm_bytes=1 << 20) as r:
        for b in r:
            if b.seq == 1:
                keep = b[CAM]
            if b.seq == 4:
                keep = None
    srv.join()
    ends = [p + n for _, p, n in srv.regions]
    # The loop's variable holds the current batch at each ack.
    assert srv.acks == [[1, 0], [2, ends[0]], [3, ends[0]], [4, ends[0]], [5, ends[3]], [6, ends[4]]]
    assert keep is None


def test_holding_every_batch_goes_inline():
    """The caller holds every batch: once the arena is full the server
    sends camera columns inline (the client has read every batch: no
    deadlock), and every batch is correct."""
    want = batches(40, seed=3)
    srv = FakeServer(want)
    with lc.connect(srv.path, timeout=5, read_timeout=10, shm_bytes=1 << 20) as r:
        got = list(r)
    srv.join()
    check(got, want)
    assert len(srv.regions) == (1 << 20) // COL and len(srv.inline) == 40 - len(srv.regions)
    assert all(rel == 0 for _, rel in srv.acks)
    assert over_arena(got[0][CAM]) and not over_arena(got[-1][CAM])


def test_column_larger_than_the_arena():
    """A column larger than the arena always comes inline; still correct."""
    rng = np.random.default_rng(4)
    want = [{"index": np.arange(2, dtype="<i8"), CAM: rng.integers(0, 256, (2, 3, 480, 640), dtype=np.uint8)}
            for _ in range(3)]
    srv = FakeServer(want)
    with lc.connect(srv.path, timeout=5, read_timeout=10, shm_bytes=1 << 20) as r:
        got = list(r)
    srv.join()
    check(got, want)
    assert not srv.regions and len(srv.inline) == 3


@pytest.mark.parametrize("kw", [{"shm_bytes": 0}, {}])
def test_plain_socket(kw):
    """shm_bytes=0: the plain hello (no key, no fd). A server whose header
    lacks "shm" (an old server, a replay): the arena is dropped, nothing is
    acked, batches are as before."""
    want = batches(5, seed=5)
    srv = FakeServer(want, shm_header=False)
    with lc.connect(srv.path, timeout=5, read_timeout=10, **kw) as r:
        got = list(r)
    srv.join()
    check(got, want)
    assert ("shm" in srv.hello) == (srv.fds == 1) == ("shm_bytes" not in kw)
    assert srv.acks == [] and srv.extra == b""
    assert not any(over_arena(b[CAM]) for b in got)


def _bad_after(first):
    """A script that gives batch 0 a good region and batch 1 `first`."""
    def script(s, p, n, size):
        return (p, n) if s == 0 else first(p, n, size)
    return script


@pytest.mark.parametrize("name,script,match", [
    ("overlaps the previous region", _bad_after(lambda p, n, size: (p - 1, n)), "starts before the previous one ends"),
    ("runs past the arena's end", _bad_after(lambda p, n, size: (size - 100, n)), "runs past the arena's end"),
    ("size does not match the shape", _bad_after(lambda p, n, size: (p, n - 1)), "bytes in shared memory for shape"),
])
def test_bad_regions(name, script, match):
    want = batches(3, seed=6)
    srv = FakeServer(want, script=script)
    with lc.connect(srv.path, timeout=5, read_timeout=10, shm_bytes=1 << 20) as r:
        it = iter(r)
        check([next(it)], [want[0]])
        with pytest.raises(lc.ProtocolError, match=f"column '{CAM}'.*{match}"):
            next(it)
    srv.join()


def test_shm_column_without_arena():
    """A shm column on a connection whose header did not say shm is an error."""
    msgs = [header(batch_size=2), {"type": "batch", "seq": 0, "epoch": 0, "size": 2, "columns": {
        CAM: {b"nd": True, b"type": "|u1", b"kind": b"", b"shape": [2], b"shm": [0, 2]}}}, end(2)]
    data = b"".join(msgpack.packb(m, use_bin_type=True) for m in msgs)
    for src in (data, lambda: _socket_source(data)):
        src = src() if callable(src) else src
        try:
            with pytest.raises(lc.ProtocolError, match="shared memory"):
                list(lc.StreamReader(src))
        finally:
            if isinstance(src, socket.socket):
                src.close()  # the reader never closes a socket it was given


def _socket_source(data):
    a, b = socket.socketpair()
    b.sendall(data)
    b.close()
    return a


@pytest.mark.parametrize("size", [1, (1 << 20) - 1, (64 << 30) + 1, -1])
def test_bad_sizes(size):
    with pytest.raises(ValueError, match="shm_bytes"):
        lc.connect("/nonexistent/lrstream.sock", shm_bytes=size)
    torch_dataset = pytest.importorskip("lrstream_client.torch_dataset")
    with pytest.raises(ValueError, match="shm_bytes"):
        torch_dataset.LRStreamDataset("/nonexistent/lrstream.sock", shm_bytes=size)


def test_arena_bookkeeping():
    """ShmArena alone: arrays over the arena, release in position order,
    the ack message, copy mode."""
    a = rd.ShmArena(1 << 20)
    a.start({"shm": True})
    assert a.fd is None
    m = {b"nd": True, b"type": "<u2", b"kind": b"", b"shape": [4, 8]}
    x = a.array("c", {**m, b"shm": [0, 64]})
    y = a.array("c", {**m, b"shm": [(1 << 20) - 64, 64]})
    z = a.array("c", {**m, b"shm": [(1 << 20) + 10, 64]})  # wrapped: offset 10
    x[...] = 7
    np.testing.assert_array_equal(np.frombuffer(a._mm, "<u2", 32, 0), 7)
    assert a.release() == 0
    del x
    assert a.release() == 64
    v = z.T
    del z
    assert a.release() == 64  # y still held
    del y
    assert a.release() == (1 << 20) - 64 + 64  # z's view still holds z's region
    del v
    a.batches = 3
    assert msgpack.unpackb(a.ack()) == [3, (1 << 20) + 74]
    with pytest.raises(lc.ProtocolError, match="starts before"):
        a.array("c", {**m, b"shm": [100, 64]})
    c = rd.ShmArena(1 << 20, copy_alloc=lambda shape, dt, n: ((arr := np.empty(shape, dt)),
                                                               memoryview(arr.reshape(-1).view(np.uint8))))
    c.start({"shm": True})
    c._mm[0:64] = bytes(range(64))
    w = c.array("c", {**m, b"shm": [0, 64]})
    assert w.flags.owndata and w.tobytes() == bytes(range(64)) and c.release() == 64
    d = rd.ShmArena(1 << 20)
    assert not d.start({}) and d._mm is None and d.fd is None
    with pytest.raises(lc.ProtocolError, match="did not say"):
        d.array("c", {**m, b"shm": [0, 64]})


def test_size_rounded_up():
    """An arena size that is not a multiple of 4096 is rounded up (the
    server takes multiples of SHM_ALIGN only)."""
    srv = FakeServer(batches(1), shm_header=False)
    with lc.connect(srv.path, timeout=5, read_timeout=10, shm_bytes=(1 << 20) + 1) as r:
        list(r)
    srv.join()
    assert srv.hello["shm"] == srv.size == (1 << 20) + rd.SHM_ALIGN


def test_shm_stream_without_large_columns():
    """A stream whose columns are all too small to be placed keeps its
    msgpack path (read-only views of the received bytes, as before) on an
    shm connection, and still acks every batch."""
    want = [{k: v for k, v in b.items() if k != CAM} for b in batches(4, seed=8)]
    srv = FakeServer(want, big=())
    with lc.connect(srv.path, timeout=5, read_timeout=10, shm_bytes=1 << 20) as r:
        got = list(r)
        assert r.header["shm"] is True
    srv.join()
    check(got, want)
    assert not got[0]["observation.state"].flags.writeable
    assert srv.acks == [[k + 1, 0] for k in range(4)]


@pytest.mark.parametrize("features,bs,want", [
    ([{"name": "a", "dtype": "<f4", "shape": [6]}], 256, False),
    ([{"name": "a", "dtype": "<f4", "shape": [64]}], 256, True),  # exactly 64 KiB
    ([{"name": "a", "dtype": "<f4", "shape": [64]}], 255, False),
    ([{"name": "i", "dtype": "<i8", "shape": []}, {"name": "c", "dtype": "|u1", "shape": [3, 96, 128]}], 2, True),
    ([{"name": "x", "dtype": "nonsense", "shape": [1]}], 1, True),  # cannot size it: walk
    ([], 8, False),
])
def test_shm_columns(features, bs, want):
    assert rd.shm_columns({"features": features, "batch_size": bs}) is want


def test_server_that_reads_no_releases():
    """A server that stops reading the client's release messages (stopped,
    hung) fills the socket's buffer: the client's send waits like a read,
    bounded by read_timeout (TimeoutError), never forever."""
    d = tempfile.mkdtemp(prefix="lrs-shm-")
    path = os.path.join(d, "s.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    done = threading.Event()

    def serve():
        conn, _ = srv.accept()
        with conn:
            _, fds, _, _ = socket.recv_fds(conn, 1 << 16, 4)
            for fd in fds:
                os.close(fd)
            msgs = [header(batch_size=2, shm=True)] + [
                {"type": "batch", "seq": s, "epoch": 0, "size": 2, "columns": {"index": nd(np.arange(2))}}
                for s in range(20000)]
            try:
                for m in msgs:
                    conn.sendall(msgpack.packb(m, use_bin_type=True))
            except OSError:
                pass  # the client gave up
            done.wait(10)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    n = 0
    try:
        with pytest.raises(TimeoutError, match="release messages"):
            # read_timeout 3 s: on a loaded machine the fake server thread may not send for 1 s
            with lc.connect(path, timeout=5, read_timeout=3, shm_bytes=1 << 20) as r:
                for _ in r:
                    n += 1
    finally:
        done.set()
        t.join(10)
        srv.close()
        os.unlink(path)
        os.rmdir(d)
    assert 0 < n < 20000


def test_mutated_shm_messages():
    """Seeded byte mutations of a batch whose camera column is in the arena
    (and one inline): the walk yields batches or raises ProtocolError /
    TruncatedStreamError (a clear error), nothing else, never a region
    outside the arena."""
    import io
    import random

    good = msgpack.packb({"type": "batch", "seq": 0, "epoch": 0, "size": 2, "columns": {
        "index": nd(np.arange(2)),
        CAM: {b"nd": True, b"type": "|u1", b"kind": b"", b"shape": list(SHAPE), b"shm": [4096, COL]},
        "other": nd(np.zeros(SHAPE, np.uint8)),
        "task": ["a", "b"]}}, use_bin_type=True)
    rng = random.Random(11)
    outcomes = {}
    for i in range(600):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            p = rng.randrange(0, 120 if i % 2 else len(data))  # the heads, mostly
            data[p] = rng.randrange(256)
        arena = rd.ShmArena(1 << 20)
        arena.start({"shm": True})
        rm = rd.RawMessages(io.BytesIO(bytes(data)), decode=True)
        rm.walk(True)
        rm.shm = arena
        try:
            while True:
                m = rm.next()
                if not isinstance(m, dict):
                    break
                for v in (m.get("columns") or {}).values() if isinstance(m.get("columns"), dict) else ():
                    if isinstance(v, np.ndarray) and v.size:
                        v.reshape(-1)[[0, -1]]  # every array's memory is readable
            outcomes["ok"] = outcomes.get("ok", 0) + 1
        except lc.ProtocolError as e:
            outcomes["ProtocolError"] = outcomes.get("ProtocolError", 0) + 1
            assert "malformed" in str(e) or "lrstream" in str(e), e
    assert outcomes.get("ProtocolError", 0) > 50 and outcomes.get("ok", 0) > 50, outcomes


@pytest.mark.parametrize("change", [
    {b"type": [["a", "<i4"]]}, {b"type": "nonsense"}, {b"type": "|O"}, {b"shm": 5}, {b"shm": [1]}, {b"shm": ["a", "b"]},
    {b"shm": [-64, 64]}, {b"shm": [0, 2**70]}, {b"shape": 8}, {b"shape": [-1, -64]}, {b"shape": [8, "x"]},
    {b"kind": b"O"}, {b"shm": [0, 63]},
])
def test_bad_shm_maps(change):
    a = rd.ShmArena(1 << 20)
    a.start({"shm": True})
    m = {b"nd": True, b"type": "<u1", b"kind": b"", b"shape": [8, 8], b"shm": [0, 64], **change}
    with pytest.raises(lc.ProtocolError, match="column 'c'"):
        a.array("c", m)
    assert a.array("c", {b"nd": True, b"type": "<u1", b"kind": b"", b"shape": [8, 8], b"shm": [0, 64]}).shape == (8, 8)
