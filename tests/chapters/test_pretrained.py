"""The pretrained page on hand-made frames: the regimes, the start-of-training norms, SEC − none fine-tuned
as its own Holm family, the regime interaction (checked against an independent computation) in its declared family,
the gradient-vs-norm slopes, the computed answer and its claim row."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sec_lib import report
from sec_lib.chapters import evidence
from sec_lib.chapters import pretrained as pt
from sec_lib.runs import experiments as ex
from sec_lib.runs.store import Frames

LOSSES = ex.MAIN_LOSSES
SEEDS = (0, 1, 2, 3)
#: SEC − none per (regime, loss): fine-tuned SEC gains 3 points on ms and 1 elsewhere, from scratch it loses 2.
SEC_GAIN = {("fine-tuned", l): (3.0 if l == "ms" else 1.0) for l in LOSSES} | {("from scratch", l): -2.0
                                                                                for l in LOSSES}
#: First-step batch norms per regime: (mean, std); the fine-tuned runs start 4x larger and twice as uneven.
START = {"fine-tuned": (8.0, 3.2), "from scratch": (2.0, 0.4)}
#: Gradient-vs-norm slope per regime.
SLOPE = {"fine-tuned": -1.5, "from scratch": -1.0}


def regime_frames(noise=0.2, seed=3, gains=None):
    gains = SEC_GAIN if gains is None else gains
    rng = np.random.default_rng(seed)
    rows, steps = [], []
    for regime in pt.REGIMES:
        for loss in LOSSES:
            for v in ex.VARIANTS:
                for s in SEEDS:
                    key = f"{regime}-{loss}-{v}-{s}"
                    gain = gains[(regime, loss)] if v == "sec" else 0.0
                    mean, std = START[regime]
                    rows.append({"key": key, "regime": regime, "loss": loss, "variant": v, "seed": s,
                                 "status": "done", "R@1": 60.0 + 10 * (regime == "fine-tuned") + gain
                                 + noise * rng.standard_normal(), "test_norm_mean": mean / 2,
                                 "test_norm_var": (std / 4) ** 2, "train_norm_mean": mean / 2,
                                 "train_norm_var": (std / 4) ** 2})
                    for step in (1, 2, 3, 4, 8):
                        steps.append({"key": key, "step": step, "norm_mean": mean if step == 1 else mean / 2,
                                      "norm_var": std ** 2 if step == 1 else (std / 4) ** 2,
                                      "grad_slope": SLOPE[regime] + (0.2 if step > 6 else 0.0)})
    return pd.DataFrame(rows), pd.DataFrame(steps)


def independent_interaction(runs, loss=None):
    """(mean, lo, hi, p) of the interaction over seeds, computed from scratch with numpy and scipy."""
    per_seed = []
    for s in SEEDS:
        vals = []
        for l in ([loss] if loss else LOSSES):
            def r1(regime, v):
                x = runs[(runs.regime == regime) & (runs.loss == l) & (runs.variant == v) & (runs.seed == s)]["R@1"]
                return float(x.iloc[0])
            vals.append((r1("fine-tuned", "sec") - r1("fine-tuned", "none"))
                        - (r1("from scratch", "sec") - r1("from scratch", "none")))
        per_seed.append(np.mean(vals))
    x = np.array(per_seed)
    h = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return x.mean(), x.mean() - h, x.mean() + h, stats.ttest_1samp(x, 0).pvalue


def test_runs_need_a_known_regime_and_variant():
    runs, _ = regime_frames()
    assert set(pt.regime_runs(runs)["regime"]) == set(pt.REGIMES)
    with pytest.raises(ValueError, match="regime .*'pretrained'.* valid: \\['fine-tuned', 'from scratch'\\]"):
        pt.regime_runs(runs.assign(regime="pretrained"))
    with pytest.raises(ValueError, match="variant .*'sec-ema'"):
        pt.regime_runs(runs.assign(variant="sec-ema"))
    with pytest.raises(KeyError, match="no fine-tuning arm"):
        pt.regime_runs(runs.iloc[:0])
    with pytest.raises(ValueError, match="lacks columns \\['regime'\\]"):
        pt.regime_runs(runs.drop(columns="regime"))


def test_the_start_of_training_norms_per_regime():
    runs, steps = regime_frames()
    start = pt.start_norms(pt.regime_runs(runs), steps.sample(frac=1, random_state=0))   # the first step, whatever order
    fine = start[start.regime == "fine-tuned"]
    assert (fine.start_norm_mean == 8.0).all() and fine.start_norm_var.to_numpy() == pytest.approx(3.2 ** 2)
    assert fine.start_norm_cv.to_numpy() == pytest.approx(0.4)
    c = pt.start_contrast(start)
    assert c["start_norm_mean"]["ratio"] == pytest.approx(4.0) and c["start_norm_cv"]["ratio"] == pytest.approx(2.0)
    assert c["start_norm_var"]["ratio"] == pytest.approx(64.0) and c["start_norm_mean"]["n"] == 48
    t = pt.start_table(start)
    assert list(t["regime"]) == list(pt.REGIMES) and list(t.columns[1:7]) == list(pt.START_METRICS)
    text = pt.start_sentence(start)
    assert "mean norm 8 against 2 (ratio 4" in text and "**larger** and **more uneven**" in text
    with pytest.raises(ValueError, match="steps lacks columns \\['norm_var'\\]"):
        pt.start_norms(runs, steps.drop(columns="norm_var"))


def test_sec_minus_none_fine_tuned_is_its_own_family_of_four():
    runs, _ = regime_frames()
    fam = pt.effect_family(runs)
    assert list(fam["loss"]) == list(LOSSES) and (fam["family"] == pt.FAMILY_EFFECT).all() and (fam["m"] == 4).all()
    ms = fam.set_index("loss").loc["ms"]
    assert ms["estimate"] == pytest.approx(3.0, abs=0.6) and ms["ci_lo"] > 0 and ms["p_adj"] < 0.05
    # a signal sized against the paper's Table 1 gains for ms, as every per-loss SEC − none row of the book
    from sec_lib.chapters.gains import paper_sizes
    assert ms["verdict"] == report.size_word(ms["ci_lo"], ms["ci_hi"], +1, paper_sizes("ms", "sec"))
    # Holm over the four rows' own p-values
    assert fam["p_adj"].to_numpy() == pytest.approx(report.holm(fam["p_value"].to_numpy()))
    eff = pt.effects(runs)
    assert list(eff["regime"].unique()) == list(pt.REGIMES) and set(eff["comparison"]) == {"SEC − none",
                                                                                           "L2-reg − none"}
    row = eff[(eff.regime == "from scratch") & (eff.comparison == "SEC − none") & (eff.loss == "npair")].iloc[0]
    assert row["estimate"] == pytest.approx(-2.0, abs=0.6) and row["n"] == len(SEEDS)


def test_the_interaction_matches_an_independent_computation_in_its_declared_family():
    runs, _ = regime_frames()
    fam = pt.interaction_family(runs).set_index("loss")
    assert list(fam.index) == [*LOSSES, pt.POOLED] and (fam["family"] == pt.FAMILY_INTERACTION).all()
    assert (fam["m"] == 5).all() and (fam["expected_sign"] == 1).all()
    for loss in (*LOSSES, None):
        mean, lo, hi, p = independent_interaction(runs, loss)
        r = fam.loc[loss or pt.POOLED]
        assert (r["estimate"], r["ci_lo"], r["ci_hi"], r["p_value"]) == pytest.approx((mean, lo, hi, p))
    assert fam.loc["ms", "estimate"] == pytest.approx(5.0, abs=0.8)
    assert fam.loc[pt.POOLED, "SEC − none, fine-tuned"] == pytest.approx(1.5, abs=0.4)
    assert fam.loc[pt.POOLED, "SEC − none, from scratch"] == pytest.approx(-2.0, abs=0.4)
    assert fam["p_adj"].to_numpy() == pytest.approx(report.holm(fam["p_value"].to_numpy()))
    assert fam.loc[pt.POOLED, "verdict"] == "reproduced"
    text = pt.answer_sentence(pt.effect_family(runs), pt.interaction_family(runs))
    assert text.startswith("**Yes: SEC gains more when fine-tuning") and f"{fam.loc[pt.POOLED, 'estimate']:+.2f}" in text


def test_the_interaction_figure_draws_the_familys_interaction_and_both_regimes_around_zero():
    """The figure's rows: per loss and pooled, the interaction equals the family's row (estimate and interval), and
    each regime's SEC − none is the paired mean with its own interval, computed independently here."""
    runs, _ = regime_frames()
    rows = pt.interaction_rows(runs).set_index(["loss", "part"])
    fam = pt.interaction_family(runs).set_index("loss")
    for loss in (*LOSSES, pt.POOLED):
        r = rows.loc[(loss, "interaction")]
        assert (r["estimate"], r["ci_lo"], r["ci_hi"]) == pytest.approx(
            tuple(fam.loc[loss, ["estimate", "ci_lo", "ci_hi"]]))
    w = runs[runs.loss == "ms"].pivot_table(index="seed", columns=["regime", "variant"], values="R@1")
    d = (w[("fine-tuned", "sec")] - w[("fine-tuned", "none")]).to_numpy()
    half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    r = rows.loc[("ms", "SEC − none, fine-tuned")]
    assert (r["estimate"], r["ci_lo"], r["ci_hi"]) == pytest.approx((d.mean(), d.mean() - half, d.mean() + half))
    from sec_lib.figures import pretrained as pf
    fig = pf.interaction_figure(pt.interaction_rows(runs))
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    assert lo < min(0, rows["ci_lo"].min()) and hi > max(0, rows["ci_hi"].max())     # fits the intervals and 0
    assert [t.get_text() for t in ax.get_yticklabels()] == [*LOSSES, pt.POOLED]
    assert len(fig.legends[0].get_texts()) == 3


