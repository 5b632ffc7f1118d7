"""The decisive tier's schedule pilot: its runs never touch the test classes, and its rule decides as registered."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sec_lib.runs import experiments as ex
from sec_lib.runs import pilot
from sec_lib.runs.store import run_key


def test_pilot_runs_are_held_out_with_pilot_seeds_and_both_lengths_of_each_shape():
    cfgs = pilot.configs()
    p = ex.get_profile("reference")
    assert len({run_key(c) for c in cfgs}) == len(cfgs) == 2 * 2 * 2 * 3
    assert all(c.holdout_classes == p.holdout_classes > 0 for c in cfgs)        # never the test classes
    assert {c.seed for c in cfgs}.isdisjoint(range(100)) and all(c.eta == 0 for c in cfgs)
    steps = [c for c in cfgs if c.schedule == "step"]
    assert {c.lr_milestones for c in steps} == {(2400, 3400), (3600, 5100)}
    assert min(m for c in steps for m in c.lr_milestones) > p.early_iterations   # early prefix stays a prefix
    assert [c.iterations for c in cfgs[:12]] == [4000] * 12                     # the short half trains first


def _runs(gain_cos, gain_step, r_cos=80.0, r_step=79.0, noise=0.2, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for shape, g, base in (("cosine", gain_cos, r_cos), ("step", gain_step, r_step)):
        for loss in pilot.LOSSES:
            for s in pilot.SEEDS:
                short = base + rng.normal(0, 1)
                rows += [{"shape": shape, "length": 4000, "loss": loss, "seed": s, "R@1": short},
                         {"shape": shape, "length": 6000, "loss": loss, "seed": s, "R@1": short + g + rng.normal(0, noise)}]
    return pd.DataFrame(rows)


def test_convergence_is_the_paired_gain_of_the_longer_runs_with_its_t_interval():
    runs = _runs(0.1, 0.9)
    raw = pilot.convergence(runs)
    conv = raw.set_index("shape")
    w = runs[runs["shape"] == "cosine"].pivot_table(index=["loss", "seed"], columns="length", values="R@1")
    d = w[6000] - w[4000]
    lo, hi = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    assert conv.loc["cosine", "gain"] == pytest.approx(d.mean())
    assert (conv.loc["cosine", "gain_lo"], conv.loc["cosine", "gain_hi"]) == pytest.approx((lo, hi))
    assert conv.loc["cosine", "converged"] and not conv.loc["step", "converged"]
    assert pilot.choice(raw) == "cosine"


def test_the_choice_is_the_better_converged_shape_and_none_until_the_pilot_is_complete():
    assert pilot.choice(pilot.convergence(_runs(0.1, 0.1, r_cos=79.0, r_step=81.0))) == "step"
    assert pilot.choice(pilot.convergence(_runs(0.8, 0.6))) is None               # neither converged
    partial = _runs(0.1, 0.1).iloc[:-2]
    conv = pilot.convergence(partial)
    assert pilot.choice(conv[conv["shape"] == "step"]) is None                   # a missing pair: no choice yet


def test_last_quarter_gain_reads_the_curve():
    ev = pd.DataFrame({"step": [0, 1000, 2000, 3000, 4000], "R@1": [10.0, 50.0, 60.0, 64.0, 65.5]})
    assert pilot.last_quarter_gain(ev, 4000) == pytest.approx(1.5)
    assert np.isnan(pilot.last_quarter_gain(ev.iloc[[4]], 4000))


def test_the_pilot_extends_to_its_next_length_pair():
    two = pilot.configs(pairs=2)
    assert sorted({c.iterations for c in two}) == [4000, 6000, 9000] and len(two) == 36
    assert [c for c in two if c.iterations < 9000] == pilot.configs()          # the first pair's runs, same keys
    runs = _runs(0.1, 0.1).assign(length=lambda d: d["length"].map({4000: 6000, 6000: 9000}))
    conv = pilot.convergence(runs, (6000, 9000))
    assert "R@1 at 6000" in conv and pilot.choice(conv, (6000, 9000)) == "cosine"


def test_the_pilot_stops_at_its_fourth_pair_and_falls_back_to_the_last_t_when_nothing_converged():
    assert pilot.LENGTH_PAIRS[-1] == (13500, 20250) and len(pilot.configs(pairs=4)) == 5 * 12
    runs = _runs(0.6, 0.5, r_cos=80.0, r_step=81.0).assign(length=lambda d: d["length"].map({4000: 13500, 6000: 20250}))
    conv = pilot.convergence(runs, (13500, 20250))
    assert pilot.choice(conv, (13500, 20250)) is None and pilot.fallback(conv) == "step"   # higher R@1 at T
    assert pilot.fallback(pilot.convergence(runs.iloc[:-1], (13500, 20250))) is None       # incomplete: wait
    ok = _runs(0.1, 0.5).assign(length=lambda d: d["length"].map({4000: 13500, 6000: 20250}))
    assert pilot.fallback(pilot.convergence(ok, (13500, 20250))) is None                   # the rule decides
