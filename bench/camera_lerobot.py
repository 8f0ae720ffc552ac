#!/usr/bin/env python3
"""Camera baseline: frames/s of LeRobotDataset + torch DataLoader over a
dataset's frames in shuffled order (what a LeRobot training loop does), for
docs/performance.md's camera benchmark. Prints one JSON line.

    python bench/camera_lerobot.py DATASET_DIR [--workers 2] [--batch-size 32] [--backend pyav]

CPU is the main process's plus its DataLoader workers' (user + system).
"""

import argparse
import json
import resource
import time


def collate(items):
    """default_collate without the language columns (lists of varying
    length that torch cannot stack; lerobot_collate_fn keeps them as lists)."""
    from torch.utils.data import default_collate

    return default_collate([{k: v for k, v in it.items() if not k.startswith("language_")} for it in items])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--backend", default="pyav")
    ap.add_argument("--limit", type=int, default=0, help="stop after this many samples (0: all)")
    a = ap.parse_args()

    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset("bench/cameras", root=a.root, video_backend=a.backend)
    cams = ds.meta.video_keys
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                                     generator=torch.Generator().manual_seed(0), collate_fn=collate)

    def cpu() -> float:
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    c0, t0 = cpu(), time.perf_counter()
    n = 0
    for b in dl:
        n += len(b["index"])
        if a.limit and n >= a.limit:
            break
    del dl  # end the workers so their CPU is counted
    secs, cpus = time.perf_counter() - t0, cpu() - c0
    print(json.dumps({"backend": a.backend, "workers": a.workers, "samples": n, "cameras": len(cams),
                      "camera_frames": n * len(cams), "seconds": round(secs, 3), "cpu_seconds": round(cpus, 3),
                      "samples_per_sec": round(n / secs, 1), "camera_frames_per_sec": round(n * len(cams) / secs, 1),
                      "peak_rss_main_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


if __name__ == "__main__":
    main()
