"""Write a LeRobot v3 dataset with LeRobot's own writers (fixture for the interop suite).

The dataset is produced exactly the way a LeRobot user produces one:

* ``LeRobotDataset.create`` / ``add_frame`` / ``save_episode`` / ``finalize``
  (lerobot >= 0.6.1) write the numeric features (``observation.state``,
  ``action``) and two video cameras (``observation.images.front``,
  ``observation.images.wrist``), encoded by LeRobot's default encoder
  (AV1 through pyav's libsvtav1) or H.264 (``--codec h264``). LeRobot's
  default file-size limits put several episodes in one mp4 per camera
  (the fixture asserts at least one mp4 holds two or more episodes).
  ``--codec image`` stores the cameras as image features instead (PNG
  bytes in the parquet files, LeRobot's ``use_videos=False``).
* the language columns are then added by
  ``lerobot.annotations.steerable_pipeline.writer.LanguageColumnsWriter``
  fed canned module outputs (``plan`` / ``interjections`` / ``vqa`` staging
  files, no VLM), checked by its ``StagingValidator``, followed by the
  Executor's ``meta/info.json`` update (language features + ``say`` tool),
  exactly the writer phase of ``lerobot-annotate``:

  - ``full``: every episode has subtasks, a plan (re-planned at the
    interjection), memories, an interjection with its speech tool call and
    a VQA pair per camera; even episodes also carry two ``task_aug`` rows;
  - ``partial``: only even episodes are annotated; the writer gives the odd
    ones empty lists;
  - ``none``: the writer is not run (no language columns at all).

Content is deterministic (``--seed``): state/action are seeded random
values, pixels are per-camera gradients plus the global frame index and a
moving block (sharp edges: chroma subsampling and the YUV->RGB conversion
matter), so a frame taken from the wrong episode, offset or camera is
visible. The same datasets serve the interop suite (conftest.py) and the
camera pixel tests (test_camera_pixels.py, ``annotate="none"``, 30 fps).

CLI::

    python make_lerobot_dataset.py OUT_DIR [--annotate full|partial|none]
        [--codec av1|h264|image] [--height 64] [--width 96] [--episodes 4]
        [--fps 10] [--seed 0] [--repo-id interop/lerobot_written]

Importable: ``make_dataset(root, annotate="full", codec="av1", height=64,
width=96, episodes=4, fps=10, seed=0, repo_id=...) -> Path``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

CAMERAS = ("observation.images.front", "observation.images.wrist")
STATE_DIM = 6
ACTION_DIM = 6
TASKS = ("pick up the red cube", "open the drawer", "stack the blocks")


def episode_lengths(episodes: int) -> list[int]:
    """Varying episode lengths (deterministic)."""
    base = (12, 7, 15, 9, 11, 5, 13, 8)
    return [base[i % len(base)] for i in range(episodes)]


def frame_pixels(cam: int, global_index: int, height: int, width: int) -> np.ndarray:
    """HWC uint8 image: a per-camera gradient shifted by the global frame index.

    Channel 0 is a horizontal ramp, channel 1 a vertical ramp, channel 2 a
    flat level that encodes the frame index (about 8 levels per frame,
    modulo 256); a 16x16 block moves with the frame index (sharp edges).
    """
    ys, xs = np.mgrid[0:height, 0:width]
    img = np.empty((height, width, 3), dtype=np.uint8)
    shift = 40 * cam + 3 * global_index
    img[..., 0] = ((xs * 255) // max(width - 1, 1) + shift) % 256
    img[..., 1] = ((ys * 255) // max(height - 1, 1) + 2 * shift) % 256
    img[..., 2] = (16 + 8 * global_index + 100 * cam) % 256
    if height > 24 and width > 16:
        x0 = (4 * global_index + 9 * cam) % (width - 16)
        img[8:24, x0 : x0 + 16] = (255 - 40 * cam, 40 * global_index % 256, 200)
    return img


def _canned_staging(ep: int, timestamps: list[float], cameras: tuple[str, ...]) -> dict[str, list[dict]]:
    """Canned module outputs of the steerable pipeline for one episode."""
    from lerobot.annotations.steerable_pipeline.writer import speech_atom

    n = len(timestamps)
    third = max(n // 3, 1)
    t0, t1, t2 = timestamps[0], timestamps[min(third, n - 1)], timestamps[min(2 * third, n - 1)]
    plan = [
        {"role": "assistant", "style": "subtask", "timestamp": t0, "content": f"ep{ep}: reach the object"},
        {"role": "assistant", "style": "subtask", "timestamp": t1, "content": f"ep{ep}: grasp it"},
        {"role": "assistant", "style": "subtask", "timestamp": t2, "content": f"ep{ep}: place it"},
        {"role": "assistant", "style": "plan", "timestamp": t0,
         "content": f"1. reach 2. grasp 3. place (episode {ep})"},
        {"role": "assistant", "style": "memory", "timestamp": t1, "content": f"ep{ep}: object reached"},
        {"role": "assistant", "style": "memory", "timestamp": t2, "content": f"ep{ep}: object grasped"},
    ]
    if ep % 2 == 0:  # task rephrasings (task_aug) on even episodes
        for k in range(2):
            plan.append({"role": "user", "style": "task_aug", "timestamp": t0,
                         "content": f"ep{ep}: rephrased task {k}"})
    inter_t = timestamps[min(third + 1, n - 1)]
    # The pipeline re-plans at every interjection (its validator requires it).
    plan.append({"role": "assistant", "style": "plan", "timestamp": inter_t,
                 "content": f"1. slow down 2. place (episode {ep})"})
    interjections = [
        {"role": "user", "style": "interjection", "timestamp": inter_t, "content": f"ep{ep}: go slower please"},
        speech_atom(inter_t, f"ep{ep}: slowing down"),
    ]
    vqa = []
    for ci, cam in enumerate(cameras):
        tq = timestamps[min(ci + 1, n - 1)]
        vqa.append({"role": "user", "style": "vqa", "timestamp": tq, "camera": cam,
                    "content": f"ep{ep} cam{ci}: how many objects?"})
        vqa.append({"role": "assistant", "style": "vqa", "timestamp": tq, "camera": cam,
                    "content": json.dumps({"label": "cube", "count": ep + ci + 1})})
    return {"plan": plan, "interjections": interjections, "vqa": vqa}


def annotate(root: Path, mode: str) -> None:
    """Add the language columns with LeRobot's LanguageColumnsWriter."""
    if mode == "none":
        return
    from lerobot.annotations.steerable_pipeline.reader import iter_episodes
    from lerobot.annotations.steerable_pipeline.staging import EpisodeStaging
    from lerobot.annotations.steerable_pipeline.executor import Executor
    from lerobot.annotations.steerable_pipeline.validator import StagingValidator
    from lerobot.annotations.steerable_pipeline.writer import LanguageColumnsWriter

    records = list(iter_episodes(root))
    with tempfile.TemporaryDirectory(prefix="lrstream-staging-") as staging_dir:
        staging = Path(staging_dir)
        for rec in records:
            if mode == "partial" and rec.episode_index % 2 == 1:
                continue
            outputs = _canned_staging(rec.episode_index, list(rec.frame_timestamps), CAMERAS)
            st = EpisodeStaging(staging, rec.episode_index)
            for module, rows in outputs.items():
                st.write(module, rows)
        report = StagingValidator().validate(records, staging)
        if not report.ok:
            raise RuntimeError(f"canned staging rejected by LeRobot's validator: {report.summary()}: {report.errors}")
        LanguageColumnsWriter().write_all(records, staging, root)
    # What the pipeline's Executor does right after the writer: declare the
    # language features and the say tool in meta/info.json.
    Executor._ensure_annotation_metadata_in_info(root)


