"""LeRobot's own policies trained on lrstream batches, step by step (issue: LeRobot training proof).

The same training loop (``lrstream_client.train``: lerobot-train's steps, LeRobot's factories,
optimizer and scheduler presets) is fed once by ``LeRobotDataset`` + ``DataLoader`` and once by
lrstream (``LRStreamDataset`` over a spawned ``lrstream serve``), in plan order, on a dataset
written by LeRobot's writer (2 AV1 cameras, 4 episodes of 7-15 frames, batch 4: the 20 steps
cross an epoch boundary and its short last batch). Asserted: the loss and gradient norm of every
step are bitwise equal, and so is every parameter after the last step; an lrstream run killed
(SIGKILL) after its checkpoint at step 10 and resumed from it gives the same steps 11-20 and the
same parameters as the uninterrupted run. ACT and Diffusion Policy run with small widths (their
factories' defaults otherwise; no pretrained backbone: nothing can be downloaded here) so the
suite stays short on 2 CPU cores.

Also: ``DatasetMetadata`` against ``LeRobotDatasetMetadata``, ``to_lerobot`` batches against
``DataLoader(LeRobotDataset)`` batches (float32 and uint8 frames, camera windows), and the
errors a mismatched dataset gives before the first step.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import REPO

from lrstream_client import read_stream
from lrstream_client.lerobot import DatasetMetadata, LeRobotBatches, LeRobotFormat, delta_timestamps_flag, to_lerobot
from lrstream_client import train as trainmod

STEPS = 20
STOP_AT = 10
POLICIES = {
    "act": ["--policy.chunk_size=4", "--policy.n_action_steps=4", "--policy.dim_model=64",
            "--policy.dim_feedforward=128", "--policy.n_heads=2", "--policy.n_encoder_layers=1",
            "--policy.n_vae_encoder_layers=1", "--policy.latent_dim=8",
            "--policy.pretrained_backbone_weights=null"],
    "diffusion": ["--policy.horizon=8", "--policy.n_action_steps=4", "--policy.n_obs_steps=2",
                  "--policy.down_dims=[32,64]", "--policy.crop_shape=[56,88]",
                  "--policy.diffusion_step_embed_dim=32", "--policy.spatial_softmax_num_keypoints=16",
                  "--policy.pretrained_backbone_weights=null"],
}


def base_args(policy: str, dataset: Path, bin_: Path, loader: str, **kw) -> list[str]:
    args = [f"--policy.type={policy}", f"--dataset.root={dataset}", "--dataset.repo_id=interop/none",
            "--batch_size=4", f"--steps={STEPS}", "--shuffle=false", f"--loader={loader}",
            f"--lrstream={bin_}", "--log_freq=1", *POLICIES[policy]]
    args += [f"--{k}={v}" for k, v in kw.items()]
    return args


def policy_state(out: Path) -> dict:
    return torch.load(out / "checkpoints" / "last" / "state.pt", map_location="cpu", weights_only=False)["policy"]


def assert_same_params(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    diff = [k for k in a if not torch.equal(a[k], b[k])]
    assert not diff, f"{len(diff)} parameters differ, first {diff[:3]}"


def run_killed_at(args: list[str], step: int) -> None:
    """Run the trainer in a child process and SIGKILL its process group once it logged the
    checkpoint of ``step`` (the spawned lrstream serve goes with it)."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    p = subprocess.Popen([sys.executable, "-m", "lrstream_client.train", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    seen = []
    try:
        for line in p.stdout:
            seen.append(line)
            rec = json.loads(line)
            if rec.get("checkpoint") and rec["step"] == step:
                os.killpg(p.pid, signal.SIGKILL)
                break
        else:
            raise AssertionError(f"the trainer ended without a checkpoint at step {step}: {seen[-3:]}")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()  # a ResourceWarning otherwise (the suites run with warnings as errors)
    assert p.returncode == -signal.SIGKILL


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_policy_trains_identically(lrstream_bin, lerobot_datasets, tmp_path, policy):
    ds = lerobot_datasets["none"]
    ref_out, lrs_out, res_out = tmp_path / "lerobot", tmp_path / "lrstream", tmp_path / "resumed"
    want = trainmod.train(base_args(policy, ds, lrstream_bin, "lerobot", output_dir=ref_out))
    got = trainmod.train(base_args(policy, ds, lrstream_bin, "lrstream", output_dir=lrs_out))
    assert len(want) == len(got) == STEPS
    for w, g in zip(want, got):
        assert (g["step"], g["loss"], g["grad_norm"], g["lr"]) == (w["step"], w["loss"], w["grad_norm"], w["lr"]), \
            f"{policy} step {w['step']}: LeRobotDataset {w} lrstream {g}"
    assert_same_params(policy_state(ref_out), policy_state(lrs_out))

    # Killed after the checkpoint at STOP_AT, resumed in this process: the rest of the run is the same.
    run_killed_at(base_args(policy, ds, lrstream_bin, "lrstream", output_dir=res_out, save_freq=STOP_AT), STOP_AT)
    rest = trainmod.train(base_args(policy, ds, lrstream_bin, "lrstream", output_dir=res_out, resume="true"))
    assert [r["step"] for r in rest] == list(range(STOP_AT + 1, STEPS + 1))
    for w, g in zip(got[STOP_AT:], rest):
        assert (g["loss"], g["grad_norm"], g["lr"]) == (w["loss"], w["grad_norm"], w["lr"]), \
            f"{policy} resumed step {w['step']}: uninterrupted {w} resumed {g}"
    assert_same_params(policy_state(lrs_out), policy_state(res_out))


