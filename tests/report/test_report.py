"""sec_lib.report on hand-made result frames: intervals against scipy.stats.t, paired differences
against scipy.stats.ttest_rel, the verdict rules on hand-made intervals and on simulated
null data, min_detectable_effect against statsmodels / G*Power / a Monte-Carlo power check, and
holm against a worked example and statsmodels."""
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
    assert row.n == 4 and row.n_unpaired == 2
    assert (row.estimate, row.ci_lo, row.ci_hi) == pytest.approx(t_ci(xb - xa))
    assert row.p_value == pytest.approx(stats.ttest_rel(xb, xa).pvalue)
    assert row.mean_a == pytest.approx(xa.mean()) and row.mean_b == pytest.approx(xb.mean())
    # a NaN metric drops that pair for that metric only
    df.loc[(df.variant == "sec") & (df.seed == 0), "R@1"] = np.nan
    assert R.paired_diff(df, "loss", "variant", "none", "sec", metrics=["R@1"]).n.item() == 3


def test_paired_diff_groups_and_edge_cases():
    df = pd.concat([runs([50, 51, 52], [53, 55, 56]), runs([60, 61, 62], [59, 60, 60.5], loss="ms")])
    df["NMI"] = 1.0
    out = R.paired_diff(df, ["loss"], "variant", "none", "sec")  # default metrics: those present
    assert out.metric.tolist() == ["R@1", "NMI", "R@1", "NMI"]
    assert out.loss.tolist() == ["triplet", "triplet", "ms", "ms"]
    nmi = out[out.metric == "NMI"].iloc[0]
    assert nmi.estimate == 0.0 and math.isnan(nmi.p_value)  # identical pairs: no test possible
    const = R.paired_diff(runs([1.0, 2.0], [2.0, 3.0]), None, "variant", "none", "sec", metrics=["R@1"]).iloc[0]
    # identical non-zero differences: the spread is not estimable, so no interval and no test
    assert const.estimate == 1.0 and math.isnan(const.p_value) and math.isnan(const.ci_lo) and math.isnan(const.ci_hi)
    single = R.paired_diff(runs([1.0], [2.0]), "loss", "variant", "none", "sec", metrics=["R@1"]).iloc[0]
    assert single.n == 1 and math.isnan(single.ci_lo) and math.isnan(single.p_value)


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


def verdict_of(values_none, values_sec, expected_sign=+1, margin=None):
    d = R.paired_diff(runs(values_none, values_sec), "loss", "variant", "none", "sec", metrics=["R@1"]).iloc[0]
    return R.verdict(d.estimate, d.ci_lo, d.ci_hi, expected_sign=expected_sign, margin=margin, n=d.n)


def test_verdict_words_are_the_designs():
    assert R.VERDICTS == ("reproduced", "larger than claimed", "smaller than claimed", "negligible", "not reproduced",
                          "inconclusive", "not testable offline")
    assert "partly" not in R.VERDICTS and R.VERDICT_RULES.single_run_max == "inconclusive"


def test_verdict_sec_wins_clearly():
    assert verdict_of([50.0, 51.0, 52.0, 50.5], [53.0, 54.2, 55.1, 53.4]) == "reproduced"


def test_verdict_sec_loses_with_the_interval_on_the_wrong_side():
    assert verdict_of([53.0, 54.2, 55.1, 53.4], [50.0, 51.0, 52.0, 50.5]) == "not reproduced"
    # and a claim that SEC *lowers* the quantity is reproduced by the same numbers
    assert verdict_of([53.0, 54.2, 55.1, 53.4], [50.0, 51.0, 52.0, 50.5], expected_sign=-1) == "reproduced"


def test_verdict_noisy_is_inconclusive():
    assert verdict_of([50.0, 55.0, 48.0, 53.0], [53.0, 52.0, 51.0, 54.0]) == "inconclusive"


def test_verdict_no_data_is_not_testable():
    assert verdict_of([50.0], [np.nan]) == "not testable offline"
    assert R.verdict(float("nan"), float("nan"), float("nan")) == "not testable offline"
    assert R.verdict(None, None, None) == "not testable offline"
    assert R.verdict(1.0, 0.5, 1.5, n=0) == "not testable offline"


