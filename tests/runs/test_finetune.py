"""The fine-tuning arm (sec_lib.runs.finetune): the paper's protocol on the backbone pretrained here,
its rates chosen on held-out classes, and a from-scratch twin for every run."""
import dataclasses
from types import SimpleNamespace

import pytest

from sec_lib.params import ParameterError
from sec_lib.runs import experiments as ex
from sec_lib.runs import finetune as ft
from sec_lib.runs.pretrain import CHECKPOINT
from sec_lib.runs.store import run_key
from sec_lib.runs.train import train


class FakeStore:
    """Held-out R@1 by (trunk lr, head ratio) for the selection runs; the from-scratch Adam pilot peaks at 3e-3."""
    root = "fake"

    def __init__(self, score):
        self.score = score

    def get(self, cfg, tables=()):
        if cfg.pretrained is None:                     # the profile's own learning-rate pilot
            return SimpleNamespace(status="done", config=cfg, metrics={"R@1": -abs(cfg.lr - 3e-3)}, evals=None)
        return SimpleNamespace(status="done", config=cfg, metrics={"R@1": self.score(cfg.lr, cfg.lr_head / cfg.lr)})


def test_the_grids_come_from_the_rebuttal_and_the_authors_code():
    assert ft.HEAD_RATIOS == (0.2, 0.5, 1.0, 2.0)
    assert ft.REBUTTAL_TABLE3[("CUB", "T, SHT")][:2] == (5e-6, 2.5e-6)
    assert "Table 3" in ft.SOURCE


def test_the_selection_trains_on_held_out_classes_with_the_protocol():
    p = ex.get_profile("cpu")
    sel = ft.selection(p)
    lrs, ratios = ft.grid(p)
    assert (lrs, ratios) == (ft.TRUNK_LRS[1:4], ft.HEAD_RATIOS)        # the cpu cut: the middle three trunk rates
    assert len(sel) == len(lrs) * len(ratios) == len({run_key(c) for c in sel}) == 12
    for c in sel:
        assert c.holdout_classes == p.holdout_classes and c.seed == p.pilot_seed and c.loss == "semihard"
        assert c.pretrained == str(CHECKPOINT) and c.freeze_bn and c.schedule == "step"
        assert c.lr_milestones == (75,) and c.lr_decay == 0.1 and c.optimizer == "adam" and c.eta == 0


def test_the_chosen_rates_are_the_best_held_out_pair_and_feed_every_run():
    p = ex.get_profile("cpu")
    store = FakeStore(lambda lr, ratio: 50 - abs(lr - 1e-3) * 1e3 - abs(ratio - 0.5))
    assert ft.chosen_rates(p, store) == (1e-3, 5e-4)
    fine = ft.runs(p, store)
    assert len(fine) == len(ex.MAIN_LOSSES) * len(ex.VARIANTS) * len(p.seeds)
    for c in fine:
        assert (c.lr, c.lr_head, c.pretrained, c.freeze_bn) == (1e-3, 5e-4, str(CHECKPOINT), True)
        assert c.holdout_classes == 0 and c.test_classes == p.base["test_classes"]
        scratch = ft.twin(p, c, store)
        assert scratch in ex.main_table(ex.tuned(p, "adam", store)) and scratch.pretrained is None
        assert scratch.lr == 3e-3
        assert dataclasses.replace(c, **{f: getattr(scratch, f) for f in (
            "pretrained", "freeze_bn", "schedule", "lr_milestones", "lr", "lr_head")}) == scratch


def test_a_trunk_rate_at_the_edge_of_its_grid_is_refused_a_ratio_at_the_edge_of_the_conventions_is_not():
    p = ex.get_profile("cpu")
    assert ft.chosen_rates(p, FakeStore(lambda lr, ratio: 50 - abs(lr - 1e-3) * 1e3 + ratio)) == (1e-3, 2e-3)
    with pytest.raises(ex.SelectionError, match="trunk rate 0.003"):
        ft.chosen_rates(p, FakeStore(lambda lr, ratio: lr * 1e4 - abs(ratio - 0.5)))


def test_only_the_quick_tier_has_a_fine_tuning_arm():
    with pytest.raises(ParameterError, match="'smoke', 'cpu'"):
        ft.selection("reference")


def test_a_smoke_fine_tuning_run_trains():
    p = ex.get_profile("smoke")
    cfg = dataclasses.replace(ft.selection(p)[0], iterations=4, lr_milestones=(3,))
    res = train(cfg)
    assert res.status == "done" and res.metrics["R@1"] > 0


