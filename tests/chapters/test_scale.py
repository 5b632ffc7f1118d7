"""The scale page on hand-made frames: its arms, trajectories, the declared Holm family of four
contrasts, the mechanism it reads from them, the rebuttal's variances set beside our CVs, and its claim row."""
import math

import numpy as np
import pandas as pd
import pytest

from sec_lib import report
from sec_lib.chapters import evidence
from sec_lib.chapters import scale
from sec_lib.runs import experiments as ex

LOSSES = ex.MAIN_LOSSES
# per arm: R@1 gain over none, mean norm, std of the norms (so CV = std / mean)
ARMS = {"none": (0.0, 14.0, 2.8), "l2reg": (0.0, 0.6, 0.12), "sec": (2.0, 0.5, 0.06),
        "sec-relative": (2.0, 14.0, 1.4), "sec-fixed": (1.5, 14.0, 1.0), "cir": (2.0, 0.3, 0.05)}


def arm_frames(arms=ARMS, noise=0.3):
    rng = np.random.default_rng(7)
    rows, steps = [], []
    for loss in LOSSES:
        for v, (gain, mean, std) in arms.items():
            for s in range(3):
                key = f"{loss}-{v}-{s}"
                rows.append({"key": key, "loss": loss, "variant": v, "seed": s, "status": "done",
                             "R@1": 50.0 + gain + noise * rng.standard_normal(),
                             "train_norm_mean": mean, "train_norm_var": std ** 2,
                             "test_norm_mean": mean * 1.1, "test_norm_var": (1.1 * std) ** 2})
                for step in (1, 5, 10):
                    steps.append({"key": key, "step": step, "norm_mean": mean * (1 + 1 / step),
                                  "norm_var": std ** 2, "dtheta_mean": 0.1 / step if step != 5 else np.nan})
    return pd.DataFrame(rows), pd.DataFrame(steps)


def test_arms_are_named_and_unknown_variants_refused():
    runs, _ = arm_frames()
    r = scale.arm_runs(runs)
    assert list(dict.fromkeys(r["arm"])) == list(scale.ARM_LABELS.values())
    assert r.loc[r.variant == "none", "train_norm_cv"].iloc[0] == pytest.approx(0.2)
    with pytest.raises(ValueError, match="not arms of the scale page; valid: .*'sec-relative'"):
        scale.arm_runs(runs.assign(variant="sec-ema"))
    t = scale.arm_table(runs)
    assert list(t["arm"][:6]) == list(scale.ARM_LABELS.values()) and list(t["loss"].unique()) == list(LOSSES)
    cols = list(t.columns)
    assert cols.index("train_norm_cv") == cols.index("train_norm_var") + 1     # each variance with its CV beside it
    assert cols.index("test_norm_cv") == cols.index("test_norm_var") + 1


def test_trajectories_give_scale_cv_and_step_per_arm():
    runs, steps = arm_frames()
    t = scale.trajectories(runs, steps)
    assert set(t.columns) >= {"loss", "arm", "step", "norm_mean", "norm_cv", "dtheta_mean"}
    row = t[(t.loss == "ms") & (t.variant == "none") & (t.step == 1)].iloc[0]
    assert row["norm_mean"] == pytest.approx(28.0) and row["norm_cv"] == pytest.approx(2.8 / 28.0)
    assert np.isnan(t[(t.step == 5)]["dtheta_mean"]).all()
    with pytest.raises(ValueError, match="steps lacks columns"):
        scale.trajectories(runs, steps.drop(columns="dtheta_mean"))


