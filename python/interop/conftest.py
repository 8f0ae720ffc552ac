"""Shared fixtures of the interop suite (lrstream beside lerobot, huggingface_hub, pyarrow).

Everything runs offline: HF_HUB_OFFLINE is set for the whole session unless a
test sets up its own environment (the Hub tests use the fake Hub in fake_hub.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SHARED = REPO / ".." / "shared"
RECIPES = SHARED / "recipes"
CONFORMANCE = SHARED / "conformance" / "datasets"

sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "python"))

# No test may reach the real Hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


@pytest.fixture(scope="session")
def lrstream_bin(tmp_path_factory) -> Path:
    """The lrstream binary, built once per session from this checkout."""
    out = tmp_path_factory.mktemp("bin") / "lrstream"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/lrstream"], cwd=REPO, check=True)
    return out


@pytest.fixture(scope="session")
def lerobot_datasets(tmp_path_factory) -> dict[str, Path]:
    """LeRobot-written datasets: full (AV1), partial (H.264), none (AV1), written once per session.

    Set LRSTREAM_INTEROP_DATASETS=DIR to reuse (or create) them under DIR.
    """
    from make_lerobot_dataset import make_dataset

    base = os.environ.get("LRSTREAM_INTEROP_DATASETS")
    root = Path(base) if base else tmp_path_factory.mktemp("lerobot_written")
    specs = {"full": ("full", "av1"), "partial": ("partial", "h264"), "none": ("none", "av1")}
    out = {}
    for name, (mode, codec) in specs.items():
        d = root / name
        done = d.parent / f".{name}.complete"
        if not done.exists():
            if d.exists():
                import shutil

                shutil.rmtree(d)  # a previous run stopped half-way
            make_dataset(d, annotate_mode=mode, codec=codec, repo_id=f"interop/{name}")
            done.touch()
        out[name] = d
    return out


# delta_timestamps used on both sides (fps 10): a 4-step action chunk and 2 frames of state history.
DELTA_TIMESTAMPS = {"action": [0.0, 0.1, 0.2, 0.3], "observation.state": [-0.2, -0.1, 0.0]}
DELTA_FLAG = "action=0:4/10,observation.state=-2:1/10"

_ITEMS: dict[tuple[str, bool], list[dict]] = {}


@pytest.fixture(scope="session")
def lerobot_items(lerobot_datasets):
    """``get(name, deltas=True)`` -> every ``LeRobotDataset[i]`` of a fixture dataset (cached).

    With ``deltas`` the dataset is opened with DELTA_TIMESTAMPS. Camera frames are
    decoded by LeRobot (``observation.images.*`` CHW float tensors): this is the place
    the camera pixel tests (test_camera_pixels.py) compare lrstream's frames against.
    """
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    def get(name: str, deltas: bool = True) -> list[dict]:
        key = (name, deltas)
        if key not in _ITEMS:
            ds = LeRobotDataset(f"interop/{name}", root=lerobot_datasets[name],
                                delta_timestamps=DELTA_TIMESTAMPS if deltas else None)
            _ITEMS[key] = [ds[i] for i in range(len(ds))]
        return _ITEMS[key]

    return get
