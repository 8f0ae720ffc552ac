"""Helpers for the client tests: build wire-format streams in Python."""

import os
import sys

import msgpack
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def nd(a):
    a = np.ascontiguousarray(a)
    return {b"nd": True, b"type": a.dtype.str, b"kind": b"", b"shape": list(a.shape), b"data": a.tobytes()}


def header(**kw):
    h = {"type": "header", "format": "lrstream/1", "lrstream_version": "test", "dataset": "d", "revision": "r",
         "fps": 30, "recipe": "x.yaml", "recipe_sha256": "0" * 64, "mode": "drop", "batch_size": 2,
         "drop_last": False, "keep_language": False,
         "features": [{"name": "index", "dtype": "<i8", "shape": []},
                      {"name": "observation.state", "dtype": "<f4", "shape": [3]}],
         "tools": None, "options": None, "components": [], "share": {"rank": 0, "world_size": 1, "worker": 0, "num_workers": 1}}
    h.update(kw)
    return h


def batch(seq, start, n):
    idx = np.arange(start, start + n, dtype="<i8")
    state = np.arange(3 * n, dtype="<f4").reshape(n, 3) + start
    msgs = [[{"role": "user", "content": f"frame {i}"}, {"role": "assistant", "tool_calls": [{"type": "function"}]}]
            for i in range(start, start + n)]
    return {"type": "batch", "seq": seq, "epoch": 0, "size": n, "resume": f"tok{seq}",
            "columns": {"index": nd(idx), "observation.state": nd(state), "task": ["t"] * n, "messages": msgs,
                        "message_streams": [["high_level", "low_level"]] * n, "target_message_indices": [[1]] * n}}


def end(samples):
    return {"type": "end", "frames": samples, "rendered": samples, "dropped": 0, "passthrough": 0, "skipped": 0,
            "errors": 0, "batches": 0, "samples": samples, "components": {}}


def pack(*msgs):
    return b"".join(msgpack.packb(m, use_bin_type=True) for m in msgs)


def stream(n=5, bs=2):
    msgs = [header()]
    seq = 0
    for start in range(0, n, bs):
        msgs.append(batch(seq, start, min(bs, n - start)))
        seq += 1
    msgs.append(end(n))
    return pack(*msgs)
