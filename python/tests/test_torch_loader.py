"""LRStreamDataset with real torch and torchdata DataLoaders against a real
`lrstream serve` on the demo dataset: exact checkpoints, epochs, len and
header, collation mistakes, writable tensors, server failures."""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time

import msgpack
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

from conftest import ROOT, SERVE_ARGS
from lrstream_client import LRStreamDataset, TruncatedStreamError
from lrstream_client.torch_dataset import LRStreamBatch


def indices(batches):
    return [tuple(b["index"].tolist()) for b in batches]


def epoch_of(server, epoch, nw=0):
    ds = LRStreamDataset(server)
    ds.set_epoch(epoch)
    return indices(DataLoader(ds, batch_size=None, num_workers=nw))


@pytest.mark.parametrize("kind,nw,persistent", [
    ("plain", 0, False), ("plain", 2, False), ("plain", 2, True), ("plain", 4, False),
    ("stateful", 0, False), ("stateful", 2, False), ("stateful", 2, True),
])
def test_exact_checkpoint(server, kind, nw, persistent):
    """Checkpoint after 7 batches (a break), resume in a new dataset and
    loader: epochs 1 and 2 are exactly the uninterrupted ones."""
    want = epoch_of(server, 1, nw) + epoch_of(server, 2, nw)
    Loader = DataLoader if kind == "plain" else StatefulDataLoader
    kw = dict(batch_size=None, num_workers=nw, persistent_workers=persistent if nw else False)
    ds = LRStreamDataset(server, num_workers=nw)
    ds.set_epoch(1)
    loader = Loader(ds, **kw)
    got = []
    for i, b in enumerate(loader):
        got.append(tuple(b["index"].tolist()))
        if i == 6:
            break
    state = ds.state_dict() if kind == "plain" else loader.state_dict()
    if kind == "plain":
        assert state["epoch"] == 1 and state["batches"] == 7
    del loader, ds
    gc.collect()
    ds = LRStreamDataset(server, num_workers=nw)
    loader = Loader(ds, **kw)
    if kind == "plain":
        ds.load_state_dict(state)
    else:
        loader.load_state_dict(state)
    for _ in range(2):  # the rest of epoch 1, then epoch 2
        got += indices(loader)
    assert got == want
    one_epoch = [i for b in got[:len(want) // 2] for i in b]
    assert len(one_epoch) == len(set(one_epoch)), "a frame served twice in one epoch"



def test_resume_with_another_cluster(server):
    """One rank: a mid-epoch checkpoint of 2 workers resumes exactly with 0
    or 3. Several ranks: a mid-epoch checkpoint resumes only with the same
    world_size and num_workers, refused with a message saying so."""
    want = epoch_of(server, 1, 0)  # the whole epoch; W workers leave out its last B mod W batches
    ds = LRStreamDataset(server, num_workers=2)
    ds.set_epoch(1)
    got = []
    for i, b in enumerate(DataLoader(ds, batch_size=None, num_workers=2)):
        got.append(tuple(b["index"].tolist()))
        if i == 4:
            break
    state = ds.state_dict()
    for nw in (0, 3):
        ds = LRStreamDataset(server, num_workers=nw)
        ds.load_state_dict(state)
        rest = indices(DataLoader(ds, batch_size=None, num_workers=nw))
        # the uninterrupted order of epoch 1 up to the last batch both runs serve
        assert len(want) - 3 < len(got + rest) <= len(want), nw
        assert got + rest == want[:len(got + rest)], nw
    multi = dict(state, num_workers=2, world_size=2)
    for kw, match in [(dict(world_size=1, rank=0), "world_size 2 cannot resume with world_size 1"),
                      (dict(world_size=2, rank=0, num_workers=1), "num_workers 2 x world_size 2 cannot resume")]:
        ds = LRStreamDataset(server, **kw)
        ds.load_state_dict(multi)
        with pytest.raises(ValueError, match=match):
            next(iter(ds))
    ds = LRStreamDataset(server, world_size=1, rank=0)
    ds.load_state_dict(dict(multi, batches=0))  # an epoch boundary: any cluster
    assert len(next(iter(ds))["index"]) == 8

def test_break_then_continue_persistent(server):
    """persistent_workers + break: the next loop continues with the first
    batch the loop did not take (prefetched batches are not lost)."""
    want = epoch_of(server, 0, 2)
    ds = LRStreamDataset(server)
    loader = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True, prefetch_factor=4)
    got = []
    for stop in (3, 4):
        for i, b in enumerate(loader):
            got.append(tuple(b["index"].tolist()))
            if i == stop:
                break
    got += indices(loader)
    assert got == want


@pytest.mark.parametrize("nw,persistent", [(0, False), (2, False), (2, True)])
def test_epochs_same_for_any_workers(server, nw, persistent):
    want = [epoch_of(server, e, nw) for e in range(3)]
    assert want[0] != want[1]  # shuffled per epoch
    ds = LRStreamDataset(server, num_workers=nw)
    loader = DataLoader(ds, batch_size=None, num_workers=nw, persistent_workers=persistent)
    for epoch in range(3):  # the documented loop, with set_epoch ...
        ds.set_epoch(epoch)
        assert indices(loader) == want[epoch]
    ds.set_epoch(0)
    for epoch in range(3):  # ... and without: each loop is the next epoch
        assert indices(loader) == want[epoch]
        assert all(b for b in want[epoch])


def test_len_and_header(server):
    for nw in (0, 2, 3):
        ds = LRStreamDataset(server, num_workers=nw)
        assert len(ds) == len(epoch_of(server, 0, nw)), nw
        assert len(DataLoader(ds, batch_size=None, num_workers=nw)) == len(ds)
    assert ds.fps == 10 and ds.recipe == "demo-recipe.yaml" and ds.batch_size == 8
    assert [f["name"] for f in ds.features][:5] == ["index", "episode_index", "frame_index", "timestamp", "task_index"]
    assert ds.tools is not None and isinstance(ds.revision, str) and ds.cameras == []
    with pytest.raises(TypeError, match="num_workers"):
        len(LRStreamDataset(server))


@pytest.mark.parametrize("header,want", [
    # a camera not under observation.images. (open_50 on the Hub names it "image")
    ({"features": [{"name": "image"}, {"name": "state"}],
      "cameras": [{"key": "image", "decoded": True}]}, ["image"]),
    # declared but not decoded (video files absent): no column, no camera
    ({"features": [{"name": "action"}],
      "cameras": [{"key": "observation.images.front", "decoded": False}]}, []),
    ({"features": [{"name": "observation.images.top"}, {"name": "observation.images.front"}],
      "cameras": [{"key": "observation.images.front", "decoded": True},
                  {"key": "observation.images.top", "decoded": True}]},
     ["observation.images.front", "observation.images.top"]),
    # no cameras key (a dataset without cameras, or an older server): by name
    ({"features": [{"name": "observation.images.front"}, {"name": "action"}]}, ["observation.images.front"]),
])
def test_cameras_from_header(header, want):
    ds = LRStreamDataset("/nonexistent/lrstream.sock")
    ds._header = header
    assert ds.cameras == want


def test_default_collation_is_refused(server):
    ds = LRStreamDataset(server)
    with pytest.raises(TypeError, match="batch_size=None"):
        next(iter(DataLoader(ds)))
    with pytest.raises(Exception, match="batch_size=None"):
        next(iter(DataLoader(ds, batch_size=4, num_workers=1)))


def test_tensors_writable_and_private():
    """A 1-byte column written in place must not touch the received bytes
    (CPython caches b'\\x00')."""
    msg = {"type": "batch", "seq": 0, "epoch": 0, "size": 1, "resume": None,
           "columns": {"flag": {b"nd": True, b"type": "|u1", b"kind": b"", b"shape": [1], b"data": b"\x00"},
                       "task": ["t"]}}
    b = LRStreamBatch(msgpack.packb(msg, use_bin_type=True), "none", 0, 0, 1, "", 0, 0, 1, 1, None)
    t = b["flag"]
    t[0] = 7
    assert b"\x00"[0] == 0 and bytes(1) == b"\x00"
    assert b["flag"].tolist() == [7]


def test_columns_become_tensors_once(server):
    """A numeric column becomes a tensor when first read, once: every later
    read (item, get, items, dict) gives that same tensor; lists stay lists."""
    b = next(iter(DataLoader(LRStreamDataset(server), batch_size=None)))
    idx = b["index"]
    idx[0] = -5
    assert b.get("index") is idx and dict(b)["index"] is idx and b.to_dict()["index"] is idx
    assert all(isinstance(v, torch.Tensor) for k, v in b.items() if k in {f["name"] for f in LRStreamDataset(server).features})
    assert isinstance(b["messages"], list) and b.get("no such column", 7) == 7
    assert b["index"][0] == -5

def test_batches_pickle_as_bytes(server):
    """Workers hand over raw bytes of batches without large numeric columns
    (decoded in the main process)."""
    ds = LRStreamDataset(server)
    b = next(iter(DataLoader(ds, batch_size=None, num_workers=1)))
    assert isinstance(b, LRStreamBatch) and isinstance(b.raw, bytes) and len(b.raw) > 0
    assert "messages" in b and isinstance(b["messages"], list)



@pytest.mark.parametrize("nw,direct", [(0, 1), (0, 1 << 16), (2, 1), (2, 1 << 16)])
def test_walked_batches_equal_msgpack_decoding(server, monkeypatch, nw, direct):
    """Batches of large numeric columns (camera frames) are walked as they
    arrive, array payloads of at least `direct` bytes received straight
    into their arrays -- in DataLoader workers, into tensors in shared
    memory that reach the main process by file descriptor: forced here for
    every batch, the same tensors and lists as msgpack's decoding; writable
    and private."""
    import lrstream_client.reader as reader
    import lrstream_client.torch_dataset as td

    def first(n):
        ds = LRStreamDataset(server)
        ds.set_epoch(1)
        out = []
        for b in DataLoader(ds, batch_size=None, num_workers=nw):
            out.append(b.to_dict())
            if len(out) == n:
                return out

    want = first(4)
    monkeypatch.setattr(td, "WALK_BYTES", 1)
    monkeypatch.setattr(reader, "DIRECT_BYTES", direct)
    walked = []
    orig = td.decode_batch_buffer
    counting = lambda *a: walked.append(1) or orig(*a)  # noqa: E731
    monkeypatch.setattr(td, "decode_batch_buffer", counting)  # a worker's bytes, decoded in the main process
    orig_walk = reader.RawMessages._walk_message
    monkeypatch.setattr(reader.RawMessages, "_walk_message", lambda self: walked.append(1) or orig_walk(self))
    got = first(4)
    # Workers walk in their own processes (the counter above counts in this one).
    assert walked or nw, "neither the walk nor decode_batch_buffer was used"
    for w, g in zip(want, got):
        assert w.keys() == g.keys()
        for k, v in w.items():
            if isinstance(v, torch.Tensor):
                assert g[k].dtype == v.dtype and torch.equal(g[k], v), k
                # In a worker every payload of >= direct bytes was received into shared memory.
                assert g[k].is_shared() == (nw > 0 and g[k].nbytes >= direct), (k, g[k].nbytes)
                g[k].add_(1)  # writable, and private: the next batch's data is untouched
            else:
                assert g[k] == v, k


SERVER_FAIL = textwrap.dedent("""
    import os, signal, sys, time
    sys.path.insert(0, {py!r})
    from torch.utils.data import DataLoader
    from lrstream_client import LRStreamDataset
    ds = LRStreamDataset(serve_args={args!r}, lrstream={bin!r}, read_timeout=60)
    it = iter(DataLoader(ds, batch_size=None, num_workers={nw}))
    next(it)
    os.kill(ds._server_pid, signal.{sig})
    t0 = time.monotonic()
    try:
        while True:
            next(it)
    except Exception as e:
        print("ERROR", round(time.monotonic() - t0, 2), type(e).__name__, " | ".join(str(e).splitlines()))
    if {sig!r} == "SIGSTOP":
        os.kill(ds._server_pid, signal.SIGCONT)
""")


@pytest.mark.parametrize("sig,nw", [("SIGKILL", 0), ("SIGKILL", 2), ("SIGSTOP", 0), ("SIGSTOP", 2)])
def test_server_failure_reaches_loop(lrstream_bin, sig, nw):
    # The kill must land mid-epoch: small batches, and samples large enough (a 200-step
    # action chunk, ~5 KB each, ~6 MB an epoch) that an epoch cannot sit whole in the socket
    # and client buffers by the time the signal arrives (otherwise the epoch simply ends).
    args = ["--batch-size", "1", "--mode", "fallback", "--epochs", "0", "--cameras", "none",
            "--delta-timestamps", "action=0:200/10"]
    code = SERVER_FAIL.format(py=os.path.join(ROOT, "python"), args=args, bin=lrstream_bin, nw=nw, sig=sig)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    line = [l for l in out.stdout.splitlines() if l.startswith("ERROR")]
    assert line, out.stdout + out.stderr
    _, secs, kind, text = line[0].split(" ", 3)
    # Reported by the client's watchdog (a dead or stopped server within ~1.5 s), not by
    # read_timeout (60 s); the margin is for a loaded machine (3.4 s seen at load 8).
    assert float(secs) < 20.0, line
    assert "lrstream serve (pid" in text and ("gone" in text or "killed" in text or "stopped" in text), line


def test_spawned_server_ends_with_dataset(lrstream_bin):
    ds = LRStreamDataset(serve_args=SERVE_ARGS, lrstream=lrstream_bin)
    assert len(next(iter(ds))["index"]) == 8
    proc = ds._proc
    loader = DataLoader(ds, batch_size=None, num_workers=2)
    next(iter(loader))  # forked workers must not disturb the server (no ECHILD)
    assert proc.poll() is None
    del ds, loader
    gc.collect()
    assert proc.wait(10) is not None



KILLED_PARENT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {py!r})
    from torch.utils.data import DataLoader
    from lrstream_client import LRStreamDataset
    ds = LRStreamDataset(serve_args={args!r}, lrstream={bin!r})
    it = iter(DataLoader(ds, batch_size=None, num_workers=2))
    next(it)
    print("SERVER", ds._server_pid, flush=True)
    time.sleep(60)
