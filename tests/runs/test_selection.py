"""Pre-registered selections: learning rate (bracketed by its grid), run length (plateau), η and L2 weight."""
import dataclasses

import pandas as pd
import pytest

from sec_lib.runs import experiments as ex
from sec_lib.runs.train import RunResult

E = pd.DataFrame()


def fake(cfg, r1, status="done", curve=None):
    evals = pd.DataFrame({"step": [s for s, _ in curve], "R@1": [v for _, v in curve]}) if curve else E
    return RunResult(cfg, status, {"R@1": r1} if status == "done" else {}, E, E, evals, E, E, E)


def pilot(profile, scores, curve=None):
    """Fake pilot results: ``scores[(optimizer, lr, sec)]`` is the held-out R@1 (None: diverged)."""
    out = []
    for c in ex.lr_pilot(profile):
        s = scores.get((c.optimizer, c.lr, c.eta > 0), 50.0)
        out.append(fake(c, s, "done" if s is not None else "failed", curve))
    return out


def test_every_selection_run_uses_held_out_classes_and_the_pilot_seed():
    for name in ex.PROFILE_NAMES:
        p = ex.get_profile(name)
        for c in ex.lr_pilot(p) + ex.eta_selection(p):
            assert c.holdout_classes == p.holdout_classes > 0, name
            assert c.seed == p.pilot_seed and p.pilot_seed not in (*p.seeds, *p.main_seeds)


def test_lr_at_the_edge_of_its_grid_is_refused_with_the_grid_named():
    p = ex.get_profile("cpu")
    grid = p.lr_pilot["adam"]
    runs = pilot(p, {("adam", grid[-1], False): 90.0})
    with pytest.raises(ex.SelectionError, match=r"largest rate of its grid.*Widen"):
        ex.chosen_lr(p, "adam", runs)
    runs = pilot(p, {("adam", grid[0], False): 90.0})
    with pytest.raises(ex.SelectionError, match="smallest rate"):
        ex.chosen_lr(p, "adam", runs)
    runs = pilot(p, {("adam", grid[1], False): 90.0})
    assert ex.chosen_lr(p, "adam", runs) == grid[1]


def test_lr_ties_go_to_the_smaller_rate_and_diverged_runs_never_win():
    p = ex.get_profile("reference")
    g = p.lr_pilot["sgd"]
    runs = pilot(p, {("sgd", g[1], True): 80.0, ("sgd", g[2], True): 80.0, ("sgd", g[0], True): None,
                     ("sgd", g[3], True): None})
    assert ex.chosen_lr(p, "sgd", runs, sec=True) == g[1]
    smoke = ex.get_profile("smoke")              # one rate per grid: nothing to bracket, no refusal
    assert ex.chosen_lr(smoke, "adam", pilot(smoke, {})) == smoke.lr_pilot["adam"][0]


def test_run_length_is_where_the_smoothed_held_out_curve_flattens():
    p = ex.get_profile("reference")
    best = ("adam", p.lr_pilot["adam"][1], False)
    rising = [(s, 50 + s / 100) for s in range(0, 6001, 250)]                 # +2.5 points per 250 steps
    with pytest.raises(ex.SelectionError, match="lengthen the pilot"):
        ex.chosen_iterations(p, pilot(p, {best: 90.0}, rising))
    flat_after_3000 = [(s, 50 + min(s, 3000) / 100) for s in range(0, 6001, 250)]
    # at 4000 the smoothed value at 3000 still carries the rise: 5000 is the first flat quarter
    assert ex.chosen_iterations(p, pilot(p, {best: 90.0}, flat_after_3000)) == 5000
    # one noisy evaluation does not decide: a single dip at 3000 is averaged away
    noisy = [(s, v - (5 if s == 3000 else 0)) for s, v in rising]
    with pytest.raises(ex.SelectionError):
        ex.chosen_iterations(p, pilot(p, {best: 90.0}, noisy))
    assert ex.chosen_iterations(ex.get_profile("cpu"), []) == ex.get_profile("cpu").base["iterations"]


def test_smoothed_is_a_trailing_mean():
    assert ex.smoothed({0: 0.0, 1: 3.0, 2: 6.0, 3: 0.0}, 2) == {0: 0.0, 1: 1.5, 2: 4.5, 3: 3.0}


def test_eta_and_l2_weight_are_chosen_separately_on_held_out_runs():
    p = dataclasses.replace(ex.get_profile("reference"), base=dict(ex.get_profile("reference").base, lr=3e-3))
    sel = ex.eta_selection(p)
    assert {c.mu for c in sel if c.eta > 0} == {"batch", "zero"}
    score = {("triplet", 0.1, "batch"): 70.0, ("triplet", 0.005, "zero"): 71.0}
    runs = [fake(c, score.get((c.loss, c.eta, c.mu), 60.0)) for c in sel]
    assert ex.chosen_eta(p, "triplet", runs) == 0.1
    assert ex.chosen_eta(p, "triplet", runs, mu="zero") == 0.005
