"""Write LeRobot v3 datasets with every kind of feature LeRobot 0.6.1 records (interop fixture).

Written the way a LeRobot user writes them (``LeRobotDataset.create`` /
``add_frame`` / ``save_episode`` / ``finalize``), no language columns:

* numeric features of every dtype ``info.json`` allows (bool, int8..int64,
  uint8..uint64, float16/32/64), size-1 features (``next.reward``,
  ``next.done``, a gripper), a vector and a 2x2 matrix;
* an RGB video camera (AV1, LeRobot's default, or H.264), an RGB image camera
  (PNG bytes in the parquet files) in the same dataset, and a depth camera:
  a video feature flagged ``info.is_depth_map``, quantized by LeRobot's writer
  (log or linear, ``DepthEncoderConfig``) to 12-bit codes in HEVC lossless
  ``gray12le`` (LeRobot's default depth codec) or AV1 ``gray12le`` through
  libaom (``aom``: the one other codec 0.6.1 accepts for ``gray12le``;
  h264 and libsvtav1 refuse it);
* several episodes per video file (LeRobot's default file-size limits).

``variant``:

* ``log``: AV1 RGB + PNG image camera + log-quantized depth (defaults
  0.01..10 m, shift 3.5), depth given as uint16 millimetres;
* ``linear``: H.264 RGB + linear depth between 0.2 and 4 m, depth given as
  float32 metres;
* ``short``: no videos (``use_videos=False``: image cameras), episodes of 1
  and 2 frames. LeRobot 0.6.1's writer cannot put episodes of 1 or 2 frames
  into a shared video file (its concatenation fails: "non monotonically
  increasing dts"), so short episodes are tested without videos; nor can its
  statistics aggregate a 2-D feature over a 1-frame episode (the per-episode
  stats lose a dimension), so ``short`` has no matrix feature.

Depth content spans the whole quantized range (a ramp over the image plus a
moving block and a near/far stripe), so every part of the dequantization
formula is exercised.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

RGB = "observation.images.rgb"
IMG = "observation.images.img"
DEPTH = "observation.images.depth"
# depth image features (use_videos=False: TIFF frames in the data files), given to the writer as
# uint16 millimetres and float32 metres (its info.depth_unit records which)
DEPTH_IMG_MM = "observation.images.depth_mm"
DEPTH_IMG_M = "observation.images.depth_m"

NUMERIC = {
    "next.reward": ("float32", (1,)),
    "next.done": ("bool", (1,)),
    "observation.gripper": ("int32", (1,)),
    "observation.state": ("float64", (3,)),
    "i8": ("int8", (2,)),
    "i16": ("int16", (2,)),
    "i64": ("int64", (1,)),
    "u8": ("uint8", (2,)),
    "u16": ("uint16", (1,)),
    "u32": ("uint32", (2,)),
    "u64": ("uint64", (1,)),
    "f16": ("float16", (2,)),
    "mat": ("float32", (2, 2)),
}

VARIANTS = {
    "log": dict(lengths=(5, 3, 7, 4), videos=True, rgb_codec="av1", depth="log"),
    "linear": dict(lengths=(4, 6, 3), videos=True, rgb_codec="h264", depth="linear"),
    "aom": dict(lengths=(4, 5, 3), videos=True, rgb_codec="h264", depth="log", depth_codec="libaom-av1"),
    "short": dict(lengths=(1, 2, 3, 1, 2), videos=False, rgb_codec=None, depth=None),
    "depthimg": dict(lengths=(3, 4), videos=False, rgb_codec=None, depth="image"),
}


def numeric_features(variant: str) -> dict:
    """The numeric features of a variant (``short``: no matrix, see above)."""
    return {k: v for k, v in NUMERIC.items() if not (variant == "short" and len(v[1]) > 1)}


def numeric_value(name: str, dtype: str, shape: tuple, g: int, rng) -> np.ndarray:
    """Deterministic values that use each dtype's range (extremes included)."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return np.array([(g % 3) == 2], dtype=bool).reshape(shape)
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        # LeRobot's stats go through float64 (pyarrow refuses |x| > 2^53)
        lo, hi = max(int(info.min), -(2**53)), min(int(info.max), 2**53)
        cands = [lo, hi, 0, g, -g if info.min < 0 else 7 * g]
        vals = [cands[(g + k) % len(cands)] for k in range(int(np.prod(shape)))]
        return np.array(vals, dtype=dt).reshape(shape)
    v = rng.standard_normal(int(np.prod(shape))) * (10.0 ** (g % 5 - 2))
    if dt == np.float64:
        v[0] = 0.1 + g * 1e-9  # not a float32: rounding matters
    return v.astype(dt).reshape(shape)


