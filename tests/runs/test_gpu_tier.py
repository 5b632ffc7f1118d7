"""The gpu tier (sec_lib/runs/gpu_tier.py): which runs it names, in which order, and how they reach its folder."""
import dataclasses

import pandas as pd
import pytest

from sec_lib.runs import gpu_tier, pool, study, tier
from sec_lib.runs import experiments as ex
from sec_lib.runs.store import ResultStore, run_key


def test_the_gpu_tier_names_its_float32_runs_beside_the_bf16_profile(tmp_path):
    """The gpu profile moved to bf16 + channels-last, then to NMI/F1 at the last evaluation only: a chunk's export
    still names the committed runs of its earlier forms, so none is dropped from the tier; and cuDNN's version has
    one column type whether a row was restored (text) or trained here (an int)."""
    store = ResultStore(tmp_path / "store")
    t = tier.TierStore(tier.tier_dir("gpu"))
    assert tier.restore(tier.tier_dir("gpu"), store) == len(t.runs)
    p = ex.get_profile("gpu")
    assert p.base["autocast"] == "bf16" and p.base["channels_last"] is True and p.base["eval_clustering"] == "final"
    current = {run_key(c) for c in ex.profile_configs(p, store) if store.has(c)}
    earlier = set(t.runs["key"]) - current
    assert len(earlier) == 22                       # 14 float32 and 8 bf16 runs with k-means at every evaluation
    assert not earlier & {run_key(c) for c in ex.profile_configs(p, store)}   # the profile alone would drop them
    named = {run_key(c) for c in gpu_tier.configs(p, store)}
    assert set(t.runs["key"]) <= named
    out = tmp_path / "gpu"
    assert tier.export(store, gpu_tier.configs(p, store), out)["exported"] == len(t.runs)
    assert tier.TierStore(out).runs["cudnn"].dropna().unique().tolist() == [91900.0]
    # a restored row keeps its numbers as numbers, so it shares its columns with a run trained here (torch reports
    # cuDNN's version as an int), also after a second restore of a row trained several to a process
    key = t.runs["key"][t.runs["cudnn"].notna()].iloc[0]
    assert store.meta(key)["provenance"]["cudnn"] == 91900.0
    r, extra = store.get(t.config(key)), []
    for seed, root in ((990, tmp_path / "again"), (991, tmp_path / "third")):
        new = dataclasses.replace(r, config=r.config.replace(seed=seed))
        store.save(new, provenance_={**store.meta(key)["provenance"], "cudnn": 91900, "runs_together": 4})
        extra.append(new.config)
        assert tier.export(store, gpu_tier.configs(p, store) + extra, out)["exported"] == \
            len(t.runs) + len(extra)
        store = ResultStore(root)
        tier.restore(out, store)
        assert store.meta(run_key(new.config))["provenance"]["runs_together"] == 4
    assert tier.TierStore(out).runs["cudnn"].dropna().unique().tolist() == [91900.0]


def test_gpu_tier_export_saves_every_run_the_store_holds(monkeypatch, tmp_path):
    """`bench/gpu_session.sh` calls `gpu_tier.export` after the tier, also when its time limit stopped a chunk: every
    gpu-tier run in the store reaches the tier folder (on 2026-11-27 six finished runs were lost that way)."""
    committed = tier.tier_dir("gpu")
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "store"))
    store = ResultStore()
    assert store.root == tmp_path / "store"
    n = tier.restore(committed, store)
    monkeypatch.setattr(tier, "tier_dir", lambda profile, root=None: tmp_path / profile)
    assert gpu_tier.export() == 0
    assert len(tier.TierStore(tmp_path / "gpu").runs) == n == len(tier.TierStore(committed).runs)


def test_gpu_tier_command_starts_from_the_pace_kept_in_the_store(monkeypatch, tmp_path):
    """A second command on a warm GPU machine reads the last chunk's pace from the store (gpu_pace.json)."""
    import json
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "store"))
    monkeypatch.setattr(tier, "restore", lambda out, store: 0)
    monkeypatch.setattr(pool, "prepare_data", lambda p: None)
    seen = []

    def fake(todo, named, out, store, jobs, what, together=1, deadline=None, pace=None, pace_file=None, kind=None,
             unit=1):
        seen.append((dict(pace), pace_file, kind))
        assert todo and {c.kmeans_workers for c in todo} == {4}       # 16 cores, 4 processes
        assert [run_key(c) for c in todo] == [run_key(c.replace(kmeans_workers=1)) for c in todo]
        return False
    monkeypatch.setattr(study, "train_exporting", fake)
    monkeypatch.setattr(gpu_tier.os, "cpu_count", lambda: 16)
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "gpu_pace.json").write_text(json.dumps({"s": 176.0, "run": 44.0, "processes": 4}))
    assert gpu_tier.command(5.0, 4, 1) == 0
    # the stage names the runs' kind: a pace of another stage's runs predicts with a margin (study.chunk_seconds)
    assert seen == [({"s": 176.0, "run": 44.0, "processes": 4}, tmp_path / "store" / "gpu_pace.json",
                     gpu_tier.stages(ex.get_profile("gpu"), None)[0][0])]


