"""sec_lib.report on hand-made result frames: intervals against scipy.stats.t, paired differences
against scipy.stats.ttest_rel, and the verdict rules."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from sec_lib import report as R


def t_ci(x, level=0.95):
    x = np.asarray(x, float)
    lo, hi = stats.t.interval(level, df=len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    return x.mean(), lo, hi


def runs(values_none, values_sec, loss="triplet", seeds=None):
    seeds = list(range(len(values_none))) if seeds is None else seeds
    rows = [dict(loss=loss, variant="none", seed=s, status="done", **{"R@1": v}) for s, v in zip(seeds, values_none)]
    rows += [dict(loss=loss, variant="sec", seed=s, status="done", **{"R@1": v}) for s, v in zip(seeds, values_sec)]
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------ mean_ci


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_mean_ci_against_scipy_t(level):
    x = [61.2, 63.0, 62.1, 60.4, 64.4]
    mean, lo, hi, n = R.mean_ci(x, level=level)
    ref = t_ci(x, level)
    assert (mean, lo, hi) == pytest.approx(ref, rel=1e-12)
    assert n == 5


def test_mean_ci_edge_cases():
    mean, lo, hi, n = R.mean_ci([3.0])
    assert mean == 3.0 and math.isnan(lo) and math.isnan(hi) and n == 1
    mean, lo, hi, n = R.mean_ci([])
    assert math.isnan(mean) and n == 0
    assert R.mean_ci([2.0, np.nan, 4.0])[3] == 2  # NaN (failed run) dropped
    assert R.mean_ci([1.0, np.nan, 3.0])[:3] == pytest.approx(t_ci([1.0, 3.0]))
    assert R.mean_ci([5.0, 5.0, 5.0])[:3] == (5.0, 5.0, 5.0)
    with pytest.raises(ValueError, match="level"):
        R.mean_ci([1, 2], level=95)


# ----------------------------------------------------------------------------------------- summarize


def test_summarize_tidy_against_scipy():
    df = pd.concat([runs([50, 51, 53], [54, 55, 57]), runs([60, 62], [61, np.nan], loss="ms")])
    df["MAP@R"] = np.arange(len(df), dtype=float)
    s = R.summarize(df, ["loss", "variant"], ["R@1", "MAP@R"])
    assert list(s.columns) == ["loss", "variant", "metric", "mean", "ci_lo", "ci_hi", "n"]
    assert len(s) == 4 * 2  # groups x metrics
    row = s[(s.loss == "triplet") & (s.variant == "sec") & (s.metric == "R@1")].iloc[0]
    assert (row["mean"], row.ci_lo, row.ci_hi) == pytest.approx(t_ci([54, 55, 57]))
    assert row.n == 3
    one = s[(s.loss == "ms") & (s.variant == "sec") & (s.metric == "R@1")].iloc[0]
    assert one.n == 1 and one["mean"] == 61 and math.isnan(one.ci_lo)
    assert list(dict.fromkeys(s.loss)) == ["triplet", "ms"]  # first-appearance order
    whole = R.summarize(df, None, "R@1")
    assert whole.n.tolist() == [9]


def test_wide_formats_mean_and_half_width():
    df = runs([50, 51, 53], [54, np.nan, np.nan])
    s = R.summarize(df, "variant", ["R@1"])
    w = R.wide(s, digits=1)
    assert list(w.columns) == ["variant", "R@1"]
    m, lo, hi = t_ci([50, 51, 53])
    assert w.loc[w.variant == "none", "R@1"].item() == f"{m:.1f} ± {(hi - lo) / 2:.1f}"
    assert w.loc[w.variant == "sec", "R@1"].item() == "54.0 (n=1)"
    empty = R.summarize(runs([1.0], [np.nan]), "variant", ["R@1"])
    assert R.wide(empty).loc[1, "R@1"] == "n/a"


def test_summarize_bad_input():
    df = runs([1, 2], [3, 4])
    with pytest.raises(ValueError, match="not in the frame"):
        R.summarize(df, "nope", ["R@1"])
    with pytest.raises(ValueError, match="metrics"):
        R.summarize(df, "variant", ["NMI"])
    with pytest.raises(ValueError, match="DataFrame"):
        R.summarize(df.to_dict(), "variant", ["R@1"])


# -------------------------------------------------------------------------------------- paired_diff


def test_paired_diff_against_ttest_rel_and_drops_unpaired():
    a = {0: 50.0, 1: 52.0, 2: 51.0, 3: 49.5, 7: 48.0}  # seed 7 has no SEC run
    b = {0: 53.0, 1: 53.5, 2: 54.0, 3: 51.0, 9: 70.0}  # seed 9 has no baseline run
    df = pd.DataFrame(
        [dict(loss="t", variant="none", seed=s, **{"R@1": v}) for s, v in a.items()]
        + [dict(loss="t", variant="sec", seed=s, **{"R@1": v}) for s, v in b.items()]
    )
    out = R.paired_diff(df, "loss", "variant", "none", "sec", metrics=["R@1"])
    assert len(out) == 1
    row = out.iloc[0]
    xa = np.array([a[s] for s in (0, 1, 2, 3)])
    xb = np.array([b[s] for s in (0, 1, 2, 3)])
    assert row.n_pairs == 4 and row.n_unpaired == 2
    assert (row["diff"], row.ci_lo, row.ci_hi) == pytest.approx(t_ci(xb - xa))
    assert row.p_value == pytest.approx(stats.ttest_rel(xb, xa).pvalue)
    assert row.mean_a == pytest.approx(xa.mean()) and row.mean_b == pytest.approx(xb.mean())
    # a NaN metric drops that pair for that metric only
    df.loc[(df.variant == "sec") & (df.seed == 0), "R@1"] = np.nan
    assert R.paired_diff(df, "loss", "variant", "none", "sec", metrics=["R@1"]).n_pairs.item() == 3


def test_paired_diff_groups_and_edge_cases():
    df = pd.concat([runs([50, 51, 52], [53, 55, 56]), runs([60, 61, 62], [59, 60, 60.5], loss="ms")])
    df["NMI"] = 1.0
    out = R.paired_diff(df, ["loss"], "variant", "none", "sec")  # default metrics: those present
    assert out.metric.tolist() == ["R@1", "NMI", "R@1", "NMI"]
    assert out.loss.tolist() == ["triplet", "triplet", "ms", "ms"]
    nmi = out[out.metric == "NMI"].iloc[0]
    assert nmi["diff"] == 0.0 and math.isnan(nmi.p_value)  # identical pairs: no test possible
    const = R.paired_diff(runs([1.0, 2.0], [2.0, 3.0]), None, "variant", "none", "sec", metrics=["R@1"]).iloc[0]
    # identical non-zero differences: the spread is not estimable, so no interval and no test
    assert const["diff"] == 1.0 and math.isnan(const.p_value) and math.isnan(const.ci_lo) and math.isnan(const.ci_hi)
    single = R.paired_diff(runs([1.0], [2.0]), "loss", "variant", "none", "sec", metrics=["R@1"]).iloc[0]
    assert single.n_pairs == 1 and math.isnan(single.ci_lo) and math.isnan(single.p_value)


def test_paired_diff_bad_input():
    df = runs([1, 2], [3, 4])
    with pytest.raises(ValueError, match="does not occur"):
        R.paired_diff(df, "loss", "variant", "none", "l2reg", metrics=["R@1"])
    with pytest.raises(ValueError, match="ambiguous"):
        R.paired_diff(pd.concat([df, df]), "loss", "variant", "none", "sec", metrics=["R@1"])
    with pytest.raises(ValueError, match="must not contain"):
        R.paired_diff(df, ["seed"], "variant", "none", "sec", metrics=["R@1"])
    with pytest.raises(ValueError, match="not in the frame"):
        R.paired_diff(df, "loss", "variant", "none", "sec", pair_on="run", metrics=["R@1"])


# ------------------------------------------------------------------------------------------- verdicts


def verdict_of(values_none, values_sec, expected_sign=+1):
    d = R.paired_diff(runs(values_none, values_sec), "loss", "variant", "none", "sec", metrics=["R@1"]).iloc[0]
    return R.verdict(d["diff"], d.ci_lo, d.ci_hi, expected_sign=expected_sign, n=d.n_pairs)


def test_verdict_sec_wins_clearly():
    assert verdict_of([50.0, 51.0, 52.0, 50.5], [53.0, 54.2, 55.1, 53.4]) == "reproduced"


def test_verdict_sec_loses():
    assert verdict_of([53.0, 54.2, 55.1, 53.4], [50.0, 51.0, 52.0, 50.5]) == "not reproduced"
    # and a claim that SEC *lowers* the norm variance is reproduced by the same numbers
    assert verdict_of([53.0, 54.2, 55.1, 53.4], [50.0, 51.0, 52.0, 50.5], expected_sign=-1) == "reproduced"


def test_verdict_noisy_is_partly():
    assert verdict_of([50.0, 55.0, 48.0, 53.0], [53.0, 52.0, 51.0, 54.0]) == "partly"


def test_verdict_no_data_is_not_testable():
    assert verdict_of([50.0], [np.nan]) == "not testable offline"
    assert R.verdict(float("nan"), float("nan"), float("nan")) == "not testable offline"
    assert R.verdict(None, None, None) == "not testable offline"
    assert R.verdict(1.0, 0.5, 1.5, n=0) == "not testable offline"


def test_verdict_rules_thresholds():
    assert R.VERDICT_RULES.min_effect == 0.0 and R.VERDICT_RULES.level == 0.95
    assert R.verdict(0.3, 0.1, 0.5, min_effect=1.0) == "partly"  # significant but below min_effect
    assert R.verdict(1.2, 0.1, 2.3, min_effect=1.0) == "reproduced"
    assert R.verdict(0.5, -0.2, 1.2) == "partly"  # CI includes 0
    assert R.verdict(-0.5, -1.2, 0.2) == "not reproduced"  # wrong-side point estimate
    assert R.verdict(0.0, -1.0, 1.0) == "not reproduced"
    assert R.verdict(0.7, math.nan, math.nan, n=1) == "partly"  # single run: never "reproduced"
    # no-change claims (equivalence within the margin)
    assert R.verdict(0.05, -0.2, 0.3, expected_sign=0, min_effect=0.5) == "reproduced"
    assert R.verdict(0.05, -0.9, 1.0, expected_sign=0, min_effect=0.5) == "partly"
    assert R.verdict(1.5, 1.0, 2.0, expected_sign=0, min_effect=0.5) == "not reproduced"
    with pytest.raises(ValueError, match="expected_sign"):
        R.verdict(1.0, 0.5, 1.5, expected_sign=2)
    with pytest.raises(ValueError, match="inside"):
        R.verdict(3.0, 0.5, 1.5)
    with pytest.raises(ValueError, match="ci_lo"):
        R.verdict(1.0, 1.5, 0.5)


def test_verdict_table_computes_the_verdict_column():
    rows = [
        dict(claim="C1", text="SEC improves R@1 (triplet)", estimate=3.0, ci_lo=2.1, ci_hi=3.9, n=4, paper=5.6, link="cub.md"),
        dict(claim="C2", text="SEC improves R@1 (MS)", estimate=-1.0, ci_lo=-1.6, ci_hi=-0.4, n=4, paper=None),
        dict(claim="C3", text="noisy", estimate=0.4, ci_lo=-0.3, ci_hi=1.1, n=3),
        dict(claim="C4", text="SOP needs the real data", estimate=None, ci_lo=None, ci_hi=None, n=0, source="x"),
    ]
    t = R.verdict_table(rows)
    assert t.columns[:10].tolist() == [
        "claim", "text", "estimate", "ci_lo", "ci_hi", "n", "paper", "link", "expected_sign", "verdict"
    ]
    assert t.verdict.tolist() == ["reproduced", "not reproduced", "partly", "not testable offline"]
    assert set(t.verdict) <= set(R.VERDICTS)
    assert "source" in t.columns and t.paper.isna().tolist() == [False, True, True, True]
    with pytest.raises(ValueError, match="never given"):
        R.verdict_table([{**rows[0], "verdict": "reproduced"}])
    with pytest.raises(ValueError, match="required keys"):
        R.verdict_table([dict(claim="C5", text="x")])
    with pytest.raises(ValueError, match="C6"):
        R.verdict_table([dict(claim="C6", text="x", estimate=1.0, ci_lo=0.0, ci_hi=2.0, expected_sign=3)])


# ------------------------------------------------------------------ the one log-log fit (train, figures, theory)


def test_loglog_fit_matches_scipy():
    rng = np.random.default_rng(0)
    x = np.exp(rng.uniform(-2, 2, 40))
    y = 3.0 * x ** -1.5 * np.exp(rng.normal(0, 0.2, 40))
    slope, _, r2 = R.loglog_fit(x, y, min_points=2)
    ref = stats.linregress(np.log(x), np.log(y))
    assert slope == pytest.approx(ref.slope, rel=1e-10)
    assert r2 == pytest.approx(ref.rvalue ** 2, rel=1e-10)
    exact = R.loglog_fit([1, 2, 4, 8], [1, 0.5, 0.25, 0.125], min_points=2)
    assert exact.slope == pytest.approx(-1.0, abs=1e-12) and exact.r2 == pytest.approx(1.0)
    assert all(math.isnan(v) for v in R.loglog_fit([1.0], [2.0], min_points=2))
    with pytest.raises(ValueError, match="same length"):
        R.loglog_fit([1, 2], [1])


def test_loglog_fit_recovers_a_power_law():
    x = np.geomspace(0.5, 8, 20)
    slope, icpt, r2 = R.loglog_fit(x, 3.0 * x ** -1.0)
    assert slope == pytest.approx(-1.0) and np.exp(icpt) == pytest.approx(3.0) and r2 == pytest.approx(1.0)
    assert np.isnan(R.loglog_fit([1, 2], [1, 2])[0])       # fewer than 3 points (the default)


def test_loglog_fit_takes_tensors():
    x = torch.linspace(0.5, 20, 50, dtype=torch.float64)
    slope, _, r2 = R.loglog_fit(x, 3 * x ** -1.0)
    assert slope == pytest.approx(-1.0, abs=1e-9) and r2 == pytest.approx(1.0, abs=1e-9)


def test_loglog_fits_one_fit_per_group():
    df = pd.DataFrame({"g": [0] * 4 + [1] * 4, "x": [1, 2, 4, 8] * 2,
                       "y": [1, 0.5, 0.25, 0.125] + [1, 4, 16, 64]})
    fits = R.loglog_fits(df, "x", "y", ["g"])
    assert list(fits["g"]) == [0, 1]
    assert fits["slope"].tolist() == pytest.approx([-1.0, 2.0])


# ------------------------------------------------------------------ the one CI formatter


def test_format_ci_styles():
    assert R.format_ci(1.234, 1.0, 1.468, 3) == "1.23 ± 0.23"
    assert R.format_ci(1.234, math.nan, math.nan, 1) == "1.23 (n=1)"
    assert R.format_ci(math.nan, 0, 1, 3) == "n/a" and R.format_ci(1.0, 0, 2, 0) == "n/a"
    assert R.format_ci(1.5, 0.5, 2.5, 3, style="interval", number=lambda v: f"{v:+.1f}") == "+1.5 [+0.5, +2.5] (n=3)"
    assert R.format_ci(None, None, None, None, style="interval", missing="no evidence") == "no evidence"
    assert R.fmt_estimate({"estimate": 1.0, "ci_lo": 0.5, "ci_hi": 1.5, "n": 2}, unit=" pp") == "+1.00 pp [+0.50, +1.50] (n=2)"
    assert R.fmt_cell(0.001234, 0.001, 0.00147, 3) == "0.00123 ± 0.000235"
    with pytest.raises(ValueError, match="style"):
        R.format_ci(1, 0, 2, 3, style="box")
