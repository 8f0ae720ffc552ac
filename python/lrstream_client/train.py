"""Train a LeRobot policy on lrstream batches: ``python -m lrstream_client.train``.

The loop is lerobot-train's (``lerobot/scripts/lerobot_train.py``, 0.6.1) without accelerate:
LeRobot's own factories build the policy (``make_policy_config``, ``make_policy``), its
processors (``make_pre_post_processors`` with the dataset's ``stats.json``) and its optimizer
and scheduler presets; each step times the wait for data (``data_s``: the next batch, the
camera uint8 -> float32 conversion and the preprocessor, as lerobot-train measures it) and the
update (``updt_s``: forward, backward, gradient clipping, optimizer and scheduler steps).
Flags keep lerobot-train's names where they mean the same thing::

    python -m lrstream_client.train --policy.type=act --dataset.root=./my_dataset \\
        --batch_size=8 --steps=1000 --output_dir=outputs/act --save_freq=500 [--resume=true]

``--dataset.repo_id=ORG/NAME`` reads from the Hub (or ``--dataset.root`` a local copy).
``--policy.FIELD=VALUE`` sets any field of the policy's config (JSON values or strings).
``--loader=lerobot`` feeds the same loop from ``LeRobotDataset`` + ``DataLoader`` (for
comparisons); the default ``--loader=lrstream`` spawns ``lrstream serve`` through
:class:`LRStreamDataset`. A checkpoint (``OUTPUT_DIR/checkpoints/STEP``, ``last`` pointing at
the newest) holds the policy, optimizer, scheduler, RNG states and the loader's state, so
``--resume=true`` continues with exactly the batches the interrupted run had not consumed.
Each log line is JSON (``step``, ``loss``, ``grad_norm``, ``lr``, ``data_s``, ``updt_s``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

from .lerobot import DatasetMetadata, delta_timestamps_flag

CKPT_VERSION = 1


def parse_args(argv: Optional[Sequence[str]] = None) -> Tuple[argparse.Namespace, Dict[str, Any], List[str]]:
    p = argparse.ArgumentParser(prog="python -m lrstream_client.train", description=__doc__.split("\n")[0])
    p.add_argument("--policy.type", dest="policy_type", required=True, help="act, diffusion, ... (LeRobot's names)")
    p.add_argument("--dataset.repo_id", dest="repo_id", default=None)
    p.add_argument("--dataset.root", dest="root", default=None)
    p.add_argument("--dataset.revision", dest="revision", default=None)
    p.add_argument("--dataset.video_backend", dest="video_backend", choices=("torchcodec", "pyav"), default=None,
                   help="whose camera pixels (LeRobot's backends differ on 10/12-bit and BT.709-tagged videos): "
                        "default torchcodec, as LeRobot")
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--num_workers", type=int, default=0, help="DataLoader workers")
    p.add_argument("--log_freq", type=int, default=1)
    p.add_argument("--save_freq", type=int, default=0, help="checkpoint every N steps (0: at the end only)")
    p.add_argument("--output_dir", default=None)
    p.add_argument("--resume", type=_bool, default=False)
    p.add_argument("--shuffle", type=_bool, default=True,
                   help="lrstream's shuffled order (true, as lerobot-train shuffles) or plan order")
    p.add_argument("--device", default="cpu")
    p.add_argument("--loader", choices=("lrstream", "lerobot"), default="lrstream")
    p.add_argument("--lrstream", default=None, help="the lrstream binary (default: bundled, else PATH)")
    p.add_argument("--lrstream_args", default="", help="extra `lrstream serve` flags, one string")
    args, rest = p.parse_known_args(argv)
    overrides: Dict[str, Any] = {}
    for a in rest:
        if not a.startswith("--policy.") or "=" not in a:
            p.error(f"unrecognized argument {a!r} (policy fields are --policy.FIELD=VALUE)")
        k, v = a[len("--policy."):].split("=", 1)
        overrides[k] = _value(v)
    if args.root is None and args.repo_id is None:
        p.error("give --dataset.root (a local dataset) or --dataset.repo_id (a Hub dataset)")
    if args.resume and not args.output_dir:
        p.error("--resume=true needs --output_dir")
    return args, overrides, rest


def _bool(s: str) -> bool:
    v = s.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {s!r}")


def _value(s: str) -> Any:
    try:
        v = json.loads(s)
    except ValueError:
        return s
    return tuple(v) if isinstance(v, list) else v


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def build_policy(args: argparse.Namespace, overrides: Dict[str, Any], meta: DatasetMetadata):
    """LeRobot's factories: config, policy, processors, optimizer and scheduler presets."""
    from lerobot.policies.factory import make_policy, make_policy_config, make_pre_post_processors

    cfg = make_policy_config(args.policy_type, device=args.device, push_to_hub=False, **overrides)
    policy = make_policy(cfg, ds_meta=meta)
    check_features(cfg, meta)
    pre, post = make_pre_post_processors(cfg, dataset_stats=meta.stats)
    optimizer = cfg.get_optimizer_preset().build(policy.get_optim_params())
    sched_cfg = cfg.get_scheduler_preset()
    scheduler = sched_cfg.build(optimizer, args.steps) if sched_cfg is not None else None
    return cfg, policy, pre, post, optimizer, scheduler


