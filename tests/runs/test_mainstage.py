"""The decisive tier's main comparison: planned from the selection, frozen before it trains."""
import json

import numpy as np
import pandas as pd
import pytest

from sec_lib.runs import experiments as ex
from sec_lib.runs import mainstage, plan, selection
from sec_lib.runs.store import run_key


def choices(zero_wins=("ms",)):
    """Final selections: η = 0.1 best for most losses; for ``zero_wins`` no regularizer scores best."""
    sec, l2 = {}, {}
    for loss in ex.MAIN_LOSSES:
        scores = {0.0: 80.0, 0.005: 80.1, 0.05: 80.5, 0.1: 81.0, 0.5: 80.2, 1.0: 79.0}
        if loss in zero_wins:
            scores[0.0] = 82.0
        sec[loss] = selection.choose(scores, selection.ETA_GRID)
        l2[loss] = selection.choose({0.0: 80.0, 0.001: 80.2, 0.005: 80.6, 0.01: 80.3}, selection.L2_GRID)
    return sec, l2


def diffs(sd=0.9, seeds=(1000, 1001, 1002)):
    rng = np.random.default_rng(0)
    return pd.DataFrame([{"loss": l, "seed": s, "diff": 0.3 + sd * rng.standard_normal()}
                         for l in ex.MAIN_LOSSES for s in seeds])


def test_plan_takes_its_seed_count_from_the_held_out_sd():
    sec, l2 = choices()
    d = diffs()
    p = mainstage.make_plan(sec, l2, d, "cosine", 9000)
    sd = plan.seed_mean_sd(d)["sd"]
    assert p.sd == pytest.approx(sd) and (p.seeds, p.mde) == pytest.approx(plan.planned_seeds(sd))
    assert plan.FLOOR <= p.seeds <= plan.CAP and (p.mde <= plan.TARGET or p.seeds == plan.CAP)
    assert p.eta == {l: 0.1 for l in ex.MAIN_LOSSES}            # ms: 0 won, its best nonzero η is tested
    assert p.flags["ms"][0].startswith("SEC not selected") and "triplet" not in p.flags
    assert p.l2 == {l: 0.005 for l in ex.MAIN_LOSSES}
    assert mainstage.Plan.from_json(p.to_json()) == p


def test_plan_refuses_an_unfinished_selection():
    sec, l2 = choices()
    sec["npair"] = selection.choose({0.0: 1.0, 0.005: 2.0, 0.05: 1.0, 0.1: 1.0, 0.5: 1.0, 1.0: 1.0})   # low edge
    assert sec["npair"].needs is not None
    with pytest.raises(ValueError, match="not final"):
        mainstage.make_plan(sec, l2, diffs(), "step", 6000)
    sec, l2 = choices()
    del l2["ms"]
    with pytest.raises(ValueError, match="no choice for"):
        mainstage.make_plan(sec, l2, diffs(), "step", 6000)
    with pytest.raises(ValueError, match="no usable SD"):
        mainstage.make_plan(*choices(), diffs(seeds=(1000,)), "step", 6000)   # one seed: no spread


def test_the_plan_is_written_once(tmp_path):
    sec, l2 = choices()
    first = mainstage.make_plan(sec, l2, diffs(0.9), "cosine", 9000)
    later = mainstage.make_plan(sec, l2, diffs(2.0), "cosine", 9000)
    path = tmp_path / "decisive" / "plan.json"
    assert mainstage.write_plan(first, path) == first
    assert mainstage.write_plan(later, path) == first              # a pre-registration is never rewritten
    assert json.loads(path.read_text())["seeds"] == first.seeds
    assert not list(path.parent.glob(".tmp-*"))


def test_main_comparison_runs():
    sec, l2 = choices(zero_wins=())
    p = mainstage.make_plan(sec, l2, diffs(), "step", 6000)
    cfgs = mainstage.configs(p)
    keys = [run_key(c) for c in cfgs]
    assert len(keys) == len(set(keys))
    by = pd.DataFrame([{"loss": c.loss, "eta": c.eta, "mu": c.mu, "seed": c.seed} for c in cfgs])
    for loss in ex.MAIN_LOSSES:
        sub = by[by["loss"] == loss]
        assert sorted(sub[sub["eta"] == 0]["seed"]) == list(range(p.seeds))                       # none
        assert sorted(sub[(sub["eta"] == 0.1) & (sub["mu"] == "batch")]["seed"]) == list(range(p.seeds))
        assert sorted(sub[sub["mu"] == "zero"]["seed"]) == list(range(plan.FLOOR))                # L2
        paper = sub[(sub["eta"] == ex.ETA_SEC[loss]) & (sub["mu"] == "batch")]
        assert sorted(paper["seed"]) == list(range(plan.FLOOR))                                     # the paper's η
    c = cfgs[0]
    assert c.holdout_classes == 0 and c.iterations == 6000 and c.schedule == "step"
    assert tuple(c.lr_milestones) == (3600, 5100) and c.eval_every == 6000 // mainstage.EVALS
    assert {c.seed for c in cfgs[:8]} == {0}                       # seed by seed: a stopped tier is usable
    assert set(mainstage.plan_table(p)["loss"]) == set(ex.MAIN_LOSSES)
