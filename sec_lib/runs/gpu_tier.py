"""The gpu tier: what a lent GPU trains, in which order, and how its runs reach ``data/reference/gpu/``.

``bench/gpu_session.sh`` calls :func:`command` and then :func:`export` in each short GPU window; ``python -m
sec_lib.book gpu-tier`` calls :func:`command`; the tiers page counts :func:`stages`. Training itself is
:func:`sec_lib.runs.study.train_exporting`'s, the CPU tiers' too.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from pathlib import Path

from . import pool
from . import experiments as ex
from . import finetune
from . import pretrain
from . import study
from . import tier
from .store import ResultStore
from .config import TrainConfig


#: The gpu profile's earlier forms, whose committed runs stay in the tier (each its own kind or its own settings):
#: float32 with NMI/F1 at every evaluation (2026-11-23 to 26), then bf16 + channels-last with NMI/F1 at every
#: evaluation (2026-11-27, before k-means moved to the last evaluation only).
EARLIER_FORMS = ({"autocast": "none", "channels_last": False, "eval_clustering": "all"},
                 {"eval_clustering": "all"})


def configs(p: ex.Profile, store) -> list:
    """Every gpu-tier run that can be named now: the profile's, those of its earlier forms (:data:`EARLIER_FORMS`),
    so that an export keeps their committed runs, and those of the tier's own :func:`stages` (its main comparison is
    named before the profile's main chapter is, and an export writes only the runs it names)."""
    out = ex.profile_configs(p, store)
    for form in EARLIER_FORMS:
        out += ex.profile_configs(dataclasses.replace(p, base={**p.base, **form}), store)
    for _, naming in stages(p, store):
        try:
            out += naming()
        except WAITING:                                # a later stage waits for this one's choices
            break
    return out


def export() -> int:
    """Export every gpu-tier run the store holds to ``data/reference/gpu/`` (``bench/gpu_session.sh`` calls it after
    the tier, also when its time limit stopped a chunk: runs that chunk finished are saved as they end)."""
    p, store, out = ex.get_profile("gpu"), ResultStore(), tier.tier_dir("gpu")
    counts = tier.export(store, configs(p, store), out)
    print(f"gpu tier: {counts['exported']} runs exported to {out}", flush=True)
    return 0


#: The gpu tier's selection order: SEC's η grid first, then its η = 0 run, then the L2 weights.
SELECTION_ORDER = {"sec": 0, "none": 1, "l2reg": 2}
#: What a stage's naming raises while it waits for an earlier one: a missing run or choice (KeyError,
#: SelectionError), or the pretrained trunk the fine-tuning stages start from, not committed yet (FileNotFoundError).
WAITING = (KeyError, ex.SelectionError, FileNotFoundError)
#: The stage a GPU is for: the four main losses with and without SEC at the tier's own held-out η.
MAIN_STAGE = "main comparison (main losses × none and SEC at its held-out η)"
#: The first stage that needs the gpu profile's pretrained trunk (:data:`sec_lib.runs.pretrain.GPU_CONFIG`):
#: :func:`command` pretrains it before that stage when it is not committed.
TRUNK_STAGE = "fine-tuning rate selection (the pretrained ResNet-18 trunk, held-out classes)"
FINETUNED_STAGE = "fine-tuned comparison (main losses × none and SEC, from the pretrained trunk)"

#: The stages named in pairs (a seed's none and SEC runs, one after the other), which a chunk does not split.
PAIRED_STAGES = (MAIN_STAGE, FINETUNED_STAGE)


def stages(p: ex.Profile, store) -> list:
    """The gpu tier's stages in the order :func:`command` trains them, as (name, configs) pairs, ``configs``
    a function that names the stage's runs (it raises ``KeyError`` or :class:`~sec_lib.runs.experiments.SelectionError`
    while a choice it needs is missing). The tiers page counts the same stages.

    1. Adam's learning-rate pilot (the η selection trains at the rate it chooses; the pilot's SGD rows serve the
       optimizer chapter only).
    2. The four main losses' held-out selection: SEC's η grid, η = 0, the L2 weights.
    3. The main comparison a GPU is for: the four main losses × {none, SEC at the held-out η} × the
       profile's ``main_seeds``, the same runs (and store keys) as the main chapter's arms of those losses. Named
       from stage 2 alone: the main chapter also waits for tuplet margin's and CosFace's selection. A seed's none
       and SEC runs are named one after the other, so that a chunk of an even number of runs trains both arms of
       its pairs on one machine (lent machines differ: H100s and an H200 so far), and a paired difference
       never mixes two GPUs.
    4. The pretrained regime's rates (:data:`TRUNK_STAGE`): the gpu profile's ResNet-18 trunk pretrained the way the
       decisive tier's smallcnn trunk was (:data:`sec_lib.runs.pretrain.GPU_CONFIG`; :func:`command` pretrains it
       first where it is not committed), then :func:`sec_lib.runs.finetune.selection`: semihard without SEC, every
       (trunk rate, head/trunk ratio) pair of ``finetune.GRIDS['gpu']``, on the held-out classes with the pilot seed.
    5. The fine-tuned comparison (:data:`FINETUNED_STAGE`): every run of stage 3 started from the trunk instead, at
       the chosen rates (``finetune.settings``); its from-scratch twin is that run of stage 3."""
    @functools.cache
    def tuned() -> ex.Profile:                      # the pilot's rate, read from the store once for both stages
        return ex.tuned(p, "adam", store)

    def selection():
        cfgs = [c for c in ex.eta_selection(tuned())
                if c.loss in ex.MAIN_LOSSES and c.variant in SELECTION_ORDER and not c.relative]
        return sorted(cfgs, key=lambda c: SELECTION_ORDER[c.variant])     # stable: each grid in its order

    def main():                                     # each seed's none and SEC runs side by side: see the docstring
        q = tuned()
        sel = ex.stored_selection(q, store, ex.MAIN_LOSSES)
        return [ex.config(q, loss, variant, s, **changes) for loss in ex.MAIN_LOSSES for s in q.main_seeds
                for variant, changes in (("none", {}), ("sec", {"eta": ex.chosen_eta(q, loss, sel)}))]
    def finetuned():
        lr, lr_head = finetune.chosen_rates(p, store)
        start = {**finetune.settings(p), "lr": lr, "lr_head": lr_head}      # read the trunk's provenance once
        return [dataclasses.replace(c, **start) for c in main()]
    return [("Adam's learning-rate pilot", lambda: [c for c in ex.lr_pilot(p) if c.optimizer == "adam"]),
            ("main losses' η/L2 selection", selection),
            (MAIN_STAGE, main),
            (TRUNK_STAGE, lambda: finetune.selection(p)),
            (FINETUNED_STAGE, finetuned)]