def test_the_verdict_rules_on_each_kind_of_interval():
    # npair +0.25 [-4.36, +4.86] (n = 3) read "partly": the interval contains 0 -> inconclusive
    assert R.verdict(0.25, -4.36, 4.86, n=3) == "inconclusive"
    # triplet -4.65 [-9.37, +0.06] read "not reproduced" although the interval contains 0
    assert R.verdict(-4.65, -9.37, 0.06, n=3) == "inconclusive"
    # CosFace +4.5, +12.1, +5.1 (3 of 3 seeds positive) read "partly": n = 3 cannot tell
    row = R.verdict_row([4.5, 12.1, 5.1])
    assert row["ci_lo"] < 0 < row["ci_hi"] and row["verdict"] == "inconclusive"
    assert row["mde"] > row["estimate"]   # the page can say: this design detects only larger effects
    # the no-change rule in the right order: [0.1, 0.3] inside a ±0.5 margin
    assert R.verdict(0.2, 0.1, 0.3, expected_sign=0, margin=0.5) == "reproduced"
    # ... while for a directional claim the same interval shows a negligible effect
    assert R.verdict(0.2, 0.1, 0.3, expected_sign=+1, margin=0.5) == "negligible"
    assert R.verdict(0.2, 0.1, 0.3, expected_sign=+1, margin=0.5, p_adj=1e-4) == "negligible"
    assert R.verdict(0.2, 0.1, 0.3, expected_sign=+1) == "reproduced"  # no margin declared: no negligible rule
    # zero spread, both ways it used to reach the pages: NaN bounds (report.paired_diff) and a
    # zero-width interval with p = 0 (review.values_ci) -- both at most inconclusive now
    assert R.verdict(1.0, math.nan, math.nan, n=3) == "inconclusive"
    assert R.verdict(1.0, 1.0, 1.0, n=3, p_adj=0.0) == "inconclusive"
    assert R.verdict(0.0, 0.0, 0.0, expected_sign=0, margin=0.5, n=3) == "inconclusive"
    assert R.verdict(-1.0, -1.0, -1.0, n=3) == "inconclusive"
    zero = R.verdict_row([2.0, 2.0, 2.0])
    assert zero["verdict"] == "inconclusive" and zero["sd"] == 0.0
    assert all(math.isnan(zero[k]) for k in ("ci_lo", "ci_hi", "p_value", "p_adj", "mde"))


@pytest.mark.parametrize(
    "est, lo, hi, sign, margin, n, p_adj, expected",
    [
        # directional, +1
        (1.0, 0.2, 1.8, +1, None, 4, None, "reproduced"),
        (1.0, 0.2, 1.8, +1, None, 4, 0.01, "reproduced"),
        (1.0, 0.2, 1.8, +1, None, 4, 0.049, "reproduced"),
        (1.0, 0.2, 1.8, +1, None, 4, 0.05, "inconclusive"),   # adjusted p must be < 0.05
        (1.0, 0.2, 1.8, +1, None, 4, 0.3, "inconclusive"),
        (1.0, 0.2, 1.8, +1, None, 4, math.nan, "reproduced"),  # NaN = no adjusted p given
        (1.0, 0.2, 1.8, +1, 0.5, 4, 0.01, "reproduced"),      # reaches past the margin: not negligible
        (-1.0, -1.8, -0.2, +1, None, 4, None, "not reproduced"),
        (-1.0, -1.8, -0.2, +1, None, 4, 0.9, "inconclusive"),    # p_adj gates both decisive words
        (-1.0, -1.8, -0.2, +1, None, 4, 0.049, "not reproduced"),
        (0.5, -0.2, 1.2, +1, None, 4, None, "inconclusive"),
        (-0.5, -1.2, 0.2, +1, None, 4, None, "inconclusive"),   # wrong-side estimate, interval contains 0
        (0.0, -1.0, 1.0, +1, None, 4, None, "inconclusive"),
        (0.5, 0.0, 1.0, +1, None, 4, None, "inconclusive"),     # touching 0 is not "on the predicted side"
        (0.05, -0.3, 0.4, +1, 0.5, 4, None, "not reproduced"),  # inside ±margin: negligible
        (0.05, -0.3, 0.4, +1, 0.2, 4, None, "inconclusive"),
        (0.45, 0.4, 0.5, +1, 0.5, 4, None, "negligible"),       # margin boundary counts as inside
        # directional, -1
        (-1.0, -1.8, -0.2, -1, None, 4, 0.01, "reproduced"),
        (1.0, 0.2, 1.8, -1, None, 4, 0.01, "not reproduced"),
        (-0.2, -0.3, -0.1, -1, 0.5, 4, 0.01, "negligible"),
        (-0.5, -1.2, 0.2, -1, None, 4, None, "inconclusive"),
        # no change
        (0.05, -0.2, 0.3, 0, 0.5, 4, None, "reproduced"),
        (0.05, -0.2, 0.3, 0, 0.5, 4, 0.001, "reproduced"),      # equivalence: p_adj (difference) is not its test
        (1.5, 1.0, 2.0, 0, 0.5, 4, 0.2, "inconclusive"),        # outside the margin, but not after Holm
        (0.05, -0.9, 1.0, 0, 0.5, 4, None, "inconclusive"),
        (0.6, 0.3, 0.9, 0, 0.5, 4, None, "inconclusive"),       # straddles the margin
        (1.5, 1.0, 2.0, 0, 0.5, 4, None, "not reproduced"),
        (-1.5, -2.0, -0.6, 0, 0.5, 4, None, "not reproduced"),
        (0.2, 0.1, 0.3, 0, None, 4, None, "reproduced"),        # default margin: 0.5 points of R@1
        # no usable interval
        (0.7, math.nan, math.nan, +1, None, 1, None, "inconclusive"),
        (0.7, 0.5, 0.9, +1, None, 1, None, "inconclusive"),     # bounds without n >= 2 are not an interval
        (0.7, 0.5, math.nan, +1, None, 4, None, "inconclusive"),
        (5.0, None, None, 0, 0.5, None, None, "inconclusive"),
    ],
)
def test_verdict_rules_on_hand_made_intervals(est, lo, hi, sign, margin, n, p_adj, expected):
    assert R.verdict(est, lo, hi, expected_sign=sign, margin=margin, n=n, p_adj=p_adj) == expected


