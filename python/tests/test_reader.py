import io
import os
import socket
import tempfile
import threading
import unittest

import msgpack
import numpy as np

import _util  # noqa: F401  (puts the package on sys.path)
from _util import batch, end, header, pack, stream

import lrstream_client as lc


class ReaderTest(unittest.TestCase):
    def test_batches(self):
        r = lc.StreamReader(stream(5, 2))
        self.assertEqual(r.header["format"], "lrstream/1")
        batches = list(r)
        self.assertEqual([b.size for b in batches], [2, 2, 1])
        self.assertEqual([b.seq for b in batches], [0, 1, 2])
        self.assertEqual(batches[2].resume, "tok2")
        idx = np.concatenate([b["index"] for b in batches])
        np.testing.assert_array_equal(idx, np.arange(5))
        st = batches[1]["observation.state"]
        self.assertEqual(st.dtype, np.float32)
        self.assertEqual(st.shape, (2, 3))
        np.testing.assert_array_equal(st[0], [2, 3, 4])
        self.assertEqual(batches[0]["messages"][1][0], {"role": "user", "content": "frame 1"})
        self.assertEqual(r.end["samples"], 5)

    def test_header_with_pins(self):
        # An object store dataset's header carries "pins" right after "revision" (docs/wire-format.md):
        # 1,000 files grouped by directory, as [name, size, hash].
        files = {f"data/chunk-{c:03d}": [[f"file-{i:03d}.parquet", 100_000_000 + i, f"{c:04x}{i:028x}"] for i in range(100)]
                 for c in range(10)}
        pins = [{"dataset": "s3://b/p", "revision": "a" * 40, "hash": "etag", "objects": 1003, "files": files}]
        h = header()
        h = {**{k: v for k, v in h.items() if k in ("type", "format", "lrstream_version", "dataset", "revision")},
             "pins": pins, **{k: v for k, v in h.items() if k not in ("type", "format", "lrstream_version", "dataset", "revision")}}
        msgs = [h, batch(0, 0, 2), batch(1, 2, 1), end(3)]
        r = lc.StreamReader(pack(*msgs))
        self.assertEqual(r.header["pins"], pins)
        self.assertEqual(r.header["fps"], 30)
        self.assertEqual([b.size for b in r], [2, 1])

    def test_zero_copy(self):
        b = next(iter(lc.StreamReader(stream(2, 2))))
        a = b["observation.state"]
        self.assertFalse(a.flags.owndata)
        self.assertIsInstance(a.base, (bytes, memoryview, np.ndarray))

    def test_file_and_path(self):
        data = stream(3, 2)
        with tempfile.NamedTemporaryFile(suffix=".msgpack", delete=False) as f:
            f.write(data)
        try:
            self.assertEqual(sum(b.size for b in lc.read_stream(f.name)), 3)
            with open(f.name, "rb") as fh:
                self.assertEqual(sum(b.size for b in lc.StreamReader(fh)), 3)
        finally:
            os.unlink(f.name)

    def test_small_reads(self):
        # A pipe delivering a few bytes at a time.
        class Slow(io.RawIOBase):
            def __init__(self, data):
                self.data, self.pos = data, 0

            def readable(self):
                return True

            def readinto(self, b):
                n = min(7, len(b), len(self.data) - self.pos)
                b[:n] = self.data[self.pos:self.pos + n]
                self.pos += n
                return n

        r = lc.StreamReader(Slow(stream(9, 4)), read_size=5)
        self.assertEqual(sum(b.size for b in r), 9)

    def test_error_message(self):
        data = pack(header(), batch(0, 0, 2), {"type": "error", "message": "render failed: episode 3"})
        r = lc.StreamReader(data)
        it = iter(r)
        self.assertEqual(next(it).size, 2)
        with self.assertRaisesRegex(lc.StreamError, "episode 3"):
            next(it)

    def test_lone_error(self):
        with self.assertRaisesRegex(lc.StreamError, "no such dataset"):
            lc.StreamReader(pack({"type": "error", "message": "no such dataset"})).header

    def test_truncated(self):
        data = stream(5, 2)
        for cut in (len(data) - 1, len(data) - len(pack(end(5))), len(data) // 2):
            with self.assertRaises(lc.TruncatedStreamError, msg=f"cut {cut}"):
                list(lc.StreamReader(data[:cut]))
        with self.assertRaises(lc.TruncatedStreamError):
            lc.StreamReader(b"").header

    def test_bad_format(self):
        with self.assertRaises(lc.ProtocolError):
            lc.StreamReader(pack(header(format="lrstream/2"), end(0))).header
        with self.assertRaises(lc.ProtocolError):
            list(lc.StreamReader(pack(batch(0, 0, 1))))

    def test_msgpack_numpy_compat(self):
        try:
            import msgpack_numpy
        except ImportError:
            self.skipTest("msgpack_numpy not installed")
        msgs = list(msgpack.Unpacker(io.BytesIO(stream(3, 2)), object_hook=msgpack_numpy.decode, raw=False))
        a = msgs[1]["columns"]["observation.state"]
        self.assertIsInstance(a, np.ndarray)
        self.assertEqual(a.shape, (2, 3))

    def test_socket(self):
        # The default offers a shared-memory arena (hello key "shm", with
        # the memfd; ignored by this server, whose header lacks "shm");
        # shm_bytes=0 sends the plain hello.
        want = {"worker": 1, "num_workers": 3, "rank": 0, "world_size": 2, "resume": "tokX"}
        shm = {"shm": lc.reader.SHM_BYTES} if lc.reader.shm_supported() else {}
        for kw, hello in (({}, {**want, **shm}), ({"shm_bytes": 0}, want)):
            with self.subTest(**kw):
                self.assertEqual(self._socket_hello(**kw), hello)

    def _socket_hello(self, **kw):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.sock")
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            srv.bind(path)
            srv.listen(1)
            got = {}

            def serve():
                conn, _ = srv.accept()
                with conn:
                    u = msgpack.Unpacker(raw=False)
                    while "hello" not in got:
                        u.feed(conn.recv(4096))
                        for m in u:
                            got["hello"] = m
                    conn.sendall(stream(4, 2))

            t = threading.Thread(target=serve)
            t.start()
            with lc.connect(path, worker=1, num_workers=3, rank=0, world_size=2, resume="tokX", timeout=5, **kw) as r:
                self.assertEqual(sum(b.size for b in r), 4)
            t.join()
            srv.close()
            return got["hello"]

    def test_live_stream_no_read_ahead_wait(self):
        # The producer waits for the client to see batch 0 before sending
        # more; a reader that blocks filling its buffer would deadlock.
        for kind in ("socket", "pipe"):
            a, b = socket.socketpair()
            seen = threading.Event()
            in_time = []
            data = stream(4, 2)
            first = pack(header(), batch(0, 0, 2))

            def produce():
                b.sendall(first)
                in_time.append(seen.wait(5))
                b.sendall(data[len(first):])
                b.close()

            t = threading.Thread(target=produce)
            t.start()
            src = a if kind == "socket" else os.fdopen(os.dup(a.fileno()), "rb")
            r = lc.StreamReader(src)
            sizes = []
            for bt in r:
                sizes.append(bt.size)
                seen.set()
            t.join()
            self.assertEqual(in_time, [True], f"{kind}: batch 0 was not delivered before more data arrived")
            self.assertEqual(sizes, [2, 2], kind)
            if kind == "pipe":
                src.close()
            a.close()

    def test_torch_lazy(self):
        import subprocess
        import sys

        # A fresh interpreter: other tests of this session import torch.
        code = "import lrstream_client, sys; assert 'lrstream_client.torch_dataset' not in sys.modules"
        subprocess.run([sys.executable, "-c", code], check=True,
                       env={**os.environ, "PYTHONPATH": os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")})
        try:
            import torch  # noqa: F401
        except ImportError:
            with self.assertRaises(ImportError):
                lc.LRStreamDataset
            return
        self.assertTrue(callable(lc.LRStreamDataset))


def _nd(a, over=None):
    a = np.ascontiguousarray(a)
    m = {b"nd": True, b"type": a.dtype.str, b"kind": b"", b"shape": list(a.shape), b"data": a.tobytes()}
    m.update(over or {})
    return m


def _msgpack_decoded(raw):
    """The reference: msgpack, then msgpack-numpy maps as arrays."""
    m = msgpack.unpackb(raw, raw=False)
    for k, v in m["columns"].items():
        if type(v) is dict and v.get(b"nd") is True and not v[b"kind"]:
            m["columns"][k] = np.frombuffer(v[b"data"], np.dtype(v[b"type"])).reshape(v[b"shape"])
    return m


class DecodeBatchBufferTest(unittest.TestCase):
    """decode_batch_buffer: the same message as msgpack's decoding, numeric
    columns as writable arrays of their own, whatever the layout."""

    big = np.arange(3 * 2 * 40 * 50, dtype=np.uint8).reshape(3, 2, 40, 50)
    cases = {
        "language batch": batch(4, 10, 3),
        "camera-like": {"type": "batch", "seq": 1, "epoch": 2, "size": 3, "resume": None,
                        "columns": {"index": _nd(np.arange(3, dtype="<i8")), "img": _nd(big),
                                    "messages": [[{"role": "user", "content": "x"}]] * 3}},
        "list before arrays": {"type": "batch", "seq": 0, "epoch": 0, "size": 2, "resume": "t",
                               "columns": {"task": ["a", "b"], "s": _nd(np.ones((2, 3), "<f4"))}},
        "columns first, keys after": {"columns": {"s": _nd(np.zeros((2, 0), "<f2"))}, "type": "batch",
                                      "seq": 300, "epoch": -1, "size": 2, "resume": "x" * 40},
        "many columns (map16)": {"type": "batch", "seq": 70000, "epoch": 0, "size": 1, "resume": None,
                                 "columns": {f"c{i}": _nd(np.array([i], "<i4")) for i in range(20)}},
        "bool, big-endian, 0-d": {"type": "batch", "seq": 0, "epoch": 0, "size": 1, "resume": None,
                                  "columns": {"b": _nd(np.array([True, False])), "be": _nd(np.array([1.5], ">f8")),
                                              "z": _nd(np.array(3, "<i8"))}},
        "bin type string": {"type": "batch", "seq": 0, "epoch": 0, "size": 2, "resume": None,
                            "columns": {"s": _nd(np.arange(2, dtype="<u2"), {b"type": b"<u2"})}},
        "structured kind (msgpack path)": {"type": "batch", "seq": 0, "epoch": 0, "size": 1, "resume": None,
                                           "columns": {"v": _nd(np.arange(2, dtype="<i4"), {b"kind": b"x"})}},
        "end message": end(7),
    }

    def test_same_as_msgpack(self):
        for name, msg in self.cases.items():
            with self.subTest(name):
                raw = msgpack.packb(msg, use_bin_type=True)
                want = msgpack.unpackb(raw, raw=False) if "columns" not in msg else _msgpack_decoded(raw)
                for buf, a, b in ((raw, 0, None), (bytearray(b"??" + raw + b"!"), 2, 2 + len(raw))):
                    got = lc.decode_batch_buffer(buf, a, b)
                    self.assertEqual(list(got), list(want))
                    for k, v in want.items():
                        if k != "columns":
                            self.assertEqual(got[k], v, k)
                    for k, v in (want.get("columns") or {}).items():
                        g = got["columns"][k]
                        if isinstance(v, np.ndarray):
                            self.assertIsInstance(g, np.ndarray, k)
                            self.assertTrue(g.flags.writeable and g.flags.owndata, k)
                            self.assertEqual((g.dtype, g.shape), (v.dtype, v.shape), k)
                            np.testing.assert_array_equal(g, v)
                        else:
                            self.assertEqual(g, v, k)

    def test_frame(self):
        """_frame (walk mode's framing): a whole message ends where msgpack
        says; every prefix asks for more, never less than it has."""
        from lrstream_client.reader import _frame, _frame_from

        extra = {"ext": msgpack.ExtType(5, b"abc"), "fixext": msgpack.ExtType(1, b"abcd"), "f": 1.5,
                 "big": 2**40, "neg": -2**20, "nested": [{"a": [1, None, True]}] * 20, "b": b"\x00" * 300}
        for name, msg in {**self.cases, "every type": extra}.items():
            with self.subTest(name):
                raw = msgpack.packb(msg, use_bin_type=True)
                buf = raw + b"\xc1tail"  # the next message's bytes follow
                self.assertEqual(_frame(buf, 0, len(buf)), (len(raw), 0))
                for cut in sorted({1, 2, 7, len(raw) // 2, len(raw) - 1, *range(0, len(raw), 97)} - {0}):
                    end, need = _frame(raw, 0, cut)
                    self.assertIsNone(end, cut)
                    self.assertTrue(cut < need <= len(raw), (cut, need))
                    # resumed where it stopped, over the whole buffer: the same end
                    _, _, p, todo = _frame_from(raw, 0, cut, 1)
                    self.assertLessEqual(p, need)
                    self.assertEqual(_frame_from(buf, p, len(buf), todo)[0], len(raw), cut)
        with self.assertRaisesRegex(lc.ProtocolError, "byte 0xc1"):
            _frame(b"\x91\xc1", 0, 2)

    def test_bad_messages(self):
        raw = msgpack.packb(self.cases["camera-like"], use_bin_type=True)
        short = _nd(np.arange(4, dtype="<i8"), {b"shape": [5]})
        for name, buf, a, b, match in [
            ("truncated", raw[:-10], 0, None, "truncated"),
            ("cut in an array", raw[:2000], 0, None, "truncated"),
            ("trailing bytes", raw + b"\x00", 0, None, "after its end"),
            ("array shorter than its shape", msgpack.packb({"type": "batch", "columns": {"a": short}}), 0, None,
             "buffer|size"),
            ("no type", msgpack.packb({"columns": {}}), 0, None, "without a type"),
        ]:
            with self.subTest(name), self.assertRaisesRegex((lc.ProtocolError, ValueError), match):
                lc.decode_batch_buffer(buf, a, b)

    def test_mutated_bytes(self):
        """Seeded byte mutations and cuts: the result is msgpack's decoding,
        or a ProtocolError/ValueError -- never another exception."""
        import random

        rng = random.Random(14)
        seeds = [msgpack.packb(m, use_bin_type=True) for m in self.cases.values()]
        for i in range(600):
            raw = bytearray(rng.choice(seeds))
            for _ in range(rng.randint(1, 3)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            if rng.random() < 0.3:
                raw = raw[:rng.randrange(1, len(raw))]
            raw = bytes(raw)
            try:
                got = lc.decode_batch_buffer(raw)
            except (lc.ProtocolError, ValueError):
                continue
            try:
                want = msgpack.unpackb(raw, raw=False)
            except Exception as e:  # the walker accepted what msgpack refuses
                self.fail(f"case {i}: decode_batch_buffer accepted {raw!r}, msgpack: {e}")
            self.assertEqual(sorted(got), sorted(want), i)


def camera_stream(batches=3, n=4, h=240, w=320, seed=5):
    """A stream of camera batches (two uint8 (n, 3, h, w) columns, 1.8 MB
    per batch by default: walk mode, between small numeric and message
    columns) in lrstream's layout, and its messages."""
    from _util import nd

    rng = np.random.default_rng(seed)
    feats = [{"name": "index", "dtype": "<i8", "shape": []}, {"name": "observation.state", "dtype": "<f4", "shape": [3]},
             {"name": "observation.images.top", "dtype": "|u1", "shape": [3, h, w]},
             {"name": "observation.images.wrist", "dtype": "|u1", "shape": [3, h, w]}]
    msgs = [header(features=feats, batch_size=n)]
    for i in range(batches):
        m = batch(i, i * n, n)
        cols = m["columns"]
        m["columns"] = {"index": cols["index"], "observation.state": cols["observation.state"],
                        "observation.images.top": nd(rng.integers(0, 256, (n, 3, h, w), dtype=np.uint8)),
                        "observation.images.wrist": nd(rng.integers(0, 256, (n, 3, h, w), dtype=np.uint8)),
                        **{k: v for k, v in cols.items() if k not in ("index", "observation.state")}}
        msgs.append(m)
    msgs.append(end(batches * n))
    return pack(*msgs), msgs


class WalkReceiveTest(unittest.TestCase):
    """Walk mode (streams of camera frames): each message is parsed as it
    arrives and large array payloads are received straight into their own
    arrays. The batches equal decode_batch_buffer's (the previous decoder)
    exactly, whatever the read sizes; arrays are writable, private, never
    views of the receive buffer; a cut stream never yields a partial batch."""

    raw, msgs = camera_stream()

    def want(self, raw=None, msgs=None):
        """The previous decoder's batches: decode_batch_buffer per message."""
        raw, msgs = (self.raw, self.msgs) if raw is None else (raw, msgs)
        out, pos = [], 0
        for m in msgs:
            n = len(msgpack.packb(m, use_bin_type=True))
            out.append(lc.decode_batch_buffer(raw, pos, pos + n))
            pos += n
        return out[1:-1]

    def assert_same(self, got, want):
        self.assertEqual(len(got), len(want))
        for g, w in zip(got, want):
            self.assertEqual(list(g), list(w["columns"]))
            for k, v in w["columns"].items():
                if isinstance(v, np.ndarray):
                    self.assertTrue(g[k].flags.writeable and g[k].flags.owndata, k)
                    self.assertEqual((g[k].dtype, g[k].shape), (v.dtype, v.shape), k)
                    np.testing.assert_array_equal(g[k], v, k)
                else:
                    self.assertEqual(g[k], v, k)

    def walk_socket(self, data, chunk, direct=None):
        """RawMessages over a socket in walk mode, the peer writing data in
        random pieces of at most chunk bytes: (batches, end or b"" or None,
        reads that landed in an array's memory)."""
        import random

        from lrstream_client import reader

        a, b = socket.socketpair()

        def write():
            rng, i = random.Random(chunk), 0
            try:
                while i < len(data):
                    k = rng.randint(1, chunk)
                    b.sendall(data[i:i + k])
                    i += k
            finally:
                b.close()

        t = threading.Thread(target=write)
        t.start()
        into_arrays = []
        rm = reader.RawMessages(a, decode=True, read_timeout=20)
        recv = rm._recv
        rm._recv = lambda mv: (into_arrays.append(1) if isinstance(mv.obj, np.ndarray) else None) or recv(mv)
        old = reader.DIRECT_BYTES
        if direct is not None:
            reader.DIRECT_BYTES = direct
        try:
            got, last = [], None
            h = rm.next()
            if isinstance(h, dict):
                self.assertEqual(h["type"], "header")
                rm.walk(True)
                while True:
                    m = rm.next()
                    if not isinstance(m, dict) or m["type"] != "batch":
                        last = m
                        break
                    bufs = np.frombuffer(rm._buf, np.uint8)
                    for k, v in m["columns"].items():
                        if isinstance(v, np.ndarray):
                            self.assertFalse(np.shares_memory(v, bufs), k)
                    got.append(m["columns"])
            else:
                last = h
        finally:
            reader.DIRECT_BYTES = old
            t.join()
            a.close()
        return got, last, len(into_arrays)

    def test_same_as_previous_decoder(self):
        want = self.want()
        for chunk in (1 << 20, 65536, 1000):
            with self.subTest(chunk=chunk):
                got, last, direct = self.walk_socket(self.raw, chunk)
                self.assert_same(got, want)
                self.assertEqual(last["type"], "end")
                self.assertGreater(direct, 0, "no payload was received into its array")
        raw, msgs = camera_stream(h=6, w=10)
        for chunk, direct in ((1, 1), (3, 1), (5, None), (50, 1)):  # every array head split anywhere
            with self.subTest(chunk=chunk, direct=direct):
                got, last, _ = self.walk_socket(raw, chunk, direct=direct)
                self.assert_same(got, self.want(raw, msgs))
                self.assertEqual(last["type"], "end")

    def test_stream_reader_pipe_and_file(self):
        """StreamReader walks camera streams from a pipe, a file, bytes."""
        want = self.want()
        r, w = os.pipe()
        t = threading.Thread(target=_write_all, args=(w, self.raw))
        t.start()
        with os.fdopen(r, "rb") as f:
            reader = lc.StreamReader(f)
            got = [dict(b) for b in reader]
            self.assertIsNotNone(reader._raw, "the pipe was not read in walk mode")
        t.join()
        self.assert_same(got, want)
        self.assertEqual(reader.end["samples"], 12)
        with tempfile.NamedTemporaryFile() as tf:
            tf.write(self.raw)
            tf.flush()
            self.assert_same([dict(b) for b in lc.StreamReader(tf.name)], want)
        self.assert_same([dict(b) for b in lc.StreamReader(self.raw)], want)

    def test_batches_are_private(self):
        """A batch's arrays keep their values when later batches are read
        and written to (nothing is a view of a reused buffer)."""
        reader = lc.StreamReader(io.BufferedReader(io.BytesIO(self.raw), 4096))
        it = iter(reader)
        first = next(it)
        keep = {k: v.copy() for k, v in first.items() if isinstance(v, np.ndarray)}
        for b in it:
            for v in b.values():
                if isinstance(v, np.ndarray):
                    v[...] = 0
                    self.assertFalse(any(np.shares_memory(v, f) for f in keep.values()))
        for k, v in keep.items():
            np.testing.assert_array_equal(first[k], v, k)

    def test_truncated(self):
        """Cut anywhere (inside a payload, an array's head, a message list,
        between messages): the complete batches before the cut, then
        TruncatedStreamError (b"" from RawMessages); never a partial batch."""
        sizes = [len(msgpack.packb(m, use_bin_type=True)) for m in self.msgs]
        starts = np.cumsum([0] + sizes)
        b1 = int(starts[1])  # the first batch
        img = self.raw.index(b"\xc6", b1 + 100)  # the first image's bin32 head
        cuts = {"in the header": 5, "after the header": b1, "in a batch's map head": b1 + 1,
                "in an array head": img - 3, "in a bin head": img + 2, "at a payload's start": img + 5,
                "in the first payload": img + 5 + 1000, "in the second payload": int(starts[2]) - 20000,
                "in the messages": int(starts[2]) - 30, "before the end": int(starts[-2]),
                "in the end": len(self.raw) - 1}
        want = self.want()
        for name, cut in cuts.items():
            complete = int(np.searchsorted(starts, cut, side="right")) - 2  # batches entirely before the cut
            with self.subTest(name):
                got, last, _ = self.walk_socket(self.raw[:cut], 1 << 16)
                self.assertEqual(last, None if cut in starts else b"")  # the end of the connection, or a partial message
                self.assert_same(got, want[:max(0, complete)])
                seen = []
                with self.assertRaises(lc.TruncatedStreamError):
                    for bt in lc.StreamReader(self.raw[:cut]):
                        seen.append(bt)
                self.assert_same(seen, want[:max(0, complete)])

    def test_bad_messages(self):
        """Malformed batches in a walked stream: a ProtocolError naming what
        is wrong."""
        from _util import nd

        h = self.msgs[0]
        short = nd(np.arange(4, dtype="<i8"))
        short[b"shape"] = [5]
        for name, bad, match in [
            ("array shorter than its shape", {"type": "batch", "columns": {"a": short}}, r"32 bytes of data for shape \[5\] of <i8"),
            ("not a map", [1, 2], "not a map"),
            ("column name not a str", {"type": "batch", "columns": {1: nd(np.zeros(2))}}, "column name 1"),
            ("no type", {"columns": {}}, "without a type"),
            ("bad dtype", {"type": "batch", "columns": {"a": {**nd(np.zeros(2)), b"type": "<zz"}}}, "bad array type"),
        ]:
            with self.subTest(name), self.assertRaisesRegex(lc.ProtocolError, match):
                list(lc.StreamReader(pack(h, bad, end(0))))

    def test_mutated_bytes(self):
        """Seeded byte mutations in the message heads: the walk gives the
        previous decoder's result, or a ProtocolError / ValueError /
        TruncatedStreamError -- never another exception, never a hang."""
        import random

        rng = random.Random(12)
        b1 = len(msgpack.packb(self.msgs[0], use_bin_type=True))
        heads = [i for i in range(b1, len(self.raw)) if i < b1 + 400 or self.raw[i] in (0xC6, 0x85, 0x94)]
        for i in range(150):
            raw = bytearray(self.raw)
            for _ in range(rng.randint(1, 2)):
                raw[rng.choice(heads)] = rng.randrange(256)
            raw = bytes(raw)
            try:
                got = [dict(b) for b in lc.StreamReader(raw)]
            except (lc.ProtocolError, ValueError, lc.StreamError):
                continue
            try:
                want = [m["columns"] for m in msgpack.Unpacker(io.BytesIO(raw), raw=False) if m.get("type") == "batch"]
            except Exception as e:  # the walk accepted what msgpack refuses
                self.fail(f"case {i}: the walk accepted a stream msgpack refuses: {e}")
            self.assertEqual([sorted(g) for g in got], [sorted(w) for w in want], i)


def _write_all(fd, data):
    with os.fdopen(fd, "wb") as f:
        f.write(data)

class ConnectReadTimeoutTest(unittest.TestCase):
    def test_read_timeout_says_so(self):
        """A server that accepts and sends nothing: connect's read_timeout
        ends the wait with a TimeoutError that says what timed out."""
        import time

        import lrstream_client as lc

        d = tempfile.mkdtemp(prefix="lrs-silent-")
        path = os.path.join(d, "silent.sock")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(path)
        srv.listen(1)
        conns = []
        t = threading.Thread(target=lambda: conns.append(srv.accept()), daemon=True)
        t.start()
        t0 = time.monotonic()
        try:
            with self.assertRaisesRegex(TimeoutError, r"sent nothing within the socket's timeout \(read_timeout\)"):
                with lc.connect(path, timeout=5, read_timeout=0.3, shm_bytes=0) as r:
                    r.header
            self.assertLess(time.monotonic() - t0, 3)
        finally:
            t.join(5)
            for c, _ in conns:
                c.close()  # the accepted connection (a ResourceWarning otherwise)
            srv.close()
            os.unlink(path)
            os.rmdir(d)


def test_reader_closes_the_file_it_opened_when_the_stream_is_over(tmp_path):
    """A StreamReader given a path closes its file once the stream ended
    (end, in-band error, truncation), without `with` (a ResourceWarning
    otherwise: the suites run with warnings as errors)."""
    import lrstream_client as lc
    from _util import header, pack, stream

    cases = {"end": (stream(5, 2), None), "error": (pack(header(), {"type": "error", "message": "boom"}), lc.StreamError),
             "truncated": (stream(5, 2)[:-10], lc.TruncatedStreamError)}
    for name, (data, exc) in cases.items():
        p = tmp_path / f"{name}.msgpack"
        p.write_bytes(data)
        r = lc.StreamReader(str(p))
        if exc is None:
            assert len(list(r)) == 3
        else:
            try:
                list(r)
            except exc:
                pass
            else:
                raise AssertionError(f"{name}: no {exc.__name__}")
        assert r._file.closed, name


if __name__ == "__main__":
    unittest.main()