def test_metadata_matches_lerobot(lerobot_datasets):
    from lerobot.datasets.dataset_metadata import LeRobotDatasetMetadata

    root = lerobot_datasets["none"]
    ref = LeRobotDatasetMetadata("interop/none", root=root)
    meta = DatasetMetadata.load(str(root))
    assert meta.features == ref.features
    assert meta.fps == ref.fps and meta.camera_keys == ref.camera_keys
    assert meta.total_frames == ref.total_frames and meta.total_episodes == ref.total_episodes

    def walk(a, b, path=""):
        assert type(a) is type(b), path
        if isinstance(a, dict):
            assert a.keys() == b.keys(), path
            for k in a:
                walk(a[k], b[k], f"{path}/{k}")
        else:
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), path

    walk(meta.stats, ref.stats)


@pytest.mark.parametrize("uint8", [False, True])
def test_to_lerobot_matches_collated_lerobot(lrstream_bin, lerobot_datasets, uint8):
    """to_lerobot(lrstream batch) == DataLoader(LeRobotDataset(..., return_uint8)) batch, every
    key, dtype, shape and value (camera windows included)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from torch.utils.data import DataLoader

    root = lerobot_datasets["none"]
    delta = {"action": [0.0, 0.1, 0.2], "observation.images.front": [-0.1, 0.0], "observation.state": [-0.1, 0.0]}
    ref = LeRobotDataset("interop/none", root=root, delta_timestamps=delta, return_uint8=uint8)
    want = list(DataLoader(ref, batch_size=8, shuffle=False))
    p = subprocess.run([str(lrstream_bin), "stream", "--dataset", str(root), "--batch-size", "8", "--cameras", "all",
                        "--delta-timestamps", delta_timestamps_flag(delta), "-q"], capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    import io

    meta = DatasetMetadata.load(str(root))
    got = [to_lerobot(b, meta.camera_keys, return_uint8=uint8) for b in read_stream(io.BytesIO(p.stdout))]
    assert len(got) == len(want)
    for i, (w, g) in enumerate(zip(want, got)):
        assert g.keys() == w.keys(), f"batch {i}: {sorted(g.keys() ^ w.keys())}"
        for k, wv in w.items():
            gv = g[k]
            if isinstance(wv, torch.Tensor):
                assert gv.dtype == wv.dtype and gv.shape == wv.shape, f"batch {i} {k}: {gv.dtype} {gv.shape} vs {wv.dtype} {wv.shape}"
                assert torch.equal(gv, wv), f"batch {i} {k}: values differ"
            else:
                assert gv == wv, f"batch {i} {k}"


def test_lerobot_format_options(lrstream_bin, lerobot_datasets):
    """The two ways to ask for LeRobot's format: LRStreamDataset(transform=LeRobotFormat(...)) and
    LeRobotBatches(read_stream(...)) give DataLoader(LeRobotDataset(...))'s batches."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from torch.utils.data import DataLoader

    from lrstream_client import LRStreamDataset

    root = lerobot_datasets["none"]
    want = list(DataLoader(LeRobotDataset("interop/none", root=root), batch_size=16, shuffle=False))
    meta = DatasetMetadata.load(str(root))
    ds = LRStreamDataset(serve_args=["--dataset", str(root), "--batch-size", "16", "--cameras", "all"],
                         lrstream=str(lrstream_bin), transform=LeRobotFormat(meta.camera_keys))
    try:
        via_dataset = [dict(b) for b in DataLoader(ds, batch_size=None, num_workers=0)]
    finally:
        ds.close()
    p = subprocess.run([str(lrstream_bin), "stream", "--dataset", str(root), "--batch-size", "16", "--cameras", "all",
                        "-q"], capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    import io

    via_reader = list(LeRobotBatches(read_stream(io.BytesIO(p.stdout)), meta.camera_keys))
    for got in (via_dataset, via_reader):
        assert len(got) == len(want)
        for w, g in zip(want, got):
            assert g.keys() == w.keys()
            for k, wv in w.items():
                if isinstance(wv, torch.Tensor):
                    assert g[k].dtype == wv.dtype and torch.equal(g[k], wv), k
                else:
                    assert g[k] == wv, k


def test_delta_timestamps_flag():
    assert delta_timestamps_flag(None) is None
    assert delta_timestamps_flag({"action": [0.0, 0.1], "observation.state": [-0.1]}) == \
        "action=0.0,0.1;observation.state=-0.1"
    with pytest.raises(ValueError, match="empty"):
        delta_timestamps_flag({"action": []})


def test_shape_guard_names_the_column():
    g = trainmod.ShapeGuard()
    g.check(0, {"a": torch.zeros(4, 3), "task": ["x"] * 4})
    g.check(1, {"a": torch.zeros(2, 3)})  # a short last batch is fine
    with pytest.raises(ValueError, match=r"step 2: column 'a' changed from shape \(3,\)"):
        g.check(2, {"a": torch.zeros(4, 5)})


def _copy_dataset(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_bad_input_fails_before_the_first_step(lrstream_bin, lerobot_datasets, tmp_path):
    src = lerobot_datasets["none"]
    # stats.json missing: the normalizer cannot be built.
    no_stats = _copy_dataset(src, tmp_path / "no_stats")
    (no_stats / "meta" / "stats.json").unlink()
    with pytest.raises(ValueError, match="meta/stats.json is missing"):
        trainmod.train(base_args("act", no_stats, lrstream_bin, "lrstream"))
    # A camera the policy config names that the dataset lacks, and a wrong shape.
    from lerobot.configs.types import FeatureType, PolicyFeature

    meta = DatasetMetadata.load(str(src))
    from lerobot.policies.factory import make_policy_config

    cfg = make_policy_config("act", device="cpu", push_to_hub=False)
    cfg.input_features = {"observation.images.top": PolicyFeature(type=FeatureType.VISUAL, shape=(3, 64, 96))}
    cfg.output_features = {"action": PolicyFeature(type=FeatureType.ACTION, shape=(6,))}
    with pytest.raises(ValueError, match="needs feature 'observation.images.top'"):
        trainmod.check_features(cfg, meta)
    cfg.input_features = {"observation.images.front": PolicyFeature(type=FeatureType.VISUAL, shape=(3, 96, 96))}
    with pytest.raises(ValueError, match=r"'observation.images.front' has shape \(3, 64, 96\) in the dataset"):
        trainmod.check_features(cfg, meta)


def test_stored_wider_than_declared_streams_as_lerobot_loads(lrstream_bin, lerobot_datasets, tmp_path):
    """A numeric column stored wider than info.json declares (action as float64, frame_index as
    int32: writers other than LeRobot's do this) is cast by LeRobotDataset to the declared type
    and then to torch's; lrstream emits the same dtypes and values, not a refusal."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from torch.utils.data import DataLoader

    root = _copy_dataset(lerobot_datasets["none"], tmp_path / "wide")
    for f in sorted((root / "data").rglob("*.parquet")):
        t = pq.read_table(f)
        i = t.schema.get_field_index("action")
        t = t.set_column(i, "action", t.column("action").cast(pa.list_(pa.float64())))
        j = t.schema.get_field_index("frame_index")
        t = t.set_column(j, "frame_index", t.column("frame_index").cast(pa.int32()))
        pq.write_table(t, f)
    want = list(DataLoader(LeRobotDataset("interop/none", root=root), batch_size=16, shuffle=False))
    p = subprocess.run([str(lrstream_bin), "stream", "--dataset", str(root), "--batch-size", "16", "--cameras", "none",
                        "-q"], capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    import io

    got = list(read_stream(io.BytesIO(p.stdout)))
    assert len(got) == len(want)
    for w, g in zip(want, got):
        for k in ("action", "frame_index", "observation.state", "index", "timestamp"):
            gv = torch.from_numpy(np.array(g[k]))  # a copy: the decoded arrays are read-only views
            assert gv.dtype == w[k].dtype and torch.equal(gv, w[k]), k


def test_video_backend_reaches_both_loaders(monkeypatch):
    """--dataset.video_backend (lerobot-train's name) becomes lrstream serve's --video-backend
    and LeRobotDataset's video_backend, so that --loader=lerobot compares like with like."""
    import lrstream_client.torch_dataset as td

    seen = {}

    class Recorder:
        def __init__(self, serve_args=None, **kw):
            seen["serve"] = list(serve_args)

    monkeypatch.setattr(td, "LRStreamDataset", Recorder)
    meta = type("Meta", (), {"camera_keys": ["observation.images.front"], "repo_id": "x/y"})()
    for backend, want in ((None, None), ("pyav", "pyav"), ("torchcodec", "torchcodec")):
        argv = ["--policy.type=act", "--dataset.root=/nonexistent"]
        if backend:
            argv.append(f"--dataset.video_backend={backend}")
        args, _, _ = trainmod.parse_args(argv)
        assert args.video_backend == want
        trainmod.lrstream_loader(args, meta, None)
        s = seen["serve"]
        assert (s[s.index("--video-backend") + 1] if "--video-backend" in s else None) == want
    with pytest.raises(SystemExit):
        trainmod.parse_args(["--policy.type=act", "--dataset.root=x", "--dataset.video_backend=video_reader"])
