"""End-to-end check of the Python client against a real lrstream binary.

usage: e2e_client.py LRSTREAM DATASET RECIPE EXPECTED_JSONL FEATURES_JSON SOCKET_DIR

Reads `lrstream stream` through a pipe and `lrstream serve` through a Unix
socket with 3 concurrent workers, and checks every batch against the
expected per-frame outcomes (fallback mode, --no-task-aug: the `.step`
files) and the parquet feature values.
"""
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
import lrstream_client as lc  # noqa: E402

lrstream, dataset, recipe, expected_path, features_path, sock_dir = sys.argv[1:7]
ARGS = ["--dataset", dataset, "--recipe", recipe, "--mode", "fallback", "--no-task-aug",
        "--on-error", "skip", "--batch-size", "37"]

expected = {}
with open(expected_path) as f:
    for line in f:
        if line.strip():
            e = json.loads(line)
            expected[e["index"]] = e
with open(features_path) as f:
    features = {int(k): v for k, v in json.load(f).items()}
kept = sorted(i for i, e in expected.items() if e["outcome"] in ("rendered", "passthrough"))


def check_batches(batches, header, who):
    """Check invariants of each batch; return {index: sample} seen."""
    seen = {}
    names = [f["name"] for f in header["features"]]
    for b in batches:
        n = b.size
        assert n <= header["batch_size"], (who, n)
        for name in names:
            arr = b[name]
            assert isinstance(arr, np.ndarray) and arr.shape[0] == n, (who, name, getattr(arr, "shape", None))
        for key in ("task", "messages", "message_streams", "target_message_indices"):
            assert len(b[key]) == n, (who, key)
        idx = b["index"]
        for j in range(n):
            i = int(idx[j])
            assert i not in seen, f"{who}: frame {i} twice"
            e = expected[i]
            assert e["outcome"] == "rendered", (who, i, e["outcome"])
            r = e["rendered"]
            assert b["messages"][j] == r["messages"], (who, i, b["messages"][j], r["messages"])
            assert b["message_streams"][j] == r["message_streams"], (who, i)
            assert b["target_message_indices"][j] == r["target_message_indices"], (who, i)
            assert int(b["episode_index"][j]) == e["episode_index"], (who, i)
            for name, want in features[i].items():
                got = b[name][j]
                assert np.array_equal(got, np.asarray(want, dtype=got.dtype)), (who, i, name, got, want)
            seen[i] = True
    return seen


def read_pipe():
    p = subprocess.Popen([lrstream, "stream", "-q"] + ARGS, stdout=subprocess.PIPE)
    r = lc.StreamReader(p.stdout)
    batches = list(r)
    assert p.wait() == 0
    seen = check_batches(batches, r.header, "pipe")
    assert sorted(seen) == kept, ("pipe", len(seen), len(kept))
    for b in batches[:-1]:
        assert b.size == 37
    assert r.end["samples"] == len(kept), r.end
    return len(batches)


def read_socket():
    sock = os.path.join(sock_dir, "e2e.sock")
    srv = subprocess.Popen([lrstream, "serve", "--socket", sock] + ARGS, stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if os.path.exists(sock):
                break
            time.sleep(0.02)
        results, errors = [None] * 3, []

        def worker(w):
            try:
                with lc.connect(sock, worker=w, num_workers=3, timeout=10) as r:
                    batches = list(r)
                    assert r.header["share"]["worker"] == w
                    results[w] = check_batches(batches, r.header, f"worker {w}")
            except BaseException as e:  # reported below
                errors.append((w, e))

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        union = {}
        for w, s in enumerate(results):
            assert s, f"worker {w} got nothing"
            for i in s:
                assert i not in union, f"frame {i} served to two workers"
                union[i] = w
        assert sorted(union) == kept, ("socket", len(union), len(kept))
    finally:
        srv.terminate()
        srv.wait(10)
    assert not os.path.exists(sock), "socket left behind after SIGTERM"


n = read_pipe()
read_socket()
print(f"ok: {len(kept)} kept frames, {n} batches through the pipe, 3 socket workers")
