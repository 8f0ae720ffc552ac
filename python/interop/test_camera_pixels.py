"""lrstream's camera pixels equal LeRobot's own, for every frame of datasets
written by LeRobot's writer (AV1, its default encoder, H.264, and image
features: PNG bytes in the parquet files, use_videos=False), read
with LeRobotDataset's pyav and torchcodec backends (return_uint8=True, the
uint8 frames before LeRobot's float32 /255 conversion).

Needs go (to build lrstream) and FFmpeg; under CI=1 or LRSTREAM_REQUIRE_FFMPEG=1
(scripts/test.sh) their absence fails.
"""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from lrstream_client.reader import StreamReader
from make_lerobot_dataset import CAMERAS, make_dataset

ROOT = Path(__file__).resolve().parents[2]
CAMS = CAMERAS
H, W = 64, 96


def _need(tool: str) -> None:
    if shutil.which(tool) is None:
        if os.environ.get("CI") or os.environ.get("LRSTREAM_REQUIRE_FFMPEG"):
            pytest.fail(f"CI: {tool} not found")
        pytest.skip(f"{tool} not found")


@pytest.fixture(scope="module")
def lrstream_bin(lrstream_bin):
    """The session's lrstream binary (conftest.py), once FFmpeg is known to be there."""
    _need("ffmpeg")
    return lrstream_bin


@pytest.fixture(scope="module", params=["av1", "h264", "image"])
def dataset(request, tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("ds") / request.param, annotate_mode="none", codec=request.param,
                        height=H, width=W, episodes=3, fps=30, repo_id="lrstream/camera_" + request.param)


def stream(bin_: Path, ds: Path, tmp: Path, *extra: str):
    recipe = ROOT / "testdata" / "demo-recipe.yaml"
    p = subprocess.run([str(bin_), "stream", "--dataset", str(ds), "--recipe", str(recipe), "--mode", "fallback",
                        "--batch-size", "16", *extra], capture_output=True)
    assert p.returncode == 0, p.stderr.decode()
    out = p.stdout
    reader = StreamReader(out)
    header = reader.header
    return header, list(reader)


def lerobot(ds: Path, backend: str, **kw):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    return LeRobotDataset("lrstream/camera", root=ds, video_backend=backend, return_uint8=True, **kw)


def as_uint8(x) -> np.ndarray:
    """LeRobot's frame as uint8: video frames are uint8 with return_uint8;
    image features are float32 in [0, 1] (PIL -> to_tensor, exactly k/255)."""
    a = x.numpy()
    if a.dtype == np.uint8:
        return a
    b = np.rint(a.astype(np.float64) * 255)
    assert np.abs(b - a.astype(np.float64) * 255).max() < 1e-3, "not a k/255 image"
    return b.astype(np.uint8)


def _backend(backend: str) -> None:
    if backend == "torchcodec":
        try:
            import torchcodec.decoders  # noqa: F401
        except Exception as e:  # torchcodec needs FFmpeg shared libraries it supports
            pytest.skip(f"torchcodec does not load here: {e}")


@pytest.mark.parametrize("backend", ["pyav", "torchcodec"])
def test_every_frame_equals_lerobot(lrstream_bin, dataset, tmp_path, backend):
    _backend(backend)
    if dataset.name == "image" and backend != "pyav":
        pytest.skip("image features are not videos: the video backend does not apply (covered by the pyav case)")
    header, batches = stream(lrstream_bin, dataset, tmp_path)
    cams = {c["key"]: c["decoded"] for c in header["cameras"]}
    assert cams == {k: True for k in CAMS}
    lr = lerobot(dataset, backend)
    n = 0
    worst = 0
    for b in batches:
        for k in CAMS:
            assert b[k].dtype == np.uint8 and b[k].shape[1:] == (3, H, W)
        for i in range(len(b["index"])):
            item = lr[int(b["index"][i])]
            assert int(item["episode_index"]) == int(b["episode_index"][i])
            for k in CAMS:
                want = as_uint8(item[k])
                got = b[k][i]
                diff = int(np.abs(want.astype(np.int16) - got.astype(np.int16)).max())
                worst = max(worst, diff)
                assert diff == 0, f"index {int(b['index'][i])} {k}: max abs difference {diff} vs LeRobot ({backend})"
            n += 1
    assert n == lr.num_frames
    print(f"{dataset.name} {backend}: {n} frames x {len(CAMS)} cameras, max abs difference {worst}")


def test_delta_timestamps_equal_lerobot(lrstream_bin, dataset, tmp_path):
    key = CAMS[0]
    deltas = [-2 / 30, 0.0, 1 / 30]
    _, batches = stream(lrstream_bin, dataset, tmp_path, "--delta-timestamps", f"{key}=-2/30,0,1/30")
    lr = lerobot(dataset, "pyav", delta_timestamps={key: deltas})
    for b in batches:
        assert b[key].shape[1:] == (3, 3, H, W)
        for i in range(len(b["index"])):
            item = lr[int(b["index"][i])]
            np.testing.assert_array_equal(b[key][i], as_uint8(item[key]))
            np.testing.assert_array_equal(b[key + "_is_pad"][i], item[key + "_is_pad"].numpy())


def test_float_conversion_as_lerobot(lrstream_bin, dataset, tmp_path):
    """docs/video.md: batch[key].float() / 255 is LeRobotDataset's float32
    [0, 1] frame (its default, return_uint8=False)."""
    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from lrstream_client.torch_dataset import to_torch

    _, batches = stream(lrstream_bin, dataset, tmp_path)
    lr = LeRobotDataset("lrstream/camera", root=dataset, video_backend="pyav")
    b = to_torch(batches[0])
    x = b[CAMS[0]].float() / 255
    for i in range(3):
        torch.testing.assert_close(x[i], lr[int(b["index"][i])][CAMS[0]], rtol=0, atol=0)


def test_shuffled_training_order_equals_lerobot(lrstream_bin, dataset, tmp_path):
    """The training order (--shuffle) delivers each sample with its own frames."""
    _, batches = stream(lrstream_bin, dataset, tmp_path, "--shuffle", "--seed", "7")
    lr = lerobot(dataset, "pyav")
    seen = []
    for b in batches:
        for i in range(len(b["index"])):
            idx = int(b["index"][i])
            seen.append(idx)
            item = lr[idx]
            for k in CAMS:
                np.testing.assert_array_equal(b[k][i], as_uint8(item[k]))
    assert sorted(seen) == list(range(lr.num_frames)) and seen != sorted(seen)
