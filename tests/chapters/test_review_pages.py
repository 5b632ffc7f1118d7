"""sec_lib.chapters on hand-made result frames: the 90%-of-final iteration, pooled paired differences,
the chapter tables and the claims page's verdict logic (including claims that SEC loses)."""
import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from scipy import stats

from sec_lib import reference, report
from sec_lib.chapters import (bnwn, claims, common, compare, convergence, evidence, face, fairness, instability,
                              normlayer, npair, optim, ssl)
from sec_lib.report.claims import Claim
from sec_lib.chapters import eta as eta_ch
from sec_lib.chapters import mu as mu_ch
from sec_lib.figures import claims as claims_fig
from sec_lib.figures import sweeps as rp
from sec_lib.figures.tables import FOLDED_ATTR, compact_verdict_table
from sec_lib.runs.store import Frames

LOSSES = ("triplet", "semihard", "npair", "ms")
SEEDS = (0, 1, 2)


def frames(runs, **tables):
    empty = pd.DataFrame(columns=["key"])
    return Frames(runs=runs, **{t: tables.get(t, empty) for t in
                                ("steps", "tracked", "evals", "test_norms", "cosines", "grad_scatter")})


def t_ci(x):
    x = np.asarray(x, float)
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    return x.mean(), lo, hi


# ------------------------------------------------------------------------------------ reach_step


def brute_reach(t, r, frac):
    """First point of a dense piecewise-linear curve at or above frac * final (independent of reach_step)."""
    grid = np.linspace(t[0], t[-1], 200001)
    y = np.interp(grid, t, r)
    return grid[np.argmax(y >= frac * r[-1] - 1e-12)]


@pytest.mark.parametrize("t,r", [
    ([0, 10, 20, 30], [10, 40, 80, 100]),
    ([0, 10, 20, 30, 40], [0, 50, 95, 90, 100]),   # non-monotone: the first crossing counts
    ([0, 5, 50], [20, 21, 60]),
])
def test_reach_step_against_dense_curve(t, r):
    got = convergence.reach_step(t, r, 0.9)
    assert got == pytest.approx(brute_reach(np.array(t, float), np.array(r, float), 0.9), abs=1e-3)


def test_reach_step_hand_values_and_edges():
    assert convergence.reach_step([0, 10, 20, 30], [10, 40, 80, 100]) == pytest.approx(25.0)   # 20 + (90-80)/(100-80)*10
    assert convergence.reach_step([0, 10], [95, 100]) == 0.0                                   # already there at step 0
    assert convergence.reach_step([30, 0, 10, 20], [100, 10, 40, 80]) == pytest.approx(25.0)   # order does not matter
    assert convergence.reach_step([0, 10, 20], [10, 50, 100], frac=0.5) == pytest.approx(10.0)
    assert math.isnan(convergence.reach_step([], []))
    assert math.isnan(convergence.reach_step([0, 10], [1.0, np.nan]))
    with pytest.raises(ValueError, match="frac"):
        convergence.reach_step([0, 1], [0, 1], frac=1.5)
    with pytest.raises(ValueError, match="same length"):
        convergence.reach_step([0, 1], [0, 1, 2])


def test_reach_table_and_convergence_diffs():
    rows, ev = [], []
    for loss in ("triplet", "ms"):
        for v, t_hit in (("none", 60.0), ("sec", 30.0)):
            for s in SEEDS:
                key = f"{loss}-{v}-{s}"
                rows.append(dict(key=key, loss=loss, variant=v, seed=s, status="done"))
                final = 50.0 + s
                # linear from 0 to 0.9*final at t_hit + s, then flat at final from step 100
                t90 = t_hit + (2 * s if v == "sec" else s)      # SEC gains 30, 29, 28 steps over seeds 0, 1, 2
                ev += [dict(key=key, step=0, **{"R@1": 0.0}), dict(key=key, step=t90, **{"R@1": 0.9 * final}),
                       dict(key=key, step=100, **{"R@1": final})]
    runs = pd.DataFrame(rows)
    reach = convergence.reach_table(runs, pd.DataFrame(ev))
    assert reach.set_index("key").loc["ms-sec-2", "reach"] == pytest.approx(34.0)
    d = convergence.convergence_diffs(reach)
    r = d[(d.loss == "triplet") & (d.metric == "reach")].iloc[0]
    assert r["estimate"] == pytest.approx(-29.0) and r["n"] == 3
    assert r["verdict"] == "reproduced"                  # faster with SEC, CI excludes 0
    f = d[(d.loss == "triplet") & (d.metric == "final")].iloc[0]
    assert f["estimate"] == pytest.approx(0.0) and f["verdict"] == "inconclusive"   # zero spread: no usable interval
    band = convergence.curve_band(runs, pd.DataFrame(ev))
    b = band[(band.loss == "ms") & (band.variant == "none") & (band.step == 100)].iloc[0]
    assert b["mean"] == pytest.approx(51.0) and b["min"] == 50.0 and b["max"] == 52.0


# ----------------------------------------------------------------------------------- pooled_diff


def main_runs(gains, var_none=4.0, var_sec=0.04, l2_gain=None, noise=(0.0, 0.7, -0.4), vary_var=False):
    """Main-table runs: R@1 = 50 + seed noise (+ gain[loss] for SEC)."""
    rows = []
    for loss in LOSSES:
        for v in ("none", "l2reg", "sec"):
            for s, e in zip(SEEDS, noise):
                r1 = 50.0 + e + (gains[loss] + 0.3 * s if v == "sec" else 0.0)
                if v == "l2reg":
                    r1 += (l2_gain or {}).get(loss, 0.0)
                k = 1 + LOSSES.index(loss) if vary_var else 1
                var = var_sec * (1 + 0.1 * s) if v == "sec" else var_none * k * (1 + 0.05 * s)
                rows.append(dict(key=f"{loss}-{v}-{s}", loss=loss, variant=v, seed=s, status="done",
                                 eta=0.0 if v == "none" else 1.0, **{"R@1": r1, "train_norm_var": var, "train_norm_mean": 2.0,
                                                                     "NMI": 40.0 + e}))
    return pd.DataFrame(rows)


def test_pooled_diff_against_hand_computation():
    gains = dict(triplet=2.0, semihard=-1.0, npair=0.5, ms=1.5)
    runs = main_runs(gains)
    out = report.pooled_diff(runs, "variant", "none", "sec", "R@1")
    per_seed = [np.mean([gains[l] + 0.3 * s for l in LOSSES]) for s in SEEDS]
    m, lo, hi = t_ci(per_seed)
    assert (out["estimate"], out["ci_lo"], out["ci_hi"]) == pytest.approx((m, lo, hi))
    assert out["n"] == 3 and out["n_groups"] == 4
    assert out["p_value"] == pytest.approx(stats.ttest_1samp(per_seed, 0).pvalue)
    lg = report.pooled_diff(runs, "variant", "none", "sec", "train_norm_var", transform=np.log10)
    ref = [np.mean([np.log10(0.04 * (1 + 0.1 * s) / (4.0 * (1 + 0.05 * s)))] * 4) for s in SEEDS]
    assert lg["estimate"] == pytest.approx(np.mean(ref))
    # a missing side gives no evidence rather than an error
    assert report.pooled_diff(runs[runs.variant != "sec"], "variant", "none", "sec", "R@1")["n"] == 0


