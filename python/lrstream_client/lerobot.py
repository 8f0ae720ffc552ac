"""LeRobot-format batches and dataset metadata (imports torch; lerobot is not needed).

Two things a LeRobot policy needs from its data loader, without ``LeRobotDataset``:

* :class:`DatasetMetadata` -- ``info.json`` features and ``stats.json`` statistics of a
  dataset (local directory or Hub repo), shaped like ``LeRobotDatasetMetadata``'s
  ``features`` / ``stats`` / ``fps`` / ``camera_keys``, so ``make_policy(cfg, ds_meta=meta)``
  and ``make_pre_post_processors(cfg, dataset_stats=meta.stats)`` accept it.
* :func:`to_lerobot` / :class:`LeRobotBatches` -- an lrstream batch as
  ``DataLoader(LeRobotDataset(...), collate_fn=lerobot_collate_fn)`` yields it: the same keys,
  dtypes and shapes, camera frames as float32 in [0, 1] (LeRobotDataset's default) or uint8
  (``return_uint8=True``, what ``lerobot-train`` loads), optionally moved to a device first.

Where the uint8 -> float32 conversion happens matters: a camera frame is 4x larger as
float32. With ``device`` given, the uint8 tensor is copied to the device and converted
there (LeRobot's own ``lerobot-train`` does the same: it loads uint8 and divides by 255 in
the training loop). The conversion is ``x.to(float32) / 255``, the operation LeRobot's
decoders and ``lerobot-train`` apply, so the values are bitwise those LeRobot gives.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence

import numpy as np
import torch

__all__ = ["DatasetMetadata", "LeRobotBatches", "LeRobotFormat", "delta_timestamps_flag", "to_lerobot"]

# lrstream's own per-batch metadata column (LRStreamDataset's meta_key): not part of LeRobot's batch.
_LRSTREAM_KEYS = ("_lrstream",)


class DatasetMetadata:
    """``meta/info.json`` and ``meta/stats.json`` of a LeRobot v3 dataset.

    ``DatasetMetadata.load(dataset)`` takes what ``lrstream --dataset`` takes: a local
    directory, or a Hub repo id (``ORG/NAME``; read through ``huggingface_hub``, its cache and
    ``HF_TOKEN``, only the two files). ``stats`` follows LeRobot's ``load_stats``: every leaf
    is a numpy array (at least 1-d), nested by feature then statistic.
    """

    def __init__(self, info: Dict[str, Any], stats: Optional[Dict[str, Any]], *, repo_id: str = "",
                 root: Optional[Path] = None, revision: Optional[str] = None):
        if not isinstance(info, dict) or not isinstance(info.get("features"), dict):
            raise ValueError(f"{repo_id or root}: meta/info.json has no 'features' mapping")
        for ft in info["features"].values():  # as LeRobot's load_info: shapes are tuples
            if isinstance(ft, dict) and isinstance(ft.get("shape"), list):
                ft["shape"] = tuple(ft["shape"])
        self.info = info
        self.stats = _stats_to_numpy(stats) if stats is not None else None
        self.repo_id = repo_id
        self.root = root
        self.revision = revision

    @classmethod
    def load(cls, dataset: str, *, revision: Optional[str] = None,
             cache_dir: Optional[str] = None) -> "DatasetMetadata":
        p = Path(dataset).expanduser()
        if p.is_dir():
            return cls.from_dir(p)
        if p.exists() or dataset.startswith((".", "/", "~")) or dataset.count("/") != 1:
            raise FileNotFoundError(f"{dataset}: not a dataset directory (and not a Hub repo id ORG/NAME)")
        return cls.from_hub(dataset, revision=revision, cache_dir=cache_dir)

    @classmethod
    def from_dir(cls, root: Path) -> "DatasetMetadata":
        root = Path(root)
        info_path = root / "meta" / "info.json"
        if not info_path.is_file():
            raise FileNotFoundError(f"{root}: no meta/info.json (not a LeRobot v3 dataset)")
        info = _read_json(info_path)
        stats_path = root / "meta" / "stats.json"
        stats = _read_json(stats_path) if stats_path.is_file() else None
        return cls(info, stats, repo_id=root.name, root=root)

    @classmethod
    def from_hub(cls, repo_id: str, *, revision: Optional[str] = None,
                 cache_dir: Optional[str] = None) -> "DatasetMetadata":
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError

        def get(name: str) -> Path:
            return Path(hf_hub_download(repo_id, f"meta/{name}", repo_type="dataset", revision=revision,
                                        cache_dir=cache_dir))

        info = _read_json(get("info.json"))
        try:
            stats = _read_json(get("stats.json"))
        except EntryNotFoundError:
            stats = None
        return cls(info, stats, repo_id=repo_id, revision=revision)

    # LeRobotDatasetMetadata's surface, as the policy factories read it.
    @property
    def features(self) -> Dict[str, Dict[str, Any]]:
        return self.info["features"]

    @property
    def fps(self) -> int:
        return self.info["fps"]

    @property
    def camera_keys(self) -> List[str]:
        return [k for k, f in self.features.items() if f.get("dtype") in ("video", "image")]

    @property
    def video_keys(self) -> List[str]:
        return [k for k, f in self.features.items() if f.get("dtype") == "video"]

    @property
    def image_keys(self) -> List[str]:
        return [k for k, f in self.features.items() if f.get("dtype") == "image"]

    @property
    def depth_keys(self) -> List[str]:
        return [k for k in self.camera_keys if _is_depth(self.features[k])]

    @property
    def total_frames(self) -> int:
        return self.info["total_frames"]

    @property
    def total_episodes(self) -> int:
        return self.info["total_episodes"]

    def require_stats(self, keys: Iterable[str]) -> None:
        """Raise naming every key the normalizer needs that stats.json lacks."""
        where = self.repo_id or str(self.root)
        if self.stats is None:
            raise ValueError(f"{where}: meta/stats.json is missing; the policy's normalizer needs it "
                             "(LeRobot writes it with the dataset: lerobot-edit-dataset can recompute it)")
        missing = [k for k in keys if k not in self.stats]
        if missing:
            raise ValueError(f"{where}: meta/stats.json has no statistics for {', '.join(missing)}")


def _is_depth(feature: Mapping[str, Any]) -> bool:
    info = feature.get("info") or {}
    return bool(info.get("is_depth_map") or info.get("video.is_depth_map"))


def _read_json(path: Path) -> Any:
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: {e}") from e


def _stats_to_numpy(stats: Dict[str, Any]) -> Dict[str, Any]:
    """LeRobot's load_stats semantics: flatten with '/', every leaf np.atleast_1d(np.array(v)),
    unflatten on '/' (so the nesting is the same as LeRobot's, also for keys holding '/')."""
    flat: Dict[str, Any] = {}

    def walk(prefix: str, d: Mapping[str, Any]) -> None:
        for k, v in d.items():
            key = f"{prefix}/{k}" if prefix else str(k)
            if isinstance(v, dict):
                walk(key, v)
            else:
                flat[key] = np.atleast_1d(np.array(v))

    if not isinstance(stats, dict):
        raise ValueError("meta/stats.json is not a JSON object")
    walk("", stats)
    out: Dict[str, Any] = {}
    for key, v in flat.items():
        node = out
        *parents, last = key.split("/")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = v
    return out


def to_lerobot(batch: Mapping[str, Any], camera_keys: Sequence[str], *, return_uint8: bool = False,
               device: Optional[Any] = None, non_blocking: bool = False,
               depth_keys: Sequence[str] = ()) -> Dict[str, Any]:
    """One lrstream batch as LeRobot's collated batch (a new dict; the input is not changed).

    Numeric columns become tensors (on ``device`` if given); RGB camera columns (uint8
    ``(B, [T,] 3, H, W)``) become float32 in [0, 1] unless ``return_uint8``; depth columns
    are float32 already and pass through; lists (``task``, messages) stay lists. lrstream's
    own ``_lrstream`` position column is left out.
    """
    cams = set(camera_keys) - set(depth_keys)
    out: Dict[str, Any] = {}
    for k in batch.keys():
        if k in _LRSTREAM_KEYS:
            continue
        v = batch[k]
        if isinstance(v, np.ndarray):
            v = torch.from_numpy(v if v.flags.writeable else v.copy())
        if isinstance(v, torch.Tensor):
            if device is not None:
                v = v.to(device, non_blocking=non_blocking)
            if k in cams and v.dtype == torch.uint8 and not return_uint8:
                v = v.to(torch.float32) / 255
        out[k] = v
    return out


class LeRobotFormat:
    """:func:`to_lerobot` as ``LRStreamDataset(transform=LeRobotFormat(meta.camera_keys))``:
    every batch the DataLoader yields is in LeRobot's format (picklable, so it also runs in
    spawned DataLoader workers). The transform runs where the batch is decoded -- in a worker
    when there are workers -- so float32 frames would cross to the main process at 4x the
    bytes: with workers prefer ``return_uint8=True`` and convert on the device in the loop
    (``to_lerobot(batch, camera_keys, device=...)`` or lerobot-train's ``/ 255.0``)."""

    def __init__(self, camera_keys: Sequence[str], *, return_uint8: bool = False, depth_keys: Sequence[str] = ()):
        self.camera_keys = list(camera_keys)
        self.depth_keys = list(depth_keys)
        self.return_uint8 = return_uint8

    def __call__(self, columns: Mapping[str, Any]) -> Dict[str, Any]:
        return to_lerobot(columns, self.camera_keys, return_uint8=self.return_uint8, depth_keys=self.depth_keys)


class LeRobotBatches:
    """Wraps an iterable of lrstream batches (a DataLoader over :class:`LRStreamDataset`, or
    ``read_stream``) so it yields :func:`to_lerobot` batches; ``len`` and ``state_dict`` /
    ``load_state_dict`` pass through to the wrapped object when it has them."""

    def __init__(self, batches: Iterable[Mapping[str, Any]], camera_keys: Sequence[str], *,
                 return_uint8: bool = False, device: Optional[Any] = None, non_blocking: bool = False,
                 depth_keys: Sequence[str] = ()):
        self.batches = batches
        self.camera_keys = list(camera_keys)
        self.depth_keys = list(depth_keys)
        self.return_uint8 = return_uint8
        self.device = device
        self.non_blocking = non_blocking

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        for b in self.batches:
            yield to_lerobot(b, self.camera_keys, return_uint8=self.return_uint8, device=self.device,
                             non_blocking=self.non_blocking, depth_keys=self.depth_keys)

    def __len__(self) -> int:
        return len(self.batches)  # type: ignore[arg-type]


def delta_timestamps_flag(delta_timestamps: Optional[Mapping[str, Sequence[float]]]) -> Optional[str]:
    """LeRobot's ``delta_timestamps`` dict (``resolve_delta_timestamps``' output) as lrstream's
    ``--delta-timestamps`` value (``KEY=o1,o2;KEY2=...``), offsets written exactly (repr)."""
    if not delta_timestamps:
        return None
    parts = []
    for key, offsets in delta_timestamps.items():
        if not offsets:
            raise ValueError(f"delta_timestamps[{key!r}] is empty")
        if any(c in key for c in "=,;"):
            raise ValueError(f"delta_timestamps key {key!r} holds '=', ',' or ';'")
        parts.append(f"{key}=" + ",".join(repr(float(o)) for o in offsets))
    return ";".join(parts)