@pytest.mark.parametrize(
    "est, lo, hi, sign, margin, p_adj, p_eq_adj, expected",
    [
        # a negligible effect is "not reproduced" only if its equivalence test survives the family's Holm
        (0.05, -0.3, 0.4, +1, 0.5, None, 0.01, "not reproduced"),
        (0.05, -0.3, 0.4, +1, 0.5, None, 0.2, "inconclusive"),
        (0.05, -0.3, 0.4, +1, 0.5, 0.9, 0.049, "not reproduced"),
        (0.2, 0.1, 0.3, +1, 0.5, 1e-4, 0.2, "inconclusive"),    # significant and inside the margin: never reproduced
        (-0.2, -0.3, -0.1, -1, 0.5, 0.01, 0.3, "inconclusive"),
        # the same two gates for a no-change claim
        (0.05, -0.2, 0.3, 0, 0.5, None, 0.01, "reproduced"),
        (0.05, -0.2, 0.3, 0, 0.5, 0.001, 0.06, "inconclusive"),
        (-1.5, -2.0, -0.6, 0, 0.5, 0.01, None, "not reproduced"),
        # p_eq_adj plays no part outside the margin
        (1.0, 0.2, 1.8, +1, 0.5, 0.01, 0.9, "reproduced"),
        (-1.0, -1.8, -0.2, +1, 0.5, 0.01, 0.9, "not reproduced"),
    ],
)
def test_both_decisive_words_answer_to_the_family(est, lo, hi, sign, margin, p_adj, p_eq_adj, expected):
    assert R.verdict(est, lo, hi, sign, margin, n=4, p_adj=p_adj, p_eq_adj=p_eq_adj) == expected


def test_equivalence_p_matches_statsmodels_tost():
    from statsmodels.stats.weightstats import DescrStatsW
    rng = np.random.default_rng(11)
    for n in (3, 5, 8):
        for _ in range(20):
            x = rng.normal(rng.uniform(-1, 1), rng.uniform(0.1, 1.5), n)
            margin = float(rng.choice([0.3, 0.5, 1.0]))
            ci = R.values_ci(x)
            expected = DescrStatsW(x).ttost_mean(-margin, margin)[0]
            assert R.equivalence_p(ci["estimate"], ci["ci_lo"], ci["ci_hi"], n, margin) == pytest.approx(expected, rel=1e-9)
            row = R.verdict_row(x, 0, margin)
            assert row["p_eq"] == pytest.approx(expected, rel=1e-9) and row["p_eq_adj"] == row["p_eq"]
    # a 95% interval inside the margin is a TOST at 2.5% per side
    ci = R.values_ci([0.1, 0.2, 0.15, 0.12])
    assert R.equivalence_p(ci["estimate"], ci["ci_lo"], ci["ci_hi"], 4, 0.5) < 0.025
    # no test: no margin, one value, no interval
    assert math.isnan(R.equivalence_p(0.1, -0.1, 0.3, 4, 0.0))
    assert math.isnan(R.equivalence_p(0.1, -0.1, 0.3, 1, 0.5))
    assert math.isnan(R.equivalence_p(0.1, None, 0.3, 4, 0.5))


def test_adjust_family_gates_the_wrong_side_and_the_negligible_reading():
    """Two rows that each alone would read "not reproduced" lose it when the family's Holm adjustment
    leaves their test above 0.05; a row that survives keeps it."""
    rng = np.random.default_rng(3)
    wrong = R.verdict_row([-1.0, -0.6, -1.4, -0.5], +1)                  # wrong side, raw p about 0.02
    assert wrong["verdict"] == "not reproduced" and 0.01 < wrong["p_value"] < 0.05
    tiny = R.verdict_row([0.05, -0.15, 0.2, 0.0], +1, margin=0.5)         # negligible, TOST raw p < 0.025
    assert tiny["verdict"] == "not reproduced"
    noise = [R.verdict_row(rng.normal(0, 1, 4) + 5.0 * (i == 0), +1) for i in range(6)]
    fam = R.adjust_family([wrong, tiny, *noise])
    assert fam.loc[0, "p_adj"] >= 0.05 and fam.loc[0, "verdict"] == "inconclusive"
    assert fam.loc[1, "p_eq"] == pytest.approx(tiny["p_eq"])
    assert (fam.loc[1, "p_eq_adj"] < 0.05) == (fam.loc[1, "verdict"] == "not reproduced")
    assert np.isnan(fam.loc[2:, "p_eq"]).all()                           # no margin, no equivalence test
    # a family of one changes nothing
    assert R.adjust_family([wrong]).loc[0, "verdict"] == "not reproduced"