def test_pooled_diff_leaves_out_a_loss_in_which_a_run_failed():
    """A diverged run (status 'failed', R@1 NaN) takes its loss out of the pooled mean for every seed, so each seed
    averages the same losses; the loss is named in ``excluded``."""
    gains = dict(triplet=2.0, semihard=-1.0, npair=0.5, ms=1.5)
    runs = main_runs(gains)
    failed = (runs["loss"] == "npair") & (runs["variant"] == "sec") & (runs["seed"] == SEEDS[0])
    runs.loc[failed, ["status", "R@1"]] = ["failed", np.nan]
    out = report.pooled_diff(runs, "variant", "none", "sec", "R@1")
    kept = [l for l in LOSSES if l != "npair"]
    per_seed = [np.mean([gains[l] + 0.3 * s for l in kept]) for s in SEEDS]
    m, lo, hi = t_ci(per_seed)
    assert (out["estimate"], out["ci_lo"], out["ci_hi"]) == pytest.approx((m, lo, hi))
    assert out["n"] == 3 and out["n_groups"] == 3 and out["excluded"] == ["npair"]
    # without a status column the old rule holds: the NaN pair alone drops out (seed 0 averages 3 losses)
    mixed = report.pooled_diff(runs.drop(columns="status"), "variant", "none", "sec", "R@1")
    assert mixed["excluded"] == [] and mixed["n_groups"] == 4
    assert mixed["estimate"] != pytest.approx(m)
    assert report.pooled_diff(main_runs(gains), "variant", "none", "sec", "R@1")["excluded"] == []


# ------------------------------------------------------------------------------------ chapters


def test_summary_table_cells_and_counts():
    runs = pd.DataFrame([dict(loss="a", seed=s, status="done", x=v, v=w) for s, v, w in
                         zip(SEEDS, (1.0, 2.0, 4.0), (1e-4, 2e-4, 3e-4))]
                        + [dict(loss="b", seed=0, status="failed", x=np.nan, v=np.nan),
                           dict(loss="b", seed=1, status="done", x=5.0, v=1e5)])
    t = report.summary_table(runs, ["loss"], ["x", "v"]).set_index("loss")
    m, lo, hi = t_ci([1.0, 2.0, 4.0])
    assert t.loc["a", "x"] == f"{m:.2f} ± {(hi - lo) / 2:.2f}"
    assert t.loc["a", "v"].startswith("0.0002 ± ")            # small values: significant digits
    assert t.loc["b", "x"] == "5.00 (n=1)" and t.loc["b", "v"] == "1e+05 (n=1)"
    assert (t.loc["b", "runs"], t.loc["b", "failed"]) == (2, 1)
    assert report.fmt_cell(np.nan, np.nan, np.nan, 0) == "n/a"
    # a failed run's values (a diverged run's step statistics) are not averaged; a group of failed runs keeps its row
    runs.loc[runs["status"] == "failed", "x"] = 99.0
    runs = pd.concat([runs, pd.DataFrame([dict(loss="c", seed=0, status="failed", x=7.0, v=np.nan)])])
    t = report.summary_table(runs, ["loss"], ["x", "v"]).set_index("loss")
    assert t.loc["b", "x"] == "5.00 (n=1)" and list(t.index) == ["a", "b", "c"]
    assert (t.loc["c", "x"], t.loc["c", "runs"], t.loc["c", "failed"]) == ("n/a", 1, 1)


def test_eta_diffs_and_reading():
    rows = []
    effect = {0.1: 2.0, 1.0: -3.0}
    for loss in ("triplet", "ms"):
        for eta in (0.0, 0.1, 1.0):
            for s, e in zip(SEEDS, (0.0, 0.5, -0.2)):
                r1 = 60 + e + effect.get(eta, 0.0) + 0.1 * s * (eta > 0)
                rows.append(dict(key=f"{loss}{eta}{s}", loss=loss, eta=eta, seed=s, status="done",
                                 **{"R@1": r1, "train_norm_var": 1.0 / (1 + eta), "test_norm_var": 2.0}))
    runs = pd.DataFrame(rows)
    d = eta_ch.eta_diffs(runs)
    assert list(d["eta"].unique()) == [0.1, 1.0] and len(d) == 4
    ref = report.paired_diff(runs[runs.eta.isin([0.0, 1.0])], "loss", "eta", 0.0, 1.0, metrics=["R@1"])
    got = d[d.eta == 1.0].set_index("loss")["estimate"]
    assert got["ms"] == pytest.approx(ref.set_index("loss").loc["ms", "estimate"]) == pytest.approx(-2.9)
    assert set(d[d.eta == 0.1]["verdict"]) == {"reproduced"}
    assert set(d[d.eta == 1.0]["verdict"]) == {"not reproduced"}
    text = eta_ch.eta_reading(d)
    assert "**triplet**: SEC beats η = 0 with a CI above 0 at η ∈ {0.1}" in text and "below 0 at η ∈ {1}" in text
    assert text.count("\n") == 1                        # one line per loss
    rob = eta_ch.eta_robustness(runs)
    assert rob["estimate"] == pytest.approx(-0.4) and rob["n"] == 3     # per seed: (2 + 0.1s - 3 + 0.1s) / 2
    shown = compact_verdict_table(d)         # the page shows the book's one verdict-table form
    assert len(shown) == len(d) and list(shown.columns[:7]) == ["loss", "eta", "metric", "estimate [95% CI]",
                                                                "adj. p", "verdict", "could detect"]
    r, row = d.iloc[0], shown.iloc[0]
    assert row["estimate [95% CI]"] == f"{r['estimate']:+.2f} [{r['ci_lo']:+.2f}, {r['ci_hi']:+.2f}]"
    assert row["verdict"] == r["verdict"] and row["n"] == f"{int(r['n'])}"
    assert {"mean η = 0", "mean at η", "p_value"} <= set(shown.attrs[FOLDED_ATTR]["Means and test"])
    tbl = eta_ch.eta_table(runs)
    assert {"loss", "eta", "R@1", "runs", "failed"} <= set(tbl.columns) and len(tbl) == 6
    s = eta_ch.eta_summary(runs)
    assert set(s["metric"]) == {"R@1", "train_norm_var", "test_norm_var"}


def mu_runs():
    eff = {"none": 0.0, "batch mean": 3.0, "EMA ρ=0.1": 2.8, "EMA ρ=0.01": 3.1, "zero η=0.1": -2.0,
           "zero η=0.005": 1.0, "fixed r=4": 0.5}
    rows = []
    for loss in ("semihard", "ms"):
        for st, g in eff.items():
            for s, e in zip(SEEDS, (0.0, 0.4, -0.3)):
                rows.append(dict(key=f"{loss}{st}{s}", loss=loss, setting=st, seed=s, status="done",
                                 **{"R@1": 70 + e + g + 0.05 * s * (st == "batch mean"), "NMI": 60.0, "F1": 30.0,
                                    "train_norm_var": 1.0}))
    return pd.DataFrame(rows)


def test_mu_eta_sentence_reads_the_weight_from_the_runs():
    from sec_lib.runs.experiments import ETA_SEC
    runs = mu_runs()
    runs = runs.assign(eta=[ETA_SEC[r.loss] if r.setting != "none" else 0.0 for r in runs.itertuples()])
    text = mu_ch.eta_sentence(runs)
    assert f"semihard {ETA_SEC['semihard']:g}" in text and f"ms {ETA_SEC['ms']:g}" in text
    assert "the paper's η for each loss" in text
    other = runs.assign(eta=runs["eta"].where(runs["loss"] != "semihard", 0.05))
    assert "semihard 0.05" in mu_ch.eta_sentence(other) and "not the paper's η" in mu_ch.eta_sentence(other)
    with pytest.raises(ValueError, match="eta"):
        mu_ch.eta_sentence(mu_runs())


