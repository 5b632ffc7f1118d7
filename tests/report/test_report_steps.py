"""report.shared_steps (the chapters' common.shared_steps): a mean over runs at each step averages every run, also where a committed tier kept a
different subset of each run's steps (tier.decimate_steps)."""
import numpy as np
import pandas as pd
import pytest

from sec_lib import report
from sec_lib.chapters import common, mu
from sec_lib.runs import tier


def _log(key, steps, slope, offset=0.0, nan_at=()):
    s = np.asarray(steps, dtype=float)
    v = offset + slope * s
    v[np.isin(s, nan_at)] = np.nan
    return pd.DataFrame({"key": key, "step": np.asarray(steps), "norm_mean": v, "mu": 2 * v})


def test_runs_that_share_their_steps_come_back_as_they_are():
    steps = pd.concat([_log("a", range(0, 100, 10), 1.0), _log("b", range(0, 100, 10), 3.0)], ignore_index=True)
    assert common.shared_steps(steps) is steps


def test_runs_on_different_steps_are_put_on_one_grid_and_their_mean_is_smooth():
    """Two runs of one straight line each, logged on different steps: the mean over runs at each logged step jumps
    between the runs (the doubled lines of the μ page); on the shared grid it is the mean line itself."""
    a = _log("a", range(0, 1001, 100), 1.0)                    # 0, 100, ..., 1000
    b = _log("b", [0, 50, 150, 250, 450, 650, 850, 1000], 3.0, offset=10.0)
    steps = pd.concat([a, b], ignore_index=True)
    raw = steps.groupby("step")["norm_mean"].mean()
    assert not np.allclose(raw.to_numpy(), (5.0 + 2.0 * raw.index.to_numpy()))     # the artifact: subsets mixed
    out = common.shared_steps(steps)
    assert set(out.columns) == {"key", "step", "norm_mean", "mu"}
    assert out.groupby("key")["step"].apply(tuple).nunique() == 1                  # one grid for both runs
    assert out.groupby("key").size().max() == 11                                  # as many as the longest run
    mean = out.groupby("step")["norm_mean"].mean()
    np.testing.assert_allclose(mean.to_numpy(), 5.0 + 2.0 * mean.index.to_numpy())  # exact on a line
    np.testing.assert_allclose(out.loc[out.key == "a", "mu"], 2 * out.loc[out.key == "a", "step"])


def test_no_extrapolation_beyond_a_runs_logged_range_and_nan_rows_are_skipped():
    a = _log("a", range(0, 1001, 100), 1.0, nan_at=(500,))
    b = _log("b", range(300, 701, 50), 1.0)                                        # a run logged from 300 to 700
    out = common.shared_steps(pd.concat([a, b], ignore_index=True), ["norm_mean"])
    assert list(out.columns) == ["key", "step", "norm_mean"]
    ob = out[out.key == "b"]
    assert ob.loc[(ob.step < 300) | (ob.step > 700), "norm_mean"].isna().all()
    assert ob.loc[(ob.step >= 300) & (ob.step <= 700), "norm_mean"].notna().all()
    oa = out[out.key == "a"].set_index("step")["norm_mean"]
    assert oa.notna().all() and oa.loc[oa.index[oa.index > 400][0]] == pytest.approx(oa.index[oa.index > 400][0])
    with pytest.raises(ValueError, match="steps"):
        common.shared_steps(pd.DataFrame({"key": ["a"], "norm_mean": [1.0]}))
    with pytest.raises(ValueError, match="DataFrame"):
        report.shared_steps([1, 2])
    assert common.shared_steps is report.shared_steps


def test_the_mu_trajectory_of_decimated_runs_is_one_curve():
    """What the μ page draws, on two runs decimated as a committed tier decimates them (each keeps other steps where
    its gradient slope was undefined): one value per step, on the line both runs follow."""
    rows = []
    for key, gaps, offset in (("a", {40, 41, 42}, 0.0), ("b", {100, 101, 102}, 1.0)):
        for s in range(1, 1001):
            rows.append({"key": key, "step": s, "mu": 0.01 * s + offset, "norm_mean": 0.01 * s,
                         "grad_slope": np.nan if s in gaps else -1.0})
    kept = pd.concat([tier.decimate_steps(g) for _, g in pd.DataFrame(rows).groupby("key")], ignore_index=True)
    assert kept.groupby("key")["step"].apply(tuple).nunique() == 2              # different subsets per run
    runs = pd.DataFrame({"key": ["a", "b"], "loss": "semihard", "setting": "batch mean"})
    tr = mu.mu_trajectory(runs, kept)
    assert tr["step"].is_unique
    np.testing.assert_allclose(tr["mu"], 0.01 * tr["step"] + 0.5, rtol=1e-9)   # the two runs' mean, at every step