def test_the_gpu_tiers_k_means_restarts_share_the_cores_among_the_processes():
    assert [gpu_tier.kmeans_workers(j, 16) for j in (1, 2, 4, 6, 8, 16, 32)] == [10, 8, 4, 2, 2, 1, 1]
    assert gpu_tier.kmeans_workers(2, 2) == 1 and gpu_tier.kmeans_workers(4) >= 1


class _HoldsEvery:
    """A store holding every run but those of ``missing`` losses' held-out selection; R@1 peaks inside each grid
    (lr 1e-3, η 0.05), as a pilot and a selection that choose would give."""
    root = "every run"

    def __init__(self, missing=()):
        self.missing = set(missing)

    def get(self, c, tables=None):
        import math
        from types import SimpleNamespace
        if c.loss in self.missing and c.holdout_classes:
            return None
        r1 = 95 - abs(math.log10(c.lr) + 3) - (abs(math.log10(c.eta) + 1.3) if c.eta > 0 else 1.0)
        return SimpleNamespace(config=c, status="done", metrics={"R@1": r1}, evals=None)

    def has(self, c):
        return self.get(c) is not None


def test_the_gpu_tiers_main_comparison_is_named_from_the_main_losses_selection_alone():
    """The gpu tier trains the four main losses' selection (η = 0 included), then their none and selected-SEC arms:
    the same runs (keys) as the main chapter's, named before tuplet margin's and CosFace's selection exists (the main
    chapter waits for those; before 2026-11-27 the tier's selection left out η = 0, so its main comparison could never
    be named)."""
    p = ex.get_profile("gpu")
    partial = _HoldsEvery(missing=ex.EXTRA_LOSSES)
    stages = dict(gpu_tier.stages(p, partial))
    names = list(stages)
    assert len(names) == 5 and names[0] == "Adam's learning-rate pilot"
    assert names[3:] == [gpu_tier.TRUNK_STAGE, gpu_tier.FINETUNED_STAGE]
    selection = stages[names[1]]()
    assert {c.loss for c in selection} == set(ex.MAIN_LOSSES)
    assert {c.variant for c in selection} == {"none", "sec", "l2reg"} and not any(c.relative for c in selection)
    assert [c.variant for c in selection] == sorted((c.variant for c in selection),
                                                    key=gpu_tier.SELECTION_ORDER.get)
    main = stages[names[2]]()
    assert len(main) == len(ex.MAIN_LOSSES) * 2 * len(p.main_seeds) == len({run_key(c) for c in main})
    assert {(c.loss, c.variant, c.eta) for c in main if c.variant == "sec"} == {(l, "sec", 0.05) for l in ex.MAIN_LOSSES}
    # a seed's two arms side by side: a chunk of 4 holds two whole pairs, trained on one machine
    pairs = [main[i:i + 2] for i in range(0, len(main), 2)]
    assert all(a.variant == "none" and b.variant == "sec" and (a.loss, a.seed) == (b.loss, b.seed) for a, b in pairs)
    with pytest.raises(KeyError, match="η selection"):
        ex.sweep_configs("main", p, partial)
    everything = {run_key(c) for c in ex.sweep_configs("main", p, _HoldsEvery())}
    assert {run_key(c) for c in main} <= everything
    # the selection holds every η > 0 run the main chapter's choice reads for these losses
    chapter_sel = {run_key(c) for c in ex.sweep_configs("selection", p, _HoldsEvery())
                   if c.loss in ex.MAIN_LOSSES and c.variant in ("none", "sec", "l2reg") and not c.relative}
    assert {run_key(c) for c in selection} == chapter_sel


def test_the_tiers_page_counts_the_gpu_tiers_own_stages():
    """The tiers page's gpu row counts what the gpu tier trains (Adam's pilot, the main losses' selection, their
    main comparison), not the whole profile's 12-run pilot and 91-run selection."""
    from sec_lib.chapters import tiers
    p = ex.get_profile("gpu")
    store = _HoldsEvery(missing=ex.EXTRA_LOSSES)
    want = [len(configs()) for _, configs in gpu_tier.stages(p, store)[:3]]
    rows = tiers.stages(p, store)
    assert [r["runs"].split(" (")[0] for r in rows[:3]] == [f"{n} of {n}" for n in want] == ["4 of 4", "36 of 36",
                                                                                            "40 of 40"]
    assert all(r["complete"] for r in rows[:3])
    assert "(Adam's learning-rate pilot)" in rows[0]["runs"]
    # the pretrained regime, one more row: it waits for the trunk (not committed in this checkout)
    assert rows[3]["stage"] == tiers.PRETRAINED and not rows[3]["complete"]
    assert rows[3]["runs"] == "rates: the trunk is not pretrained yet"


