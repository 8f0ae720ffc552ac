"""lrstream vs the installed lerobot release, frame by frame, on LeRobot-written datasets.

Reference side: ``LeRobotDataset(root, delta_timestamps=...)[i]`` -> ``batch_to_transition``
-> ``RenderMessagesStep(recipe)`` -> ``transition_to_batch`` (per sample) and
``lerobot_collate_fn`` (batches). lrstream side: ``lrstream stream`` (msgpack, read with
lrstream_client). Compared: messages, message_streams, target_message_indices, task,
index/episode_index/frame_index/timestamp/task_index, observation.state and action windows and
their ``*_is_pad`` masks.

lrstream options that make it LeRobot 0.6.1's RenderMessagesStep (docs/interop.md):
``--mode drop`` (0.6.1 drops frames whose recipe yields no target and passes frames without
language through unrendered; ``fallback`` is LeRobot main's later behaviour) and
``--no-task-aug`` (the step passes the sample's canonical ``task`` explicitly, so ``task_aug``
rows never rotate the task).

Pixels: compared in test_camera_pixels.py (camera frames), through the ``lerobot_items`` fixture.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import DELTA_FLAG, RECIPES

from lrstream_client import read_stream

HERE = Path(__file__).resolve().parent
# lerobot 0.6.1 accepts only these of ../shared/recipes (upstream main's later recipes have
# target-less components and `route:`, which 0.6.1 refuses); v061_mem_vqa_speech.yaml is
# subtask_mem_vqa_speech.yaml made 0.6.1-valid (memory, interjection + say, VQA per camera).
RECIPE_PATHS = {"subtask_joint": RECIPES / "subtask_joint.yaml", "pi05_hirobot": RECIPES / "pi05_hirobot.yaml",
                "v061_mem_vqa_speech": HERE / "recipes" / "v061_mem_vqa_speech.yaml"}
NUMERIC = ["index", "episode_index", "frame_index", "timestamp", "task_index",
           "observation.state", "action", "observation.state_is_pad", "action_is_pad"]
LANG = ["messages", "message_streams", "target_message_indices"]


def lrstream_samples(bin_, dataset, recipe, *, mode="drop", batch_size=1, extra=()):
    """Run lrstream stream; return (header, batches) or raise with its stderr."""
    cmd = [str(bin_), "stream", "--dataset", str(dataset), "--recipe", str(recipe), "--mode", mode,
           "--no-task-aug", "--batch-size", str(batch_size), "--workers", "1", "-q",
           "--delta-timestamps", DELTA_FLAG, *extra]
    p = subprocess.run(cmd, capture_output=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.decode()[-2000:]}")
    import io

    return list(read_stream(io.BytesIO(p.stdout)))


def unbatch(batches):
    """Per-sample dicts keyed by global index."""
    out = {}
    for b in batches:
        n = len(b["index"])
        for j in range(n):
            s = {k: v[j] for k, v in b.items()}
            out[int(s["index"])] = s
    return out


def lerobot_render(items, recipe_path):
    """LeRobot 0.6.1's per-sample pipeline; None where RenderMessagesStep drops the frame."""
    from lerobot.configs.recipe import TrainingRecipe
    from lerobot.datasets.language import LANGUAGE_EVENTS, LANGUAGE_PERSISTENT
    from lerobot.processor.converters import batch_to_transition
    from lerobot.lerobot_types import TransitionKey
    from lerobot.processor.render_messages_processor import RenderMessagesStep

    step = RenderMessagesStep(recipe=TrainingRecipe.from_yaml(recipe_path))
    out = []
    for it in items:
        t = step(batch_to_transition(dict(it)))
        if t is None:
            out.append(None)
            continue
        # The sample as LeRobot's training loop sees it: the dataset item with the step's
        # complementary data (rendered messages replacing the raw language columns).
        sample = {k: v for k, v in it.items() if k not in (LANGUAGE_PERSISTENT, LANGUAGE_EVENTS)}
        comp = t.get(TransitionKey.COMPLEMENTARY_DATA) or {}
        for k in (*LANG, "task"):
            if k in comp:
                sample[k] = comp[k]
        out.append(sample)
    return out


def _np(v):
    if isinstance(v, torch.Tensor):
        return v.numpy()
    return np.asarray(v)


def diff_sample(i, want, got):
    """Human-readable differences between LeRobot's sample ``want`` and lrstream's ``got``."""
    d = []
    for k in NUMERIC:
        if k not in want:
            d.append(f"frame {i}: LeRobot has no {k!r}")
            continue
        if k not in got:
            d.append(f"frame {i} {k}: missing in lrstream")
            continue
        w, g = _np(want[k]), _np(got[k])
        if w.shape != g.shape or not np.array_equal(w.astype(g.dtype) if g.dtype != w.dtype else w, g):
            d.append(f"frame {i} {k}: expected {w.tolist()} ({w.dtype}), got {g.tolist()} ({g.dtype})")
    if want.get("task") != got.get("task"):
        d.append(f"frame {i} task: expected {want.get('task')!r}, got {got.get('task')!r}")
    for k in LANG:
        w, g = want.get(k), got.get(k)
        if w != g:
            d.append(f"frame {i} {k}: expected {w!r}, got {g!r}")
    return d


