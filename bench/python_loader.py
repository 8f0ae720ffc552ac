#!/usr/bin/env python3
"""Python client through torch: samples/s delivered to the training loop by
LRStreamDataset + DataLoader, against the bare reader (lrstream_client.connect)
on the same server and epoch, with CPU seconds per sample. See
docs/performance.md ("Python client") and docs/python.md.

    python bench/python_loader.py --lrstream ./lrstream --workers 0,1,2 -- \
        --dataset /tmp/bench300k --recipe ../shared/recipes/subtask_mem_vqa_speech.yaml --batch-size 256

Everything after `--` is passed to `lrstream serve` (the training order is
used: every configuration reads epoch 0 of the same order). Each training
step touches what a step touches: every sample's messages, two tensors
(index, action) and one byte per page of every camera tensor.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from lrstream_client import connect  # noqa: E402


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def server_cpu(pid):
    """CPU seconds of the server process so far, its exited children (FFmpeg) included."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


PAGE = 4096


def step(batch):
    """What a training step reads of a batch (the same in every configuration): the messages,
    two columns, and one byte of every 4 KiB page of each camera column (a copy to the GPU
    reads them all: with DataLoader workers the main process maps the shared pages on first
    touch). Returns the batch's sample count."""
    idx = batch["index"]
    for m in batch.get("messages") or ():
        len(m)
    idx.sum()
    batch.get("action")
    for k in batch.keys():
        if k.startswith("observation.images."):
            batch[k].reshape(-1)[::PAGE].sum()
    return len(idx)


def bare(sock):
    c0, t0 = time.process_time(), time.perf_counter()
    samples = 0
    with connect(sock, timeout=60, epoch=0) as reader:
        for batch in reader:
            samples += step(batch)
    return samples, time.perf_counter() - t0, time.process_time() - c0, 0.0


def loader(sock, workers):
    """workers None: the dataset iterated directly, without a DataLoader."""
    from torch.utils.data import DataLoader

    from lrstream_client import LRStreamDataset

    ds = LRStreamDataset(sock, num_workers=workers or 0)
    dl = ds if workers is None else DataLoader(ds, batch_size=None, num_workers=workers)
    c0, k0, t0 = time.process_time(), children_cpu(), time.perf_counter()
    samples = 0
    for batch in dl:
        samples += step(batch)
    del dl  # workers exit: their CPU is counted in RUSAGE_CHILDREN
    return samples, time.perf_counter() - t0, time.process_time() - c0, children_cpu() - k0


def stream(lrstream, args, samples):
    """`lrstream stream ARGS > /dev/null`: the same epoch without a client
    (its samples are the bare reader's: same dataset, flags and order)."""
    k0, t0 = children_cpu(), time.perf_counter()
    with open(os.devnull, "wb") as null:
        subprocess.run([lrstream, "stream", "-q", *args], stdout=null, check=True)
    return samples, time.perf_counter() - t0, 0.0, children_cpu() - k0


REPLAY = """
import os, socket, sys
rec, path = sys.argv[1], sys.argv[2]
size = os.path.getsize(rec)
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
srv.listen(8)
while True:
    c, _ = srv.accept()
    if os.fork() == 0:
        c.recv(4096)  # the hello: every client gets the recorded stream
        with open(rec, "rb") as f:
            off = 0
            while off < size:
                off += os.sendfile(c.fileno(), f.fileno(), off, size - off)
        os._exit(0)
    c.close()
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
"""


