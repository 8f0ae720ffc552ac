"""Hugging Face Storage Buckets: lrstream's hf://buckets/ reader and writer vs huggingface_hub and hf_xet.

The fake is the Go one (internal/fakehub.Buckets: the bucket API and a Xet CAS that checks every
xorb and shard it is sent), served by internal/fakehub/cmd/fakebuckets — the same fake the Go tests
use. The tests check that huggingface_hub's own client (list_bucket_tree, HfFileSystem,
download_bucket_files through hf_xet) reads it — so the fake speaks the real protocol —, that the
Xet hashes it lists are hf_xet's, that lrstream streams the same batches from a bucket as from the
local copy, and that `lrstream prerender --out hf://buckets/…` uploads a pre-render that
huggingface_hub downloads byte for byte and lrstream replays exactly like the local one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import CONFORMANCE, REPO

TOKEN = "hf_bucketSECRETtoken0123456789"
DATASET = CONFORMANCE / "pub_inferred_front_wrist"


@pytest.fixture(scope="session")
def fakebuckets_bin(tmp_path_factory):
    out = tmp_path_factory.mktemp("fakebuckets") / "fakebuckets"
    subprocess.run(["go", "build", "-o", str(out), "./internal/fakehub/cmd/fakebuckets"], cwd=REPO, check=True)
    return out


class Buckets:
    """A running fakebuckets process and its control routes."""

    def __init__(self, binary, *args):
        self.proc = subprocess.Popen([str(binary), "-token", TOKEN, "-page-size", "5", *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.info = json.loads(self.proc.stdout.readline())
        self.url = self.info["endpoint"]

    def control(self, route, body=b"", method="POST", **q):
        qs = "&".join(f"{k}={urllib.request.quote(str(v))}" for k, v in q.items())
        req = urllib.request.Request(f"{self.url}/_fake/{route}?{qs}", data=body if method == "POST" else None,
                                     method=method)
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def log(self):
        return self.control("log", method="GET")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()


@pytest.fixture()
def buckets(fakebuckets_bin):
    b = Buckets(fakebuckets_bin, "-bucket", "lab/robots", "-put", f"lab/robots/sets/pick={DATASET}",
                "-put", f"lab/robots/sets/pick2={DATASET / 'meta'}")  # a sibling prefix
    yield b
    b.close()


def env_for(b, tmp_path, **kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE", "HUGGINGFACE"))}
    env.update(HF_ENDPOINT=b.url, HF_TOKEN=TOKEN, HF_HOME=str(tmp_path / "hf"), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    env.update(kw)
    return env


def xet_hashes(paths):
    import hf_xet

    return [r.hash for r in hf_xet.hash_files([str(p) for p in paths])]


# huggingface_hub reads HF_HUB_OFFLINE at import: its side runs in a subprocess with its own env.
HF_SIDE = """
import json, sys
from huggingface_hub import HfApi, HfFileSystem
endpoint, token, prefix, dest = sys.argv[1:5]
api = HfApi(endpoint=endpoint, token=token)
files = [f for f in api.list_bucket_tree("lab/robots", prefix, recursive=True) if getattr(f, "size", None) is not None]
fs = HfFileSystem(endpoint=endpoint, token=token)
data = {f.path: fs.open("hf://buckets/lab/robots/" + f.path, "rb").read().hex() for f in files if f.path.startswith(prefix + "/")}
api.download_bucket_files("lab/robots", [(f, dest + "/" + f.path) for f in files if f.path.startswith(prefix + "/")])
print(json.dumps({"files": {f.path: f.xet_hash for f in files}, "data": data,
                  "total": api.bucket_info("lab/robots").total_files}))