def test_no_interaction_reads_as_no_detectable_change():
    gains = {k: (1.0 if k[1] == "ms" else 0.0) for k in SEC_GAIN}        # the same effect in both regimes
    runs, _ = regime_frames(noise=1.0, seed=11, gains=gains)
    fam = pt.interaction_family(runs)
    assert fam.set_index("loss").loc[pt.POOLED, "verdict"] != "reproduced"
    assert pt.answer_sentence(pt.effect_family(runs), fam).startswith("**Not detectably")
    # a seed missing one run of a loss leaves that seed out of that loss (and of the mean over the losses)
    short = runs[~((runs.seed == 3) & (runs.loss == "ms") & (runs.regime == "from scratch") & (runs.variant == "sec"))]
    f2 = pt.interaction_family(short).set_index("loss")
    assert f2.loc["ms", "n"] == 3 and f2.loc["triplet", "n"] == 4 and f2.loc[pt.POOLED, "n"] == 4


def test_the_relative_sec_arm_is_shown_beside_the_others_but_outside_both_families():
    """The decisive tier's fourth arm (relative SEC): accepted, its own descriptive rows in both regimes (after
    L2-reg and SEC), and neither declared family changes."""
    runs, steps = regime_frames()
    rel = runs[runs.variant == "sec"].assign(variant="sec-relative", key=lambda d: d["key"] + "-rel")
    rel = rel.assign(**{"R@1": rel["R@1"] + 0.75})          # relative SEC: 0.75 above SEC in every run
    both = pd.concat([runs, rel], ignore_index=True)
    assert set(pt.regime_runs(both)["variant"]) == {*ex.VARIANTS, "sec-relative"}
    eff = pt.effects(both)
    assert list(eff[eff.regime == "fine-tuned"]["comparison"].unique()) == ["L2-reg − none", "SEC − none",
                                                                            "relative SEC − none"]
    sec = eff[eff.comparison == "SEC − none"].set_index(["regime", "loss"])["estimate"]
    r = eff[eff.comparison == "relative SEC − none"].set_index(["regime", "loss"])["estimate"]
    assert (r - sec).to_numpy() == pytest.approx(0.75)
    pd.testing.assert_frame_equal(pt.effect_family(both), pt.effect_family(runs))
    pd.testing.assert_frame_equal(pt.interaction_family(both), pt.interaction_family(runs))
    s = pt.slope_table(both, pd.concat([steps, steps[steps.key.isin(rel["key"].str[:-4])].assign(
        key=lambda d: d["key"] + "-rel")]))
    assert list(s["variant"]) == [*ex.VARIANTS, "sec-relative"] * 2