def test_the_family_is_the_four_declared_contrasts_adjusted_together():
    runs, _ = arm_frames()
    fam = scale.scale_family(runs)
    assert list(fam["comparison"]) == [c[0] for c in scale.CONTRASTS]
    assert list(fam["mechanism"]) == ["equalize", "equalize", "shrink", "shrink"]
    ok = fam["p_value"].notna()
    assert (fam["m"] == ok.sum()).all() and (fam["family"] == scale.FAMILY).all()
    assert fam.loc[ok, "p_adj"].to_numpy() == pytest.approx(report.holm(fam.loc[ok, "p_value"].to_numpy()))
    f = fam.set_index("comparison")
    w = runs.pivot_table(index=["seed", "loss"], columns="variant", values="R@1")
    for name, a, b, _, _ in scale.CONTRASTS:      # paired on seed within each loss, averaged over the losses per seed
        per_seed = (w[b] - w[a]).groupby(level=0).mean()
        assert f.loc[name, "estimate"] == pytest.approx(per_seed.mean())
        assert f.loc[name, "ci_hi"] - f.loc[name, "estimate"] == pytest.approx(
            per_seed.std(ddof=1) / math.sqrt(3) * 4.302652729911275)
    assert f.loc["relative SEC − none", "estimate"] == pytest.approx(2.0, abs=0.5)
    assert (f["n"] == 3).all() and (f["n_losses"] == 4).all() and (f["n_counts"] == "seeds").all()
    # the descriptive scale and CV ratios beside each contrast
    assert f.loc["relative SEC − none", "log10 scale ratio"] == pytest.approx(0.0, abs=1e-12)
    assert f.loc["relative SEC − none", "log10 CV ratio"] == pytest.approx(math.log10(0.1 / 0.2))
    assert f.loc["L2-reg − none", "log10 scale ratio"] == pytest.approx(math.log10(0.6 / 14))
    for r in fam.itertuples(index=False):
        assert r.verdict == report.verdict(r.estimate, r.ci_lo, r.ci_hi, r.expected_sign, r.margin, n=r.n,
                                           p_adj=r.p_adj, p_eq_adj=r.p_eq_adj)
    assert f.loc["relative SEC − none", "verdict"] == "reproduced"


@pytest.mark.parametrize("arms, answer", [
    (ARMS, "equalizing"),
    ({**ARMS, "sec-relative": (0.0, 14.0, 1.4), "sec-fixed": (0.0, 14.0, 1.0), "l2reg": (2.0, 0.6, 0.12),
      "sec": (2.0, 0.5, 0.06)}, "shrinking"),
    ({**ARMS, "l2reg": (2.0, 0.6, 0.12), "sec": (4.0, 0.5, 0.06)}, "both"),
    ({k: (0.0, *v[1:]) for k, v in ARMS.items()}, "neither"),
])
def test_the_mechanism_is_read_from_the_verdicts(arms, answer):
    runs, _ = arm_frames(arms)
    fam = scale.scale_family(runs)
    m = scale.mechanism(fam)
    assert m["answer"] == answer
    text = scale.answer_sentence(fam)
    assert {"equalizing": "Equalizing moves R@1", "shrinking": "Shrinking moves R@1", "both": "Both mechanisms",
            "neither": "Neither mechanism"}[answer] in text
    assert "one Holm family of 4" in text and "relative SEC − none" in text


def test_a_significant_loss_is_named_as_against():
    runs, _ = arm_frames({**ARMS, "l2reg": (-3.0, 0.6, 0.12)})
    m = scale.mechanism(scale.scale_family(runs))
    assert m["against"] == ["L2-reg − none"] and not m["shrink"]


def test_the_variance_fall_splits_into_cv_and_scale():
    runs, _ = arm_frames()
    s = scale.sec_split(runs)["parts"]
    var = s["log10 variance ratio"]["estimate"]
    assert var == pytest.approx(math.log10(0.06 ** 2 / 2.8 ** 2))
    assert s["2·log10 CV ratio (equalizing)"]["estimate"] + s["2·log10 scale ratio (shrinking)"]["estimate"] == \
        pytest.approx(var)
    assert scale.sec_split(runs)["scale_share"] == pytest.approx(2 * math.log10(0.5 / 14) / var)
    t = scale.sec_split_table(runs)
    assert len(t) == 3 and (t["n (seeds)"] == 3).all()


def test_the_rebuttal_variances_beside_our_cvs():
    runs, _ = arm_frames()
    reb = pd.DataFrame({"loss": ["triplet", "ms", "tml"], "norm_var_none": [5.77, 1.68, 1.0],
                        "norm_var_sec": [0.02, 0.004, 0.5]})
    t = scale.rebuttal_cv_table(runs, reb).set_index("loss")
    assert t.loc["triplet", "rebuttal var ratio"] == pytest.approx(5.77 / 0.02)
    assert t.loc["ms", "our var none"] == pytest.approx(2.8 ** 2) and t.loc["ms", "our CV SEC"] == pytest.approx(0.12)
    assert t.loc["ms", "our CV none"] == pytest.approx(0.2)
    share = 2 * math.log10(0.5 / 14) / math.log10(0.06 ** 2 / 2.8 ** 2)
    assert t.loc["ms", "share of the fall that is scale"] == pytest.approx(share)
    assert np.isnan(t.loc["tml", "our var none"])             # a loss we did not run: the rebuttal's row alone
    text = scale.rebuttal_sentence(t.reset_index())
    assert f"Over the 2 losses whose variance fell, a median {share:.0%}" in text and "CV 0.2 → 0.12" in text
    # the committed copy of the rebuttal's numbers (sec_lib/data/paper/rebuttal_variance.csv), not ../shared
    full = scale.rebuttal_cv_table(runs)
    assert list(full["loss"]) == list(LOSSES) and full["rebuttal var none"].iloc[0] == pytest.approx(5.77)