def test_verdict_invariants_on_random_intervals():
    """Whatever the interval (no paper size): reproduced <=> on the predicted side beyond the margin; negligible <=>
    on the predicted side inside it; not reproduced <=> wrong side, or inside the margin around 0; and the word never
    depends on the estimate."""
    rng = np.random.default_rng(1)
    for _ in range(2000):
        lo, hi = np.sort(rng.normal(0, 1.5, 2))
        est = rng.uniform(lo, hi)
        sign = int(rng.choice([-1, 1]))
        margin = float(rng.choice([0.0, 0.3, 1.0]))
        v = R.verdict(est, lo, hi, sign, margin, n=5)
        s_lo, s_hi = sorted((sign * lo, sign * hi))
        inside = -margin <= lo and hi <= margin
        assert v == R.verdict((lo + hi) / 2, lo, hi, sign, margin, n=5)
        assert (v == "reproduced") == (s_lo > 0 and not inside)
        assert (v == "negligible") == (s_lo > 0 and inside)
        assert (v == "not reproduced") == (s_hi < 0 or (inside and s_lo <= 0))


def test_verdict_bad_input():
    with pytest.raises(ValueError, match="expected_sign"):
        R.verdict(1.0, 0.5, 1.5, expected_sign=2)
    with pytest.raises(ValueError, match="inside"):
        R.verdict(3.0, 0.5, 1.5)
    with pytest.raises(ValueError, match="ci_lo"):
        R.verdict(1.0, 1.5, 0.5)
    with pytest.raises(ValueError, match="margin"):
        R.verdict(1.0, 0.5, 1.5, margin=-0.1)
    with pytest.raises(ValueError, match="no-change"):
        R.verdict(0.0, -0.1, 0.1, expected_sign=0, margin=0.0)
    with pytest.raises(ValueError, match="p_adj"):
        R.verdict(1.0, 0.5, 1.5, p_adj=1.5)
    with pytest.raises(ValueError, match="n must be"):
        R.verdict(1.0, 0.5, 1.5, n=-1)


# ----------------------------------------------------------------------------- simulations of the rules


def null_words(n, draws, rng, expected_sign=+1, effect=0.0):
    return pd.Series([R.verdict_row(rng.normal(effect, 1.0, n), expected_sign)["verdict"] for _ in range(draws)])


@pytest.mark.parametrize("n", [3, 5])
def test_null_effect_is_rarely_reproduced(n):
    """True effect 0: the old rules gave a decisive word every time (about half "not reproduced",
    the rest "reproduced" or "partly"); now "reproduced" comes out at most about 5% of the time
    (2.5% expected: the interval above 0) and so does "not reproduced"."""
    rng = np.random.default_rng(20261123)
    words = null_words(n, 2000, rng).value_counts(normalize=True)
    assert words.get("reproduced", 0.0) <= 0.05
    assert words.get("not reproduced", 0.0) <= 0.05
    assert words.get("inconclusive", 0.0) >= 0.9            # the old rules: 0%
    # the old rule called every wrong-side point estimate "not reproduced": about half the draws
    old_not_reproduced = np.mean([rng.normal(0, 1, n).mean() <= 0 for _ in range(2000)])
    assert old_not_reproduced > 0.45 > 5 * words.get("not reproduced", 0.0)


def test_holm_keeps_a_family_of_null_comparisons_honest():
    """8 null comparisons per family: without adjustment some row of the family is "reproduced" in
    about 1 - 0.975^8 = 18% of families; after Holm in at most about 5%."""
    rng = np.random.default_rng(7)
    raw_any = adj_any = 0
    families = 300
    for _ in range(families):
        rows = [R.verdict_row(rng.normal(0.0, 1.0, 5)) for _ in range(8)]
        raw_any += any(r["verdict"] == "reproduced" for r in rows)
        fam = R.adjust_family(rows)
        adj_any += (fam["verdict"] == "reproduced").any()
    assert raw_any / families > 0.1
    assert adj_any / families <= 0.05


def test_at_the_min_detectable_effect_reproduced_comes_out_at_the_stated_power():
    """Monte-Carlo check of min_detectable_effect: a true effect equal to it (sd 1, n 5) is
    "reproduced" in about 80% of draws."""
    rng = np.random.default_rng(3)
    mde = R.min_detectable_effect(1.0, 5)
    words = null_words(5, 3000, rng, effect=mde)
    assert (words == "reproduced").mean() == pytest.approx(0.8, abs=0.03)


# ------------------------------------------------------------------------------ min_detectable_effect