def check_features(cfg, meta: DatasetMetadata) -> None:
    """Before the first step: every input/output feature the config names is in the dataset
    with the config's shape, and stats.json covers the normalized ones."""
    feats = meta.features
    where = meta.repo_id or str(meta.root)
    for key, ft in {**cfg.input_features, **cfg.output_features}.items():
        if key not in feats:
            raise ValueError(f"{where}: the policy needs feature {key!r}, the dataset has none "
                             f"(it has {', '.join(sorted(feats))})")
        want = tuple(ft.shape)
        shape = tuple(feats[key]["shape"])
        if feats[key].get("dtype") in ("video", "image") and len(shape) == 3 and shape[-1] in (1, 3):
            shape = (shape[2], shape[0], shape[1])  # info.json is HWC, the policy CHW
        if shape != want:
            raise ValueError(f"{where}: feature {key!r} has shape {shape} in the dataset, the policy config "
                             f"says {want}")
    normalized = []
    for key, ft in {**cfg.input_features, **cfg.output_features}.items():
        mode = cfg.normalization_mapping.get(ft.type.value)
        if mode is not None and mode.value != "IDENTITY":
            normalized.append(key)
    meta.require_stats(normalized)


def lrstream_loader(args, meta: DatasetMetadata, delta: Optional[Dict[str, List[float]]]):
    from torch.utils.data import DataLoader

    from .torch_dataset import LRStreamDataset

    dataset = args.root or args.repo_id
    cameras = "all" if meta.camera_keys else "none"  # all: a camera the policy may read never goes missing
    serve = ["--dataset", str(dataset), "--batch-size", str(args.batch_size), "--cameras", cameras,
             "--seed", str(args.seed)]
    if args.revision:
        serve += ["--revision", args.revision]
    if args.video_backend:
        serve += ["--video-backend", args.video_backend]
    if args.shuffle:
        serve.append("--shuffle")
    flag = delta_timestamps_flag(delta)
    if flag:
        serve += ["--delta-timestamps", flag]
    serve += args.lrstream_args.split()
    ds = LRStreamDataset(serve_args=serve, lrstream=args.lrstream, num_workers=args.num_workers)
    dl = DataLoader(ds, batch_size=None, num_workers=args.num_workers)
    return ds, dl