def test_the_reading_shows_every_measure():
    runs, _ = arm_frames()
    fam = scale.scale_family(runs)
    text = scale.page_reading(runs, fam)
    for r in fam.itertuples(index=False):
        assert f"**{r.comparison}**" in text and f"**{r.verdict}**" in text
        if np.isfinite(r.p_adj):
            assert f"Holm-adjusted p = {r.p_adj:.2g} over 4 comparisons" in text
    assert "each the mean over 4 losses" in text and "n = 3 seeds" in text


def test_the_claim_row_comes_from_the_family():
    runs, steps = arm_frames()
    from sec_lib.runs.store import Frames
    e = pd.DataFrame()
    ev = evidence.Evidence.from_frames({"scale": Frames(runs, steps, e, e, e, e, e)})
    (rec,) = evidence.page_records("scale", ev)
    fam = scale.scale_family(runs).set_index("comparison")
    row = fam.loc["relative SEC − none"]
    assert rec.id == "S1" and rec.page == "scale" and rec.family == "scale page"
    assert rec.estimate == pytest.approx(row["estimate"]) and rec.p_adj == pytest.approx(row["p_adj"])
    assert rec.verdict == row["verdict"] == "reproduced" and rec.m == 4
    assert "equalizing" in rec.note
    assert "S1" in {c.id for c in evidence.page_claims("scale")} and "scale" in evidence.claim_pages()
    # without the chapter's frames the claim has no evidence (not an error)
    (none,) = evidence.page_records("scale", evidence.Evidence.from_frames({}))
    assert none.verdict == "not testable offline" and "no frames for chapter" in none.note


def test_a_variance_that_did_not_fall_has_no_scale_share():
    runs, _ = arm_frames({**ARMS, "sec": (2.0, 14.0, 3.0)})      # SEC raised the variance here
    t = scale.rebuttal_cv_table(runs)
    assert t["share of the fall that is scale"].isna().all()
    assert "for none of the losses" in scale.rebuttal_sentence(t)


def test_the_figures_draw_from_the_pages_tables():
    from sec_lib.figures import scale as scale_fig
    runs, steps = arm_frames()
    fig = scale_fig.trajectory_figure(scale.trajectories(runs, steps))
    assert len(fig.axes) == 3 * len(LOSSES) and fig.axes[0].get_yscale() == "log"
    assert [t.get_text() for t in fig.legends[0].get_texts()] == list(scale.ARM_LABELS.values())   # below the grid
    fig = scale_fig.arm_figure(scale.arm_runs(runs), list(scale.ARM_LABELS.values()))
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == list(scale.ARM_LABELS.values())


def test_the_pml_question_is_answered_on_the_runs_own_norms():
    """CIR / (mu^2 SEC) - 1 from a run's test-set norms equals PML's penalty (sec_lib.sec.center_invariant_penalty)
    over mu^2 times plain SEC on embeddings with those norms, and the moment identity."""
    import torch
    from sec_lib.sec import SphericalEmbeddingConstraint, center_invariant_penalty
    rng = np.random.default_rng(0)
    norms = {"k1": rng.lognormal(1.0, 0.3, 200), "k2": rng.lognormal(0.0, 0.05, 200)}
    runs = pd.DataFrame({"key": ["k1", "k2"], "arm": ["none", "SEC"], "loss": ["ms", "ms"]})
    tn = pd.concat([pd.DataFrame({"key": k, "norm": v}) for k, v in norms.items()], ignore_index=True)
    gaps = scale.cir_gaps(runs, tn).set_index("key")
    for k, n in norms.items():
        d = torch.randn(len(n), 8, dtype=torch.float64)
        f = d / d.norm(dim=1, keepdim=True) * torch.as_tensor(n).unsqueeze(1)
        mu = float(f.norm(dim=1).mean())
        want = float(center_invariant_penalty(f)) / (mu ** 2 * float(SphericalEmbeddingConstraint(eta=1.0)(f))) - 1
        assert gaps.loc[k, "gap"] == pytest.approx(want, rel=1e-6)
        assert gaps.loc[k, "gap"] == pytest.approx(gaps.loc[k, "gap_formula"], abs=1e-9)
    assert abs(gaps.loc["k2", "gap"]) < abs(gaps.loc["k1", "gap"])           # concentrated norms: closer to μ²·SEC
    t = scale.cir_table(gaps.reset_index())
    assert list(t["arm"]) == ["none", "SEC"] and (t["runs"] == 1).all()
    assert "not already in pytorch-metric-learning" in scale.cir_sentence(gaps.reset_index())