def test_mu_trajectory_sentence_says_when_a_slow_ema_anchors_the_norms():
    rows = []
    for loss in ("semihard", "ms"):
        for setting, end in (("batch mean", 0.3), ("EMA ρ=0.1", 0.32), ("EMA ρ=0.01", 3.6), ("none", 13.0)):
            rows += [dict(loss=loss, setting=setting, step=st, mu=end, norm_mean=v)
                     for st, v in ((1, 4.4), (13500, end))]
    traj = pd.DataFrame(rows)
    text = mu_ch.trajectory_sentence(traj)
    assert "semihard: 0.30 (batch mean), 0.32 (EMA ρ=0.1), 3.60 (EMA ρ=0.01)" in text
    assert "the norms end about 12 times larger" in text and "slowly drifting fixed radius" in text
    near = traj.assign(norm_mean=traj["norm_mean"].where(traj["setting"] != "EMA ρ=0.01", 0.4))
    assert "drifting" not in mu_ch.trajectory_sentence(near)
    assert mu_ch.trajectory_sentence(traj[traj["setting"] != "batch mean"]) == ""


def test_mu_tables():
    runs = mu_runs()
    best = mu_ch.mu_vs_best_zero(runs)
    assert list(best["best_zero"]) == ["zero η=0.005"] * 2            # the best μ = 0 setting, picked post hoc
    r = best[best.loss == "semihard"].iloc[0]
    assert r["estimate"] == pytest.approx(2.05) and r["verdict"] == "reproduced"
    t = mu_ch.mu_rebuttal_table(runs)
    t = t.set_index("setting")
    assert t.loc["batch mean", "rebuttal R@1"] == pytest.approx(85.19)
    assert t.loc["zero η=0.005", "rebuttal R@1"] == pytest.approx(82.60)
    assert t.loc["none", "rebuttal norm var"] == pytest.approx(7.63)
    assert np.isnan(t.loc["EMA ρ=0.1", "rebuttal R@1"])
    d = mu_ch.mu_diffs(runs)
    assert set(d["versus"]) == {"none", "EMA ρ=0.1", "EMA ρ=0.01", "zero η=0.1", "zero η=0.005", "fixed r=4"}
    assert d[(d.loss == "ms") & (d.versus == "zero η=0.1")]["estimate"].iloc[0] == pytest.approx(5.05)
    e = mu_ch.ema_vs_batch(runs)
    assert e["setting"] == "EMA ρ=0.01" and e["estimate"] == pytest.approx(0.1 - 0.05)


def test_bnwn_table_and_collapse_verdict():
    eff = {("paper", "sec"): 4.0, ("bn_before_norm", "sec"): -10.0, ("weightnorm", "sec"): 3.0}
    rows = []
    for h in ("nobn", "paper", "bn_before_norm", "weightnorm"):
        for v in ("none", "sec"):
            for s, e in zip(SEEDS, (0.0, 1.0, -0.5)):
                rows.append(dict(key=f"{h}{v}{s}", head=h, variant=v, seed=s, status="done",
                                 **{"R@1": 60 + e + eff.get((h, v), 0.0) + 0.2 * s * (v == "sec"),
                                    "NMI": 50.0, "F1": 20.0, "train_norm_var": 1.0}))
    runs = pd.DataFrame(rows)
    t = bnwn.bnwn_table(runs).set_index(["head", "variant"])
    assert t.loc[("bn_before_norm", "sec"), "rebuttal R@1"] == pytest.approx(62.46)
    assert t.loc[("paper", "none"), "rebuttal R@1"] == pytest.approx(80.17)
    assert np.isnan(t.loc[("nobn", "none"), "rebuttal R@1"])
    bn = bnwn.head_effect(runs, "bn_before_norm", -1)
    assert bn["estimate"] == pytest.approx(-9.8) and bn["rebuttal"] == pytest.approx(62.46 - 80.20)
    assert bn["verdict"] == "reproduced"
    # with SEC expected to help (+1), the same numbers are "not reproduced"
    assert bnwn.head_effect(runs, "bn_before_norm", +1)["verdict"] == "not reproduced"
    d = bnwn.bnwn_diffs(runs)
    assert d[(d["head"] == "weightnorm") & (d.metric == "R@1")]["rebuttal_diff"].iloc[0] == pytest.approx(85.01 - 79.42)


def test_normlayer_diffs_equivalence():
    rows, steps = [], []
    for h in ("paper", "normalize"):
        for v in ("none", "sec"):
            for s, e in zip(SEEDS, (0.0, 0.3, -0.3)):
                key = f"{h}{v}{s}"
                rows.append(dict(key=key, head=h, variant=v, seed=s, status="done",
                                 **{"R@1": 55 + e + (2.0 + 0.1 * s) * (v == "sec") + 0.01 * s * (h == "normalize"),
                                    "NMI": 50.0 + e, "train_norm_var": 1.0, "test_norm_var": 1.0}))
                steps += [dict(key=key, step=i, grad_slope=-1.0 + 0.01 * i) for i in range(1, 5)]
    runs = pd.DataFrame(rows)
    d = normlayer.normlayer_diffs(runs)
    eq = d[(d.comparison == "normalize − paper head (none)") & (d.metric == "R@1")].iloc[0]
    assert eq["verdict"] == "reproduced" and abs(eq["estimate"]) < 0.05      # equivalence within the margin
    g = d[(d.comparison == "SEC − none (normalize head)") & (d.metric == "R@1")].iloc[0]
    assert g["estimate"] == pytest.approx(2.1) and g["verdict"] == "reproduced"
    t = normlayer.normlayer_table(runs, pd.DataFrame(steps))
    assert t["grad_slope"].iloc[0].startswith("-0.975")


def test_pilot_table_choice_rule():
    pilot = pd.DataFrame([
        dict(optimizer="adam", lr=3e-4, status="done", **{"R@1": 50.0}),
        dict(optimizer="adam", lr=1e-3, status="done", **{"R@1": 55.0}),
        dict(optimizer="adam", lr=3e-3, status="failed", **{"R@1": np.nan}),
        dict(optimizer="sgd", lr=0.01, status="done", **{"R@1": 40.0}),
        dict(optimizer="sgd", lr=0.1, status="done", **{"R@1": 40.0}),     # tie: the smaller rate wins
        dict(optimizer="sgd", lr=0.01, status="done", eta=0.5, **{"R@1": 30.0}),   # the SGD + SEC arm
        dict(optimizer="sgd", lr=0.1, status="done", eta=0.5, **{"R@1": 35.0}),
    ]).assign(eta=lambda d: d["eta"].fillna(0.0))
    t = optim.pilot_table(pilot)
    assert list(t.loc[t.chosen, "lr"]) == [1e-3, 0.01, 0.1]
    assert list(t.loc[t.chosen, "arm"]) == ["none", "none", "sec"]