def test_trajectories_and_gradient_slopes_in_both_regimes():
    runs, steps = regime_frames()
    t = pt.trajectories(runs, steps)
    assert set(t.columns) >= {"regime", "loss", "variant", "step", *pt.TRAJECTORY_COLUMNS}
    row = t[(t.regime == "fine-tuned") & (t.loss == "ms") & (t.variant == "none") & (t.step == 1)].iloc[0]
    assert row["norm_cv"] == pytest.approx(0.4) and row["grad_slope"] == pytest.approx(-1.5)
    s = pt.slope_table(runs, steps)
    assert list(s["regime"]) == [r for r in pt.REGIMES for _ in ex.VARIANTS]
    assert s.loc[0, "slope (first quarter)"].startswith("-1.500") and s.loc[0, "slope (last quarter)"].startswith("-1.300")
    c = pt.slope_contrast(runs, steps)
    assert c["estimate"] == pytest.approx(-0.5) and c["n"] == 48
    assert "fine-tuned − from scratch -0.500" in pt.slope_sentence(runs, steps)
    with pytest.raises(ValueError, match="steps lacks columns \\['grad_slope'\\]"):
        pt.slope_table(runs, steps.drop(columns="grad_slope"))


def test_the_last_quarter_gain_per_regime_and_paired():
    """Each run's R@1 gain over its last quarter (end − the evaluation at 75%), per regime and paired."""
    runs, _ = regime_frames()
    runs = runs.assign(iterations=100)
    late = {"fine-tuned": 0.2, "from scratch": 0.8}
    evals = pd.DataFrame([{"key": k, "step": step, "R@1": 50.0 + (step >= 75) * 5.0 + (step == 100) * late[g]}
                          for k, g in zip(runs["key"], runs["regime"]) for step in (50, 75, 100)])
    g = pt.late_gains(runs, evals)
    assert len(g) == len(runs) and g.groupby("regime")["gain"].agg(["min", "max"]).to_numpy().ravel() == pytest.approx(
        [0.2, 0.2, 0.8, 0.8])
    text = pt.late_gain_sentence(runs, evals)
    assert "fine-tuned, a median of +0.20 points (IQR +0.20 to +0.20; 48 runs)" in text
    assert "from scratch, a median of +0.80 points" in text
    assert "fine-tuned − from scratch -0.60 [-0.60, -0.60] (48 pairs)" in text
    # a run without an evaluation at or before 75% of its length, or without evaluations at all, has no gain
    k0, k1 = runs["key"].iloc[0], runs["key"].iloc[1]
    g2 = pt.late_gains(runs, evals[~((evals.key == k0) & (evals.step <= 75)) & (evals.key != k1)]).set_index("key")
    assert np.isnan(g2.loc[k0, "gain"]) and np.isnan(g2.loc[k1, "gain"]) and g2["gain"].notna().sum() == len(runs) - 2
    with pytest.raises(ValueError, match="evals lacks columns \\['R@1'\\]"):
        pt.late_gains(runs, evals.drop(columns="R@1"))