"""


def hf_side(b, tmp_path, prefix):
    dest = tmp_path / "downloaded"
    p = subprocess.run([sys.executable, "-c", HF_SIDE, b.url, TOKEN, prefix, str(dest)], env=env_for(b, tmp_path),
                       capture_output=True, timeout=180)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    return json.loads(p.stdout), dest


def check_downloads(out, dest, local_root, prefix):
    """Every local file is in the bucket under prefix with hf_xet's hash, read and downloaded byte for byte."""
    local = {p.relative_to(local_root).as_posix(): p for p in local_root.rglob("*")
             if p.is_file() and not p.name.startswith(".")}  # a pre-render's .lock is not published
    names = sorted(local)
    hashes = dict(zip(names, xet_hashes([local[n] for n in names])))
    assert {k for k in out["files"] if k.startswith(prefix + "/")} == {f"{prefix}/{n}" for n in names}
    for n in names:
        want = local[n].read_bytes()
        assert out["files"][f"{prefix}/{n}"] == hashes[n], n  # the Xet hash hf_xet computes
        assert bytes.fromhex(out["data"][f"{prefix}/{n}"]) == want, n  # HfFileSystem (resolve)
        assert (dest / prefix / n).read_bytes() == want, n  # download_bucket_files (hf_xet, the CAS)


def test_huggingface_hub_reads_the_fake_bucket(buckets, tmp_path):
    out, dest = hf_side(buckets, tmp_path, "sets/pick")
    check_downloads(out, dest, DATASET, "sets/pick")
    # The Hub matches prefixes lexically: the sibling prefix "sets/pick2" is listed too.
    assert any(f.startswith("sets/pick2/") for f in out["files"])
    assert out["total"] == sum(1 for p in DATASET.rglob("*") if p.is_file()) + sum(
        1 for p in (DATASET / "meta").rglob("*") if p.is_file())


def lrstream(lrstream_bin, env, *args, timeout=180):
    return subprocess.run([str(lrstream_bin), *args], env=env, capture_output=True, timeout=timeout)


def stream(lrstream_bin, env, dataset, *extra):
    return lrstream(lrstream_bin, env, "stream", "--dataset", str(dataset), "--format", "jsonl", "--batch-size", "16",
                    "--workers", "1", "-q", *extra)


def batches(out: bytes) -> list[str]:
    return [line for line in out.decode().splitlines() if line.startswith('{"type":"batch"')]


@pytest.mark.parametrize("download", ["full", "none"])
def test_lrstream_streams_a_bucket_like_the_local_copy(lrstream_bin, buckets, tmp_path, download):
    env = env_for(buckets, tmp_path)
    want = stream(lrstream_bin, env, DATASET)
    assert want.returncode == 0, want.stderr.decode()[-1500:]
    got = stream(lrstream_bin, env, "hf://buckets/lab/robots/sets/pick", "--download", download)
    assert got.returncode == 0, got.stderr.decode()[-1500:]
    assert batches(got.stdout) == batches(want.stdout)
    header = json.loads(got.stdout.decode().splitlines()[0])
    assert header["dataset"] == "hf://buckets/lab/robots/sets/pick" and len(header["revision"]) == 40
    # The header pins the files the run reads by their Xet hash (hf_xet's).
    [pins] = header["pins"]
    assert pins["dataset"] == header["dataset"] and pins["revision"] == header["revision"] and pins["hash"] == "xet"
    assert pins["objects"] == sum(1 for p in DATASET.rglob("*") if p.is_file())
    pinned = {f"{d}/{name}": (size, h) for d, files in pins["files"].items() for name, size, h in files}
    assert {"meta/info.json", "meta/tasks.parquet"} <= set(pinned) and any(n.startswith("data/") for n in pinned)
    assert "README.md" not in pinned
    names = sorted(pinned)
    for name, h in zip(names, xet_hashes([DATASET / n for n in names])):
        assert pinned[name] == ((DATASET / name).stat().st_size, h), name
    # The token went to the Hub's routes only, never to the CDN.
    log = buckets.log()
    cdn = [r for r in log if r["host"] == "cdn"]
    assert cdn and all(r["auth"] == "" for r in cdn)
    assert all(r["auth"] == f"Bearer {TOKEN}" for r in log if r["host"] in ("tree", "resolve"))
    assert TOKEN not in got.stderr.decode()