def test_class_association_against_formula():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(5), 8)
    norms = 3.0 + 0.5 * labels + rng.normal(0, 0.3, len(labels))
    tn = pd.DataFrame({"key": "a", "label": labels, "norm": norms})
    tn = pd.concat([tn, pd.DataFrame({"key": "b", "label": labels, "norm": np.repeat([1.0, 2, 3, 4, 5], 8)})])
    runs = pd.DataFrame({"key": ["a", "b"], "variant": ["none", "none"]})
    out = claims.class_association(runs, tn).set_index("key")
    grand = norms.mean()
    ssb = sum(8 * (norms[labels == k].mean() - grand) ** 2 for k in range(5))
    assert out.loc["a", "eta2"] == pytest.approx(ssb / ((norms - grand) ** 2).sum())
    assert out.loc["a", "eta2_chance"] == pytest.approx(4 / 39)
    assert out.loc["a", "p_value"] == pytest.approx(stats.f_oneway(*[norms[labels == k] for k in range(5)]).pvalue)
    assert out.loc["b", "eta2"] == pytest.approx(1.0)
    summ = claims.class_association_summary(out.reset_index().assign(loss="l"), by=["loss", "variant"])
    assert summ["runs with p < 0.05"].iloc[0] == 2
    # the chance value is the mean of η² over random relabelings
    perm = []
    for _ in range(3000):
        lp = rng.permutation(labels)
        m = np.array([norms[lp == k].mean() for k in range(5)])
        perm.append((8 * (m - grand) ** 2).sum() / ((norms - grand) ** 2).sum())
    assert np.mean(perm) == pytest.approx(4 / 39, rel=0.05)
    # difficulty: no per-sample hit stored -> NaN; with one -> the correlation
    assert claims.difficulty_association(runs, tn)["norm_hit_corr"].isna().all()
    hit = (norms < np.median(norms)).astype(float)
    tn2 = tn[tn.key == "a"].assign(**{"hit@1": hit})
    r = claims.difficulty_association(runs.iloc[:1], tn2)["norm_hit_corr"].iloc[0]
    assert r == pytest.approx(np.corrcoef(norms, hit)[0, 1])


def test_tracked_stats():
    tr = pd.DataFrame([dict(key="k", step=st, sample=i, norm=(1 + i) * (1 + st / 10)) for st in (0, 10, 20)
                       for i in range(3)])
    runs = pd.DataFrame({"key": ["k"]})
    t = instability.tracked_stats(runs, tr).iloc[0]
    assert t["growth"] == pytest.approx(3.0)
    n_end = np.array([3.0, 6.0, 9.0])
    assert t["cv_end"] == pytest.approx(n_end.std() / n_end.mean())
    assert t["max_rel_jump"] == pytest.approx(1.0)     # step 0 -> 10: every norm doubles


# -------------------------------------------------------------------------------------- claims


def sweep_frames(gains, l2_gain=None):
    """Hand-made frames for every chapter the claims read."""
    runs = main_runs(gains, l2_gain=l2_gain, vary_var=True)
    steps, tn, ev, tr = [], [], [], []
    rng = np.random.default_rng(1)
    for r in runs.itertuples():
        sec = r.variant == "sec"
        steps += [dict(key=r.key, step=i, dtheta_cv=(0.3 + 0.02 * r.seed if sec else 0.6 + 0.01 * r.seed), grad_norm_cv=0.5,
                       dtheta_mean=0.1, grad_slope=-0.9 - 0.1 * r.seed, grad_r2=0.8, mu=np.nan, norm_mean=1.0)
                  for i in range(1, 4)]
        lab = np.repeat(np.arange(4), 6)
        tn += [dict(key=r.key, label=l, norm=(1 + 0.3 * l if not sec else 1.0) + rng.normal(0, 0.05)) for l in lab]
        t90 = (60 + 2 * r.seed) if sec else 80 + r.seed        # SEC reaches 90% 20, 19, 18 steps sooner
        early = (0.5 if sec else 0.3) + 0.01 * r.seed          # fraction of the final R@1 at steps 10, 25, 50
        ev += [dict(key=r.key, step=0, **{"R@1": 0.0})]
        ev += [dict(key=r.key, step=st, **{"R@1": early * r._7}) for st in (10, 25, 50)]
        ev += [dict(key=r.key, step=t90, **{"R@1": 0.9 * r._7}), dict(key=r.key, step=100, **{"R@1": r._7})]
        tr += [dict(key=r.key, step=st, sample=i, norm=(1 + i) * (1 + st / (100 if sec else 10 + r.seed))) for st in (0, 50)
               for i in range(3)]
    steps, tn, ev, tr = map(pd.DataFrame, (steps, tn, ev, tr))
    main = frames(runs, steps=steps, test_norms=tn, evals=ev, tracked=tr)
    eta = pd.concat([runs[runs.variant == "none"].assign(eta=0.0), runs[runs.variant == "sec"].assign(eta=1.0)])
    mu = mu_runs()
    heads = []
    for h in ("paper", "normalize", "bn_before_norm", "weightnorm"):
        for v in ("none", "sec"):
            for s in SEEDS:
                g = {"bn_before_norm": -8.0}.get(h, 2.0)
                heads.append(dict(key=f"{h}{v}{s}", head=h, variant=v, seed=s, status="done",
                                  **{"R@1": 60 + s + (g + 0.2 * s) * (v == "sec"), "NMI": 50.0, "F1": 20.0,
                                     "train_norm_var": 1.0, "test_norm_var": 1.0}))
    heads = pd.DataFrame(heads)
    hsteps = pd.DataFrame([dict(key=k, step=i, grad_slope=-1.0 + 0.05 * sd, dtheta_cv=0.5, grad_norm_cv=0.5,
                                dtheta_mean=0.1) for k, sd in zip(heads["key"], heads["seed"]) for i in range(1, 4)])
    opt = pd.concat([runs[runs.variant != "l2reg"].assign(optimizer="adam"),
                     runs[runs.variant != "l2reg"].assign(optimizer="sgd",
                                                          **{"R@1": runs.loc[runs.variant != "l2reg", "R@1"] - 5})])
    return {"compare": main, "convergence": main, "instability": main, "eta": frames(eta), "mu": frames(mu),
            "tuned": frames(runs[runs.variant != "l2reg"]),
            "normlayer": frames(heads[heads["head"].isin(["paper", "normalize"])], steps=hsteps),
            "bnwn": frames(heads[heads["head"] != "normalize"], steps=hsteps), "optim": frames(opt, steps=steps),
            "beyond": frames(runs.iloc[0:0])}


MIXED_GAINS = dict(triplet=3.0, semihard=-2.0, npair=1.0, ms=2.0)   # SEC loses on semihard


def book_records(f):
    """Every claim's record on hand-made frames, each decided by its page (as the claims page collects them)."""
    ev = evidence.Evidence.from_frames(f)
    recs = [r for p in evidence.claim_pages() for r in evidence.page_records(p, ev)]
    return sorted(recs, key=lambda r: evidence.claim_sort_key(r.id))


@pytest.fixture(scope="module")
def mixed():
    f = sweep_frames(MIXED_GAINS, l2_gain={l: 0.5 for l in LOSSES})
    return f, claims.claims_frame(book_records(f))