def pretrained_trunk(deadline: float | None = None) -> bool:
    """Whether the gpu profile's pretrained trunk is committed; if not, pretrain it now (on this machine's GPU,
    resumably: :func:`sec_lib.runs.pretrain.build_checkpoint`), stopping at ``deadline`` (a ``time.monotonic()``
    value) with its state saved for the next call. ``bench/gpu_session.sh`` sends a new checkpoint back."""
    cfg = pretrain.GPU_CONFIG
    if (pretrain.REPO / pretrain.provenance_path("gpu")).is_file():
        return True
    print(f"gpu tier: pretraining the gpu profile's trunk ({cfg.arch}, width {cfg.width}, {cfg.image_size} px, "
          f"{cfg.iterations} steps) for the fine-tuning stages", flush=True)
    try:
        prov = pretrain.build_checkpoint(cfg, stop_at=None if deadline is None else deadline - 30)
    except pretrain.PretrainStopped as e:
        print(f"gpu tier: {e}", flush=True)
        return False
    print(f"gpu tier: pretrained in {prov['train']['seconds']:.0f} s, test R@1 of its features "
          f"{prov['test_features']['pretrained']['R@1']:.2f} (random init "
          f"{prov['test_features']['random_init']['R@1']:.2f}); written to {pretrain.checkpoint_path(cfg)}", flush=True)
    return True


def kmeans_workers(jobs: int, cores: int | None = None) -> int:
    """How many k-means restarts a run of the tier runs at once (``TrainConfig.kmeans_workers``: the same clustering,
    not part of the key): this machine's cores shared by the ``jobs`` processes, at most the restarts of a fit.

    Every run ends with NMI/F1 of the test classes (1,392 on the gpu profile): k-means with 10 restarts, 55 s on one
    thread of an AMD EPYC, while the GPU idles (the H200 window of 2026-11-28). The processes of a chunk start
    together and end together, so their last evaluations share the host's cores (16 on the lent machines)."""
    cores = (os.cpu_count() or 1) if cores is None else cores
    return max(1, min(TrainConfig.kmeans_n_init, cores // max(1, jobs)))


def command(minutes: float = 0.0, jobs: int | None = None, together: int | None = None) -> int:
    """Train the gpu tier in its order, resumably, exporting to ``data/reference/gpu/`` after every chunk:
    the committed runs are restored, then the held-out η selection of the four main losses (SEC, then L2), then
    the main comparison once that selection is complete. ``minutes`` > 0: start no chunk that would end after that
    many minutes (a lent GPU's short window). Defaults: the gpu profile's ``jobs`` and ``together``."""
    p = ex.get_profile("gpu")
    jobs, together = jobs or p.jobs, together or p.together
    workers = kmeans_workers(jobs)
    deadline = time.monotonic() + 60 * minutes if minutes > 0 else None
    store, out = ResultStore(), tier.tier_dir("gpu")
    # the last chunk's pace, carried from chunk to chunk and kept in the store for the next command on this machine
    pace_file = Path(store.root) / "gpu_pace.json"
    pace = json.loads(pace_file.read_text()) if pace_file.is_file() else {}
    print(f"restored {tier.restore(out, store)} committed runs of {out} into {store.root}", flush=True)
    pool.prepare_data(p)

    def named():
        return configs(p, store)
    for name, naming in stages(p, store):
        if name == TRUNK_STAGE and not pretrained_trunk(deadline):
            return 0
        try:
            cfgs = naming()
        except WAITING as e:
            print(f"gpu tier: the {name} cannot be named yet: {e}", flush=True)
            return 0
        todo = [c.replace(kmeans_workers=workers) for c in cfgs if not store.has(c)]   # not in the key
        print(f"gpu tier: {name}, {len(cfgs)} runs, {len(todo)} to train "
              f"({jobs} processes x {together} runs together, k-means restarts {workers} at once)", flush=True)
        if not study.train_exporting(todo, named(), out, store, jobs, "gpu tier", together, deadline, pace, pace_file,
                                        kind=name, unit=2 if name in PAIRED_STAGES else 1):
            return 0
    return 0