def test_missing_bucket_and_token(lrstream_bin, buckets, tmp_path):
    p = stream(lrstream_bin, env_for(buckets, tmp_path), "hf://buckets/lab/nothing")
    err = p.stderr.decode()
    assert p.returncode != 0 and "lab/nothing" in err and "no such bucket" in err, err
    p = stream(lrstream_bin, env_for(buckets, tmp_path, HF_TOKEN="hf_wrongTOKEN"), "hf://buckets/lab/robots/sets/pick")
    err = p.stderr.decode()
    assert p.returncode != 0 and "HF_TOKEN" in err and "hf_wrongTOKEN" not in err


def test_resume_after_a_bucket_file_changed_names_it(lrstream_bin, buckets, tmp_path):
    """A resume token of a run before a bucket file changed is refused naming the file and its Xet hashes."""
    env = env_for(buckets, tmp_path)
    spec = "hf://buckets/lab/robots/sets/pick"
    args = ("--shuffle", "--seed", "5", "--epochs", "2")
    first = stream(lrstream_bin, env, spec, *args)
    assert first.returncode == 0, first.stderr.decode()[-1500:]
    token = json.loads(batches(first.stdout)[2])["resume"]
    old = (DATASET / "meta" / "info.json").read_bytes()
    buckets.control("put", old + b" ", id="lab/robots", path="sets/pick/meta/info.json")
    changed = tmp_path / "info.json"
    changed.write_bytes(old + b" ")
    old_hash, new_hash = xet_hashes([DATASET / "meta" / "info.json", changed])
    p = stream(lrstream_bin, env, spec, *args, "--resume", token)
    err = p.stderr.decode()
    assert p.returncode != 0, err
    assert "belongs to a run of another version of the dataset" in err, err
    assert (f"meta/info.json changed (size {len(old)}, xet hash {old_hash}, "
            f"now size {len(old) + 1}, xet hash {new_hash})") in err, err


PRERENDER = ("prerender", "--dataset", str(DATASET), "--batch-size", "8", "--shard-size", "64KB", "-q")


@pytest.fixture()
def empty_buckets(fakebuckets_bin):
    b = Buckets(fakebuckets_bin, "-bucket", "lab/robots")
    yield b
    b.close()


def test_prerender_to_a_bucket(lrstream_bin, empty_buckets, tmp_path):
    """lrstream uploads a pre-render through the Xet protocol; huggingface_hub lists the Xet hashes lrstream
    registered (hf_xet's) and downloads every file byte for byte through hf_xet; lrstream replays the bucket
    exactly like the local pre-render, and verify passes."""
    b, env = empty_buckets, env_for(empty_buckets, tmp_path)
    pre = tmp_path / "pre"
    p = lrstream(lrstream_bin, env, *PRERENDER, "--out", str(pre))
    assert p.returncode == 0, p.stderr.decode()[-1500:]
    p = lrstream(lrstream_bin, env, *PRERENDER, "--out", "hf://buckets/lab/robots/pre")
    assert p.returncode == 0, p.stderr.decode()[-1500:]
    assert TOKEN not in p.stderr.decode()
    out, dest = hf_side(b, tmp_path, "pre")
    check_downloads(out, dest, pre, "pre")
    # index.json was registered last, in a batch of its own.
    batches_sent = b.control("batches", method="GET")
    assert batches_sent[-1] == ["+pre/index.json"] and all("+pre/index.json" not in x for x in batches_sent[:-1])
    want = lrstream(lrstream_bin, env, "stream", "--from", str(pre), "--format", "jsonl")
    got = lrstream(lrstream_bin, env_for(b, tmp_path / "other-node"), "stream", "--from", "hf://buckets/lab/robots/pre",
                   "--format", "jsonl")
    assert got.returncode == 0, got.stderr.decode()[-1500:]
    assert got.stdout == want.stdout
    v = lrstream(lrstream_bin, env, "verify", "hf://buckets/lab/robots/pre")
    assert v.returncode == 0 and v.stdout.decode().startswith("OK hf://buckets/lab/robots/pre:"), v.stderr.decode()
    # The CAS token went to the CAS only, the HF token to the Hub only.
    for r in b.log():
        if r["host"] in ("xorb", "shard"):
            assert r["auth"].startswith("Bearer xet_cas_"), r
        elif r["host"] in ("token", "batch", "tree"):
            assert r["auth"] == f"Bearer {TOKEN}", r