def test_an_export_names_the_gpu_tiers_main_comparison(tmp_path):
    """`tier.export` writes only the runs it is given: the gpu tier's main comparison, named before the profile's main
    chapter can be (that waits for tuplet margin's and CosFace's selection), must be among them, or its runs would
    never reach `data/reference/gpu/`."""
    p = ex.get_profile("gpu")
    partial = _HoldsEvery(missing=ex.EXTRA_LOSSES)
    main = dict(gpu_tier.stages(p, partial))[gpu_tier.MAIN_STAGE]()
    assert not {run_key(c) for c in main} & {run_key(c) for c in ex.profile_configs(p, partial)}   # the old gap
    assert {run_key(c) for c in main} <= {run_key(c) for c in gpu_tier.configs(p, partial)}
    # before the selection is complete, the stages that can be named are (the pilot, the selection), and no error
    early = _HoldsEvery(missing=("triplet", *ex.EXTRA_LOSSES))
    named = {run_key(c) for c in gpu_tier.configs(p, early)}
    stages = dict(gpu_tier.stages(p, early))
    assert {run_key(c) for c in stages["main losses' η/L2 selection"]()} <= named
    with pytest.raises(KeyError):
        stages[gpu_tier.MAIN_STAGE]()


_TRUNK = {"format": "sec_lib pretrained glyph backbone v1",
          "config": {"arch": "resnet18s", "width": 64, "image_size": 64, "device": "cuda", "save_dtype": "bfloat16"}}


def test_the_gpu_tiers_fine_tuned_stages_start_from_its_pretrained_trunk(monkeypatch):
    """Stages 4 and 5 ("pretrain the gpu profile's ResNet-18 the same way on the disjoint classes and
    fine-tune it"): the fine-tuning rates on held-out classes, then every run of the main comparison started from
    the gpu profile's own trunk at the chosen rates, each with that run as its from-scratch twin. Both wait, with
    the command that builds it, while the trunk is not committed."""
    from sec_lib.runs import finetune
    from sec_lib.chapters import tiers
    p = ex.get_profile("gpu")
    store = _HoldsEvery(missing=ex.EXTRA_LOSSES)
    stages = dict(gpu_tier.stages(p, store))
    for name in (gpu_tier.TRUNK_STAGE, gpu_tier.FINETUNED_STAGE):
        with pytest.raises(FileNotFoundError, match="glyph_resnet18s_64px.json.*pretrain --profile gpu"):
            stages[name]()
    named = {run_key(c) for c in gpu_tier.configs(p, store)}               # an export names the stages before them
    assert {run_key(c) for c in stages[gpu_tier.MAIN_STAGE]()} <= named
    monkeypatch.setattr(finetune, "committed_provenance", lambda path=None, profile="reference":
                        _TRUNK if profile == "gpu" else pytest.fail("the gpu tier fine-tunes the gpu trunk"))
    sel = stages[gpu_tier.TRUNK_STAGE]()
    lrs, ratios = finetune.GRIDS["gpu"]
    assert len(sel) == len(lrs) * len(ratios) == 12 and len({run_key(c) for c in sel}) == 12
    for c in sel:
        assert (c.loss, c.variant, c.seed, c.holdout_classes) == ("semihard", "none", p.pilot_seed, p.holdout_classes)
        assert c.pretrained == "data/reference/pretrained/glyph_resnet18s_64px.pt" and c.freeze_bn
        assert (c.model, c.width, c.image_size, c.autocast, c.channels_last) == ("resnet18s", 64, 64, "bf16", True)
    main = stages[gpu_tier.MAIN_STAGE]()
    fine = stages[gpu_tier.FINETUNED_STAGE]()
    assert len(fine) == len(main) == 40
    # _HoldsEvery's R@1 peaks at lr 1e-3: the interior trunk rate; the ratios tie, and the smallest wins
    assert {(c.lr, c.lr_head) for c in fine} == {(1e-3, 1e-3 * min(ratios))}
    q = ex.tuned(p, "adam", store)
    for f, m in zip(fine, main):
        assert finetune.scratch_config(q, f) == m                          # its twin: the same run from scratch
        assert dataclasses.replace(f, pretrained=None, freeze_bn=False, lr=m.lr, lr_head=m.lr_head) == m
    assert named <= {run_key(c) for c in gpu_tier.configs(p, store)}
    row = tiers.stages(p, store)[3]
    assert row == {"stage": tiers.PRETRAINED, "runs": "rates: 12 of 12; fine-tuned: 40 of 40", "complete": True}


