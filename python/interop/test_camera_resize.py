"""`--resize HxW` on image features equals torch's resize of the same
frames, exactly: torch.nn.functional.interpolate(frame, [H, W],
mode="bilinear", antialias=True) on the uint8 frame lrstream gives without
--resize (itself LeRobot's pixels: test_camera_pixels.py) -- which is what
torchvision.transforms.v2.functional.resize(frame, [H, W]) (bilinear,
antialias=True: its defaults) computes for uint8 tensors on x86 CPUs with
AVX2. torchvision's float path (its choice on other CPUs, or a float frame
rounded back) is within 1 level; the test measures it.

Needs go (to build lrstream); no FFmpeg (image features are PNG bytes).
"""

import io
import subprocess
from pathlib import Path

import msgpack
import numpy as np
import pytest

from lrstream_client.reader import decode_array
from make_lerobot_dataset import CAMERAS, make_dataset

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "testdata" / "demo-recipe.yaml"
H, W = 64, 96


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("ds") / "image", annotate_mode="none", codec="image",
                        height=H, width=W, episodes=2, fps=30, repo_id="lrstream/camera_resize")


def frames(bin_: Path, ds: Path, *extra: str):
    """index -> {camera: uint8 (3, h, w)} of `lrstream stream`, and the header."""
    p = subprocess.run([str(bin_), "stream", "--dataset", str(ds), "--recipe", str(RECIPE), "--mode", "fallback",
                        "--batch-size", "16", *extra], capture_output=True)
    assert p.returncode == 0, p.stderr.decode()
    msgs = list(msgpack.Unpacker(io.BytesIO(p.stdout), raw=False))
    out = {}
    for m in msgs:
        if m["type"] == "batch":
            cols = {k: decode_array(m["columns"][k]) for k in ["index", *CAMERAS]}
            for i, idx in enumerate(cols["index"]):
                out[int(idx)] = {k: cols[k][i] for k in CAMERAS}
    return msgs[0], out


@pytest.mark.parametrize("size", ["40x56", "27x100", "100x150", "64x48"])
def test_resize_equals_torchvision(lrstream_bin, dataset, size):
    import torch
    from torchvision.transforms.v2 import functional as F

    h, w = map(int, size.split("x"))
    native = torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")  # torchvision's uint8 path
    _, orig = frames(lrstream_bin, dataset)
    header, got = frames(lrstream_bin, dataset, "--resize", size)
    feats = {f["name"]: f for f in header["features"]}
    assert header["options"]["resize"] == size
    assert orig.keys() == got.keys() and len(got) > 0
    worst_float = 0
    for idx, cams in got.items():
        for k in CAMERAS:
            assert feats[k]["shape"] == [3, h, w] and cams[k].shape == (3, h, w)
            src = torch.from_numpy(orig[idx][k].copy())
            want = torch.nn.functional.interpolate(src[None], size=[h, w], mode="bilinear", align_corners=False,
                                                   antialias=True)[0].numpy()
            diff = int(np.abs(want.astype(np.int16) - cams[k].astype(np.int16)).max())
            assert diff == 0, f"index {idx} {k} --resize {size}: max abs difference {diff} vs torch"
            if native:
                np.testing.assert_array_equal(F.resize(src, [h, w], antialias=True).numpy(), want)
            flt = F.resize(src.float(), [h, w], antialias=True).round().clamp(0, 255).to(torch.uint8).numpy()
            worst_float = max(worst_float, int(np.abs(flt.astype(np.int16) - cams[k].astype(np.int16)).max()))
    assert worst_float <= 1, f"the float path differs by {worst_float}"
    print(f"--resize {size}: {len(got)} frames x {len(CAMERAS)} cameras equal torch's uint8 resize; "
          f"float path max abs difference {worst_float}")