""")


def test_spawned_server_ends_when_python_is_killed(lrstream_bin):
    """SIGKILL of the training process (no finalizer, no atexit) still ends
    the server it spawned (PR_SET_PDEATHSIG), with DataLoader workers alive."""
    code = KILLED_PARENT.format(py=os.path.join(ROOT, "python"), args=SERVE_ARGS, bin=lrstream_bin)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("SERVER "), line
        pid = int(line.split()[1])
        assert _alive(pid)
        p.kill()
        p.wait()
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), f"lrstream serve (pid {pid}) outlived the SIGKILLed process that spawned it"
    finally:
        p.kill()
        p.wait()
        p.stdout.close()


def _alive(pid):
    """pid exists and is not a zombie (an orphan is reaped by init)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return False
    return data[data.rindex(b")") + 2:data.rindex(b")") + 3] not in (b"Z", b"X")

DDP = textwrap.dedent("""
    import os, sys, json
    sys.path.insert(0, {py!r})
    import torch, torch.distributed as dist
    from torch.utils.data import DataLoader
    from lrstream_client import LRStreamDataset
    dist.init_process_group("gloo")
    r = dist.get_rank()
    def run(state=None, stop=None):
        ds = LRStreamDataset({sock!r}, num_workers=2)
        if state: ds.load_state_dict(state)
        else: ds.set_epoch(1)
        got = []
        for i, b in enumerate(DataLoader(ds, batch_size=None, num_workers=2)):
            got.append(b["index"].tolist())
            if i == stop: break
        return got, ds.state_dict()
    full, _ = run()
    part, st = run(stop=4)
    rest, _ = run(st)
    assert part + rest == full, (r, len(part), len(rest), len(full))
    out = [None, None]
    dist.all_gather_object(out, [i for b in full for i in b])
    if r == 0:
        assert not set(out[0]) & set(out[1]), "ranks overlap"
        print("DDP-OK", len(out[0]), len(out[1]))
    dist.destroy_process_group()
""")


