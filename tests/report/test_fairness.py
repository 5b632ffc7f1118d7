"""sec_lib.report.fairness on synthetic data with known answers, against direct pandas/scipy computations."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sec_lib.report.fairness import (class_difficulty, class_table, correlation, effects_frame, eta_squared, gap_change,
                              group_gap, relative_to_run)


def clustered(n_classes=200, per_class=8, effect=0.5, class_sd=1.0, seed=0):
    """Rows (label, group, value): a class random effect plus, for group 'b', a shift of `effect` (noise SD 1)."""
    rng = np.random.default_rng(seed)
    label = np.repeat(np.arange(n_classes), per_class)
    group = np.where(np.tile(np.arange(per_class), n_classes) % 2 == 0, "a", "b")
    value = 10 + rng.normal(0, class_sd, n_classes)[label] + effect * (group == "b") + rng.normal(0, 1, len(label))
    return pd.DataFrame({"label": label, "group": group, "value": value})


def test_group_gap_point_estimates_match_direct_formulas():
    df = clustered(n_classes=30, seed=1)
    out = group_gap(df, "value", "group", "a", "b", n_boot=200)
    va, vb = df.loc[df.group == "a", "value"], df.loc[df.group == "b", "value"]
    assert out["mean_a"].estimate == pytest.approx(va.mean()) and out["mean_b"].estimate == pytest.approx(vb.mean())
    assert out["diff"].estimate == pytest.approx(vb.mean() - va.mean())
    assert out["rel_diff"].estimate == pytest.approx((vb.mean() - va.mean()) / df["value"].mean())
    na, nb = len(va), len(vb)
    pooled = np.sqrt(((na - 1) * va.var() + (nb - 1) * vb.var()) / (na + nb - 2))
    g = (vb.mean() - va.mean()) / pooled * (1 - 3 / (4 * (na + nb) - 9))
    assert out["smd"].estimate == pytest.approx(g)
    for iv in out.values():
        assert iv.lo <= iv.estimate <= iv.hi


def test_rel_diff_is_scale_free_and_intervals_cover_known_effects():
    df = clustered(effect=0.5, class_sd=0.5, seed=2)
    out = group_gap(df, "value", "group", "a", "b", n_boot=1000)
    scaled = group_gap(df.assign(value=7 * df["value"]), "value", "group", "a", "b", n_boot=1000)
    assert scaled["rel_diff"].estimate == pytest.approx(out["rel_diff"].estimate)
    assert scaled["smd"].estimate == pytest.approx(out["smd"].estimate)
    assert scaled["diff"].estimate == pytest.approx(7 * out["diff"].estimate)
    assert out["diff"].lo < 0.5 < out["diff"].hi and out["diff"].excludes_zero
    null = group_gap(clustered(effect=0.0, seed=3), "value", "group", "a", "b", n_boot=1000)
    assert not null["diff"].excludes_zero and not null["smd"].excludes_zero


def test_cluster_bootstrap_is_wider_than_row_bootstrap_for_between_class_contrasts():
    """A class-level attribute (every row of a class in one group): rows are not independent."""
    df = clustered(n_classes=60, per_class=10, effect=0.0, class_sd=2.0, seed=4)
    df["group"] = np.where(df["label"] % 2 == 0, "a", "b")
    by_class = group_gap(df, "value", "group", "a", "b", n_boot=1000)
    by_row = group_gap(df, "value", "group", "a", "b", cluster=None, n_boot=1000)
    width = lambda iv: iv.hi - iv.lo  # noqa: E731
    assert width(by_class["diff"]) > 2 * width(by_row["diff"])


def test_within_class_centring_removes_a_class_confound():
    """Classes with a high baseline hold more 'b' rows, but within every class b and a are equal."""
    rows = []
    for c in range(40):
        base = 10.0 + c
        n_b = 1 + (c % 2) * 6  # odd classes (higher baselines on average) mostly b
        rows += [(c, "b", base)] * n_b + [(c, "a", base)] * (8 - n_b)
    df = pd.DataFrame(rows, columns=["label", "group", "value"])
    pooled = group_gap(df, "value", "group", "a", "b", n_boot=200)
    within = group_gap(df, "value", "group", "a", "b", within=True, n_boot=200)
    assert pooled["diff"].estimate > 0.1
    assert within["diff"].estimate == pytest.approx(0.0, abs=1e-12)


def test_eta_squared_matches_anova_sums_of_squares():
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"label": np.arange(300), "group": rng.choice(["x", "y", "z"], 300)})
    df["value"] = df["group"].map({"x": 0.0, "y": 1.0, "z": 2.0}) + rng.normal(0, 1, 300)
    est = eta_squared(df, "value", "group", cluster=None, n_boot=500)
    grand = df["value"].mean()
    ss_b = sum(len(g) * (g["value"].mean() - grand) ** 2 for _, g in df.groupby("group"))
    ss_t = ((df["value"] - grand) ** 2).sum()
    assert est.estimate == pytest.approx(ss_b / ss_t)
    f, _ = stats.f_oneway(*[g["value"] for _, g in df.groupby("group")])
    assert est.estimate == pytest.approx(2 * f / (2 * f + 297))  # eta^2 = df_b F / (df_b F + df_w)
    assert est.lo < est.estimate < est.hi and est.lo > 0.2


def test_correlation_matches_scipy_and_covers_truth():
    rng = np.random.default_rng(6)
    xy = rng.multivariate_normal([0, 0], [[1, 0.6], [0.6, 1]], size=400)
    df = pd.DataFrame({"x": xy[:, 0], "y": xy[:, 1]})
    sp = correlation(df, "x", "y", n_boot=500)
    pe = correlation(df, "x", "y", method="pearson", n_boot=500)
    assert sp.estimate == pytest.approx(stats.spearmanr(df.x, df.y).statistic)
    assert pe.estimate == pytest.approx(stats.pearsonr(df.x, df.y).statistic)
    assert pe.lo < 0.6 < pe.hi
    with pytest.raises(ValueError, match="method"):
        correlation(df, "x", "y", method="kendall")


def test_gap_change_recovers_a_known_difference_of_differences():
    """Hit rates: group b is served 20 points worse without SEC and 5 points worse with it."""
    rows = []
    for variant, gap in (("none", 20), ("sec", 5)):
        for seed in (0, 1, 2):
            for c in range(100):
                for g, rate in (("a", 80), ("b", 80 - gap)):
                    rows += [(variant, seed, c, g, 100.0 * (k < rate / 5)) for k in range(20)]
    df = pd.DataFrame(rows, columns=["variant", "seed", "label", "font", "hit"])
    out = gap_change(df, "hit", "font", "a", "b", n_boot=300)
    assert out["gap_base"].estimate == pytest.approx(-20.0)
    assert out["gap_treated"].estimate == pytest.approx(-5.0)
    assert out["change"].estimate == pytest.approx(15.0)
    assert out["change"].excludes_zero
    table = effects_frame(out)
    assert list(table["statistic"]) == ["gap_base", "gap_treated", "change"]


def test_gap_change_null_interval_contains_zero():
    rng = np.random.default_rng(7)
    n = 4000
    df = pd.DataFrame({"variant": rng.choice(["none", "sec"], n), "label": rng.integers(0, 200, n),
                       "font": rng.choice(["a", "b"], n)})
    df["hit"] = 100.0 * (rng.random(n) < 0.7)
    out = gap_change(df, "hit", "font", "a", "b", n_boot=500)
    assert out["change"].lo < 0 < out["change"].hi


def test_helpers_and_bad_input():
    tn = pd.DataFrame({"label": [0, 0, 1, 1], "norm": [1.0, 3.0, 2.0, 2.0], "hit@1": [True, False, True, True]})
    ct = class_table(tn)
    assert ct["norm_mean"].tolist() == [2.0, 2.0] and ct["hit1"].tolist() == [50.0, 100.0]
    assert ct["norm_rel"].tolist() == [1.0, 1.0]
    diff = class_difficulty([tn, tn.assign(**{"hit@1": [False, False, True, False]})])
    assert diff["difficulty"].tolist() == [0.75, 0.25]
    rel = relative_to_run(pd.DataFrame({"variant": ["none", "none", "sec", "sec"], "norm": [1.0, 3.0, 10.0, 30.0]}))
    assert rel["norm_rel"].tolist() == [0.5, 1.5, 0.5, 1.5]
    df = clustered(n_classes=5)
    with pytest.raises(ValueError, match="not a level"):
        group_gap(df, "value", "group", "a", "c")
    with pytest.raises(ValueError, match="not in the frame"):
        group_gap(df, "norm", "group", "a", "b")
    with pytest.raises(ValueError, match="n_boot"):
        group_gap(df, "value", "group", "a", "b", n_boot=10)


def test_with_attributes_joins_rows_of_the_same_images():
    from sec_lib.report.fairness import with_attributes
    tn = pd.DataFrame({"label": [0, 0, 1], "norm": [1.0, 2.0, 3.0], "hit@1": [True, False, True]})
    inst = pd.DataFrame({"label": [0, 0, 1], "design": ["serif", "sans", "serif"]})
    cls = pd.DataFrame({"label": [0, 1], "script": ["LATIN", "GREEK"]})
    out = with_attributes(tn, inst, cls)
    assert out["design"].tolist() == ["serif", "sans", "serif"] and out["script"].tolist() == ["LATIN", "LATIN", "GREEK"]
    assert out["norm"].tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="same images"):
        with_attributes(tn, inst.iloc[::-1])
    with pytest.raises(ValueError, match="no row for label"):
        with_attributes(tn, inst, cls.iloc[:1])
