"""Image features holding JPEG bytes, against LeRobotDataset (which decodes
them with PIL, i.e. libjpeg-turbo).

LeRobot's writers store image features as PNG (exact: test_camera_pixels.py);
JPEG comes from other tools, so the datasets here are LeRobot-written image
datasets whose images were re-encoded as JPEG with PIL: 4:2:0 and 4:4:4, an
odd size, restart markers, progressive. lrstream decodes them with its own
decoder, which runs libjpeg's entropy decoding, integer inverse DCT, fancy
upsampling and colour conversion (video/jpegdec.go, video/jpegconv.go):
every value must equal LeRobot's. One dataset's JPEGs carry an EXIF
orientation (6: stored a quarter turn anticlockwise), which the datasets
library's Image feature undoes before LeRobot sees the image (its info.json
shape is the turned one): lrstream turns them the same way (video/exif.go).
"""

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from make_lerobot_dataset import CAMERAS, make_dataset
from test_camera_pixels import as_uint8, stream

def _to_jpeg(ds: Path, quality: int, subsampling: int, orientation: int = 0, **kw) -> None:
    if orientation:
        ex = Image.Exif()
        ex[0x0112] = orientation
        kw["exif"] = ex.tobytes()
        if orientation >= 5:  # LeRobot sees the image turned: height and width swap
            info = ds / "meta" / "info.json"
            meta = json.loads(info.read_text())
            for cam in CAMERAS:
                h, w, c = meta["features"][cam]["shape"]
                meta["features"][cam]["shape"] = [w, h, c]
            info.write_text(json.dumps(meta, indent=4))
    for f in sorted(ds.glob("data/**/*.parquet")):
        t = pq.read_table(f)
        for cam in CAMERAS:
            rows = t.column(cam).to_pylist()
            for v in rows:
                b = io.BytesIO()
                Image.open(io.BytesIO(v["bytes"])).convert("RGB").save(b, format="JPEG", quality=quality,
                                                                         subsampling=subsampling, **kw)
                v["bytes"] = b.getvalue()
            i = t.schema.get_field_index(cam)
            t = t.set_column(i, t.schema.field(cam), pa.array(rows, type=t.schema.field(cam).type))
        pq.write_table(t, f)


CASES = {
    "420-q90": (90, 2, 64, 96, {}),
    "444-q95": (95, 0, 64, 96, {}),
    "420-odd-size": (85, 2, 61, 91, {}),
    "420-q30-restart": (30, 2, 64, 96, {"restart_marker_blocks": 3}),
    "progressive": (90, 2, 64, 96, {"progressive": True}),
    "progressive-444-restart": (60, 0, 61, 91, {"progressive": True, "restart_marker_blocks": 4}),
    "exif-orientation-6": (90, 2, 64, 96, {"orientation": 6}),
}


@pytest.fixture(scope="module", params=list(CASES))
def dataset(request, tmp_path_factory) -> Path:
    quality, subsampling, h, w, kw = CASES[request.param]
    ds = make_dataset(tmp_path_factory.mktemp("jpeg") / request.param, annotate_mode="none", codec="image", height=h,
                      width=w, episodes=2, fps=30, repo_id="lrstream/camera_jpeg")
    _to_jpeg(ds, quality, subsampling, **kw)
    return ds


def test_jpeg_equals_lerobot(lrstream_bin, dataset, tmp_path):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    _, batches = stream(lrstream_bin, dataset, tmp_path)
    lr = LeRobotDataset("lrstream/camera_jpeg", root=dataset)
    worst, differ, total, n = 0, 0, 0, 0
    for b in batches:
        for i in range(len(b["index"])):
            item = lr[int(b["index"][i])]
            for k in CAMERAS:
                d = np.abs(as_uint8(item[k]).astype(np.int16) - b[k][i].astype(np.int16))
                worst = max(worst, int(d.max()))
                differ += int((d > 0).sum())
                total += d.size
            n += 1
    assert n == lr.num_frames
    share = differ / total
    print(f"{dataset.name}: {n} frames x {len(CAMERAS)} cameras, max difference {worst}, {share:.2%} of values differ")
    assert worst == 0, f"{dataset.name}: {share:.2%} of values differ from LeRobot's, by up to {worst}"