def lerobot_loader(args, meta: DatasetMetadata, delta: Optional[Dict[str, List[float]]]):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from torch.utils.data import DataLoader

    ds = LeRobotDataset(args.repo_id or meta.repo_id, root=args.root, delta_timestamps=delta,
                        revision=args.revision, return_uint8=True, video_backend=args.video_backend)
    dl = DataLoader(ds, batch_size=args.batch_size, shuffle=args.shuffle, num_workers=args.num_workers,
                    drop_last=False)
    return None, dl


def cycle(loader) -> Iterator[Any]:
    """lerobot-train's endless iteration: one pass of the loader is one epoch."""
    while True:
        n = 0
        for batch in loader:
            n += 1
            yield batch
        if n == 0:
            raise RuntimeError("the data loader yielded no batch in a whole epoch")


class ShapeGuard:
    """A batch whose tensor shapes (past the batch dimension) or dtypes change mid-run is an
    error naming the column, not a silent recompilation or a broadcast."""

    def __init__(self) -> None:
        self.seen: Dict[str, Tuple[Tuple[int, ...], torch.dtype]] = {}

    def check(self, step: int, batch: Dict[str, Any]) -> None:
        for k, v in batch.items():
            if not isinstance(v, torch.Tensor):
                continue
            sig = (tuple(v.shape[1:]), v.dtype)
            old = self.seen.setdefault(k, sig)
            if old != sig:
                raise ValueError(f"step {step}: column {k!r} changed from shape {old[0]} {old[1]} "
                                 f"to {sig[0]} {sig[1]} (per sample)")


def to_float_cameras(batch: Dict[str, Any], camera_keys: Sequence[str], device: torch.device) -> Dict[str, Any]:
    """Move to the device, then uint8 frames to float32 in [0, 1] (lerobot-train's conversion)."""
    out: Dict[str, Any] = {}
    for k in batch.keys():
        if k == "_lrstream":
            continue
        v = batch[k]
        if isinstance(v, torch.Tensor):
            v = v.to(device, non_blocking=device.type == "cuda")
            if k in camera_keys and v.dtype == torch.uint8:
                v = v.to(dtype=torch.float32) / 255.0
        out[k] = v
    return out


def update(policy, batch, optimizer, scheduler, grad_clip_norm: float) -> Tuple[float, float]:
    """lerobot-train's update_policy step (no accelerate, no sample weights)."""
    policy.train()
    loss, _ = policy.forward(batch)
    loss.backward()
    if grad_clip_norm > 0:
        grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), grad_clip_norm)
    else:
        grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), float("inf"), error_if_nonfinite=False)
    optimizer.step()
    optimizer.zero_grad()
    if scheduler is not None:
        scheduler.step()
    if callable(getattr(policy, "update", None)):
        policy.update()
    return loss.item(), grad_norm.item()


def save_checkpoint(out: Path, step: int, policy, optimizer, scheduler, loader_ds) -> Path:
    """OUTPUT/checkpoints/STEP (written to a temporary name, renamed when complete), ``last``."""
    ckpts = out / "checkpoints"
    ckpts.mkdir(parents=True, exist_ok=True)
    final = ckpts / f"{step:06d}"
    tmp = ckpts / f".{step:06d}.tmp{os.getpid()}"
    tmp.mkdir()
    state = {
        "version": CKPT_VERSION, "step": step,
        "policy": policy.state_dict(), "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "loader": loader_ds.state_dict() if loader_ds is not None else None,
        "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()},
    }
    torch.save(state, tmp / "state.pt")
    with open(tmp / "state.pt", "rb+") as f:
        os.fsync(f.fileno())
    if final.exists():  # a run resumed from an earlier checkpoint writes this step again
        shutil.rmtree(final)
    os.replace(tmp, final)
    last = ckpts / "last"
    link_tmp = ckpts / f".last.tmp{os.getpid()}"
    if link_tmp.is_symlink():
        link_tmp.unlink()
    link_tmp.symlink_to(final.name)
    os.replace(link_tmp, last)
    return final