def test_claims_verdicts_on_hand_made_frames(mixed):
    f, table = mixed
    t = table.set_index("claim")
    v = t["verdict"]
    ids = list(t.index)
    assert ids == sorted(ids, key=evidence.claim_sort_key) and len(ids) == len(set(ids))
    # C4a-d are the compare page's R@1 rows of SEC − none: Holm over exactly those four rows
    g = compare.sec_gain(f["compare"], variants=("sec",), metrics=("R@1",)).set_index("loss")
    for c, loss in zip("abcd", LOSSES):
        sized = report.refine(g.loc[loss, "verdict"], g.loc[loss, "ci_lo"], g.loc[loss, "ci_hi"], +1,
                              reference.paper_gain_values(loss=loss))      # the record sizes it against the paper
        assert t.loc[f"C4{c}", "p_adj"] == pytest.approx(g.loc[loss, "p_adj"]) and v[f"C4{c}"] == sized
        assert t.loc[f"C4{c}", "m"] == 4 and t.loc[f"C4{c}", "family"] == "compare page"
    four = g["p_value"].to_numpy(float)
    assert g["p_adj"].to_numpy(float) == pytest.approx(report.holm(four))
    assert t.loc["C4b", "estimate"] == pytest.approx(-2.0 + 0.3) and t.loc["C4b", "ci_hi"] < 0
    assert g.loc["triplet", "verdict"] == "reproduced" and t.loc["C4a", "n (counts)"] == "3 seeds"
    assert v["C4a"] in report.SIGNAL_WORDS and t.loc["C4a", "paper_size_text"].startswith("the paper's gains")
    # the primary test is a family of its own
    assert t.loc["C4v", "family"] == "primary test" and t.loc["C4v", "m"] == 1
    assert t.loc["C4v", "p_adj"] == pytest.approx(t.loc["C4v", "p_value"])
    # C1: CV = sqrt(var) / mean with the same mean 2.0, so log10 CV ratio = log10(var ratio) / 2
    runs = f["compare"].runs
    w = runs.pivot_table(index=["seed", "loss"], columns="variant", values="train_norm_var")
    c1 = (0.5 * np.log10(w["sec"] / w["none"])).groupby(level=0).mean()
    assert t.loc["C1", "estimate"] == pytest.approx(c1.mean()) and v["C1"] == "reproduced"
    assert v["Q5a"] == "reproduced"                      # BN + SEC hurts, as the rebuttal says
    assert t.loc["Q5a", "paper"] == f"{62.46 - 80.20:+.3g}"
    assert t.loc["Q7a", "n (counts)"] == "12 runs pooled across losses" and v["Q7b"] == "reproduced"
    assert v["Q10a"] == "reproduced" and v["Q10b"] == "reproduced"
    for q in ("Q8b", "Q10c"):                           # no evidence -> not testable, from the logic
        assert v[q] == "not testable offline" and t.loc[q, "note"]
    review_ids = [c.id for m in (ssl, npair, face, fairness) for c in m.CLAIMS]
    for q in review_ids:                                 # these frames hold no ssl/npair/face runs or profile
        assert v[q] == "not testable offline" and ("no frames for chapter" in t.loc[q, "note"]
                                                   or "profile" in t.loc[q, "note"])
    assert t.loc["Q6a", "same_runs_as"] == "C4" and t.loc["Q3", "same_runs_as"] == ""   # Q3 has its own runs
    # Q6a (SEC helps under Adam) is C4's runs: it carries C4's record, not a second verdict from the optim family
    for col in ("estimate", "ci_lo", "ci_hi", "p_adj", "m", "verdict"):
        assert t.loc["Q6a", col] == t.loc["C4", col], col
    assert t.loc["Q6a", "family"] == "compare page, as C4 (pooled, the paper's η)" != t.loc["Q6b", "family"]
    assert "decided as claim C4 on the compare page" in t.loc["Q6a", "note"]
    # variance reduction grows with the loss index, gains do not follow it (triplet 3, semihard -2, npair 1, ms 2)
    red = np.log10([4.0 * k / 0.04 for k in (1, 2, 3, 4)])
    assert t.loc["Q4", "estimate"] == pytest.approx(np.corrcoef(red, [3.0, -2.0, 1.0, 2.0])[0, 1], abs=0.05)
    assert v["Q2"] == "reproduced" and v["Q1"] in ("reproduced", "inconclusive")
    # C5 names the L2 weights it compares against, from the runs
    assert t.loc["C5", "note"].startswith("L2-reg weights: triplet")


def test_a_page_and_the_claims_page_show_one_verdict_per_claim(mixed):
    """Each page's own family table and its claims agree: a claim's record is that page's row."""
    f, table = mixed
    t = table.set_index("claim")
    ev = evidence.Evidence.from_frames(f)
    fam = mu_ch.page_family(ev)
    best = fam["best"].set_index("loss").loc["semihard"]
    assert t.loc["Q2", "verdict"] == best["verdict"] and t.loc["Q2", "p_adj"] == pytest.approx(best["p_adj"])
    inst = instability.page_family(ev).set_index("question")
    assert t.loc["Q7a", "verdict"] == inst.loc["slope", "verdict"]
    text = instability.page_reading(f["instability"].runs, f["instability"].steps, f["instability"].tracked,
                                    instability.page_family(ev))
    assert f"**{inst.loc['slope', 'verdict']}**" in text
    opt = optim.page_family(ev)["pooled"].set_index("optimizer")
    assert t.loc["Q6b", "verdict"] == opt.loc["sgd", "verdict"] and t.loc["Q6b", "m"] == opt.loc["sgd", "m"]


def test_q7a_needs_the_interval_to_hold_minus_one():
    """A negative slope whose interval excludes −1 is *not reproduced* on the instability page and as Q7a."""
    f = sweep_frames(MIXED_GAINS)
    steps = f["compare"].steps.assign(grad_slope=lambda d: -0.30 - 0.01 * d.groupby("key").ngroup())   # clearly not −1
    f["instability"] = frames(f["compare"].runs, steps=steps, tracked=f["compare"].tracked,
                              evals=f["compare"].evals, test_norms=f["compare"].test_norms)
    ev = evidence.Evidence.from_frames(f)
    row = instability.page_family(ev).set_index("question").loc["slope"]
    assert row["ci_hi"] < 0 and not (row["ci_lo"] <= -1 <= row["ci_hi"]) and row["verdict"] == "not reproduced"
    rec = {r.id: r for r in evidence.page_records("instability", ev)}["Q7a"]
    assert rec.verdict == "not reproduced"


def test_claims_all_losing():
    gains = dict(triplet=-3.0, semihard=-2.0, npair=-1.0, ms=-2.5)
    recs = {r.id: r for r in book_records(sweep_frames(gains))}
    assert {recs[c].verdict for c in ("C4", "C5")} == {"not reproduced"}
    assert recs["C4"].estimate == pytest.approx(np.mean([-3.0, -2.0, -1.0, -2.5]) + 0.3)
    html = claims.claims_html(claims.claims_frame([recs["C4"]]))
    assert 'id="claim-C4"' in html and 'data-verdict="not reproduced"' in html


def test_tally_counts_the_long_tier_only(mixed):
    _, table = mixed
    t = table.assign(tier=["decisive" if c.startswith("C") else "cpu" for c in table["claim"]])
    counts = claims.verdict_counts(t)
    long_rows = claims.counted(t)[claims.counted(t)["claim"].str.startswith("C")]
    assert sum(v for k, v in counts.items() if k != claims.QUICK_ONLY) == len(long_rows)
    assert counts[claims.QUICK_ONLY] == len(claims.counted(t)) - len(long_rows)
    s = claims.counts_sentence(t)
    assert s.startswith(f"Of {len(long_rows)} bodies of evidence on the decisive tier") and "quick-tier evidence only" in s
    assert "Q6a uses the same runs as C4" in s
    # the gpu tier counts as committed evidence beside the decisive tier, and the sentence names both; the retired
    # reference tier never counts
    both = t.assign(tier=["gpu" if c in ("C4", "C5") else tr for c, tr in zip(t["claim"], t["tier"])])
    assert claims.verdict_counts(both)[claims.QUICK_ONLY] == counts[claims.QUICK_ONLY]
    assert claims.counts_sentence(both).startswith(f"Of {len(long_rows)} bodies of evidence on the decisive and "
                                                   "gpu tiers")
    assert "Each page reads the decisive tier where it holds all of the page's runs" in claims.tier_sentence(both)
    retired = t.assign(tier=["reference" if c.startswith("C") else "cpu" for c in t["claim"]])
    assert claims.verdict_counts(retired)[claims.QUICK_ONLY] == len(claims.counted(t))
    html = claims.claims_html(t)
    assert '<a href="eta.html">eta</a>' in html and "data:text/csv;base64," in html and "<details>" in html