def make_dataset(
    root: str | Path,
    annotate_mode: str = "full",
    codec: str = "av1",
    height: int = 64,
    width: int = 96,
    episodes: int = 4,
    fps: int = 10,
    seed: int = 0,
    repo_id: str = "interop/lerobot_written",
    pix_fmt: str | None = None,
) -> Path:
    """Write the dataset under ``root`` (must not exist) and return it.

    ``pix_fmt`` (video codecs only) is the encoder's pixel format, as a
    LeRobot user sets it (``RGBEncoderConfig(pix_fmt=...)``, e.g.
    ``yuv420p10le``); default LeRobot's (``yuv420p``)."""
    from lerobot.configs.video import RGBEncoderConfig
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    root = Path(root)
    if annotate_mode not in ("full", "partial", "none"):
        raise ValueError(f"annotate must be full, partial or none, got {annotate_mode!r}")
    features = {
        "observation.state": {"dtype": "float32", "shape": (STATE_DIM,), "names": [f"s{i}" for i in range(STATE_DIM)]},
        "action": {"dtype": "float32", "shape": (ACTION_DIM,), "names": [f"a{i}" for i in range(ACTION_DIM)]},
    }
    videos = codec != "image"
    for cam in CAMERAS:
        features[cam] = {"dtype": "video" if videos else "image", "shape": (height, width, 3),
                         "names": ["height", "width", "channels"]}
    kwargs = {}
    enc = {} if pix_fmt is None else {"pix_fmt": pix_fmt}
    if codec == "av1":
        kwargs["rgb_encoder"] = RGBEncoderConfig(**enc)
    elif codec == "h264":
        kwargs["rgb_encoder"] = RGBEncoderConfig(vcodec="h264", **enc)
    elif codec != "image":
        raise ValueError(f"codec must be av1, h264 or image, got {codec!r}")
    ds = LeRobotDataset.create(
        repo_id=repo_id, fps=fps, features=features, root=root, robot_type="interop_bot",
        use_videos=videos, **kwargs,
    )
    rng = np.random.default_rng(seed)
    g = 0
    for ep, n in enumerate(episode_lengths(episodes)):
        task = TASKS[ep % len(TASKS)]
        for _ in range(n):
            frame = {
                "observation.state": rng.standard_normal(STATE_DIM).astype(np.float32),
                "action": rng.standard_normal(ACTION_DIM).astype(np.float32),
                "task": task,
            }
            for ci, cam in enumerate(CAMERAS):
                frame[cam] = frame_pixels(ci, g, height, width)
            ds.add_frame(frame)
            g += 1
        ds.save_episode()
    ds.finalize()
    if videos:
        check_shared_mp4(root)
    annotate(root, annotate_mode)
    return root