def p1_records(ev):
    """P1's record among the page's (P1c, its follow-up on fresh seeds, is the page's other claim); P1c's reads
    "not testable offline" on frames that name no tier."""
    recs = evidence.page_records("pretrained", ev)
    assert [r.id for r in recs] == ["P1", "P1c"]
    assert recs[1].verdict == "not testable offline"
    return [r for r in recs if r.id == "P1"]


def test_the_claim_row_comes_from_the_interaction_family():
    runs, steps = regime_frames()
    e = pd.DataFrame()
    ev = evidence.Evidence.from_frames({"pretrained": Frames(runs, steps, e, e, e, e, e)})
    (rec,) = p1_records(ev)
    row = pt.interaction_family(runs).set_index("loss").loc[pt.POOLED]
    assert rec.id == "P1" and rec.page == "pretrained" and rec.family == pt.FAMILY_INTERACTION
    assert rec.estimate == pytest.approx(row["estimate"]) and rec.p_adj == pytest.approx(row["p_adj"])
    ms = pt.effect_family(runs).set_index("loss").loc["ms", "verdict"]
    assert rec.verdict == row["verdict"] and rec.m == 5 and f"ms ({ms})" in rec.note and rec.note.startswith("SEC − none fine-tuned is a gain for: ")
    assert "pretrained" in evidence.claim_pages()
    (none,) = p1_records(evidence.Evidence.from_frames({}))
    assert none.verdict == "not testable offline"


