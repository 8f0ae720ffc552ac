"""Hugging Face Storage Buckets: lrstream's hf://buckets/ reader vs huggingface_hub's bucket client.

fake_hub.FakeHub serves a bucket (add_bucket) with the routes huggingface_hub 1.33 uses; the
tests check that huggingface_hub's own client (list_bucket_tree, HfFileSystem) reads it — so the
fake speaks the real protocol — and that lrstream streams the same batches from the bucket as
from the local copy, sends the token only to the Hub, and fails clearly on a missing bucket.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

import pytest

from conftest import CONFORMANCE
from fake_hub import FakeHub

TOKEN = "hf_bucketSECRETtoken0123456789"
DATASET = CONFORMANCE / "pub_inferred_front_wrist"


@pytest.fixture()
def bucket_hub(tmp_path):
    with FakeHub(tmp_path, "unused/repo", token=TOKEN, page_size=5) as hub:
        hub.add_bucket("lab/robots", DATASET, prefix="sets/pick")
        hub.add_bucket("lab/robots", DATASET / "meta", prefix="sets/pick2")  # a sibling prefix
        yield hub


def env_for(hub, tmp_path, **kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE", "HUGGINGFACE"))}
    env.update(HF_ENDPOINT=hub.url, HF_TOKEN=TOKEN, HF_HOME=str(tmp_path / "hf"), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    env.update(kw)
    return env


# huggingface_hub reads HF_HUB_OFFLINE at import: its side runs in a subprocess with its own env.
HF_SIDE = """
import json, sys
from huggingface_hub import HfApi, HfFileSystem
endpoint, token = sys.argv[1], sys.argv[2]
api = HfApi(endpoint=endpoint, token=token)
files = [f.path for f in api.list_bucket_tree("lab/robots", "sets/pick", recursive=True) if getattr(f, "size", None) is not None]
fs = HfFileSystem(endpoint=endpoint, token=token)
data = {p: fs.open("hf://buckets/lab/robots/" + p, "rb").read().hex() for p in files if p.startswith("sets/pick/")}
print(json.dumps({"files": files, "data": data, "total": api.bucket_info("lab/robots").total_files}))
"""


def test_huggingface_hub_reads_the_fake_bucket(bucket_hub, tmp_path):
    import sys

    p = subprocess.run([sys.executable, "-c", HF_SIDE, bucket_hub.url, TOKEN], env=env_for(bucket_hub, tmp_path),
                       capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()[-1500:]
    out = json.loads(p.stdout)
    local = {p.relative_to(DATASET).as_posix(): p for p in DATASET.rglob("*") if p.is_file()}
    assert set(out["data"]) == {f"sets/pick/{r}" for r in local}
    for rel, path in local.items():
        assert bytes.fromhex(out["data"][f"sets/pick/{rel}"]) == path.read_bytes(), rel
    # The Hub matches prefixes lexically: the sibling prefix "sets/pick2" is listed too.
    assert any(f.startswith("sets/pick2/") for f in out["files"])
    assert out["total"] == len(out["files"])


def stream(lrstream_bin, env, dataset, *extra):
    cmd = [str(lrstream_bin), "stream", "--dataset", str(dataset), "--format", "jsonl", "--batch-size", "16",
           "--workers", "1", "-q", *extra]
    return subprocess.run(cmd, env=env, capture_output=True, timeout=180)


def batches(out: bytes) -> list[str]:
    return [line for line in out.decode().splitlines() if line.startswith('{"type":"batch"')]


@pytest.mark.parametrize("download", ["full", "none"])
def test_lrstream_streams_a_bucket_like_the_local_copy(lrstream_bin, bucket_hub, tmp_path, download):
    env = env_for(bucket_hub, tmp_path)
    want = stream(lrstream_bin, env, DATASET)
    assert want.returncode == 0, want.stderr.decode()[-1500:]
    got = stream(lrstream_bin, env, "hf://buckets/lab/robots/sets/pick", "--download", download)
    assert got.returncode == 0, got.stderr.decode()[-1500:]
    assert batches(got.stdout) == batches(want.stdout)
    header = json.loads(got.stdout.decode().splitlines()[0])
    assert header["dataset"] == "hf://buckets/lab/robots/sets/pick" and len(header["revision"]) == 40
    # The header pins the files the run reads by their Xet hash (as the bucket lists them).
    [pins] = header["pins"]
    assert pins["dataset"] == header["dataset"] and pins["revision"] == header["revision"] and pins["hash"] == "xet"
    assert pins["objects"] == sum(1 for p in DATASET.rglob("*") if p.is_file())
    pinned = {f"{d}/{name}": (size, h) for d, files in pins["files"].items() for name, size, h in files}
    assert {"meta/info.json", "meta/tasks.parquet"} <= set(pinned) and any(n.startswith("data/") for n in pinned)
    assert "README.md" not in pinned
    for name, (size, h) in pinned.items():
        data = (DATASET / name).read_bytes()
        assert (size, h) == (len(data), hashlib.sha256(b"xet" + data).hexdigest()), name
    # The token went to the Hub's routes only, never to the CDN.
    cdn = [r for r in bucket_hub.log if r[1].startswith("/cdn/")]
    assert cdn and all(auth is None for _, _, auth in cdn)
    assert all(auth == f"Bearer {TOKEN}" for _, path, auth in bucket_hub.log if "/buckets/" in path)
    assert TOKEN not in got.stderr.decode()


def test_missing_bucket_and_token(lrstream_bin, bucket_hub, tmp_path):
    p = stream(lrstream_bin, env_for(bucket_hub, tmp_path), "hf://buckets/lab/nothing")
    err = p.stderr.decode()
    assert p.returncode != 0 and "lab/nothing" in err and "no such bucket" in err, err
    p = stream(lrstream_bin, env_for(bucket_hub, tmp_path, HF_TOKEN="hf_wrongTOKEN"), "hf://buckets/lab/robots/sets/pick")
    err = p.stderr.decode()
    assert p.returncode != 0 and "HF_TOKEN" in err and "hf_wrongTOKEN" not in err


def test_replay_a_prerender_from_a_bucket(lrstream_bin, tmp_path):
    """A pre-render copied into a bucket (as `hf buckets sync` would) replays and verifies from it."""
    pre = tmp_path / "pre"
    p = subprocess.run([str(lrstream_bin), "prerender", "--dataset", str(DATASET), "--out", str(pre),
                        "--batch-size", "8", "--shard-size", "64KB", "-q"], capture_output=True, timeout=180)
    assert p.returncode == 0, p.stderr.decode()[-1500:]
    with FakeHub(tmp_path / "empty", "unused/repo", token=TOKEN) as hub:
        hub.add_bucket("lab/robots", pre, prefix="pre")
        env = env_for(hub, tmp_path)
        want = subprocess.run([str(lrstream_bin), "stream", "--from", str(pre), "--format", "jsonl"],
                              env=env, capture_output=True, timeout=180)
        got = subprocess.run([str(lrstream_bin), "stream", "--from", "hf://buckets/lab/robots/pre", "--format", "jsonl"],
                             env=env, capture_output=True, timeout=180)
        assert got.returncode == 0, got.stderr.decode()[-1500:]
        assert got.stdout == want.stdout
        v = subprocess.run([str(lrstream_bin), "verify", "hf://buckets/lab/robots/pre"], env=env, capture_output=True, timeout=180)
        assert v.returncode == 0 and v.stdout.decode().startswith("OK hf://buckets/lab/robots/pre:"), v.stderr.decode()


def test_resume_after_a_bucket_file_changed_names_it(lrstream_bin, bucket_hub, tmp_path):
    """A resume token of a run before a bucket file changed is refused naming the file and its Xet hashes."""
    import shutil

    env = env_for(bucket_hub, tmp_path)
    spec = "hf://buckets/lab/robots/sets/pick"
    args = ("--shuffle", "--seed", "5", "--epochs", "2")
    first = stream(lrstream_bin, env, spec, *args)
    assert first.returncode == 0, first.stderr.decode()[-1500:]
    token = json.loads(batches(first.stdout)[2])["resume"]
    changed = tmp_path / "changed"
    shutil.copytree(DATASET / "meta", changed / "meta")
    info = changed / "meta" / "info.json"
    old = info.read_bytes()
    info.write_bytes(old + b" ")
    bucket_hub.add_bucket("lab/robots", changed, prefix="sets/pick")  # replaces the files under changed/
    p = stream(lrstream_bin, env, spec, *args, "--resume", token)
    err = p.stderr.decode()
    xet = lambda b: hashlib.sha256(b"xet" + b).hexdigest()  # the fake's stand-in Xet hash
    assert p.returncode != 0, err
    assert "belongs to a run of another version of the dataset" in err, err
    assert (f"meta/info.json changed (size {len(old)}, xet hash {xet(old)}, "
            f"now size {len(old) + 1}, xet hash {xet(old + b' ')})") in err, err