def test_ddp_two_ranks(server, tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(DDP.format(py=os.path.join(ROOT, "python"), sock=server))
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "--master-port", "29517", str(script)], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0 and "DDP-OK" in out.stdout, out.stdout[-3000:] + out.stderr[-3000:]


def test_connect_and_read_timeouts(tmp_path):
    import socket
    import threading

    ds = LRStreamDataset(str(tmp_path / "none.sock"), connect_timeout=0.3)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="connect_timeout"):
        next(iter(ds))
    assert time.monotonic() - t0 < 2
    path = str(tmp_path / "silent.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    conns = []
    t = threading.Thread(target=lambda: conns.append(srv.accept()), daemon=True)
    t.start()
    ds = LRStreamDataset(path, read_timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="read_timeout"):
        next(iter(ds))
    assert time.monotonic() - t0 < 2
    t.join(5)
    for c, _ in conns:
        c.close()
    srv.close()


CAM = "observation.images.cam"


def _camera_batch(seq):
    rng = np.random.default_rng(seq)
    return {"type": "batch", "seq": seq, "epoch": 0, "size": 8, "resume": None,
            "columns": {"index": _nd(np.arange(8 * seq, 8 * seq + 8, dtype="<i8")),
                        CAM: _nd(rng.integers(0, 256, (8, 3, 256, 256), dtype=np.uint8)),
                        "messages": [[{"role": "user", "content": f"s{seq}"}]] * 8}}


def _nd(a):
    return {b"nd": True, b"type": a.dtype.str, b"kind": b"", b"shape": list(a.shape), b"data": a.tobytes()}


def _fake_camera_server(path, cut_seq):
    """A socket server sending each worker its batches (seq worker, worker +
    2, ...) of a 4-batch epoch of camera-sized batches (1.5 MiB payloads:
    walked); the connection asking for batch cut_seq gets it cut inside the
    camera payload and is closed."""
    import socket
    import threading

    head = {"type": "header", "format": "lrstream/1", "lrstream_version": "test", "dataset": "d", "revision": "r",
            "fps": 30, "recipe": "x.yaml", "recipe_sha256": "0" * 64, "mode": "fallback", "batch_size": 8,
            "features": [{"name": "index", "dtype": "<i8", "shape": []},
                         {"name": CAM, "dtype": "|u1", "shape": [3, 256, 256]}],
            "tools": None, "training": {"fingerprint": "fp", "epoch_batches": 4, "consumers": 2}}
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)

    def serve(c):
        try:
            _serve(c)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the loader stopped reading (a checkpoint's break, a cut stream): expected

    def _serve(c):
        with c:
            h = msgpack.Unpacker(raw=False)
            h.feed(c.recv(4096))
            w = next(h)
            c.sendall(msgpack.packb(head, use_bin_type=True))
            for seq in range(w.get("next", 0), 4, w["num_workers"]):
                m = msgpack.packb(_camera_batch(seq), use_bin_type=True)
                if seq == cut_seq:
                    c.sendall(m[:m.index(CAM.encode()) + 100_000])  # inside the payload
                    return
                c.sendall(m)
            c.sendall(msgpack.packb({"type": "end"}, use_bin_type=True))

    def accept():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return srv


def _stop(srv):
    """Stops a fake server: shutdown wakes its accept thread (close alone
    leaves it blocked for the session, and every later fork() of a
    DataLoader warns about a multi-threaded process)."""
    import socket

    try:
        srv.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    srv.close()


@pytest.mark.parametrize("cut", [None, 2])
def test_worker_camera_batches(tmp_path, cut):
    """Camera-sized batches with 2 workers: tensors in shared memory equal
    to what was sent (pixels, index, messages), each its own storage (a
    write to one changes no other; a worker's batch survives its next
    ones); a stream cut inside a frame raises after the complete batches
    and never yields a partial one."""
    path = str(tmp_path / "cam.sock")
    srv = _fake_camera_server(path, cut)
    try:
        ds = LRStreamDataset(path, num_workers=2, read_timeout=30)
        got = []
        it = iter(DataLoader(ds, batch_size=None, num_workers=2))
        if cut is None:
            got = list(it)
        else:
            got = [next(it), next(it)]  # seq 0 (worker 0), seq 1 (worker 1); worker 0's seq 2 is cut
            with pytest.raises(TruncatedStreamError, match="without an 'end' message"):
                next(it)
        assert [b["_lrstream"]["index"] for b in got] == list(range(len(got))) and len(got) == (4 if cut is None else 2)
        for b in got:
            assert b[CAM].is_shared() and not b["index"].is_shared()  # 64 bytes: pickled by value
        ptrs = {b[CAM].untyped_storage().data_ptr() for b in got}
        assert len(ptrs) == len(got)
        for b in got[1:]:
            b[CAM].zero_()
        for i, b in enumerate(got):
            want = _camera_batch(i)["columns"]
            assert b["index"].tolist() == list(range(8 * i, 8 * i + 8))
            assert b["messages"] == want["messages"]
            if i == 0:  # untouched by the writes to the later batches
                assert b[CAM].numpy().tobytes() == want[CAM][b"data"]
            else:
                assert not b[CAM].any()
    finally:
        _stop(srv)


@pytest.mark.parametrize("dt,shared", [("|u1", True), ("<f4", True), ("<i8", True), ("<f2", True), ("|b1", True),
                                       (">f4", False), ("|V4", False)])
def test_shared_alloc(dt, shared):
    """The workers' allocator: a tensor of the dtype in shared memory of its
    own, filled through the byte view; a dtype torch lacks (big-endian,
    void) gets a numpy array instead."""
    from lrstream_client.torch_dataset import shared_alloc

    dt = np.dtype(dt)
    want = np.arange(2 * 3 * dt.itemsize, dtype=np.uint8)
    v, mv = shared_alloc([2, 3], dt, want.nbytes)
    v2, _ = shared_alloc([2, 3], dt, want.nbytes)
    mv[:] = want.tobytes()
    got = v.numpy() if shared else v
    assert isinstance(v, torch.Tensor) == shared and got.shape == (2, 3) and got.dtype.itemsize == dt.itemsize
    assert got.tobytes() == want.tobytes()
    if shared:
        assert v.is_shared() and v2.is_shared() and v.untyped_storage().data_ptr() != v2.untyped_storage().data_ptr()
        assert v.dtype == torch.from_numpy(np.empty(0, dt)).dtype


def test_shared_alloc_without_private_constructor(monkeypatch):
    """A torch without UntypedStorage._new_shared: the allocator moves a
    fresh tensor into shared memory instead (same result, own storage)."""
    from lrstream_client.torch_dataset import shared_alloc

    monkeypatch.setattr(torch.UntypedStorage, "_new_shared", None, raising=False)
    want = np.arange(2 * 3 * 4, dtype=np.uint8)
    v, mv = shared_alloc([2, 3, 4], np.dtype(np.uint8), want.nbytes)
    v2, _ = shared_alloc([2, 3, 4], np.dtype(np.uint8), want.nbytes)
    mv[:] = want.tobytes()
    assert v.is_shared() and v2.is_shared() and v.untyped_storage().data_ptr() != v2.untyped_storage().data_ptr()
    assert v.numpy().tobytes() == want.tobytes() and tuple(v.shape) == (2, 3, 4)


def test_worker_camera_resume(tmp_path):
    """Walked (camera) batches through 2 workers keep exact positions: a
    checkpoint after one consumed batch resumes at the next one, whose
    frames are the ones sent for it."""
    path = str(tmp_path / "cam.sock")
    srv = _fake_camera_server(path, None)
    try:
        ds = LRStreamDataset(path, num_workers=2, read_timeout=30)
        for b in DataLoader(ds, batch_size=None, num_workers=2):
            assert b["_lrstream"]["index"] == 0
            break
        state = ds.state_dict()
        assert (state["epoch"], state["batches"]) == (0, 1)
        ds = LRStreamDataset(path, num_workers=2, read_timeout=30)
        ds.load_state_dict(state)
        got = list(DataLoader(ds, batch_size=None, num_workers=2))
        assert [b["_lrstream"]["index"] for b in got] == [1, 2, 3]
        for b in got:
            i = b["_lrstream"]["index"]
            assert b[CAM].is_shared() and b[CAM].numpy().tobytes() == _camera_batch(i)["columns"][CAM][b"data"]
        st = ds.state_dict()  # the whole epoch consumed; the next loop is epoch 1
        assert (st["epoch"], st["batches"], st["epoch_batches"], ds.epoch) == (0, 4, 4, 1)
    finally:
        _stop(srv)