def test_the_page_reading_and_the_figure():
    runs, steps = regime_frames()
    start = pt.start_norms(pt.regime_runs(runs), steps)
    text = pt.page_reading(pt.effect_family(runs), pt.interaction_family(runs), start)
    assert text.count("- **Interaction") == 5 and text.count("- **SEC − none, fine-tuned") == 4
    assert "Where fine-tuning starts" in text
    from sec_lib.figures import pretrained as pf
    fig = pf.trajectory_figure(pt.trajectories(runs, steps))
    assert len(fig.axes) == 3 * len(LOSSES)
    with pytest.raises(ValueError, match="window"):
        pf.trajectory_figure(pt.trajectories(runs, steps), window=0)


def test_a_profile_without_the_arm_says_so_and_benchmark_books_note_the_page():
    assert pt.has_arm("cpu") and pt.has_arm("smoke") and not pt.has_arm("reference")
    assert "has no fine-tuning arm" in pt.design_sentence("gpu")
    with pytest.raises(Exception, match="'smoke', 'cpu'"):
        pt.has_arm("nope")
    from sec_lib.runs import benchmarks
    assert "ImageNet backbone" in benchmarks.page_note("cub", "pretrained")
    assert benchmarks.page_note("cpu", "pretrained") is None


def test_the_landing_page_names_the_page_once_its_claim_has_an_estimate():
    from sec_lib.chapters import home
    runs, steps = regime_frames()
    e = pd.DataFrame()
    (rec,) = p1_records(evidence.Evidence.from_frames({"pretrained": Frames(runs, steps, e, e, e, e, e)}))
    text = home.regime_sentence(rec)
    assert "most direct test of the paper's setting is [the pretrained page](pretrained.html)" in text and rec.evidence in text
    assert f"**{rec.verdict}**{home.inconclusive_words(rec)}." in text       # the reason where an interval misses 0
    (none,) = p1_records(evidence.Evidence.from_frames({}))
    assert home.regime_sentence(none) == "" == home.regime_sentence(None)
    assert home.regime_record("cub-smoke") is None                  # a benchmark book: the page is a note there


def test_an_interaction_inside_the_r1_margin_reads_as_no():
    """The R@1 rows of both families carry the declared equivalence margin (±0.5 points): an interaction
    shown to lie inside it is 'not reproduced' by TOST, and the answer says so instead of 'not detectably'."""
    gains = {k: 1.0 for k in SEC_GAIN}                      # the same effect in both regimes, little noise
    runs, _ = regime_frames(noise=0.05, seed=5, gains=gains)
    eff, fam = pt.effect_family(runs), pt.interaction_family(runs)
    assert (fam["margin"] == report.MARGINS["R@1"]).all() and (eff["margin"] == report.MARGINS["R@1"]).all()
    p = fam.set_index("loss").loc[pt.POOLED]
    assert -0.5 < p["ci_lo"] and p["ci_hi"] < 0.5 and p["verdict"] == "not reproduced"
    text = pt.answer_sentence(eff, fam)
    assert text.startswith("**No: averaged over the losses, the regime changes SEC's effect by no more than 0.5")
    assert "(not reproduced: no effect larger than 0.5 points; Holm" in text