def test_two_rank_processes_and_finalize(lrstream_bin, empty_buckets, tmp_path):
    """Two processes (own caches: two machines) pre-render their ranks into one prefix at once; --finalize there."""
    b = empty_buckets
    procs = [subprocess.Popen([str(lrstream_bin), *PRERENDER, "--out", "hf://buckets/lab/robots/ranks", "--rank", str(r),
                               "--world-size", "2"], env=env_for(b, tmp_path / f"node{r}"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for r in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err.decode()[-1500:]
    env = env_for(b, tmp_path)
    p = lrstream(lrstream_bin, env, "stream", "--from", "hf://buckets/lab/robots/ranks", "--format", "jsonl")
    assert p.returncode != 0 and "--finalize" in p.stderr.decode()
    p = lrstream(lrstream_bin, env, "prerender", "--finalize", "hf://buckets/lab/robots/ranks", "-q")
    assert p.returncode == 0, p.stderr.decode()[-1500:]
    p = lrstream(lrstream_bin, env, "stream", "--from", "hf://buckets/lab/robots/ranks", "--format", "jsonl")
    assert p.returncode == 0 and batches(p.stdout), p.stderr.decode()[-1500:]
    v = lrstream(lrstream_bin, env, "verify", "hf://buckets/lab/robots/ranks")
    assert v.returncode == 0, v.stderr.decode()


def test_killed_upload_leaves_no_index(lrstream_bin, empty_buckets, tmp_path):
    """A prerender killed (SIGKILL) while its xorbs upload registers nothing; run again, it completes —
    through a 503 storm of the CAS, retried."""
    b = empty_buckets
    env = env_for(b, tmp_path)
    b.control("xorb-delay", ms=5000)
    p = subprocess.Popen([str(lrstream_bin), *PRERENDER, "--out", "hf://buckets/lab/robots/pre"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while b.control("counts", method="GET").get("xorb", 0) == 0 and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    out, _ = hf_side(b, tmp_path, "pre")
    assert out["files"] == {}, out["files"]
    b.control("xorb-delay", ms=0)
    b.control("fault", kind="xorb", n=2, status=503)
    p = lrstream(lrstream_bin, env, *PRERENDER, "--out", "hf://buckets/lab/robots/pre")
    assert p.returncode == 0, p.stderr.decode()[-1500:]
    assert "pre/index.json" in hf_side(b, tmp_path, "pre")[0]["files"]


def test_prerender_wrong_token(lrstream_bin, empty_buckets, tmp_path):
    p = lrstream(lrstream_bin, env_for(empty_buckets, tmp_path, HF_TOKEN="hf_wrongWRITEtoken"), *PRERENDER,
                 "--out", "hf://buckets/lab/robots/pre")
    err = p.stderr.decode()
    assert p.returncode != 0 and "HF_TOKEN" in err and "write access" in err and "hf_wrongWRITEtoken" not in err, err


HF_UPLOAD = """
import json, pathlib, sys
from huggingface_hub import HfApi
endpoint, token, root, prefix = sys.argv[1:5]
api = HfApi(endpoint=endpoint, token=token)
files = [(str(p), prefix + "/" + p.relative_to(root).as_posix()) for p in pathlib.Path(root).rglob("*") if p.is_file()]
api.batch_bucket_files("lab/robots", add=files)
"""


def test_lrstream_reads_what_huggingface_hub_uploaded(lrstream_bin, empty_buckets, tmp_path):
    """huggingface_hub (hf_xet) uploads a dataset into the fake bucket — the fake CAS parses and checks hf_xet's
    own xorbs and shard, so its format checks are the reference client's — and lrstream streams it like the
    local copy."""
    b = empty_buckets
    env = env_for(b, tmp_path, HF_HUB_DISABLE_PROGRESS_BARS="1")
    p = subprocess.run([sys.executable, "-c", HF_UPLOAD, b.url, TOKEN, str(DATASET), "up"], env=env,
                       capture_output=True, timeout=180)
    assert p.returncode == 0, (p.stderr.decode()[-2000:], b.control("refusals", method="GET"))
    assert b.control("refusals", method="GET") == []
    want = stream(lrstream_bin, env, DATASET)
    got = stream(lrstream_bin, env, "hf://buckets/lab/robots/up")
    assert got.returncode == 0, got.stderr.decode()[-1500:]
    assert batches(got.stdout) == batches(want.stdout)


HF_UPLOAD_ONE = """
import sys
from huggingface_hub import HfApi
endpoint, token = sys.argv[1:3]
api = HfApi(endpoint=endpoint, token=token)
for local, remote in zip(sys.argv[3::2], sys.argv[4::2]):
    api.batch_bucket_files("lab/robots", add=[(local, remote)])  # one file per upload: one shard each
"""


def test_shards_are_hf_xets(lrstream_bin, empty_buckets, tmp_path):
    """For the same file, lrstream's upload and hf_xet's are the same: the same xorb hash, and shards equal byte
    for byte (a pre-render of the demo dataset with camera frames: a ~560 kB shard file of several chunks, and
    its index, published one file per batch)."""
    b = empty_buckets
    env = env_for(b, tmp_path, HF_HUB_DISABLE_PROGRESS_BARS="1")
    demo = REPO / "testdata" / "demo"
    args = ("prerender", "--dataset", str(demo), "--cameras", "all", "--shard-size", "64MB", "--batch-size", "8", "-q")
    pre = tmp_path / "pre"
    p = lrstream(lrstream_bin, env, *args, "--out", str(pre))
    assert p.returncode == 0, p.stderr.decode()[-1500:]
    shard = pre / "shard-000000.msgpack.zst"
    assert shard.stat().st_size > 4 * 128 * 1024 and sorted(x.name for x in pre.iterdir()) == [
        ".lock", "index.json", shard.name]
    p = lrstream(lrstream_bin, env, *args, "--out", "hf://buckets/lab/robots/lr")
    assert p.returncode == 0, p.stderr.decode()[-1500:]
    p = subprocess.run([sys.executable, "-c", HF_UPLOAD_ONE, b.url, TOKEN, str(shard), "hf/" + shard.name,
                        str(pre / "index.json"), "hf/index.json"], env=env, capture_output=True, timeout=180)
    assert p.returncode == 0, (p.stderr.decode()[-2000:], b.control("refusals", method="GET"))
    import base64

    shards = [base64.b64decode(s) for s in b.control("shards", method="GET")]
    assert len(shards) == 4  # lrstream: the shard file, then the index; hf_xet: the same
    assert shards[0] == shards[2], "the shard file's MDB shard differs from hf_xet's"
    assert shards[1] == shards[3], "index.json's MDB shard differs from hf_xet's"
    files = {f: h for f, h in hf_side(b, tmp_path, "lr")[0]["files"].items()}
    hf_files = {f: h for f, h in hf_side(b, tmp_path, "hf")[0]["files"].items()}
    assert {f[3:]: h for f, h in files.items()} == {f[3:]: h for f, h in hf_files.items()}