def _quick_beside(table):
    """``table`` read as a book whose decisive tier holds the paper's claims (C…) and whose review questions still
    read the quick tier."""
    return table.assign(tier=["decisive" if c.startswith("C") else "cpu" for c in table["claim"]])


def test_no_quick_tier_row_stands_in_the_scorecard_where_the_decisive_tier_is_committed(mixed):
    """Where the decisive tier is committed, the scorecard (its table, its figure's rows, its answer) holds only rows
    read from a long tier; the rows left out are named, with no number. A book with no committed tier shows every
    row it has."""
    import re
    t = _quick_beside(mixed[1])
    quick_ids = set(t.loc[t["tier"] == "cpu", "claim"])
    shown = claims.decided(t, decisive_present=True)
    assert set(shown["claim"]) == set(t["claim"]) - quick_ids and shown["tier"].map(claims.is_long_tier).all()
    html = claims.scorecard_html(shown)
    rows = re.findall(r'<tr id="[^"]+" data-claim="([^"]+)"[^>]*>(.*?)</tr>', html)
    assert {c for c, _ in rows} == set(shown["claim"]) and not quick_ids & {c for c, _ in rows}
    assert all(re.findall(r"<td>([^<]*)</td><td><a href", body) == ["decisive"] for _, body in rows)   # tier cell
    heads = dict(re.findall(r'<h3 class="scorecard-group">([^(]+) \(([^)]+)\)</h3>', html))    # as the answer counts
    qs = claims.questions(shown)
    for g, n in qs[~qs["beyond"]]["group"].value_counts().items():
        assert heads[g[0].upper() + g[1:]].split(",")[0] == str(n), (g, heads)
    if qs["beyond"].any():
        own = qs.loc[qs["beyond"], "group"].iloc[0]
        assert heads[own[0].upper() + own[1:]].endswith("and the meta-review’s question")
    said = claims.waiting_sentence(t, shown)
    assert all(i in said for i in quick_ids) and not re.search(r"\d\.\d", said)      # named, with no number
    assert claims.decided(t, decisive_present=False) is t and claims.waiting_sentence(t, t) == ""
    from sec_lib.runs.tier import has_tier
    if has_tier("decisive"):                                       # this checkout: decided by default
        assert claims.decided(t, "cpu")["claim"].tolist() == shown["claim"].tolist()
    for own in evidence.PIPELINE_PROFILES:                           # the smoke and benchmark books show their runs
        assert claims.decided(t, own) is t and not claims.decisive_stands_in(own)


def test_the_claims_page_answer_is_the_tally_in_plain_words(mixed):
    """The answer the claims page opens with: marked for the page checker (a tally, so no interval), each count
    computed here from the questions' groups and the counted rows' verdicts, with no claim id, tier or family name."""
    import re
    from sec_lib.site.pagecheck import jargon
    table = mixed[1].assign(tier="decisive")
    qs = claims.questions(table)
    html = claims.answer_html(qs, table)
    assert html.startswith('<div class="page-answer" data-interval="none">') and "data-verdict=" in html
    text = re.sub(r"<[^>]+>", "", html).replace("’", "'")
    groups = qs[~qs["beyond"]]["group"].value_counts()
    assert f"{int(groups.sum())} in all" in text
    for g, n in groups.items():
        assert f"{n} {claims.GROUP_WORDS[g][n != 1]}" in text, (g, n)
    counted = claims.counted(table)["verdict"].value_counts()
    assert f"over {int(counted.sum())} separate tests" in text
    for v, n in counted.items():
        assert f'<span data-verdict="{v}">{n} {v}</span>' in html, (v, n)
    assert jargon(text) == [] and "make book" not in text
    own = qs.loc[qs["beyond"], "group"]                              # the scorecard's groups count as the answer does
    assert len(own) == 1 and f"{own.iloc[0][0].upper() + own.iloc[0][1:]} ({groups.get(own.iloc[0], 0)}, and the " \
                             "meta-review’s question)</h3>" in claims.scorecard_html(table, qs)
    smoke = re.sub(r"<[^>]+>", "", claims.answer_html(qs, table, "smoke"))   # its own runs: every row counts
    assert f"over {int(counted.sum())} separate tests" in smoke and "this book’s own runs (profile smoke)" in smoke
    mine = mixed[1].assign(tier="smoke")
    assert re.sub(r"<[^>]+>", "", claims.answer_html(claims.questions(mine), mine, "smoke")) == smoke
    assert "No claim" in claims.answer_html(qs.iloc[:0], table.iloc[:0], "smoke")
    quick = claims.answer_html(claims.questions(_quick_beside(mixed[1])), _quick_beside(mixed[1]))
    n_quick = int((~claims.counted(_quick_beside(mixed[1]))["tier"].map(claims.is_long_tier)).sum())
    assert f"{n_quick} more have only the short runs <code>make book</code> trains behind them" in quick


def test_the_claims_page_opens_with_its_answer_then_the_figure_then_the_table():
    """notebooks/claims.ipynb: nothing a reader sees before the answer names a claim id, a tier or a family; the
    answer comes first, then the figure, the portability findings, the scorecard table and, below it, the rules and
    Holm's family rule; the page reads no tier of its own choosing (no quick-tier record), and links the glossary."""
    import json
    from pathlib import Path
    from sec_lib.site.pagecheck import jargon
    nb = json.loads((Path(__file__).resolve().parents[2] / "notebooks" / "claims.ipynb").read_text())
    cells = [("".join(c["source"]), c["cell_type"]) for c in nb["cells"]]
    where = {k: next(i for i, (s, _) in enumerate(cells) if k in s) for k in
             ("claims.answer_html", "claims_figure", "portability.findings", "claims.scorecard_html",
              "claims.rules_table", "family_rule_sentence", "glossary.md")}
    order = ["claims.answer_html", "claims_figure", "portability.findings", "claims.scorecard_html",
             "claims.rules_table", "family_rule_sentence"]
    assert [where[k] for k in order] == sorted(where[k] for k in order)
    before = " ".join(s for s, kind in cells[:where["claims.answer_html"]] if kind == "markdown")
    assert jargon(before) == [] and where["glossary.md"] < where["claims.rules_table"]
    assert 'claims.decided(every, P["profile"])' in cells[where["claims.answer_html"] - 1][0]
    assert not any("tier=" in s or "tier_agreement" in s for s, kind in cells if kind == "code")


def test_claim_definitions_are_data():
    defs = claims.claim_definitions()
    ids = list(defs["id"])
    assert len(ids) == len(set(ids))
    qs = {i[:2] for i in ids if i.startswith("Q")} | {i[:3] for i in ids if i.startswith("Q1")}
    assert {f"Q{k}" for k in range(1, 10)} <= qs and "Q10" in qs     # the ten questions of the review
    for p in evidence.claim_pages():                                    # each claim's page owns it
        assert all(c.page == p for c in evidence.page_claims(p)), p
    with pytest.raises(ValueError, match="expected_sign"):
        Claim(id="X", claim="x", estimate=lambda ev: {}, expected_sign=2, page="compare")
    with pytest.raises(KeyError, match="no frames"):
        evidence.Evidence.from_frames({}).frames("eta")
    assert set(claims.rules_table()["rule"]) >= set(report.VERDICTS)