def test_a_null_contrast_inside_the_r1_margin_reads_as_no_effect_larger_than_it():
    """Every R@1 row of the book carries the declared equivalence margin (±0.5 points): a contrast whose
    interval lies inside it is 'not reproduced' by TOST (or 'negligible' where it also misses 0), and the answer says
    no effect larger than 0.5 points (or a change smaller than it)."""
    runs, _ = arm_frames({**ARMS, "sec-fixed": (0.0, 14.0, 1.0)}, noise=0.02)
    f = scale.scale_family(runs).set_index("comparison")
    assert (f["margin"] == report.MARGINS["R@1"]).all()
    row = f.loc["fixed-scale SEC − none"]
    assert -0.5 < row["ci_lo"] and row["ci_hi"] < 0.5 and row["p_eq_adj"] < 0.05
    if row["ci_lo"] > 0:                 # a signal too small to matter (the interval misses 0 by noise)
        assert row["verdict"] == "negligible"
        words = "(negligible: a change smaller than 0.5 points)"
    else:
        assert row["verdict"] == "not reproduced"
        words = "(not reproduced: no effect larger than 0.5 points)"
    assert "fixed-scale SEC − none" in scale.answer_sentence(f.reset_index())
    assert words in scale.answer_sentence(f.reset_index())


def test_the_cir_arm_is_its_own_family_of_two_checked_against_scipy():
    """PML's CIR arm: CIR − none (expected +1) and CIR − SEC (expected no change, ±0.5), paired
    on seed within each loss and averaged over the losses per seed, Holm over the two; absent arm -> empty family."""
    from scipy import stats
    runs, _ = arm_frames(noise=0.05)
    fam = scale.cir_family(runs).set_index("comparison")
    assert list(fam.index) == ["CIR − none", "CIR − SEC"] and (fam["family"] == scale.CIR_FAMILY).all()
    assert list(fam["expected_sign"]) == [1, 0] and (fam["margin"] == report.MARGINS["R@1"]).all()
    w = runs.pivot_table(index=["seed", "loss"], columns="variant", values="R@1")
    for name, base in (("CIR − none", "none"), ("CIR − SEC", "sec")):
        x = (w["cir"] - w[base]).groupby(level=0).mean().to_numpy()
        assert fam.loc[name, "estimate"] == pytest.approx(x.mean())
        assert fam.loc[name, "p_value"] == pytest.approx(stats.ttest_1samp(x, 0).pvalue)
    assert fam["p_adj"].to_numpy() == pytest.approx(report.holm(fam["p_value"].to_numpy()))
    assert fam.loc["CIR − none", "verdict"] == "reproduced"
    assert fam.loc["CIR − SEC", "verdict"] == "reproduced"          # the same gain: equivalent within ±0.5
    text = scale.cir_arm_sentence(fam.reset_index(), runs, "decisive")
    assert "CIR − SEC" in text and "(**reproduced**: within ±0.5 points)" in text and "behaves as SEC" in text
    # from the quick tier, each verdict is marked as that tier's only (the scorecard lists such results apart)
    quick = scale.cir_arm_sentence(fam.reset_index(), runs.assign(iterations=120), "cpu")
    assert quick.startswith("**PML's CIR as an arm (the quick tier only: 3 seeds of 120 iterations;")
    assert "not verdicts of the book" in quick
    assert "(quick tier only: **reproduced**: within ±0.5 points)" in quick and "(**reproduced**" not in quick
    five = runs[runs["variant"] != "cir"]
    assert scale.cir_family(five).empty and "has no CIR arm" in scale.cir_arm_sentence(scale.cir_family(five), five,
                                                                                      "decisive")
    assert scale.shown_arms(five) == [v for k, v in scale.ARM_LABELS.items() if k != "cir"]
    # a CIR arm that shrinks without the gain: CIR − SEC is decided the other way
    runs, _ = arm_frames({**ARMS, "cir": (-2.0, 0.3, 0.05)}, noise=0.05)
    f2 = scale.cir_family(runs).set_index("comparison")
    assert f2.loc["CIR − SEC", "verdict"] == "not reproduced"
    assert "does not behave as SEC" in scale.cir_arm_sentence(f2.reset_index(), runs, "cpu")