@pytest.mark.parametrize("recipe", sorted(RECIPE_PATHS))
@pytest.mark.parametrize("name", ["full", "partial", "none"])
def test_per_frame_matches_lerobot(lrstream_bin, lerobot_datasets, lerobot_items, name, recipe):
    items = lerobot_items(name)
    want = lerobot_render(items, RECIPE_PATHS[recipe])
    got = unbatch(lrstream_samples(lrstream_bin, lerobot_datasets[name], RECIPE_PATHS[recipe]))
    diffs = []
    for i, w in enumerate(want):
        if w is None:
            if i in got:
                diffs.append(f"frame {i}: LeRobot drops it (no target message), lrstream emits {got[i].get('messages')!r}")
            continue
        if i not in got:
            diffs.append(f"frame {i}: LeRobot keeps it ({w.get('messages')!r}), lrstream dropped it")
            continue
        diffs += diff_sample(i, w, got[i])
    extra = sorted(set(got) - set(range(len(want))))
    if extra:
        diffs.append(f"lrstream emits frames LeRobot does not have: {extra}")
    assert not diffs, f"{name} × {recipe}: {len(diffs)} differences:\n" + "\n".join(diffs[:40])
    # The comparison must have compared something rendered (annotated datasets).
    if name != "none":
        assert any(w is not None and "messages" in w for w in want)


def test_batches_match_lerobot_collate(lrstream_bin, lerobot_datasets, lerobot_items):
    """lrstream's collated columns equal lerobot_collate_fn over the same samples."""
    from lerobot.utils.collate import lerobot_collate_fn

    recipe = RECIPE_PATHS["v061_mem_vqa_speech"]
    want = lerobot_render(lerobot_items("full"), recipe)
    batches = lrstream_samples(lrstream_bin, lerobot_datasets["full"], recipe, batch_size=8)
    assert len(batches) >= 3
    for b in batches:
        idx = [int(i) for i in b["index"]]
        ref = lerobot_collate_fn([want[i] for i in idx])
        for k in NUMERIC:
            w, g = ref[k].numpy(), np.asarray(b[k])
            assert w.shape == g.shape, f"batch {b.seq} {k}: shape {w.shape} vs {g.shape}"
            assert np.array_equal(w.astype(g.dtype), g), f"batch {b.seq} {k}: {w.tolist()} vs {g.tolist()}"
        for k in ["task", *LANG]:
            assert ref[k] == list(b[k]), f"batch {b.seq} {k}: expected {ref[k]!r}, got {list(b[k])!r}"


def test_partial_drop_mode_refuses_mixed_batches_like_lerobot(lrstream_bin, lerobot_datasets, lerobot_items):
    """Rendered and passthrough frames in one batch: lerobot_collate_fn raises, lrstream refuses up front
    (batches of one, as the per-frame comparison uses, never mix and are allowed)."""
    from lerobot.utils.collate import lerobot_collate_fn

    recipe = RECIPE_PATHS["v061_mem_vqa_speech"]
    want = lerobot_render(lerobot_items("partial"), recipe)
    with pytest.raises(ValueError, match="Inconsistent batch"):
        lerobot_collate_fn([w for w in want if w is not None])
    # lrstream refuses before the first batch (the same reason, found up front).
    with pytest.raises(RuntimeError, match="--mode drop cannot batch"):
        lrstream_samples(lrstream_bin, lerobot_datasets["partial"], recipe, batch_size=64)


def test_partial_fallback_mode(lrstream_bin, lerobot_datasets, lerobot_items):
    """--mode fallback (LeRobot main, not 0.6.1): annotated frames render exactly as 0.6.1;
    frames of unannotated episodes are kept and render from the task alone."""
    recipe = RECIPE_PATHS["v061_mem_vqa_speech"]
    items = lerobot_items("partial")
    want = lerobot_render(items, recipe)
    got = unbatch(lrstream_samples(lrstream_bin, lerobot_datasets["partial"], recipe, mode="fallback", batch_size=64))
    assert sorted(got) == list(range(len(items))), "fallback keeps every frame"
    diffs = []
    for i, w in enumerate(want):
        if w is not None and "messages" in w:
            diffs += diff_sample(i, w, got[i])
        else:
            g = got[i]
            assert g["messages"], f"frame {i}: fallback rendered no message"
            assert any(items[i]["task"] in str(m.get("content")) for m in g["messages"]), (
                f"frame {i}: fallback messages {g['messages']!r} do not carry the task {items[i]['task']!r}")
    assert not diffs, "\n".join(diffs[:40])


@pytest.mark.parametrize("name", ["none", "full"])
def test_no_recipe_batches_match_lerobot_collate(lrstream_bin, lerobot_datasets, lerobot_items, name):
    """Without a recipe (a --dataset without --recipe) lrstream's batches are lerobot_collate_fn over
    LeRobotDataset items without a RenderMessagesStep: the same numeric columns, windows, pad masks
    and tasks, no rendered key on either side, every frame kept."""
    from lerobot.utils.collate import lerobot_collate_fn

    items = lerobot_items(name)
    cmd = [str(lrstream_bin), "stream", "--dataset", str(lerobot_datasets[name]), "--batch-size", "8",
           "--workers", "1", "-q", "--cameras", "none", "--delta-timestamps", DELTA_FLAG]
    p = subprocess.run(cmd, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    import io

    batches = list(read_stream(io.BytesIO(p.stdout)))
    assert sum(len(b["index"]) for b in batches) == len(items)
    for b in batches:
        ref = lerobot_collate_fn([items[int(i)] for i in b["index"]])
        assert not any(k in ref or k in b for k in LANG)
        for k in NUMERIC:
            w, g = ref[k].numpy(), np.asarray(b[k])
            assert w.shape == g.shape, f"batch {b.seq} {k}: shape {w.shape} vs {g.shape}"
            assert np.array_equal(w.astype(g.dtype), g), f"batch {b.seq} {k}: {w.tolist()} vs {g.tolist()}"
        assert ref["task"] == list(b["task"]), f"batch {b.seq} task"