def test_each_claims_estimate_is_named_by_code_a_reader_can_open():
    """The claims page names where each estimate is computed: a page family's row (its module and the row's columns)
    or a module-level function; never '<lambda>' or a generated name like 'row_SEC − none (normalize head)_R@1'."""
    import importlib
    from sec_lib.report.claims import estimate_source
    for p in evidence.claim_pages():
        for c in evidence.page_claims(p):
            where = estimate_source(c.estimate)
            assert "<" not in where and "row_" not in where, (c.id, where)
            module, _, rest = where.partition(": the row ")
            if rest:
                assert importlib.import_module(module) and rest.endswith(" of the page's family"), (c.id, where)
            else:
                mod, _, name = where.rpartition(".")
                assert callable(getattr(importlib.import_module(mod), name)), (c.id, where)
    assert estimate_source(compare.CLAIMS[0].estimate) == "sec_lib.chapters.compare: the row loss = triplet of the page's family"


def test_notebook_params_spec():
    for page in (eta_ch, mu_ch, bnwn, normlayer, optim, convergence, instability, claims):
        assert set(page.PARAMS) == {"profile"}
    from sec_lib.params import ParameterError, notebook_params
    assert notebook_params({"profile": "smoke"}, eta_ch.PARAMS) == {"profile": "smoke"}
    with pytest.raises(ParameterError, match="'cpu'"):
        notebook_params({"profile": "big"}, eta_ch.PARAMS)


# -------------------------------------------------------------------------------------- figures


def test_figures_build_from_hand_made_frames(mixed):
    f, table = mixed
    main = f["compare"]
    runs = main.runs
    figs = [
        rp.eta_figure(eta_ch.eta_summary(f["eta"].runs.assign(test_norm_var=1.0))),
        rp.mu_figure(mu_runs()),
        rp.convergence_figure(convergence.curve_band(runs, main.evals), convergence.reach_table(runs, main.evals)),
        rp.tracked_figure(runs, main.tracked),
        rp.slope_figure(instability.slope_curve(runs, main.steps)),
        rp.optim_figure(optim.optim_diffs(f["optim"].runs)),
        rp.balance_figure(common.run_step_means(f["optim"].runs, main.steps, ["dtheta_cv", "grad_norm_cv"])),
        rp.bnwn_figure(f["bnwn"].runs, bnwn.bnwn_table(f["bnwn"].runs)),
        rp.class_norm_figure(claims.class_association(runs, main.test_norms)),
        claims_fig.claims_figure(table),
    ]
    assert all(isinstance(x, Figure) and x.axes for x in figs)


def test_page_readings_are_computed_from_the_frames(mixed):
    """Each page's closing paragraph comes from its chapter and carries the numbers and verdicts of the
    frames it is given (the notebooks only display it)."""
    f, table = mixed
    main = f["compare"]
    runs = main.runs[main.runs["variant"].isin(["none", "sec"])]
    reach = convergence.reach_table(runs, main.evals)
    text = convergence.page_reading(reach)
    pooled = report.pooled_diff(reach, "variant", "none", "sec", "reach")
    assert f"{pooled['estimate']:+.1f}" in text and all(f"**{loss}**" in text for loss in LOSSES)
    assert "reproduced" in text                             # SEC reaches 90% 20 iterations sooner here
    text = instability.page_reading(runs, main.steps, main.tracked)
    assert text.count("**") == 6 and "−1" in text
    bn_text = bnwn.page_reading(f["bnwn"].runs)
    bn = bnwn.head_effect(f["bnwn"].runs, "bn_before_norm", -1)
    assert f"{bn['estimate']:+.2f} points (95% CI [{bn['ci_lo']:+.2f}, {bn['ci_hi']:+.2f}]" in bn_text
    assert "Holm-adjusted p" in bn_text and "could detect ≥" in bn_text and "n = 3 seeds" in bn_text
    nl = f["normlayer"].runs
    nl_text = normlayer.page_reading(nl, main.steps.iloc[0:0].assign(grad_slope=[]))
    assert "normalize − paper head" in nl_text and "no evidence" in nl_text   # no steps: the slope has no evidence
    text = optim.page_reading(optim.optim_family(f["optim"].runs))
    assert "**adam**" in text and "**sgd**" in text and "does the norm imbalance still hurt under Adam?" in text
    mu_r = mu_runs()
    text = mu_ch.page_reading(mu_r)
    assert "best μ = 0" in text and "picked after the fact" in text
    # 'not reproduced' by an interval wholly beyond the margin says which side is better
    row = {"ci_lo": -1.9, "ci_hi": -1.0, "margin": 0.5}
    assert "the running mean is worse than the batch mean by more than 0.5" in mu_ch._ema_direction(row)
    assert "the running mean is better" in mu_ch._ema_direction({**row, "ci_lo": 1.0, "ci_hi": 1.9})
    assert mu_ch._ema_direction({**row, "ci_lo": -0.4, "ci_hi": 0.3}) == ""
    assert mu_ch._ema_direction({**row, "ci_lo": -1.9, "ci_hi": 0.3}) == ""
    fam = mu_ch.mu_family(mu_r)
    ema_setting = fam["ema"]["comparison"].iloc[0].split(" − ")[0]
    per_loss = mu_ch._ema_per_loss(fam)
    rows = fam["diffs"][(fam["diffs"]["versus"] == ema_setting) & (fam["diffs"]["metric"] == "R@1")]
    assert len(rows) and all(f"{r.loss} {r.estimate:+.2f}" in per_loss for r in rows.itertuples())
    assert per_loss in text
    diff = claims.difficulty_association(main.runs, main.test_norms)
    assert claims.difficulty_sentence(diff).startswith("**Difficulty.**")
    summary = eta_ch.eta_summary(f["eta"].runs.assign(test_norm_var=1.0))
    eta_max, ratios = eta_ch.norm_var_ratios(summary)
    assert eta_max == 1.0 and set(ratios) == set(LOSSES)


