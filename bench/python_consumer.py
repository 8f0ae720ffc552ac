#!/usr/bin/env python3
"""Python consumer throughput: frames/s a single Python process receives from
`lrstream serve` over its Unix socket with the bundled client
(python/lrstream_client): messages decoded to Python objects, numeric
columns as numpy arrays. See docs/performance.md.

    python3 bench/python_consumer.py --lrstream ./lrstream -- \
        --dataset /tmp/bench300k --recipe ../shared/recipes/subtask_mem_vqa_speech.yaml --batch-size 256

Everything after `--` is passed to `lrstream serve`. With --socket PATH it
connects to a server already listening there instead.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from lrstream_client import StreamReader, connect  # noqa: E402


def proc_cpu(pid):
    """User + system CPU seconds of process pid so far (Linux), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def proc_peak_rss_mb(pid):
    """Peak resident set (VmHWM) of process pid in MiB (Linux), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return None


def consume(sock=None, path=None, pool_bytes=None, shm_bytes=None):
    c0 = time.process_time()
    t0 = time.perf_counter()
    frames = batches = messages = 0  # frames: samples received
    kw = {} if pool_bytes is None else {"pool_bytes": pool_bytes}
    ckw = dict(kw) if shm_bytes is None else dict(kw, shm_bytes=shm_bytes)
    with (StreamReader(path, **kw) if path else connect(sock, timeout=60, **ckw)) as reader:
        for batch in reader:
            frames += batch.size
            batches += 1
            # Touch what a training step touches: every sample's messages
            # and one array.
            msgs = batch.get("messages")
            if msgs is not None:
                for m in msgs:
                    messages += len(m)
            batch["index"].sum()
        end = reader.end
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    read = (end or {}).get("frames", 0)
    return {"client_cpu_seconds": cpu, "samples": frames, "frames_read": read, "batches": batches, "messages": messages, "seconds": dt,
            "samples_per_sec": frames / dt if dt > 0 else 0.0,
            "frames_per_sec": read / dt if dt > 0 else 0.0, "end": end}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lrstream", default="lrstream", help="lrstream binary to start `serve` with")
    ap.add_argument("--socket", help="connect to this running server instead of starting one")
    ap.add_argument("--file", help="decode a recorded stream (lrstream stream > FILE) instead: the client's cost alone")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--pool-bytes", type=int, help="the reader's ArrayPool bound (0: a new array for every camera column)")
    ap.add_argument("--shm-bytes", type=int, help="the client's shared-memory arena for camera frames (0: through the socket; default: the client's)")
    ap.add_argument("--import-torch", action="store_true",
                    help="import torch first (a training process: ~160k more live objects for Python's collector)")
    ap.add_argument("--gc-freeze", action="store_true", help="gc.freeze() before reading (after --import-torch)")
    ap.add_argument("serve_args", nargs="*")
    a = ap.parse_args()
    if a.import_torch:
        import torch  # noqa: F401
    if a.gc_freeze:
        import gc

        gc.freeze()
    proc = None
    tmp = None
    sock = a.socket
    if a.file:
        r = consume(path=a.file, pool_bytes=a.pool_bytes)
    elif sock is None:
        tmp = tempfile.mkdtemp(prefix="lrs-bench-")
        sock = os.path.join(tmp, "s.sock")
        proc = subprocess.Popen([a.lrstream, "serve", "--socket", sock] + a.serve_args)
        for _ in range(600):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
    try:
        if not a.file:
            r = consume(sock, pool_bytes=a.pool_bytes, shm_bytes=a.shm_bytes)
            if proc is not None:
                r["server_cpu_seconds"] = proc_cpu(proc.pid)
                r["server_peak_rss_mb"] = proc_peak_rss_mb(proc.pid)
            r["client_peak_rss_mb"] = proc_peak_rss_mb(os.getpid())
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()
            if os.path.exists(sock):
                os.unlink(sock)
            os.rmdir(tmp)
    n = r["frames_read"] or 1
    r["client_cpu_us_per_frame"] = r["client_cpu_seconds"] / n * 1e6
    if r.get("server_cpu_seconds") is not None:
        r["server_cpu_us_per_frame"] = r["server_cpu_seconds"] / n * 1e6
        # What two otherwise idle cores allow: the client is one thread, the
        # server spreads over both cores.
        a_, b_ = r["client_cpu_us_per_frame"], r["server_cpu_us_per_frame"]
        r["two_core_bound_frames_per_sec"] = 1e6 * min(1 / a_, 2 / (a_ + b_))
    if a.json:
        print(json.dumps(r))
    else:
        print(f"{r['frames_read']} dataset frames, {r['samples']} samples in {r['batches']} batches "
              f"({r['messages']} messages), {r['seconds']:.2f}s: {r['frames_per_sec']:,.0f} frames/s, "
              f"{r['samples_per_sec']:,.0f} samples/s")
        line = f"client CPU {r['client_cpu_us_per_frame']:.2f} us/frame"
        if "server_cpu_us_per_frame" in r:
            line += (f", server CPU {r['server_cpu_us_per_frame']:.2f} us/frame; bound on 2 idle cores: "
                     f"{r['two_core_bound_frames_per_sec']:,.0f} frames/s")
        print(line)
        if r.get("server_peak_rss_mb") is not None:
            print(f"peak RSS: server {r['server_peak_rss_mb']:,.0f} MiB, client {r['client_peak_rss_mb']:,.0f} MiB")


if __name__ == "__main__":
    main()