def record(sock, path):
    """Epoch 0 as the server sends it to one client (hello epoch 0, next 0)."""
    import socket

    from lrstream_client import hello

    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(hello(0, 1, 0, 1, epoch=0, next=0))
    with open(path, "wb") as f:
        while True:
            b = s.recv(1 << 20)
            if not b:
                break
            f.write(b)
    s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lrstream", default="lrstream")
    ap.add_argument("--workers", default="direct,0,2",
                    help="DataLoader num_workers values to measure; 'direct': the dataset without a DataLoader")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stream", action="store_true",
                    help="also time `lrstream stream SERVE_ARGS > /dev/null` (the server-side ceiling)")
    ap.add_argument("--replay", action="store_true",
                    help="record epoch 0 once, then serve the recording from a minimal process (sendfile): "
                         "the client is the bottleneck, not the server's CPU (not for --workers N>0: each "
                         "worker asks for its own share)")
    ap.add_argument("--gc-freeze", action="store_true",
                    help="gc.freeze() after importing torch (what docs/python.md advises after building the model)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("serve_args", nargs="*")
    a = ap.parse_args()
    # torch first, so that every configuration runs in the same process: the
    # client's CPU per sample includes Python's full garbage collections,
    # whose cost grows with the live objects (torch's import alone adds
    # ~140k); a bare-reader round before the import would look ~1 µs/sample
    # cheaper.
    import torch  # noqa: F401

    from lrstream_client import LRStreamDataset  # noqa: F401

    if a.gc_freeze:
        import gc

        gc.freeze()

    tmp = tempfile.mkdtemp(prefix="lrs-bench-")
    sock = os.path.join(tmp, "s.sock")
    proc = subprocess.Popen([a.lrstream, "serve", "--socket", sock, "--epochs", "0", *a.serve_args],
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        warm = bare(sock)  # warm the server's keep index
        replay = None
        if a.replay:
            rec = os.path.join(tmp, "epoch0.msgpack")
            record(sock, rec)
            proc.terminate()
            proc.wait()
            sock = os.path.join(tmp, "replay.sock")
            replay = proc = subprocess.Popen([sys.executable, "-c", REPLAY, rec, sock])
            while not os.path.exists(sock):
                time.sleep(0.05)
        # Configurations alternate, a.rounds times; each keeps its best round
        # (least CPU per sample, main process + children): on a shared machine the load drifts.
        runs = [("bare reader", lambda: bare(sock))]
        for w in a.workers.split(","):
            if w == "direct":
                runs.append(("LRStreamDataset, no DataLoader", lambda: loader(sock, None)))
            elif replay is None or int(w) == 0:
                runs.append((f"DataLoader num_workers={w}", lambda w=int(w): loader(sock, w)))
        if a.stream:
            runs.append(("lrstream stream > /dev/null", lambda: stream(a.lrstream, a.serve_args, warm[0])))
        best, all_, srv = {}, {}, {}
        for _ in range(a.rounds):
            for name, f in runs:
                s0 = server_cpu(proc.pid)
                r = f()
                srv.setdefault(name, []).append((server_cpu(proc.pid) - s0) / r[0])
                all_.setdefault(name, []).append(r)
                if name not in best or (r[2] + r[3]) / r[0] < (best[name][2] + best[name][3]) / best[name][0]:
                    best[name] = r
        rows = [(name, *best[name]) for name, _ in runs]
    finally:
        proc.terminate()
        proc.wait()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)

    def median_rate(name):
        v = sorted(n / dt for n, dt, _, _ in all_[name])
        return v[len(v) // 2]

    base, base_cpu, base_med = rows[0][1] / rows[0][2], rows[0][3] / rows[0][1], median_rate(rows[0][0])
    st = [r for r in rows if r[0].startswith("lrstream stream")]
    out = []
    for name, n, dt, cpu, wcpu in rows:
        is_stream = name.startswith("lrstream stream")
        r = {"config": name, "samples": n, "seconds": round(dt, 3), "samples_per_sec": round(n / dt),
             "ratio_to_bare": round(n / dt / base, 3),
             "median_samples_per_sec": round(median_rate(name)),
             "median_ratio_to_bare": round(median_rate(name) / base_med, 3),
             "main_cpu_us_per_sample": round(cpu / n * 1e6, 3),
             "child_cpu_us_per_sample": round(wcpu / n * 1e6, 3),
             # the server's CPU per sample, median round (not the stream row: another process)
             "server_cpu_us_per_sample": None if is_stream else round(sorted(srv[name])[len(srv[name]) // 2] * 1e6),
             "cpu_ratio": None if is_stream else round(base_cpu / ((cpu + wcpu) / n), 3)}
        if st:
            r["ratio_to_stream"] = round(n / dt / (st[0][1] / st[0][2]), 3)
            r["median_ratio_to_stream"] = round(median_rate(name) / median_rate(st[0][0]), 3)
        out.append(r)
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{'configuration':31} {'samples/s':>10} {'ratio':>6} {'median':>8} {'ratio':>6} "
          f"{'main CPU µs/sample':>19} {'child CPU µs/sample':>20} {'CPU ratio':>9} {'server µs/sample':>16}"
          + (f" {'vs stream':>9} {'median':>6}" if st else ""))
    for r in out:
        print(f"{r['config']:31} {r['samples_per_sec']:>10} {r['ratio_to_bare']:>6} "
              f"{r['median_samples_per_sec']:>8} {r['median_ratio_to_bare']:>6} "
              f"{r['main_cpu_us_per_sample']:>19} {r['child_cpu_us_per_sample']:>20} {str(r['cpu_ratio'] or '-'):>9}"
              f" {str(r['server_cpu_us_per_sample'] or '-'):>16}"
              + (f" {r['ratio_to_stream']:>9} {r['median_ratio_to_stream']:>6}" if st else ""))
    print("ratio: best round's samples/s / the bare reader's; median: median round's; CPU ratio: the bare "
          "reader's CPU per sample / this one's (main + workers); child CPU: DataLoader workers, or the "
          "`lrstream stream` process and its FFmpeg children; server: the serve process (FFmpeg included), median round")


if __name__ == "__main__":
    main()
