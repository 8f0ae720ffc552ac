"""lrstream's Hub cache vs huggingface_hub's, both ways, against fake_hub.FakeHub.

huggingface_hub runs in a subprocess (hf_client.py) so it reads the environment itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fake_hub import FakeHub
from make_lerobot_dataset import CAMERAS

HERE = Path(__file__).resolve().parent
RECIPE = HERE / "recipes" / "v061_mem_vqa_speech.yaml"
REPO_ID = "interop/full"
TOKEN = "hf_interopSECRETtoken0123456789"


def clean_env(**kw):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGING_FACE", "HUGGINGFACE"))}
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    env.update({k: str(v) for k, v in kw.items() if v is not None})
    return env


def hf(env, *args):
    p = subprocess.run([sys.executable, str(HERE / "hf_client.py"), *args], env=env, capture_output=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"hf_client {args}: {p.stderr.decode()[-1500:]}")
    return json.loads(p.stdout)


def lrstream(bin_, env, dataset=REPO_ID):
    cmd = [str(bin_), "stream", "--dataset", dataset, "--recipe", str(RECIPE), "--mode", "drop", "--no-task-aug",
           "--format", "jsonl", "--batch-size", "64", "--workers", "1", "-q"]
    p = subprocess.run(cmd, env=env, capture_output=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"lrstream {dataset}: exit {p.returncode}: {p.stderr.decode()[-1500:]}")
    return [json.loads(line) for line in p.stdout.splitlines()]


def repo_requests(hub):
    """Logged requests for the dataset (huggingface_hub also calls unrelated /api/ routes)."""
    return [r for r in hub.log if f"/{REPO_ID}/" in r[1] or r[1].startswith("/cdn/")]


def cache_tree(cache: Path) -> dict[str, str]:
    """snapshot-relative path -> symlink target, plus refs and blob names."""
    repo = cache / "datasets--interop--full"
    out = {}
    for p in sorted((repo / "snapshots").rglob("*")):
        if p.is_symlink():
            out[p.relative_to(repo).as_posix()] = os.readlink(p)
    for p in sorted((repo / "refs").rglob("*")):
        if p.is_file():
            out[p.relative_to(repo).as_posix()] = p.read_text()
    return out


@pytest.fixture()
def hub(lerobot_datasets):
    with FakeHub(lerobot_datasets["full"], REPO_ID) as h:
        yield h


def test_lrstream_cache_is_found_by_huggingface_hub(lrstream_bin, hub, tmp_path, lerobot_datasets):
    cache = tmp_path / "hub"
    env = clean_env(HF_ENDPOINT=hub.url, HF_HUB_CACHE=cache)
    lrstream(lrstream_bin, env)
    snap = cache / "datasets--interop--full" / "snapshots" / hub.sha
    files = sorted(p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file())
    assert "meta/info.json" in files and "data/chunk-000/file-000.parquet" in files, files
    assert (cache / "datasets--interop--full" / "refs" / "main").read_text() == hub.sha
    n = len(repo_requests(hub))
    offline = clean_env(HF_HUB_CACHE=cache, HF_HUB_OFFLINE=1)
    got = hf(offline, "download", REPO_ID, *files, "--local")["paths"]
    assert got == [str(snap / f) for f in files]
    for f, p in zip(files, got):
        assert Path(p).read_bytes() == (lerobot_datasets["full"] / f).read_bytes(), f
        blob = Path(os.path.realpath(p)).name
        want = hub.files[f]["sha256"] if hub.files[f]["lfs"] else hub.files[f]["sha1"]
        assert blob == want, f"{f}: blob named {blob}, huggingface_hub names it {want}"
    assert hf(offline, "snapshot", REPO_ID, "--local")["path"] == str(snap)
    # local_files_only also works online (no request to the Hub).
    hf(clean_env(HF_ENDPOINT=hub.url, HF_HUB_CACHE=cache), "download", REPO_ID, *files, "--local")
    assert repo_requests(hub)[n:] == [], repo_requests(hub)[n:]
    # Same blobs and relative symlinks as huggingface_hub writes for the same files.
    ref = tmp_path / "ref"
    hf(clean_env(HF_ENDPOINT=hub.url, HF_HUB_CACHE=ref), "download", REPO_ID, *files)
    assert cache_tree(cache) == cache_tree(ref)


def test_snapshot_download_cache_is_used_by_lrstream(lrstream_bin, hub, tmp_path):
    cache = tmp_path / "hub"
    hf(clean_env(HF_ENDPOINT=hub.url, HF_HUB_CACHE=cache), "snapshot", REPO_ID)
    hub.log.clear()
    reference = lrstream(lrstream_bin, clean_env(HF_ENDPOINT=hub.url, HF_HUB_CACHE=cache, HF_HUB_OFFLINE=1))
    assert repo_requests(hub) == [], "HF_HUB_OFFLINE=1 must make no request"
    assert reference[-1]["type"] == "end" and reference[-1]["samples"] > 0
    # Online, no file is downloaded again. What is asked, and why:
    # - by branch: the revision resolution (a branch can move);
    # - one listing of meta/episodes (recursive): lrstream cannot tell a complete snapshot from a
    #   partial one (hf_hub_download fills snapshots file by file), so listing a directory online
    #   asks the Hub; the files listed are then all read from the snapshot. (huggingface_hub 1.33
    #   writes a per-commit tree listing next to the snapshot that could answer it: reported to
    #   the fetch owner, docs/interop.md.)
    # - one listing per camera's video directory, for the same reason: --cameras auto decodes a
    #   camera whose video files for the selected episodes exist (docs/video.md, "Sources"); the
    #   videos are then read from the snapshot.
    # - by branch only, one non-recursive listing of meta/ and of data/chunk-000: a cached file
    #   opened by name has its size checked against the Hub's listing (a blob truncated since it
    #   was downloaded is downloaded again; docs/hub.md, "What is verified").
    listing = [f"/api/datasets/{REPO_ID}/tree/{hub.sha}/meta/episodes?recursive=true"] + [
        f"/api/datasets/{REPO_ID}/tree/{hub.sha}/videos/{cam}/chunk-000?recursive=true" for cam in CAMERAS]
    online = lrstream(lrstream_bin, clean_env(HF_ENDPOINT=hub.url, HF_HUB_CACHE=cache))
    tree = f"/api/datasets/{REPO_ID}/tree/{hub.sha}"
    assert [r[1] for r in repo_requests(hub)] == [f"/api/datasets/{REPO_ID}/revision/main", f"{tree}/meta", listing[0],
                                                  f"{tree}/data/chunk-000", *listing[1:]], hub.log
    hub.log.clear()
    # Online, by commit SHA whose snapshot is cached: no revision request (a commit is immutable).
    pinned = lrstream(lrstream_bin, clean_env(HF_ENDPOINT=hub.url, HF_HUB_CACHE=cache), f"{REPO_ID}@{hub.sha}")
    assert [r[1] for r in repo_requests(hub)] == listing, hub.log
    strip = lambda msgs: [m for m in msgs if m["type"] == "batch"]  # noqa: E731
    assert strip(online) == strip(reference) == strip(pinned)


@pytest.mark.parametrize("source", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH",
                                    "HF_HOME/token", "HF_TOKEN over file"])
def test_token_sources_read_like_huggingface_hub(lrstream_bin, lerobot_datasets, tmp_path, source):
    home = tmp_path / "home"
    home.mkdir()
    kw = {"HF_HOME": home}
    if source == "HF_TOKEN":
        kw["HF_TOKEN"] = TOKEN
    elif source == "HUGGING_FACE_HUB_TOKEN":  # legacy name, still read by both
        kw["HUGGING_FACE_HUB_TOKEN"] = TOKEN
    elif source == "HF_TOKEN_PATH":
        (tmp_path / "tok").write_text(TOKEN + "\n")
        kw["HF_TOKEN_PATH"] = tmp_path / "tok"
    elif source == "HF_HOME/token":
        (home / "token").write_text(TOKEN + "\n")
    else:
        (home / "token").write_text("hf_wrong_file_token\n")
        kw["HF_TOKEN"] = TOKEN
    with FakeHub(lerobot_datasets["full"], REPO_ID, token=TOKEN) as hub:
        hf(clean_env(HF_ENDPOINT=hub.url, HF_HUB_CACHE=tmp_path / "py", **kw), "download", REPO_ID, "meta/info.json")
        py_auth = {a for _, p, a in repo_requests(hub) if not p.startswith("/cdn/")}
        hub.log.clear()
        lrstream(lrstream_bin, clean_env(HF_ENDPOINT=hub.url, HF_HUB_CACHE=tmp_path / "go", **kw))
        go_auth = {a for _, p, a in repo_requests(hub) if not p.startswith("/cdn/")}
        go_cdn = {a for _, p, a in repo_requests(hub) if p.startswith("/cdn/")}
    assert py_auth == {f"Bearer {TOKEN}"}, py_auth
    assert go_auth == py_auth, f"lrstream sent {go_auth}, huggingface_hub {py_auth}"
    assert go_cdn == {None}, f"lrstream sent {go_cdn} to the CDN (another host)"


def test_fake_hub_command_line(lrstream_bin, tmp_path):
    """`python fake_hub.py --root DIR --repo ORG/NAME` serves DIR by hand
    (docs/hub.md, "Trying the Hub path offline"): lrstream streams it as
    ORG/NAME with the batches of the local directory, and Ctrl-C stops it."""
    import signal

    demo = HERE.parent.parent / "testdata" / "demo"
    bad = subprocess.run([sys.executable, str(HERE / "fake_hub.py"), "--root", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no meta/info.json" in bad.stderr, bad
    p = subprocess.Popen([sys.executable, str(HERE / "fake_hub.py"), "--root", str(demo), "--repo", "demo/robot",
                          "--port", "0", "-v"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = p.stdout.readline()
        assert first.startswith(f"fake Hub: serving {demo} as dataset demo/robot"), first
        line = p.stdout.readline().strip()
        assert line.startswith("export HF_ENDPOINT=http://127.0.0.1:"), line
        endpoint = line.split("=", 1)[1]
        args = ["stream", "--cameras", "none", "--format", "jsonl", "--batch-size", "64", "--workers", "1", "-q"]
        env = clean_env(HF_ENDPOINT=endpoint, HF_HUB_CACHE=tmp_path / "cache", HF_TOKEN_PATH=tmp_path / "none")
        hub = subprocess.run([str(lrstream_bin), *args, "--dataset", "demo/robot"], env=env, capture_output=True,
                             text=True, timeout=120)
        assert hub.returncode == 0, hub.stderr
        local = subprocess.run([str(lrstream_bin), *args, "--dataset", str(demo)], capture_output=True, text=True,
                               timeout=120, check=True)
        hub_lines, local_lines = hub.stdout.splitlines(), local.stdout.splitlines()
        assert json.loads(hub_lines[0])["dataset"] == "demo/robot"
        assert json.loads(hub_lines[0])["revision"] == "c0ffee" + "0" * 34
        assert len(hub_lines) > 3 and hub_lines[1:] == local_lines[1:], "the Hub copy streams other batches"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, err
    assert "hub: GET /api/datasets/demo/robot/revision/main" in err, err
    assert "cdn: GET /cdn/" in err and "fake Hub: stopped" in err, err
