"""lrstream's --video-backend reproduces each of LeRobot's two decoding
backends, frame for frame, on videos where they differ.

LeRobotDataset decodes with torchcodec (its default wherever torchcodec
loads) or PyAV (``video_backend``). Both convert with FFmpeg's swscale, but
torchcodec interpolates chroma bicubically and honours the stream's
colorspace tag, PyAV interpolates bilinearly and converts every stream as
BT.601. On the 8-bit, untagged videos LeRobot's writers make by default
they agree (test_camera_pixels.py); here they do not:

* ``10bit``: written by LeRobot's own writer with
  ``RGBEncoderConfig(pix_fmt="yuv420p10le")`` (AV1, 10 bits);
* ``bt709``: a LeRobot dataset whose videos another tool re-encoded as
  H.264 tagged BT.709 (as phone and many camera pipelines tag them).

Each case first checks that LeRobot's two backends do differ on it (or it
would test nothing), then that ``--video-backend B`` equals
``LeRobotDataset(video_backend=B)`` for every frame of both cameras.
"""

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from make_lerobot_dataset import CAMERAS, make_dataset
from test_camera_pixels import _backend, _need, lerobot, stream

H, W = 64, 96


@pytest.fixture(scope="module")
def lrstream_bin(lrstream_bin):
    _need("ffmpeg")
    return lrstream_bin


def _retag_bt709(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for mp4 in sorted(dst.glob("videos/**/*.mp4")):
        tmp = mp4.with_name("retagged.mp4")
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-i", str(mp4), "-c:v", "libx264", "-pix_fmt", "yuv420p",
                        "-g", "2", "-colorspace", "bt709", "-color_primaries", "bt709", "-color_trc", "bt709", str(tmp)],
                       check=True)
        tmp.replace(mp4)
    info = dst / "meta" / "info.json"
    meta = json.loads(info.read_text())
    for cam in CAMERAS:
        meta["features"][cam].setdefault("info", {}).update({"video.codec": "h264", "video.pix_fmt": "yuv420p"})
    info.write_text(json.dumps(meta, indent=4))
    return dst


@pytest.fixture(scope="module", params=["10bit", "bt709"])
def dataset(request, tmp_path_factory) -> Path:
    _need("ffmpeg")
    root = tmp_path_factory.mktemp("backends")
    if request.param == "10bit":
        return make_dataset(root / "10bit", annotate_mode="none", codec="av1", pix_fmt="yuv420p10le", height=H, width=W,
                            episodes=2, fps=30, repo_id="lrstream/camera_10bit")
    base = make_dataset(root / "base", annotate_mode="none", codec="h264", height=H, width=W, episodes=2, fps=30,
                        repo_id="lrstream/camera_bt709")
    return _retag_bt709(base, root / "bt709")


def _frames(ds: Path, backend: str):
    lr = lerobot(ds, backend)
    return {i: {k: lr[i][k].numpy() for k in CAMERAS} for i in range(lr.num_frames)}


def test_backends_differ_and_each_is_reproduced(lrstream_bin, dataset, tmp_path):
    _backend("torchcodec")
    want = {b: _frames(dataset, b) for b in ("torchcodec", "pyav")}
    assert set(want["torchcodec"]) == set(want["pyav"])
    differ = max(int(np.abs(want["torchcodec"][i][k].astype(np.int16) - want["pyav"][i][k]).max())
                 for i in want["pyav"] for k in CAMERAS)
    assert differ > 0, f"{dataset.name}: LeRobot's backends agree on this video; it tests nothing"
    for backend in ("torchcodec", "pyav"):
        header, batches = stream(lrstream_bin, dataset, tmp_path, "--video-backend", backend, "--frame-cache", "off")
        n = 0
        for b in batches:
            for i in range(len(b["index"])):
                idx = int(b["index"][i])
                for k in CAMERAS:
                    got = b[k][i]
                    diff = int(np.abs(want[backend][idx][k].astype(np.int16) - got).max())
                    assert diff == 0, (f"{dataset.name}, --video-backend {backend}: index {idx} {k} differs from "
                                       f"LeRobotDataset(video_backend={backend!r}) by up to {diff}")
                n += 1
        assert n == len(want[backend])
        print(f"{dataset.name} --video-backend {backend}: {n} frames x {len(CAMERAS)} cameras equal; "
              f"LeRobot's backends differ by up to {differ}")