# statsmodels' solve_power stops at its search bracket for n = 3, alpha = 0.01, power = 0.9 (it returns
# 4.19, at which its own power is 0.41): that case is checked by Monte Carlo below instead.
@pytest.mark.parametrize("n, alpha, power", [(n, a, p) for n in (3, 5, 10, 34)
                                             for a, p in ((0.05, 0.8), (0.1, 0.5), (0.01, 0.9)) if (n, a) != (3, 0.01)])
def test_min_detectable_effect_against_statsmodels(n, alpha, power):
    sm_power = pytest.importorskip("statsmodels.stats.power")
    ref = sm_power.TTestPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power,
                                            alternative="two-sided")
    assert R.min_detectable_effect(1.0, n, alpha, power) == pytest.approx(ref, rel=1e-5)
    assert R.min_detectable_effect(2.5, n, alpha, power) == pytest.approx(2.5 * ref, rel=1e-5)  # in sd units


@pytest.mark.parametrize("n, alpha, power", [(2, 0.05, 0.8), (3, 0.05, 0.8), (3, 0.01, 0.9), (5, 0.05, 0.8),
                                             (10, 0.1, 0.5)])
def test_min_detectable_effect_monte_carlo(n, alpha, power):
    """Draw 100 000 experiments of n normal differences with mean = the detectable effect: the
    two-sided t-test (scipy) rejects at level alpha in a fraction ``power`` of them."""
    rng = np.random.default_rng(11)
    sd = 2.0
    x = rng.normal(R.min_detectable_effect(sd, n, alpha, power), sd, size=(100_000, n))
    rejected = stats.ttest_1samp(x, 0.0, axis=1).pvalue < alpha
    assert rejected.mean() == pytest.approx(power, abs=0.006)


def test_min_detectable_effect_against_gpower_table():
    # G*Power, t tests / means: difference from constant (one sample case), two tails, dz = 0.5,
    # alpha 0.05, power 0.80 -> total sample size 34 (actual power 0.8078): so 34 pairs detect
    # dz = 0.5 and 33 do not.
    assert R.min_detectable_effect(1.0, 34) < 0.5 < R.min_detectable_effect(1.0, 33)


def test_a_familys_detectable_effect_is_at_its_holm_level():
    """adjust_family puts beside every row the effect it could detect at the level its verdict uses, α/m: from
    the row's SD where it has one, else from its Student-t interval (the same number)."""
    rows = [R.verdict_row([0.5, 1.0, 1.5, 0.2, 0.9]), R.verdict_row([0.1, -0.2, 0.3, 0.0, 0.1]),
            R.verdict_row([1.0, 1.0])]                                   # zero spread: no test, no mde
    fam = R.adjust_family(rows)
    assert int(fam["m"].iloc[0]) == 2
    for r, fr in zip(rows[:2], fam.itertuples()):
        assert fr.mde == pytest.approx(R.min_detectable_effect(r["sd"], 5, 0.05 / 2), rel=1e-9)
        assert fr.mde > r["mde"]                                          # stricter than the unadjusted α
    assert math.isnan(fam["mde"].iloc[2])
    no_sd = R.adjust_family(pd.DataFrame(rows[:2]).drop(columns="sd"))  # from the interval: the same number
    assert no_sd["mde"].to_numpy() == pytest.approx(fam["mde"].to_numpy()[:2], rel=1e-9)


def test_min_detectable_effect_shape_and_edge_cases():
    mdes = [R.min_detectable_effect(1.0, n) for n in (2, 3, 5, 10, 100)]
    assert all(a > b for a, b in zip(mdes, mdes[1:]))         # more seeds detect smaller effects
    # large n: the normal approximation (z_{0.975} + z_{0.8}) / sqrt(n)
    assert R.min_detectable_effect(1.0, 10_000) == pytest.approx(
        (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) / 100, rel=1e-3)
    assert math.isnan(R.min_detectable_effect(1.0, 1))
    assert math.isnan(R.min_detectable_effect(1.0, 0))
    assert math.isnan(R.min_detectable_effect(0.0, 5))        # zero spread: no test
    assert math.isnan(R.min_detectable_effect(math.nan, 5))
    with pytest.raises(ValueError, match="sd"):
        R.min_detectable_effect(-1.0, 5)
    with pytest.raises(ValueError, match="alpha"):
        R.min_detectable_effect(1.0, 5, alpha=1.5)
    with pytest.raises(ValueError, match="exceed alpha"):
        R.min_detectable_effect(1.0, 5, alpha=0.5, power=0.4)
    with pytest.raises(ValueError, match="n must be"):
        R.min_detectable_effect(1.0, 2.5)


# -------------------------------------------------------------------------------------------- holm


def test_holm_worked_example():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> raised to 0.06 (monotone)
    adj = R.holm([0.01, 0.04, 0.03, 0.005])
    assert adj == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert R.holm([0.5, 0.6, 0.9]) == pytest.approx([1.0, 1.0, 1.0])   # capped at 1
    assert R.holm([0.03]) == pytest.approx([0.03])                      # a family of one
    assert R.holm([]).size == 0