def load_checkpoint(out: Path, policy, optimizer, scheduler, loader_ds) -> Tuple[int, Dict[str, Any]]:
    """Restores everything but the RNG states, which it returns: they are set after the first
    batch of the resumed run is taken, because creating the DataLoader's iterator draws a seed
    from torch's generator -- which the uninterrupted run did at step 0, not here."""
    path = out / "checkpoints" / "last" / "state.pt"
    if not path.is_file():
        raise FileNotFoundError(f"{out}: no checkpoint to resume from ({path} is missing)")
    state = torch.load(path, map_location="cpu", weights_only=False)
    if state.get("version") != CKPT_VERSION:
        raise ValueError(f"{path}: checkpoint version {state.get('version')}, this trainer writes {CKPT_VERSION}")
    policy.load_state_dict(state["policy"])
    optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None and state["scheduler"] is not None:
        scheduler.load_state_dict(state["scheduler"])
    if loader_ds is not None:
        if state["loader"] is None:
            raise ValueError(f"{path}: the checkpoint holds no lrstream loader state (written with --loader=lerobot)")
        loader_ds.load_state_dict(state["loader"])
    return int(state["step"]), state["rng"]


def set_rng_state(rng: Dict[str, Any]) -> None:
    torch.set_rng_state(rng["torch"])
    np.random.set_state(rng["numpy"])
    random.setstate(rng["python"])


def log(rec: Dict[str, Any]) -> None:
    print(json.dumps(rec), flush=True)


def train(argv: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """Run the loop; returns the log records (every step's, whatever --log_freq says)."""
    args, overrides, _ = parse_args(argv)
    from lerobot.datasets.factory import resolve_delta_timestamps

    set_seed(args.seed)
    meta = DatasetMetadata.load(args.root or args.repo_id, revision=args.revision)
    cfg, policy, pre, _post, optimizer, scheduler = build_policy(args, overrides, meta)
    delta = resolve_delta_timestamps(cfg, meta)
    make = lrstream_loader if args.loader == "lrstream" else lerobot_loader
    loader_ds, dl = make(args, meta, delta)
    out = Path(args.output_dir) if args.output_dir else None
    try:
        step, rng = load_checkpoint(out, policy, optimizer, scheduler, loader_ds) if args.resume else (0, None)
        return run_steps(args, cfg, policy, pre, optimizer, scheduler, loader_ds, dl, meta, step, out, rng)
    finally:
        close = getattr(loader_ds, "close", None)
        if close is not None:
            close()  # the spawned lrstream serve, also when a step fails


def run_steps(args, cfg, policy, pre, optimizer, scheduler, loader_ds, dl, meta, step, out,
              pending_rng) -> List[Dict[str, Any]]:
    device = torch.device(args.device)
    clip = cfg.get_optimizer_preset().grad_clip_norm
    guard = ShapeGuard()
    records: List[Dict[str, Any]] = []
    it = cycle(dl)
    while step < args.steps:
        t0 = time.perf_counter()
        raw = next(it)
        if pending_rng is not None:  # after the loader's iterator drew its seed (see load_checkpoint)
            set_rng_state(pending_rng)
            pending_rng = None
        batch = to_float_cameras(raw, meta.camera_keys, device)
        guard.check(step, batch)
        batch = pre(batch)
        data_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        loss, grad_norm = update(policy, batch, optimizer, scheduler, clip)
        updt_s = time.perf_counter() - t1
        step += 1
        rec = {"step": step, "loss": loss, "grad_norm": grad_norm, "lr": optimizer.param_groups[0]["lr"],
               "data_s": round(data_s, 6), "updt_s": round(updt_s, 6)}
        records.append(rec)
        if args.log_freq > 0 and step % args.log_freq == 0:
            log(rec)
        if out is not None and ((args.save_freq > 0 and step % args.save_freq == 0) or step == args.steps):
            path = save_checkpoint(out, step, policy, optimizer, scheduler, loader_ds)
            log({"checkpoint": str(path), "step": step})
    return records


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        train(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
