"""Write a small LeRobot v3 dataset with two cameras through LeRobot's own
writer (LeRobotDataset.create / add_frame / save_episode / finalize), for
the camera pixel tests. Several episodes share each mp4 (LeRobot
concatenates episodes into one file per camera until the size limit).

Usage: python camera_dataset.py OUT_DIR [--codec av1|h264] [--episodes N]
"""

import argparse
import shutil
from pathlib import Path

import numpy as np

H, W = 64, 96
CAMERAS = ("observation.images.top", "observation.images.wrist")


def frame_image(ep: int, i: int, cam: int) -> np.ndarray:
    """A deterministic image with gradients and a moving block (not flat:
    chroma subsampling and the YUV->RGB conversion matter)."""
    y, x = np.mgrid[0:H, 0:W]
    r = (x * 255 // (W - 1) + 7 * i) % 256
    g = (y * 255 // (H - 1) + 31 * ep) % 256
    b = ((x + y) * 3 + 50 * cam + 5 * i) % 256
    img = np.stack([r, g, b], axis=-1).astype(np.uint8)
    x0 = (4 * i + 9 * ep) % (W - 16)
    img[8:24, x0 : x0 + 16] = (255 - 40 * cam, 40 * ep % 256, 200)
    return img


def write(out: Path, codec: str = "av1", episodes: int = 3, lengths=(12, 9, 15, 7)) -> Path:
    """codec "image" stores the cameras as image features (PNG bytes in the
    parquet files, LeRobot's use_videos=False)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    try:
        from lerobot.configs.video import RGBEncoderConfig
    except ImportError:  # pragma: no cover - older lerobot
        RGBEncoderConfig = None
    if out.exists():
        shutil.rmtree(out)
    features = {
        "observation.state": {"dtype": "float32", "shape": (2,), "names": ["a", "b"]},
        "action": {"dtype": "float32", "shape": (2,), "names": ["a", "b"]},
    }
    for k in CAMERAS:
        features[k] = {"dtype": "video" if codec != "image" else "image", "shape": (H, W, 3),
                       "names": ["height", "width", "channels"]}
    kwargs = {}
    if codec not in ("av1", "image"):
        kwargs["rgb_encoder"] = RGBEncoderConfig(vcodec=codec)
    ds = LeRobotDataset.create(repo_id="lrstream/camera_" + codec, fps=30, features=features, root=out,
                               robot_type="test", use_videos=codec != "image", **kwargs)
    for ep in range(episodes):
        n = lengths[ep % len(lengths)]
        for i in range(n):
            frame = {
                "observation.state": np.array([ep, i], dtype=np.float32),
                "action": np.array([i, ep], dtype=np.float32),
                "task": f"task {ep % 2}",
            }
            for c, k in enumerate(CAMERAS):
                frame[k] = frame_image(ep, i, c)
            ds.add_frame(frame)
        ds.save_episode()
    ds.finalize()
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--codec", default="av1")
    ap.add_argument("--episodes", type=int, default=3)
    a = ap.parse_args()
    write(Path(a.out), a.codec, a.episodes)