def rgb_pixels(cam: int, g: int, h: int, w: int) -> np.ndarray:
    ys, xs = np.mgrid[0:h, 0:w]
    img = np.empty((h, w, 3), dtype=np.uint8)
    img[..., 0] = ((xs * 255) // max(w - 1, 1) + 3 * g + 40 * cam) % 256
    img[..., 1] = ((ys * 255) // max(h - 1, 1) + 5 * g) % 256
    img[..., 2] = (16 + 8 * g + 100 * cam) % 256
    x0 = (4 * g) % (w - 8)
    img[4:12, x0:x0 + 8] = (250, 40 * g % 256, 200)
    return img


def depth_metres(g: int, h: int, w: int, lo: float, hi: float, encoder=None) -> np.ndarray:
    """Depth in metres over [lo*0.5, hi*1.2] (values outside the range clip).

    The first frames (while g*h*w < 4096) hold every 12-bit code once instead:
    pixel p of frame g is the depth LeRobot's dequantization gives code g*h*w + p,
    so the dataset covers (nearly: the writer's rounding) every code.
    """
    if encoder is not None and g * h * w < 4096:
        from lerobot.datasets.depth_utils import dequantize_depth

        codes = np.minimum(np.arange(g * h * w, (g + 1) * h * w), 4095).astype(np.uint16).reshape(h, w)
        return dequantize_depth(codes, depth_min=encoder.depth_min, depth_max=encoder.depth_max,
                                shift=encoder.shift, use_log=encoder.use_log, output_unit="m",
                                output_tensor=False)[0].astype(np.float64)
    ys, xs = np.mgrid[0:h, 0:w]
    t = (xs + ys * w) / float(h * w - 1)
    d = lo * 0.5 + t * (hi * 1.2 - lo * 0.5)
    d = np.roll(d, 7 * g, axis=1)
    x0 = (3 * g) % (w - 6)
    d[2:8, x0:x0 + 6] = lo + 0.001 * g
    d[-3:, :] = hi
    return d


def make_dataset(root: str | Path, variant: str = "log", height: int = 24, width: int = 40,
                 fps: int = 10, seed: int = 0, repo_id: str = "interop/features") -> Path:
    """Write the dataset under ``root`` (must not exist) and return it."""
    from lerobot.configs.video import DepthEncoderConfig, RGBEncoderConfig
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    spec = VARIANTS[variant]
    root = Path(root)
    numeric = numeric_features(variant)
    features = {k: {"dtype": dt, "shape": sh, "names": None} for k, (dt, sh) in numeric.items()}
    hwc = {"shape": (height, width, 3), "names": ["height", "width", "channels"]}
    kwargs = {}
    if spec["videos"]:
        features[RGB] = {"dtype": "video", **hwc}
        features[IMG] = {"dtype": "image", **hwc}
        features[DEPTH] = {"dtype": "video", "shape": (height, width, 1),
                           "names": ["height", "width", "channels"], "info": {"is_depth_map": True}}
        kwargs["rgb_encoder"] = RGBEncoderConfig(vcodec="h264") if spec["rgb_codec"] == "h264" else RGBEncoderConfig()
        if spec["depth"] == "linear":
            kwargs["depth_encoder"] = DepthEncoderConfig(depth_min=0.2, depth_max=4.0, use_log=False)
        elif spec.get("depth_codec"):  # the other codec 0.6.1 accepts for gray12le
            kwargs["depth_encoder"] = DepthEncoderConfig(vcodec=spec["depth_codec"], extra_options={})
        else:
            kwargs["depth_encoder"] = DepthEncoderConfig()
    else:
        features[IMG] = {"dtype": "image", **hwc}
    if spec["depth"] == "image":
        for k in (DEPTH_IMG_MM, DEPTH_IMG_M):
            features[k] = {"dtype": "image", "shape": (height, width, 1), "names": ["height", "width", "channels"],
                           "info": {"is_depth_map": True}}
    ds = LeRobotDataset.create(repo_id=repo_id, fps=fps, features=features, root=root,
                               robot_type="interop_bot", use_videos=spec["videos"], **kwargs)
    rng = np.random.default_rng(seed)
    lo, hi = (0.2, 4.0) if spec["depth"] == "linear" else (0.01, 10.0)
    g = 0
    for ep, n in enumerate(spec["lengths"]):
        for _ in range(n):
            frame = {k: numeric_value(k, dt, sh, g, rng) for k, (dt, sh) in numeric.items()}
            frame["task"] = f"task {ep % 2}"
            frame[IMG] = rgb_pixels(1, g, height, width)
            if spec["depth"] == "image":
                d = depth_metres(g, height, width, 0.05, 8.0)
                frame[DEPTH_IMG_MM] = np.rint(d * 1000).astype(np.uint16)[..., None]
                frame[DEPTH_IMG_M] = d.astype(np.float32)[..., None]
            if spec["videos"]:
                frame[RGB] = rgb_pixels(0, g, height, width)
                d = depth_metres(g, height, width, lo, hi, kwargs["depth_encoder"])
                if spec["depth"] == "log":  # uint16 millimetres, as a RealSense gives them
                    frame[DEPTH] = np.rint(d * 1000).astype(np.uint16)[..., None]
                else:  # float32 metres
                    frame[DEPTH] = d.astype(np.float32)[..., None]
            ds.add_frame(frame)
            g += 1
        ds.save_episode()
    ds.finalize()
    if spec["videos"]:
        mp4 = sorted((root / "videos" / DEPTH).rglob("*.mp4"))
        assert len(mp4) == 1, f"want every episode in one depth file, got {mp4}"
    return root


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--variant", default="log", choices=sorted(VARIANTS))
    a = ap.parse_args()
    print(make_dataset(a.out, a.variant))