def test_the_summary_pairs_each_fine_tuned_run_with_its_twin_by_seed():
    import pandas as pd
    p = ex.get_profile("cpu")

    class Store(FakeStore):
        def get(self, cfg, tables=()):
            if cfg.holdout_classes:
                return super().get(cfg, tables)
            assert cfg.pretrained or cfg.lr == 3e-3          # the twin runs at the pilot's rate
            fine = cfg.pretrained is not None
            r1 = 50 + (2 if cfg.variant == "sec" and fine else 0) + 0.1 * cfg.seed
            steps = pd.DataFrame({"norm_mean": [8.0 if fine else 1.0], "norm_var": [16.0 if fine else 0.01]})
            return SimpleNamespace(status="done", config=cfg, steps=steps,
                                   metrics={"R@1": r1, "test_norm_mean": 2.0, "test_norm_var": 1.0})

    out = ft.summary(p, Store(lambda lr, ratio: 50 - abs(lr - 1e-3) * 1e3 - abs(ratio - 0.5)))
    assert len(out["runs"]) == 2 * len(ex.MAIN_LOSSES) * len(ex.VARIANTS) * len(p.seeds)
    fine = out["runs"][out["runs"].regime == "fine-tuned"]
    assert (fine.start_norm_cv == 0.5).all()
    e = out["effects"].set_index(["loss", "variant", "effect"])
    assert e.loc[("ms", "sec", "interaction"), "mean"] == pytest.approx(2.0)
    assert e.loc[("ms", "l2reg", "fine-tuned"), "mean"] == pytest.approx(0.0)
    assert e.loc[("ms", "sec", "interaction"), "seeds"] == len(p.seeds)


def test_the_chapter_pairs_each_fine_tuned_run_with_the_main_tables_own_run():
    """experiments.SWEEPS['pretrained']: the fine-tuning runs labelled 'fine-tuned', their twins labelled 'from
    scratch' and identical to the main table's runs; the selection is its own sweep ('ftrates'), trained in a wave
    before the chapters; profiles without the arm (the long tiers, the benchmark books) name none."""
    store = FakeStore(lambda lr, ratio: 50 - abs(lr - 1e-3) * 1e3 - abs(ratio - 0.5))
    labeled = ex.pretrained_runs(ex.tuned(ex.get_profile("cpu"), "adam", store), store)
    assert [lab["regime"] for _, lab in labeled] == ["fine-tuned"] * 36 + ["from scratch"] * 36
    main = {run_key(c) for c in ex.sweep_configs("compare", "cpu", store)}
    assert {run_key(c) for c, lab in labeled if lab["regime"] == "from scratch"} == main
    assert all(c.pretrained == str(CHECKPOINT) for c, lab in labeled if lab["regime"] == "fine-tuned")
    assert {run_key(c) for c in ex.sweep_configs("ftrates", "cpu", store)} == {run_key(c) for c in
                                                                                  ft.selection("cpu")}
    labels = ex.sweep_labels("pretrained", "cpu", store)
    assert len(labels) == 72 and set(map(str, labels.values())) == {"{'regime': 'fine-tuned'}",
                                                                     "{'regime': 'from scratch'}"}
    for name in ("reference", "gpu"):
        p = ex.get_profile(name)
        assert ex.pretrained(p, store) == [] == ex.finetune_rates(p, store)
    assert ex.check_sweeps("cpu", ["ftrates", "pretrained"]) > 0      # the stand-in store: an interior rate pair


def test_the_launcher_trains_the_rate_selection_before_the_chapter():
    from sec_lib.runs.waves import train_stages
    waves = []

    class Store(FakeStore):
        def get(self, cfg, tables=()):
            if cfg.pretrained and cfg.holdout_classes and not any("fine-tuning rate" in w for w, _ in waves):
                return None                       # the selection does not exist before its wave
            return super().get(cfg, tables)
    store = Store(lambda lr, ratio: 50 - abs(lr - 1e-3) * 1e3 - abs(ratio - 0.5))
    store.root = "fake"
    train_stages(ex.get_profile("cpu"), ["ftrates", "pretrained"], 1, store,
                 sweep=lambda desc, configs, lau: waves.append((desc, len(configs))))
    assert [w for w, _ in waves] == ["[cpu] lr pilot", "[cpu] fine-tuning rate selection", "[cpu] pretrained runs"]
    assert dict(waves)["[cpu] fine-tuning rate selection"] == 12 and dict(waves)["[cpu] pretrained runs"] == 72


def test_a_pretrained_runs_store_key_follows_the_checkpoints_content(tmp_path):
    """The staleness fix: the key of a run with ``pretrained`` set holds its weights file's sha256, so retraining the
    checkpoint in place gives its runs new keys; configs without (pretrained=None) keep theirs (no entry; the key
    snapshot of tests/runs/test_scale_arms.py checks every chapter's keys)."""
    import json
    import os
    import shutil
    from sec_lib.runs.config import TrainConfig, weights_path, weights_sha256
    committed = TrainConfig(pretrained=str(CHECKPOINT))
    prov = json.loads(CHECKPOINT.with_suffix(".json").read_text())
    assert committed.canonical()["pretrained_sha256"] == prov["file_sha256"]
    assert "pretrained_sha256" not in TrainConfig().canonical() and "pretrained_sha256" not in TrainConfig().to_dict()
    w = tmp_path / "w.pt"
    shutil.copyfile(weights_path(str(CHECKPOINT)), w)
    cfg = TrainConfig(pretrained=str(w))
    before = run_key(cfg)
    assert before != run_key(committed.replace(pretrained=str(tmp_path / "other.pt")))   # another file's name
    data = bytearray(w.read_bytes())
    data[-1] ^= 1                                 # retrained in place: same name, same size, other content
    w.write_bytes(bytes(data))
    os.utime(w, ns=(1, 1))
    assert run_key(cfg) != before and weights_sha256(str(w)) != prov["file_sha256"]
    assert TrainConfig(pretrained=str(tmp_path / "missing.pt")).canonical()["pretrained_sha256"] == "missing"
