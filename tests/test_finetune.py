"""The fine-tuning arm of issue 24 (sec_lib.runs.finetune): the paper's protocol on the backbone pretrained here,
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
    assert len(sel) == len(ft.TRUNK_LRS) * len(ft.HEAD_RATIOS) == len({run_key(c) for c in sel})
    for c in sel:
        assert c.holdout_classes == p.holdout_classes and c.seed == p.pilot_seed and c.loss == "semihard"
        assert c.pretrained == str(CHECKPOINT) and c.freeze_bn and c.schedule == "step"
        assert c.lr_milestones == (75,) and c.lr_decay == 0.1 and c.optimizer == "adam" and c.eta == 0


def test_the_chosen_rates_are_the_best_held_out_pair_and_feed_every_run():
    p = ex.get_profile("cpu")
    store = FakeStore(lambda lr, ratio: 50 - abs(lr - 3e-4) * 1e4 - abs(ratio - 0.5))
    assert ft.chosen_rates(p, store) == (3e-4, 1.5e-4)
    fine = ft.runs(p, store)
    assert len(fine) == len(ex.MAIN_LOSSES) * len(ex.VARIANTS) * len(p.seeds)
    for c in fine:
        assert (c.lr, c.lr_head, c.pretrained, c.freeze_bn) == (3e-4, 1.5e-4, str(CHECKPOINT), True)
        assert c.holdout_classes == 0 and c.test_classes == p.base["test_classes"]
        scratch = ft.twin(p, c, store)
        assert scratch in ex.main_table(ex.tuned(p, "adam", store)) and scratch.pretrained is None
        assert scratch.lr == 3e-3
        assert dataclasses.replace(c, **{f: getattr(scratch, f) for f in (
            "pretrained", "freeze_bn", "schedule", "lr_milestones", "lr", "lr_head")}) == scratch


def test_a_trunk_rate_at_the_edge_of_its_grid_is_refused_a_ratio_at_the_edge_of_the_conventions_is_not():
    p = ex.get_profile("cpu")
    assert ft.chosen_rates(p, FakeStore(lambda lr, ratio: 50 - abs(lr - 1e-3) * 1e3 + ratio)) == (1e-3, 2e-3)
    with pytest.raises(ex.SelectionError, match="trunk rate 0.01"):
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

    out = ft.summary(p, Store(lambda lr, ratio: 50 - abs(lr - 3e-4) * 1e4 - abs(ratio - 0.5)))
    assert len(out["runs"]) == 2 * len(ex.MAIN_LOSSES) * len(ex.VARIANTS) * len(p.seeds)
    fine = out["runs"][out["runs"].regime == "fine-tuned"]
    assert (fine.start_norm_cv == 0.5).all()
    e = out["effects"].set_index(["loss", "variant", "effect"])
    assert e.loc[("ms", "sec", "interaction"), "mean"] == pytest.approx(2.0)
    assert e.loc[("ms", "l2reg", "fine-tuned"), "mean"] == pytest.approx(0.0)
    assert e.loc[("ms", "sec", "interaction"), "seeds"] == len(p.seeds)