def test_holm_nan_safe_and_keeps_series_index():
    adj = R.holm([0.01, np.nan, 0.04, None])
    assert adj[[0, 2]] == pytest.approx([0.02, 0.04]) and np.isnan(adj[[1, 3]]).all()   # m = 2
    s = pd.Series([0.04, 0.01], index=["b", "a"], name="p")
    out = R.holm(s)
    assert isinstance(out, pd.Series) and out.index.tolist() == ["b", "a"] and out.tolist() == pytest.approx([0.04, 0.02])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        R.holm([0.2, 1.2])
    with pytest.raises(ValueError, match="1-D"):
        R.holm(np.zeros((2, 2)))


def test_holm_against_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    rng = np.random.default_rng(0)
    for m in (1, 2, 5, 24, 64):
        p = rng.uniform(0, 0.2, m) ** 2
        p[: m // 3] = p[0]                                               # ties
        ref = multitest.multipletests(p, method="holm")[1]
        adj = R.holm(p)
        assert adj == pytest.approx(ref, rel=1e-12)
        assert np.all(adj >= p) and np.all(adj <= 1)
        order = np.argsort(p, kind="stable")
        assert np.all(np.diff(adj[order]) >= 0)                          # monotone in the raw p


# ------------------------------------------------------------------------------------------ margins


def test_margin_table_and_primary_metric():
    assert R.PRIMARY_METRIC == "R@1" and R.metric_role("R@1") == "primary"
    assert set(R.SECONDARY_METRICS) == set(R.DEFAULT_METRICS) - {"R@1"}
    assert all(R.metric_role(m) == "secondary" for m in R.SECONDARY_METRICS)
    assert set(R.MARGINS) >= set(R.DEFAULT_METRICS)                       # every reported metric has one
    t = R.margin_table()
    assert list(t.columns) == ["metric", "margin", "unit", "role"]
    assert t.iloc[0].metric == "R@1" and t.iloc[0].role == "primary" and (t.role == "primary").sum() == 1
    assert dict(zip(t.metric, t.margin)) == R.MARGINS
    assert R.margin_for("R@1") == 0.5 == R.VERDICT_RULES.equivalence_margin
    with pytest.raises(ValueError, match="declared"):
        R.margin_for("R@3")


# ----------------------------------------------------------------------------- verdict rows and families


def test_verdict_row_matches_paired_diff_and_ttest():
    none, sec = [50.0, 52.0, 51.0, 49.5], [53.0, 53.5, 54.0, 51.0]
    d = np.subtract(sec, none)
    row = R.verdict_row(d, expected_sign=+1, margin=R.margin_for("R@1"))
    assert list(row) == list(R.ROW_COLUMNS)
    pdiff = R.paired_diff(runs(none, sec), "loss", "variant", "none", "sec", metrics=["R@1"]).iloc[0]
    assert (row["estimate"], row["ci_lo"], row["ci_hi"]) == pytest.approx((pdiff.estimate, pdiff.ci_lo, pdiff.ci_hi))
    assert row["p_value"] == pytest.approx(stats.ttest_rel(sec, none).pvalue)
    assert row["p_adj"] == row["p_value"] and row["m"] == 1               # a family of one until adjusted
    assert row["n"] == 4 and row["n_counts"] == "seeds"
    assert row["sd"] == pytest.approx(np.std(d, ddof=1))
    assert row["mde"] == pytest.approx(R.min_detectable_effect(np.std(d, ddof=1), 4))
    assert row["verdict"] == "reproduced"


def test_paired_pooled_and_verdict_rows_share_one_schema_and_one_family_entry_point():
    """One row schema: paired_diff, pooled_diff, values_ci and verdict_row name the estimate, its
    interval, its test and its n alike; one_family / with_verdict (the pages' entry point) give
    adjust_family's adjusted p, verdicts and detectable effects on the same rows."""
    df = pd.concat([runs([50.0, 52.0, 51.0, 49.5], [53.0, 53.5, 54.0, 51.0]),
                    runs([60.0, 61.0, 62.0, 61.5], [59.0, 60.5, 60.5, 62.0], loss="ms")])
    df["NMI"] = df["R@1"] / 2 + df["seed"]
    schema = ["estimate", "ci_lo", "ci_hi", "p_value", "n"]
    pdf = R.paired_diff(df, "loss", "variant", "none", "sec", metrics=["R@1", "NMI"])
    assert list(pdf.columns) == ["loss", *R.PAIRED_COLUMNS] and not {"diff", "n_pairs"} & set(pdf.columns)
    assert set(schema) <= set(pdf.columns)
    assert set(schema) <= set(R.pooled_diff(df, "variant", "none", "sec", "R@1"))
    assert set(schema) <= set(R.values_ci([1.0, 2.0, 4.0])) and set(schema) <= set(R.ROW_COLUMNS)
    assert list(R.verdict_row([1.0, 2.0, 4.0])) == list(R.ROW_COLUMNS)
    assert set(R.FAMILY_COLUMNS) == {*schema, "expected_sign"}
    # a table of paired differences: the entry point against adjust_family on the same rows
    fam = R.with_verdict(pdf, +1, family="f")
    raw = R.adjust_family(pdf.assign(expected_sign=+1, margin=[R.margin_for(m) for m in pdf["metric"]]), "f")
    assert fam["m"].tolist() == raw["m"].tolist() == [4] * 4
    for col in ("p_adj", "p_eq_adj", "mde"):
        np.testing.assert_array_equal(fam[col].to_numpy(float), raw[col].to_numpy(float))
    assert fam["verdict"].tolist() == raw["verdict"].tolist() and (fam["family"] == "f").all()
    assert fam["p_adj"].to_numpy() == pytest.approx(R.holm(pdf["p_value"].to_numpy()))
    # verdict rows (with their sd), a no-change claim and a row without a test: the same frame either way
    rows = [{"name": name, **R.verdict_row(v, sign, 0.5)} for name, v, sign in
            (("up", [1.0, 2.0, 1.5], +1), ("flat", [0.1, -0.1, 0.05, 0.0], 0), ("one", [3.0], -1),
             ("down", [-2.0, -2.5, -1.0], -1))]
    (one,) = R.one_family(pd.DataFrame(rows), family="g")
    pd.testing.assert_frame_equal(one, R.adjust_family(rows, "g"))
    assert (one["m"] == 3).all() and math.isnan(one.loc[2, "p_adj"])
    # several tables as one family: each comes back in place, adjusted over all of their rows
    a, b = R.one_family(fam, pd.DataFrame(rows[:2]), family="h")
    assert list(a.columns) == list(fam.columns) and (a["m"] == 6).all() and (b["m"] == 6).all()
    assert [*a["p_adj"], *b["p_adj"]] == pytest.approx(list(R.holm([*pdf["p_value"], rows[0]["p_value"],
                                                                   rows[1]["p_value"]])))
    with pytest.raises(ValueError, match="lacks columns"):
        R.one_family(pdf.rename(columns={"estimate": "diff"}).assign(expected_sign=1))


def test_verdict_row_edge_cases_and_bad_input():
    r = R.verdict_row([1.0, np.nan, 3.0, 2.0], n_counts="runs pooled across losses")
    assert r["n"] == 3 and r["n_counts"] == "runs pooled across losses"   # the failed run is dropped
    one = R.verdict_row([0.7])
    assert one["verdict"] == "inconclusive" and one["n"] == 1 and math.isnan(one["sd"]) and math.isnan(one["mde"])
    none = R.verdict_row([])
    assert none["verdict"] == "not testable offline" and none["n"] == 0
    assert R.verdict_row([0.1, 0.2, 0.15, 0.12], expected_sign=0, margin=0.5)["verdict"] == "reproduced"
    with pytest.raises(ValueError, match="n_counts"):
        R.verdict_row([1.0, 2.0], n_counts="pairs")
    with pytest.raises(ValueError, match="expected_sign"):
        R.verdict_row([1.0, 2.0], expected_sign="+")
    with pytest.raises(ValueError, match="1-D"):
        R.verdict_row(np.ones((2, 3)))


def test_adjust_family_applies_holm_then_the_rules():
    # four rows that each are "reproduced" on their own (raw p 0.02) but not as a family of four
    base = dict(estimate=1.0, ci_lo=0.2, ci_hi=1.8, n=5, expected_sign=+1)
    rows = [dict(base, p_value=0.02, name=f"r{i}") for i in range(4)]
    assert all(R.verdict(r["estimate"], r["ci_lo"], r["ci_hi"], p_adj=r["p_value"]) == "reproduced" for r in rows)
    fam = R.adjust_family(rows, family="main")
    assert fam["p_adj"].tolist() == pytest.approx([0.08] * 4) and (fam["m"] == 4).all()
    assert set(fam["verdict"]) == {"inconclusive"} and set(fam["family"]) == {"main"}
    assert fam["name"].tolist() == ["r0", "r1", "r2", "r3"]                 # order and extra columns kept
    # a strong row survives; rows without a p (zero spread) are not counted and stay inconclusive
    rows = [dict(base, p_value=0.001), dict(base, p_value=0.04), R.verdict_row([2.0, 2.0, 2.0])]
    fam = R.adjust_family(pd.DataFrame(rows))
    assert fam["p_adj"].iloc[:2].tolist() == pytest.approx([0.002, 0.04]) and math.isnan(fam["p_adj"].iloc[2])
    assert (fam["m"] == 2).all()
    assert fam["verdict"].tolist() == ["reproduced", "reproduced", "inconclusive"]
    # verdict_row output goes straight in, and the adjustment equals holm of the raw p-values
    rng = np.random.default_rng(5)
    vr = [R.verdict_row(rng.normal(0.8, 1.0, 5)) for _ in range(6)]
    fam = R.adjust_family(vr)
    assert fam["p_adj"].to_numpy() == pytest.approx(R.holm([r["p_value"] for r in vr]))
    assert fam["verdict"].tolist() == [
        R.verdict(r["estimate"], r["ci_lo"], r["ci_hi"], n=r["n"], p_adj=p) for r, p in zip(vr, fam["p_adj"])]
    assert len(R.adjust_family([])) == 0
    with pytest.raises(ValueError, match="required columns"):
        R.adjust_family([dict(estimate=1.0)])
    with pytest.raises(ValueError, match="DataFrame or a list"):
        R.adjust_family("rows")
    with pytest.raises(ValueError, match="row 0"):
        R.adjust_family([dict(base, p_value=0.01, expected_sign=3)])


def test_verdict_table_computes_the_verdict_column():
    rows = [
        dict(claim="C1", text="SEC improves R@1 (triplet)", estimate=3.0, ci_lo=2.1, ci_hi=3.9, n=4, paper=5.6, link="cub.md"),
        dict(claim="C2", text="SEC improves R@1 (MS)", estimate=-1.0, ci_lo=-1.6, ci_hi=-0.4, n=4, paper=None),
        dict(claim="C3", text="noisy", estimate=0.4, ci_lo=-0.3, ci_hi=1.1, n=3),
        dict(claim="C4", text="SOP needs the real data", estimate=None, ci_lo=None, ci_hi=None, n=0, source="x"),
        dict(claim="C5", text="adjusted away", estimate=3.0, ci_lo=2.1, ci_hi=3.9, n=4, p_adj=0.2),
        dict(claim="C6", text="negligible", estimate=0.2, ci_lo=0.1, ci_hi=0.3, n=4, margin=0.5),
        dict(claim="C7", text="old key", estimate=0.2, ci_lo=0.1, ci_hi=0.3, n=4, min_effect=0.5),
    ]
    t = R.verdict_table(rows)
    assert t.columns[:10].tolist() == [
        "claim", "text", "estimate", "ci_lo", "ci_hi", "n", "paper", "link", "expected_sign", "verdict"
    ]
    assert t.verdict.tolist() == ["reproduced", "not reproduced", "inconclusive", "not testable offline",
                                  "inconclusive", "negligible", "negligible"]
    assert set(t.verdict) <= set(R.VERDICTS)
    assert "source" in t.columns and t.paper.isna().tolist() == [False, True, True, True, True, True, True]
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
    # a half-width that would print as 0.00 keeps its significant digits, and the mean with it
    assert R.fmt_cell(0.0215, 0.0211, 0.0219, 3) == "0.0215 ± 0.0004"
    assert R.fmt_cell(0.25, 0.24, 0.26, 3) == "0.25 ± 0.01" and R.fmt_cell(0.25, 0.25, 0.25, 3) == "0.25 ± 0.00"
    with pytest.raises(ValueError, match="style"):
        R.format_ci(1, 0, 2, 3, style="box")


def test_zero_spread_up_to_float_rounding_is_zero_spread():
    # intervals of float-noise width, as computed estimates (a correlation, a log ratio) produce them
    assert R.verdict(-0.17791199964395557, -0.17791199964395585, -0.1779119996439553, n=3) == "inconclusive"
    assert R.verdict(1.7917594692280547, 1.7917594692280545, 1.791759469228055, n=12) == "inconclusive"
    assert R.verdict(1e-6, 0.5e-6, 1.5e-6, n=3) == "reproduced"          # a small scale is not zero spread
    d = np.array([60.7, 12.4, 33.3]) - np.array([60.6, 12.3, 33.2])     # 0.1 three times, up to rounding
    assert np.ptp(d) > 0
    row = R.verdict_row(d)
    assert row["verdict"] == "inconclusive" and math.isnan(row["p_value"]) and math.isnan(row["ci_lo"])
    pd_row = R.paired_diff(runs([60.6, 12.3, 33.2], [60.7, 12.4, 33.3]), None, "variant", "none", "sec",
                           metrics=["R@1"]).iloc[0]
    assert math.isnan(pd_row.p_value) and math.isnan(pd_row.ci_lo)
    assert R.verdict_row([1e-7, 2e-7, 1.5e-7])["verdict"] == "reproduced"


def test_fmt_metric_prints_percent_metrics_with_fixed_decimals_and_the_rest_with_3_significant_digits():
    from sec_lib.report import fmt_metric, is_percent
    assert [is_percent(m) for m in ("R@1", "R@100", "MAP@R", "NMI", "F1", "test_norm_var")] == [True] * 5 + [False]
    assert fmt_metric(1.234, "R@1", 2, True) == "+1.23" and fmt_metric(-0.001, "R@1") == "0.00"
    assert fmt_metric(0.012345, "test_norm_var") == "0.0123" and fmt_metric(float("nan"), "R@1") == "n/a"
    assert fmt_metric(None, "F1") == "n/a"