def test_splice_early_joins_each_run_to_its_dense_prefix():
    ident = dict(dataset="glyphs", model="convnet", width=16, head="paper", embed_dim=64, optimizer="adam",
                 lr=3e-3, mu="batch", momentum=1.0, batch_size=60, image_size=32, device="cpu")
    runs, ev = [], []
    for v in ("none", "sec"):
        for s in (0, 1):
            full, pre = f"{v}{s}", f"{v}{s}-early"
            common_ = dict(ident, loss="ms", variant=v, eta=0.0 if v == "none" else 1.0, seed=s, status="done")
            runs += [dict(common_, key=full, iterations=100), dict(common_, key=pre, iterations=40)]
            ev += [dict(key=full, step=t, **{"R@1": t / 2}) for t in (0, 20, 40, 60, 80, 100)]
            ev += [dict(key=pre, step=t, **{"R@1": t / 2 + (0.25 if (v, s, t) == ("sec", 1, 20) else 0.0)})
                   for t in range(0, 41, 5)]
    # a full run without a prefix (seed 2) is left out, so that every curve has the same resolution
    runs.append(dict(ident, loss="ms", variant="none", eta=0.0, seed=2, status="done", key="none2", iterations=100))
    ev += [dict(key="none2", step=t, **{"R@1": 1.0}) for t in (0, 50, 100)]
    runs, ev = pd.DataFrame(runs), pd.DataFrame(ev)
    keep, spliced, check = convergence.splice_early(runs, ev)
    assert sorted(keep["key"]) == ["none0", "none1", "sec0", "sec1"]
    steps = spliced[spliced.key == "sec1"].sort_values("step")["step"].tolist()
    assert steps == [0, 5, 10, 15, 20, 25, 30, 35, 40, 60, 80, 100]
    c = check.set_index("key")
    assert c.loc["sec1", "shared_steps"] == "0, 20, 40" and c.loc["sec1", "max |ΔR@1|"] == pytest.approx(0.25)
    assert c.loc["none0", "max |ΔR@1|"] == 0.0 and c.loc["none0", "prefix_key"] == "none0-early"
    assert (c.loc["sec1", "prefix_last"], c.loc["sec1", "prefix_every"], c.loc["sec1", "own_every"]) == (40, 5, 20)
    text = convergence.prefix_sentence(check, spliced)
    assert "4 runs" in text and "to iteration 40" in text and "every 5 iterations there" in text
    assert "its own, every 20 iterations, after" in text
    assert "The retraced runs are exact prefixes: at the evaluations both made (0, 20, 40) R@1 differs by at most " \
           "0.25 points." in text
    # the training logs: the prefix of sec1 logs one different loss; a pair that shares only step 0 of its evaluations
    logs = pd.DataFrame([dict(key=k, step=t, loss_metric=1.0 / t + (0.5 if (k, t) == ("sec1-early", 30) else 0.0))
                         for k in runs["key"] for t in (10, 20, 30, 40, 60)])
    _, _, lc = convergence.splice_early(runs, ev, steps=logs)
    lc = lc.set_index("key")
    assert (lc.loc["sec1", "logged_steps"], lc.loc["sec1", "max |Δloss|"]) == (4, pytest.approx(0.5))
    assert lc.loc["none0", "max |Δloss|"] == 0.0
    t2 = convergence.prefix_sentence(lc.reset_index(), spliced)
    assert "their training losses differ by at most 0.5 at every step both logged up to the prefix's end (4 steps " \
           "a pair), and at the evaluations both made (0, 20, 40) R@1 differs by at most 0.25 points." in t2
    only0 = lc.reset_index().assign(shared_steps="0", **{"max |ΔR@1|": 0.0, "max |Δloss|": 0.0})
    assert convergence.prefix_sentence(only0, spliced).endswith(
        "agree exactly at every step both logged up to the prefix's end (4 steps a pair); their evaluations "
        "cannot check it, since the two share none but the untrained network's.")
    assert convergence.prefix_sentence(only0.drop(columns=["logged_steps", "max |Δloss|"]), spliced).endswith(
        "so these evaluations cannot show that the prefixes retrace their runs.")
    # how many runs cross 90% after the dense start (step 40): the reach is then interpolated across 20 iterations
    reach = convergence.reach_table(keep, spliced)
    late = int((reach["reach"] > 40).sum())
    assert late == 4 and convergence.resolution_sentence(reach, check).startswith(
        "4 of 4 runs reach 90% of their final R@1 after their dense start ends (iteration 40), where their "
        "evaluations are up to 20 iterations apart")
    early = reach.assign(reach=10.0)
    assert convergence.resolution_sentence(early, check).startswith("Every run reaches 90% of its final R@1 within "
                                                                    "its dense start")
    assert convergence.resolution_sentence(reach, None) == ""
    # without prefixes: unchanged
    plain = runs[~runs.key.str.endswith("-early")]
    r2, e2, c2 = convergence.splice_early(plain, ev)
    assert r2 is plain and e2 is ev and c2 is None and convergence.prefix_sentence(c2, e2) == ""


def test_convergence_chapter_trains_prefixes_only_where_the_profile_asks():
    from sec_lib.runs import experiments as ex
    from sec_lib.runs.store import run_key
    cpu = ex.get_profile("cpu")
    assert ex.convergence(cpu) == ex.main_table(cpu)
    smoke = ex.get_profile("smoke")
    extra = ex.convergence(smoke)[len(ex.main_table(smoke)):]
    assert len(extra) == len(ex.MAIN_LOSSES) * 2 * len(smoke.seeds)
    assert {(c.iterations, c.eval_every) for c in extra} == {(smoke.early_iterations, smoke.early_eval_every)}
    full = {run_key(c.replace(iterations=smoke.base["iterations"], eval_every=smoke.base["eval_every"])) for c in extra}
    assert full <= {run_key(c) for c in ex.main_table(smoke)}


def test_no_prefixes_when_the_run_is_not_longer_than_the_prefix():
    from dataclasses import replace
    from sec_lib.runs import experiments as ex
    ref = ex.get_profile("reference")
    short = replace(ref, base=dict(ref.base, iterations=ref.early_iterations))
    any_choice = ex.AnyChoice()            # the selection's stand-in (every choice 'exists')
    assert ex.convergence(short, any_choice) == ex.main_table(short, any_choice)
    long = replace(ref, base=dict(ref.base, iterations=5000))
    assert len(ex.convergence(long, any_choice)) == len(ex.main_table(long, any_choice)) + \
        len(ex.MAIN_LOSSES) * 2 * len(ref.seeds)


def test_the_slope_curve_of_runs_that_log_the_slope_every_k_steps_has_no_gaps():
    """The decisive tier logs the batch statistics every 20 steps: the rolling median runs over the rows that have
    the slope, so the curve is one line per group (not isolated dashes between rows without it), and its values are
    the per-run medians of neighbouring logged slopes, averaged over seeds; one wild batch does not move it."""
    steps, rows = [], []
    for seed in range(3):
        key = f"k{seed}"
        rows.append({"key": key, "loss": "ms", "variant": "none", "seed": seed})
        for s in range(1, 401):
            steps.append({"key": key, "step": s, "grad_slope": -1.0 - seed if s % 20 == 0 else math.nan})
    curve = instability.slope_curve(pd.DataFrame(rows), pd.DataFrame(steps))
    assert list(curve["step"]) == list(range(20, 401, 20))       # only the logged steps, every one of them
    assert curve["mean"].notna().all() and np.allclose(curve["mean"], -2.0)
    steps = pd.DataFrame(steps)
    steps.loc[(steps["key"] == "k0") & (steps["step"] == 200), "grad_slope"] = -250.0    # one degenerate batch
    curve = instability.slope_curve(pd.DataFrame(rows), steps).set_index("step")["mean"]
    assert np.allclose(curve, -2.0)


def test_the_slope_figure_spans_the_means_and_says_where_a_band_is_cut():
    """A few seeds whose batches hold few nonzero gradients give a band of ±100 around slopes near −1: the axis
    spans the means (with −1 and 0), and the panel whose band goes beyond it says so."""
    rows = []
    for loss, wide in (("triplet", False), ("ms", True)):
        for s in range(100, 1001, 100):
            half = 100.0 if (wide and s == 900) else 0.5
            rows.append({"loss": loss, "variant": "none", "step": s, "mean": -1.5, "ci_lo": -1.5 - half,
                         "ci_hi": -1.5 + half})
    fig = rp.slope_figure(pd.DataFrame(rows))
    lo, hi = fig.axes[0].get_ylim()
    assert -3.5 < lo < -2.0 and 0 <= hi < 2.0           # the means (−1.5), −1 and 0, and 1.5 beyond them
    titles = {ax.get_title().split("\n")[0]: ax.get_title() for ax in fig.axes}
    assert "cut" in titles["ms"] and "cut" not in titles["triplet"]