def test_the_gpu_tier_pretrains_its_trunk_before_the_fine_tuning_stages(monkeypatch, tmp_path):
    """The command trains the stages in order; before the first fine-tuning stage it pretrains the trunk where it is
    not committed, and a pretraining stopped at the deadline ends the command (its state is kept for the next)."""
    from sec_lib.runs import pretrain
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "store"))
    monkeypatch.setattr(tier, "restore", lambda out, store: 0)
    monkeypatch.setattr(pool, "prepare_data", lambda p: None)
    store = _HoldsEvery(missing=ex.EXTRA_LOSSES)
    store.root = tmp_path / "store"                                        # where the command keeps its pace
    monkeypatch.setattr(gpu_tier, "ResultStore", lambda: store)
    trained, calls = [], []
    monkeypatch.setattr(study, "train_exporting",
                        lambda todo, *a, **k: trained.append((len(todo), k["kind"], k["unit"])) or True)
    monkeypatch.setattr(pretrain, "REPO", tmp_path)                        # no trunk committed here

    def stopped(cfg, stop_at=None):
        calls.append((cfg, stop_at))
        raise pretrain.PretrainStopped(500, cfg.iterations, tmp_path / "state.pt")
    monkeypatch.setattr(pretrain, "build_checkpoint", stopped)
    assert gpu_tier.command(5.0, 4, 1) == 0
    assert len(trained) == 3                       # the pilot, the selection and the main comparison, all present
    # the main comparison's chunks keep a seed's two arms together (unit 2), the other stages' need not
    assert [(kind, unit) for _, kind, unit in trained] == [(name, 2 if name == gpu_tier.MAIN_STAGE else 1)
                                                          for name, _ in gpu_tier.stages(ex.get_profile("gpu"), None)[:3]]
    assert [c for c, _ in calls] == [pretrain.GPU_CONFIG] and calls[0][1] is not None


def test_the_tiers_page_shows_the_gpu_main_comparisons_verdicts_once_every_pair_is_in(monkeypatch):
    """The tiers page's gpu section (:mod:`sec_lib.chapters.tiers_gpu`): while the selection is incomplete it says
    the comparison cannot be named; while a run is missing it counts the runs and shows no verdict; with every pair
    in, the compare page's paired verdicts: SEC 1 point above none with seed noise is a signal for the three losses
    that gain, sized against the paper's Table 1 gains for each (all above 1.6 points): 'smaller than claimed'; a loss
    that gains nothing is not a signal."""
    import numpy as np
    from types import SimpleNamespace
    from sec_lib.chapters import tiers_gpu
    p = ex.get_profile("gpu")
    monkeypatch.setattr(tiers_gpu, "store_for", lambda profile, root=None: store)
    store = _HoldsEvery(missing=("ms",))                                     # ms's selection not in yet
    table, sentence = tiers_gpu.main_comparison()
    assert table.empty and "cannot be named yet" in sentence

    store = _HoldsEvery()
    rng = np.random.default_rng(0)

    def frames(cfgs, tables=(), store=None, missing="error"):                # load_runs over the made-up store
        assert missing == "skip"
        rows = []
        for c in (c for c in cfgs if store.get(c) is not None):
            gain = 0.0 if c.loss == "ms" else 1.0
            r1 = 90 + rng.normal(0, 0.2) + (gain if c.variant == "sec" else 0.0) + c.seed * 0.5   # seeds differ
            rows.append({"key": run_key(c), "loss": c.loss, "variant": c.variant, "seed": c.seed, "status": "done",
                         "device": "NVIDIA H200", **{m: r1 for m in ("R@1", "R@2", "R@4", "R@8", "NMI", "F1")}})
        return SimpleNamespace(runs=pd.DataFrame(rows))
    monkeypatch.setattr(tiers_gpu, "load_runs", frames)
    table, sentence = tiers_gpu.main_comparison()
    assert list(table["loss"]) == list(ex.MAIN_LOSSES)
    verdicts = dict(zip(table["loss"], table["verdict (R@1)"]))
    assert all(verdicts[l] == "smaller than claimed" for l in ex.MAIN_LOSSES if l != "ms")
    assert verdicts["ms"] not in ("reproduced", "smaller than claimed")
    assert "40 runs" in sentence and "NVIDIA H200" in sentence and "η: triplet 0.05" in sentence

    first = dict(gpu_tier.stages(p, store))[gpu_tier.MAIN_STAGE]()[0]
    have = store.get
    monkeypatch.setattr(store, "get", lambda c, tables=None: None if c == first else have(c))
    table, sentence = tiers_gpu.main_comparison()
    assert table.empty and "holds 39 of its 40 runs" in sentence