def test_the_landing_page_states_the_mechanism_once_its_claim_has_an_estimate():
    from sec_lib.chapters import home
    from sec_lib.runs.store import Frames
    runs, steps = arm_frames()
    e = pd.DataFrame()
    frames = Frames(runs, steps, e, e, e, e, e)
    (rec,) = evidence.page_records("scale", evidence.Evidence.from_frames({"scale": frames}))
    text = home.mechanism_sentence(rec)
    assert "[The scale page](scale.html)" in text and rec.evidence in text and f"**{rec.verdict}**" in text
    assert text.endswith(f"finds: {scale.mechanism(scale.scale_family(runs))['answer']} (equalizing contrasts "
                         "reproduced: relative SEC − none, fixed-scale SEC − none; shrinking: none).")
    (none,) = evidence.page_records("scale", evidence.Evidence.from_frames({}))
    assert home.mechanism_sentence(none) == "" == home.mechanism_sentence(None)
    assert home.mechanism_record("cub-smoke") is None                # a benchmark book: the page is a note there


def test_the_fixed_scale_control_is_read_per_loss_against_sec():
    """Per loss: fixed-scale − none in R@1 (paired on seed), its CV beside SEC's and none's, its scale over SEC's;
    the sentence says it equalized harder than SEC only where its CV is lower for every loss, and names the losses it
    cost more than a point."""
    runs, _ = arm_frames({**ARMS, "sec-fixed": (-3.0, 14.0, 0.1)}, noise=0.05)
    t = scale.arm_contrast_by_loss(runs, "sec-fixed").set_index("loss")
    w = runs.pivot_table(index=["loss", "seed"], columns="variant", values="R@1")
    for loss in LOSSES:
        assert t.loc[loss, "R@1 diff"] == pytest.approx((w["sec-fixed"] - w["none"]).xs(loss).mean())
    assert t["CV"].to_numpy() == pytest.approx(0.1 / 14.0) and t["CV SEC"].to_numpy() == pytest.approx(0.12)
    assert t["scale / SEC's"].to_numpy() == pytest.approx(28.0)
    text = scale.fixed_scale_sentence(runs)
    assert "equalized harder than SEC" in text and "cost more than 1 point on triplet, semihard, npair, ms" in text
    soft = scale.fixed_scale_sentence(arm_frames({**ARMS, "sec-fixed": (0.0, 14.0, 3.0)}, noise=0.05)[0])
    assert "harder" not in soft and "cost more" not in soft
    assert scale.fixed_scale_sentence(runs[runs["variant"] != "sec-fixed"]) == ""


def test_the_answer_names_the_contrast_that_does_not_gain_when_a_mechanism_is_mixed():
    """A mechanism that gains in one contrast only is not said to 'give a gain' unqualified: the answer names the
    contrast that gains and the one that does not."""
    runs, _ = arm_frames({**ARMS, "l2reg": (2.0, 0.6, 0.12), "sec": (4.0, 0.5, 0.06)})
    fam = scale.scale_family(runs)
    assert set(fam["verdict"]) == {"reproduced"}                 # every contrast gains: no qualifier
    assert scale.mixed_contrasts(fam, scale.mechanism(fam)) == ""
    assert scale.answer_sentence(fam).startswith("**Both mechanisms move R@1 here**: equalizing the norms and")
    words = {"fixed-scale SEC − none": "not reproduced", "SEC − relative SEC": "inconclusive"}
    mixed = fam.assign(verdict=[words.get(c, "reproduced") for c in fam["comparison"]])
    assert scale.mechanism(mixed)["answer"] == "both"
    assert scale.answer_sentence(mixed).startswith(
        "**Both mechanisms move R@1 here, though not in every contrast**: equalizing gains in relative SEC − none but "
        "not in fixed-scale SEC − none; shrinking gains in L2-reg − none but not in SEC − relative SEC. Equalizing")
    one = fam.assign(verdict=np.where(fam["comparison"] == "relative SEC − none", "reproduced", "inconclusive"))
    assert scale.answer_sentence(one).startswith("**Equalizing moves R@1 here; shrinking does not detectably**, and "
                                                 "only in one contrast: equalizing gains in relative SEC − none but "
                                                 "not in fixed-scale SEC − none")