def check_shared_mp4(root: Path) -> None:
    """Fail unless some mp4 holds two or more episodes (the fixture must cover it)."""
    import pyarrow.parquet as pq

    eps = pq.read_table(sorted((root / "meta" / "episodes").rglob("*.parquet"))).to_pylist()
    key = f"videos/{CAMERAS[0]}/file_index"
    counts: dict[tuple, int] = {}
    for e in eps:
        k = (e[f"videos/{CAMERAS[0]}/chunk_index"], e[key])
        counts[k] = counts.get(k, 0) + 1
    if len(eps) >= 2 and max(counts.values()) < 2:
        raise RuntimeError(f"{root}: no mp4 holds two episodes ({counts}); the fixture needs one")


def main(argv: list[str] | None = None) -> None:
    """CLI entry point (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--annotate", choices=("full", "partial", "none"), default="full")
    p.add_argument("--codec", choices=("av1", "h264", "image"), default="av1")
    p.add_argument("--height", type=int, default=64)
    p.add_argument("--width", type=int, default=96)
    p.add_argument("--episodes", type=int, default=4)
    p.add_argument("--fps", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repo-id", default="interop/lerobot_written")
    p.add_argument("--force", action="store_true", help="remove OUT first if it exists")
    a = p.parse_args(argv)
    out = Path(a.out)
    if a.force and out.exists():
        shutil.rmtree(out)
    make_dataset(out, a.annotate, a.codec, a.height, a.width, a.episodes, a.fps, a.seed, a.repo_id)
    print(out)


if __name__ == "__main__":
    main()