def test_an_interaction_below_zero_reads_the_other_way_only_when_holm_decides_it():
    """SEC gains 1 point from scratch and none fine-tuned: the interval lies below 0 with Holm's p < 0.05, "the other
    way". The same interval with a Holm-adjusted p above 0.05 (an inconclusive row) is "not decided", never a
    change of the effect."""
    gains = {k: (0.0 if k[0] == "fine-tuned" else 1.0) for k in SEC_GAIN}
    runs, _ = regime_frames(noise=0.2, seed=7, gains=gains)
    eff, fam = pt.effect_family(runs), pt.interaction_family(runs)
    p = fam.set_index("loss").loc[pt.POOLED]
    assert p["ci_hi"] < 0 and p["p_adj"] < 0.05
    assert pt.answer_sentence(eff, fam).startswith("**The regime changes SEC's effect, the other way")
    undecided = fam.copy()
    undecided.loc[undecided["loss"] == pt.POOLED, ["p_adj", "verdict"]] = [0.077, "inconclusive"]
    text = pt.answer_sentence(eff, undecided)
    assert text.startswith("**Not decided: averaged over the losses, SEC's effect is smaller fine-tuned than from "
                           "scratch by its 95% interval, but not after the Holm adjustment over the 5 rows of its "
                           "family (adjusted p = 0.077): a hint, not a finding**")
    assert "(inconclusive; Holm over the 5 rows" in text
    above = undecided.copy()
    row = above["loss"] == pt.POOLED
    above.loc[row, ["estimate", "ci_lo", "ci_hi"]] = -above.loc[row, ["estimate", "ci_hi", "ci_lo"]].to_numpy()
    assert pt.answer_sentence(eff, above).startswith("**Not decided: averaged over the losses, SEC's effect is larger")


def test_the_quick_page_says_where_the_decisive_tiers_fine_tuning_stages_stand(tmp_path):
    """Before its plan the decisive tier names no fine-tuning runs; with a plan, the rate selection's first round
    (5 trunk rates × 4 head ratios × 3 seeds) is named and counted from its committed folder, and the fine-tuned
    runs wait for the chosen rates (an unnamed stage counts its committed runs alone)."""
    from sec_lib.runs import decisive, finetune, mainstage, tier
    from sec_lib.runs.store import ResultStore
    from sec_lib.runs.train import RunResult
    assert "holds 0 (named once the choices they need are made) runs" in pt.decisive_status(tmp_path)
    plan = mainstage.Plan("cosine", 9000, 5, 0.45, 0.4, {}, {l: 0.1 for l in LOSSES}, {l: 0.005 for l in LOSSES}, {})
    mainstage.write_plan(plan, decisive.plan_path(tmp_path))
    assert "holds 0 of 60 (first round) runs, its fine-tuned runs 0 (named once the choices they need" in pt.decisive_status(tmp_path)
    store = ResultStore(tmp_path / "runs")
    e = pd.DataFrame({"step": [1], "R@1": [80.0]})
    done = finetune.selection(decisive.profile(plan, {}, tmp_path))[:7]
    for c in done:
        store.save(RunResult(c, "done", {"R@1": 80.0}, e.iloc[:0], e.iloc[:0], e, e.iloc[:0], e.iloc[:0], e.iloc[:0]))
    tier.export(store, done, tier.tier_dir(decisive.TIER, tmp_path) / "finetune-selection")
    assert "holds 7 of 60 (first round) runs" in pt.decisive_status(tmp_path)
    assert all(c.pretrained and c.holdout_classes for c in done)


def test_the_chosen_trunk_rate_is_set_beside_the_from_scratch_rate():
    """Slower than from scratch reads as the paper's protocol; as fast or faster says the regime differs there; a
    flag is named; without one rate on each side there is nothing to say."""
    from types import SimpleNamespace as C
    slow = pt.rate_words([C(lr=1e-3)] * 2, [C(lr=3e-3)])
    assert slow == (" The chosen trunk rate is 0.33× the from-scratch runs' rate (0.003): fine-tuning moves the "
                    "pretrained trunk more slowly than training from scratch moves the network, as the paper's "
                    "protocol does.")
    fast = pt.rate_words([C(lr=1e-2)], [C(lr=3e-3)], ["at the high edge of its grid after 2 extensions"])
    assert fast.startswith(" The chosen trunk rate is 3.3× the from-scratch runs' rate (0.003) (flagged: at the "
                           "high edge of its grid after 2 extensions): a slower trunk did not pay")
    assert "the regime here is not the paper's" in fast
    assert pt.rate_words([], [C(lr=3e-3)]) == pt.rate_words([C(lr=1e-3), C(lr=3e-3)], [C(lr=3e-3)]) == ""


def test_the_answer_names_the_tier_it_reads():
    assert pt.answer_heading("cpu") == "**What the runs show (the quick tier).** " == pt.answer_heading("smoke")
    assert pt.answer_heading("decisive") == "**What the runs show (the decisive tier).** "
