"""Each review chapter's verdicts form ONE Holm family: on hand-made frames, the family size
``m`` is the number of the chapter's rows with a p-value, ``p_adj`` is :func:`sec_lib.report.holm` of
them, and every row carries its detectable effect and what its n counts."""
import numpy as np
import pandas as pd
import pytest

from sec_lib import report
from sec_lib.chapters import common
from sec_lib.chapters import mu as mu_ch

from test_review_pages import mu_runs


def assert_one_family(*tables, p_col="p_value"):
    rows = pd.concat([t[[p_col, "p_adj", "m", "mde", "n_counts", "verdict"]] for t in tables], ignore_index=True)
    ok = rows[p_col].notna()
    assert ok.sum() >= 2
    assert (rows["m"] == ok.sum()).all()
    assert rows.loc[ok, "p_adj"].to_numpy() == pytest.approx(report.holm(rows.loc[ok, p_col].to_numpy()))
    assert rows.loc[~ok, "p_adj"].isna().all()
    assert rows["n_counts"].isin(report.N_COUNTS).all()
    assert np.isfinite(rows.loc[ok, "mde"].astype(float)).all()
    return rows


def test_mu_page_is_one_family():
    runs = mu_runs()
    fam = mu_ch.mu_family(runs)
    diffs, best, ema = fam["diffs"], fam["best"], fam["ema"]
    assert len(diffs) == 12 and len(ema) == 1                      # 6 settings × 2 losses, + the EMA row
    rows = assert_one_family(diffs, ema)
    assert int(rows["m"].iloc[0]) == 13
    # the adjustment differs from a per-table one: Holm over the paired table alone gives smaller p
    alone = report.holm(diffs["p_value"].to_numpy())
    assert (diffs["p_adj"].to_numpy() >= alone - 1e-15).all() and (diffs["p_adj"].to_numpy() > alone).any()
    # n and detectable effect on every row, n counting seeds (the EMA row: seeds, each the mean over 2 losses)
    assert (diffs["n"] == 3).all() and (diffs["n_counts"] == "seeds").all()
    assert ema["n"].iloc[0] == 3 and ema["n_counts"].iloc[0] == "seeds" and ema["n_losses"].iloc[0] == 2
    d = diffs.iloc[0]
    sd = float(np.std(0.05 * np.arange(3), ddof=1))                 # ms / none: 3 + 0.05 s per seed
    m = int(rows["m"].iloc[0])                                        # detectable at the family's level, α/m
    assert d["estimate"] == pytest.approx(3.05) and d["mde"] == pytest.approx(
        report.min_detectable_effect(sd, 3, 0.05 / m), rel=1e-6)
    # the EMA rows test "no change", the others "the batch mean is better"
    assert set(diffs.loc[diffs["versus"].str.startswith("EMA"), "expected_sign"]) == {0}
    assert set(diffs.loc[~diffs["versus"].str.startswith("EMA"), "expected_sign"]) == {1}
    # each verdict is report.verdict with the family's adjusted p
    for r in pd.concat([diffs, ema]).itertuples(index=False):
        assert r.verdict == report.verdict(r.estimate, r.ci_lo, r.ci_hi, r.expected_sign, r.margin, n=r.n, p_adj=r.p_adj,
                                           p_eq_adj=r.p_eq_adj)
    # the best-μ = 0 rows repeat rows of the paired table: same numbers, not counted again
    assert list(best["best_zero"]) == ["zero η=0.005"] * 2
    for r in best.itertuples(index=False):
        twin = diffs[(diffs["loss"] == r.loss) & (diffs["versus"] == r.best_zero)].iloc[0]
        assert (r.estimate, r.p_adj, r.verdict, r.mde) == tuple(twin[["estimate", "p_adj", "verdict", "mde"]])
        assert r.best_zero in r.same_runs_as
    # the public functions return the family's rows
    pd.testing.assert_frame_equal(mu_ch.mu_diffs(runs), diffs)
    pd.testing.assert_frame_equal(mu_ch.mu_vs_best_zero(runs), best)


def test_mu_reading_shows_every_measure():
    runs = mu_runs()
    fam = mu_ch.mu_family(runs)
    text = mu_ch.page_reading(runs)
    e = fam["ema"].iloc[0]
    for r in fam["best"].itertuples(index=False):
        assert f"Holm-adjusted p = {r.p_adj:.2g} over 13 comparisons" in text
        assert f"could detect ≥ {r.mde:.2f}" in text and "n = 3 seeds" in text and f"**{r.verdict}**" in text
    assert f"{e['estimate']:+.2f} R@1 points (95% CI [{e['ci_lo']:+.2f}, {e['ci_hi']:+.2f}]" in text
    assert f"Holm-adjusted p = {e['p_adj']:.2g}" in text and "each the mean over 2 losses" in text
    assert "one Holm family of 13 comparisons" in text


def test_mu_family_zero_spread_ema_is_not_tested():
    runs = mu_runs()
    runs.loc[runs["setting"] == "batch mean", "R@1"] -= 0.05 * runs.loc[runs["setting"] == "batch mean", "seed"]
    fam = mu_ch.mu_family(runs)
    e = fam["ema"].iloc[0]             # EMA ρ=0.01 − batch mean = +0.1 on every seed: no spread, no test
    assert np.isnan(e["p_value"]) and np.isnan(e["p_adj"]) and e["verdict"] == "inconclusive"
    assert (fam["diffs"]["m"] == fam["diffs"]["p_value"].notna().sum()).all()


def test_one_family_checks_its_input():
    with pytest.raises(ValueError, match="lacks columns"):
        report.one_family(pd.DataFrame({"estimate": [1.0]}))
    with pytest.raises(ValueError, match="lacks columns"):         # one schema: no 'diff' / 'n_pairs' aliases
        report.one_family(pd.DataFrame({"diff": [1.0], "ci_lo": [0.5], "ci_hi": [1.5], "p_value": [0.01],
                                        "expected_sign": [1], "n_pairs": [3]}))
    a = pd.DataFrame({"estimate": [2.0, 0.1], "ci_lo": [1.0, -0.2], "ci_hi": [3.0, 0.4], "p_value": [0.01, 0.5],
                      "expected_sign": [1, 0], "n": [3, 3]})
    b = pd.DataFrame([common.verdict_row_of({"estimate": 1.0, "ci_lo": 0.5, "ci_hi": 1.5, "n": 5, "p_value": 0.02}, +1)])
    fa, fb = report.one_family(a, b, family="x")
    assert list(fa["p_adj"]) + list(fb["p_adj"]) == pytest.approx(list(report.holm([0.01, 0.5, 0.02])))
    assert (fa["m"] == 3).all() and fb["m"].iloc[0] == 3 and (fa["family"] == "x").all()
    assert list(fa["verdict"]) == ["reproduced", "reproduced"] and fb["verdict"].iloc[0] == "reproduced"


def normlayer_frames():
    rows, steps = [], []
    for h in ("paper", "normalize"):
        for v in ("none", "sec"):
            for s, e in zip((0, 1, 2), (0.0, 0.3, -0.3)):
                key = f"{h}{v}{s}"
                rows.append(dict(key=key, head=h, variant=v, seed=s, status="done",
                                 **{"R@1": 55 + e + (2.0 + 0.1 * s) * (v == "sec") + 0.01 * s * (h == "normalize"),
                                    "NMI": 50.0 + e + 0.1 * s * (v == "sec"), "train_norm_var": 1.0,
                                    "test_norm_var": 1.0}))
                steps += [dict(key=key, step=i, grad_slope=-1.0 + 0.01 * i + 0.02 * s + 0.01 * (v == "sec"))
                          for i in range(1, 5)]
    return pd.DataFrame(rows), pd.DataFrame(steps)


def test_normlayer_page_is_one_family():
    from sec_lib.chapters import normlayer
    runs, steps = normlayer_frames()
    fam = normlayer.normlayer_family(runs, steps)
    diffs, slope = fam["diffs"], fam["slope"]
    rows = assert_one_family(diffs, slope)
    m = int(diffs["p_value"].notna().sum()) + 1            # the NMI rows between heads have no spread: no test
    assert int(rows["m"].iloc[0]) == m and m < len(diffs) + 1
    # the slope: per seed the mean of the normalize head's two runs (n = seeds), mean over steps
    per_seed = [np.mean([-1.0 + 0.025 + 0.02 * s, -1.0 + 0.025 + 0.02 * s + 0.01]) for s in (0, 1, 2)]
    sl = slope.iloc[0]
    assert sl["estimate"] == pytest.approx(np.mean(per_seed)) and sl["n"] == 3 and sl["n_runs"] == 6
    assert sl["n_counts"] == "seeds" and sl["mde"] == pytest.approx(
        report.min_detectable_effect(np.std(per_seed, ddof=1), 3, 0.05 / m), rel=1e-6)
    assert sl["verdict"] == report.verdict(sl["estimate"], sl["ci_lo"], sl["ci_hi"], -1, n=3, p_adj=sl["p_adj"])
    text = normlayer.page_reading(runs, steps, fam)
    assert text.count(f"over {m} comparisons") == 3 and "n = 3 seeds" in text and "could detect ≥" in text
    with pytest.raises(ValueError, match="normlayer_family"):
        normlayer.page_reading(runs, steps, diffs)


def test_convergence_page_is_one_family():
    from sec_lib.chapters import convergence
    rows, ev = [], []
    for loss in ("triplet", "ms"):
        for v, t_hit in (("none", 60.0), ("sec", 30.0)):
            for s in (0, 1, 2):
                key = f"{loss}-{v}-{s}"
                rows.append(dict(key=key, loss=loss, variant=v, seed=s, status="done"))
                final = 50.0 + s + (0.5 * s if v == "sec" else 0.0)
                t90 = t_hit + (2 * s if v == "sec" else s) + (3 * s if loss == "ms" else 0)
                ev += [dict(key=key, step=0, **{"R@1": 0.0}), dict(key=key, step=10, **{"R@1": 0.2 * final + s}),
                       dict(key=key, step=t90, **{"R@1": 0.9 * final}), dict(key=key, step=100, **{"R@1": final})]
    runs, ev = pd.DataFrame(rows), pd.DataFrame(ev)
    reach = convergence.reach_table(runs, ev)
    early = convergence.early_table(runs, ev, fracs=(0.1,))
    fam = convergence.convergence_family(reach, early, fracs=(0.1,))
    diffs, pooled = fam["diffs"], fam["pooled"]
    assert_one_family(diffs, pooled)
    p = pooled.iloc[0]
    ref = report.pooled_diff(reach, "variant", "none", "sec", "reach")
    assert p["estimate"] == pytest.approx(ref["estimate"]) and p["p_value"] == pytest.approx(ref["p_value"])
    assert p["n"] == 3 and p["n_counts"] == "seeds" and p["n_losses"] == 2
    # the pooled verdict uses the family's adjusted p, not its raw p
    assert p["p_adj"] > p["p_value"]
    text = convergence.page_reading(reach, fam)
    assert f"Holm-adjusted p = {p['p_adj']:.2g} over {int(p['m'])} comparisons" in text
    assert "each the mean over 2 losses" in text and text.count("could detect ≥") == 3


def test_instability_page_is_one_family():
    from sec_lib.chapters import instability
    rows, steps, tracked = [], [], []
    for loss in ("triplet", "ms"):
        for v in ("none", "sec"):
            for s in (0, 1, 2):
                key = f"{loss}-{v}-{s}"
                rows.append(dict(key=key, loss=loss, variant=v, seed=s, status="done"))
                steps += [dict(key=key, step=i, grad_slope=-1.2 + 0.1 * s + 0.05 * (loss == "ms")) for i in (1, 2)]
                end = 1.0 + (0.2 + 0.05 * s if v == "none" else 0.0) * (1 + (loss == "ms"))
                tracked += [dict(key=key, step=st, sample=i, norm=(1 + 0.1 * i * (1 + s * (v == "none")))
                                 * (end if st else 1.0)) for st in (0, 10) for i in range(3)]
    runs = pd.DataFrame(rows)
    steps, tracked = pd.DataFrame(steps), pd.DataFrame(tracked)
    fam = instability.instability_family(runs, steps, tracked)
    assert list(fam["question"]) == ["slope", "growth", "cv_end"]
    assert_one_family(fam)
    r = fam.set_index("question")
    # slope and growth: one value per run without SEC (2 losses × 3 seeds), the CV change: per seed
    assert r.loc["slope", "n"] == 6 and r.loc["slope", "n_counts"] == "runs pooled across losses"
    assert r.loc["slope", "estimate"] == pytest.approx(np.mean([-1.2 + 0.1 * s + 0.05 * l for s in range(3) for l in (0, 1)]))
    assert r.loc["growth", "n"] == 6 and r.loc["cv_end", "n"] == 3 and r.loc["cv_end", "n_counts"] == "seeds"
    for q, sign in (("slope", -1), ("growth", 1), ("cv_end", -1)):
        x = r.loc[q]
        assert x["verdict"] == report.verdict(x["estimate"], x["ci_lo"], x["ci_hi"], sign, n=x["n"], p_adj=x["p_adj"])
    text = instability.page_reading(runs, steps, tracked, fam)
    assert text.count("could detect ≥") == 3 and text.count(f"over {int(r['m'].iloc[0])} comparisons") == 3
    assert "The interval contains −1" in text            # slope −1.075 [−1.2.., −0.9..]
    with pytest.raises(ValueError, match="instability_family"):
        instability.page_reading(runs, steps, tracked, {"x": 1})


def test_optim_page_is_one_family():
    from sec_lib.chapters import optim
    rows, steps = [], []
    for opt, gain in (("adam", 2.0), ("sgd", 0.5)):
        for loss in ("triplet", "ms"):
            for v in ("none", "sec"):
                for s, e in zip((0, 1, 2), (0.0, 0.6, -0.4)):
                    key = f"{opt}-{loss}-{v}-{s}"
                    rows.append(dict(key=key, optimizer=opt, loss=loss, variant=v, seed=s, status="done",
                                     **{"R@1": 50 + e + (gain + 0.3 * s) * (v == "sec")}))
                    steps += [dict(key=key, step=i, dtheta_cv=0.6 - (0.2 + 0.01 * s * i) * (v == "sec"),
                                   grad_norm_cv=0.5 + 0.02 * s * (v == "sec"), dtheta_mean=0.1) for i in (1, 2)]
    runs, steps = pd.DataFrame(rows), pd.DataFrame(steps)
    fam = optim.optim_family(runs, steps)
    diffs, pooled, bal = fam["diffs"], fam["pooled"], fam["balance"]
    assert (len(diffs), len(pooled), len(bal)) == (4, 2, 4)
    rows_ = assert_one_family(diffs, pooled, bal)
    assert int(rows_["m"].iloc[0]) == 10
    p = pooled.set_index("optimizer").loc["adam"]
    ref = report.pooled_diff(runs[runs.optimizer == "adam"], "variant", "none", "sec", "R@1")
    assert p["estimate"] == pytest.approx(ref["estimate"]) and p["n"] == 3 and p["n_counts"] == "seeds"
    assert p["verdict"] == report.verdict(p["estimate"], p["ci_lo"], p["ci_hi"], +1, 0.5, n=3, p_adj=p["p_adj"])
    assert (bal["expected_sign"] == -1).all()
    text = optim.page_reading(fam)
    assert text.count("could detect ≥") == 6 and "one Holm family of 10 comparisons" in text
    assert text.count("n = 3 seeds, each the mean over 2 losses") == 6
    # Adam's R@1 row is C4's runs: with C4's record the page states C4's verdict for it, named, and the rest as before
    from dataclasses import replace
    from sec_lib.report.claims import ClaimRecord
    c4 = ClaimRecord(id="C4", statement="SEC improves R@1 on average over the losses", page="compare",
                     href="compare.html", family="pooled, the paper's η", unit="pp", expected_sign=1, estimate=1.5,
                     ci_lo=0.1, ci_hi=2.9, n=3, n_counts="seeds", p_value=0.042, p_adj=0.042, m=1, mde=2.0,
                     verdict="reproduced")
    said = optim.page_reading(fam, c4)
    adam = next(line for line in said.splitlines() if line.startswith("- **adam**"))
    assert adam.startswith("- **adam**, decided on the compare page as claim C4 (the same runs; Holm family: pooled")
    assert "+1.50 R@1 points (95% CI [+0.10, +2.90]" in adam and "p = 0.042 (the only comparison of its family)" in adam
    assert adam.endswith("→ *SEC helps under adam*: **reproduced**.")
    assert "hurt under Adam?* Measured as the gain from removing it with SEC: **reproduced** (+1.50 points)" in said
    assert "Every other verdict on this page" in said and "(Adam's R@1 row among them, as declared)" in said
    assert [x for x in said.splitlines() if "**sgd**" in x] == [x for x in text.splitlines() if "**sgd**" in x]
    assert "inconclusive" in optim.page_reading(fam, replace(c4, verdict="inconclusive")).split("hurt under Adam?")[1]


def test_optim_page_leaves_a_failed_arm_out_and_says_so():
    """SGD with SEC diverges for npair (every seed): npair has no SGD row, is left out of SGD's averages (R@1 and
    balance, each seed over the same losses), its diverged steps are not averaged, and the page says which runs
    failed, at which setting and when."""
    from sec_lib.chapters import optim
    rows, steps = [], []
    losses = ("triplet", "npair", "ms")
    for opt, gain in (("adam", 2.0), ("sgd", 0.5)):
        for loss in losses:
            for v in ("none", "sec"):
                for s, e in zip((0, 1, 2), (0.0, 0.6, -0.4)):
                    key = f"{opt}-{loss}-{v}-{s}"
                    bad = opt == "sgd" and loss == "npair" and v == "sec"
                    rows.append(dict(key=key, optimizer=opt, loss=loss, variant=v, seed=s, lr=0.1, eta=1.0 * (v == "sec"),
                                     status="failed" if bad else "done",
                                     error=f"non-finite loss at step {10 + s}: metric=nan, sec=nan" if bad else None,
                                     **{"R@1": np.nan if bad else 50 + e + (gain + 0.3 * s) * (v == "sec")}))
                    steps += [dict(key=key, step=i, dtheta_cv=(9.0 if bad else 0.6 - (0.2 + 0.01 * s * i) * (v == "sec")),
                                   grad_norm_cv=0.5 + 0.02 * s * (v == "sec"), dtheta_mean=0.1) for i in (1, 2)]
    runs, steps = pd.DataFrame(rows), pd.DataFrame(steps)
    fam = optim.optim_family(runs, steps)
    diffs, pooled, bal = fam["diffs"], fam["pooled"], fam["balance"]
    assert ("sgd", "npair") not in set(zip(diffs["optimizer"], diffs["loss"])) and len(diffs) == 5
    p = pooled.set_index("optimizer")
    assert (p.loc["sgd", "n_losses"], p.loc["sgd", "left out"]) == (2, "npair")
    assert (p.loc["adam", "n_losses"], p.loc["adam", "left out"]) == (3, "")
    kept = runs[(runs.optimizer == "sgd") & (runs.loss != "npair")]
    assert p.loc["sgd", "estimate"] == pytest.approx(report.pooled_diff(kept, "variant", "none", "sec", "R@1")["estimate"])
    b = bal.set_index(["optimizer", "metric"])
    assert b.loc[("sgd", "dtheta_cv"), "left out"] == "npair"        # the diverged steps (9.0) are not in it
    assert b.loc[("sgd", "dtheta_cv"), "estimate"] == pytest.approx(-0.2 - 0.015 * 1)
    assert (optim.balance_means(runs, steps)["dtheta_cv"] < 1).all()
    t = optim.balance_table(runs, steps).set_index(["optimizer", "variant"])
    assert (t.loc[("sgd", "sec"), "runs"], t.loc[("sgd", "sec"), "failed"]) == (9, 3)
    assert not t.loc[("sgd", "sec"), "dtheta_cv"].startswith("9")
    s = optim.failures_sentence(runs)
    assert s.startswith("Runs that failed: sgd, npair with SEC (lr 0.1, η 1): 3 of 3 runs stopped with a non-finite "
                        "loss between steps 10 and 12.")
    assert optim.failures_sentence(runs[runs.status == "done"]) == "Every run of the chapter trained to its end."
    text = optim.page_reading(fam)
    assert "n = 3 seeds, each the mean over 2 losses; npair left out: a run failed" in text
    assert text.count("npair left out") == 3          # SGD's R@1 and its two balance rows


def test_eta_page_is_one_family():
    from sec_lib.chapters import eta as eta_ch
    rows = []
    gain = {0.0: 0.0, 0.01: 3.0, 0.1: 4.0, 1.0: -6.0}
    for loss in ("triplet", "ms"):
        for e, g in gain.items():
            for s in range(4):
                rows.append(dict(key=f"{loss}{e}{s}", loss=loss, eta=e, seed=s, status="done",
                                 **{"R@1": 50 + s + (g + 0.2 * s * (e > 0) + 0.1 * s * (loss == "ms"))},
                                 train_norm_var=1.0 / (1 + e), test_norm_var=1.0))
    runs = pd.DataFrame(rows)
    fam = eta_ch.eta_family(runs)
    diffs, grid = fam["diffs"], fam["grid"]
    assert (len(diffs), len(grid)) == (6, 3)
    rows_ = assert_one_family(diffs, grid)
    assert int(rows_["m"].iloc[0]) == 9
    assert (grid["n"] == 4).all() and (grid["n_counts"] == "seeds").all() and (diffs["n_counts"] == "seeds").all()
    # the page's family is larger than the grid's own (the claims page's Q9 reads the grid alone)
    alone = eta_ch.eta_grid_gains(runs)
    assert (grid["p_adj"].to_numpy() >= alone["p_adj"].to_numpy()).all() and (alone["m"] == 3).all()
    text = eta_ch.page_reading(eta_ch.eta_summary(runs), diffs, eta_ch.eta_robustness(runs), grid)
    assert "one Holm family of 9 comparisons" in text and text.count("could detect ≥") == 3
    assert "each on the η sweep's 4 seeds" in text and "(C4a–d)" in text and "the claim decides" in text
    assert "n = 4 seeds" in text and "(of these, Holm's adjustment over 9 comparisons keeps" in text
    with pytest.raises(ValueError, match="eta_family"):
        eta_ch.page_reading(eta_ch.eta_summary(runs), eta_ch.eta_diffs(runs), {}, alone)
    # the answer up front reads the same family: the grid's range of mean gains, its verdict, the per-loss counts
    answer = eta_ch.answer_sentence(fam)
    lo, hi = grid["estimate"].min(), grid["estimate"].max()
    assert f"between {lo:+.2f} and {hi:+.2f} points" in answer and "(2 of these 3 means above 0)" in answer
    assert f"**{eta_ch.range_verdict(grid)}**" in answer and "over the page's 9 comparisons" in answer
    n_rep = int((diffs["verdict"] == "reproduced").sum())
    assert f"Of the 6 per-loss rows (loss, η), reproduced: {n_rep}" in answer
    empty = {"grid": grid.iloc[:0], "diffs": diffs.iloc[:0]}
    assert "cannot be measured" in eta_ch.answer_sentence(empty)


def test_bnwn_page_is_one_family():
    from sec_lib.chapters import bnwn
    eff = {("paper", "sec"): 4.0, ("bn_before_norm", "sec"): -10.0, ("weightnorm", "sec"): 3.0}
    rows = []
    for h in ("nobn", "paper", "bn_before_norm", "weightnorm"):
        for v in ("none", "sec"):
            for s, e in zip((0, 1, 2), (0.0, 1.0, -0.5)):
                rows.append(dict(key=f"{h}{v}{s}", head=h, variant=v, seed=s, status="done",
                                 **{"R@1": 60 + e + eff.get((h, v), 0.0) + 0.2 * s * (v == "sec"),
                                    "NMI": 50.0 + 0.1 * s * (v == "sec"), "F1": 20.0, "train_norm_var": 1.0}))
    runs = pd.DataFrame(rows)
    fam = bnwn.bnwn_family(runs)
    assert len(fam) == 12
    rows_ = assert_one_family(fam)
    assert int(rows_["m"].iloc[0]) == 8                       # F1 does not move: no spread, no test
    signs = fam.drop_duplicates("head").set_index("head")["expected_sign"]
    assert signs["bn_before_norm"] == -1 and (signs.drop("bn_before_norm") == 1).all()
    bn = fam[(fam["head"] == "bn_before_norm") & (fam["metric"] == "R@1")].iloc[0]
    assert bn["estimate"] == pytest.approx(-9.8) and bn["verdict"] == "reproduced" and bn["n"] == 3
    text = bnwn.page_reading(runs, fam)
    assert text.count("over 8 comparisons") == 2 and text.count("could detect ≥") == 2
    assert "one Holm family of 8 comparisons" in text
    assert text.count(", which our interval") == 2              # the rebuttal's single run against our interval
    assert bnwn._rebuttal_side({"ci_lo": -0.15, "ci_hi": 0.38, "rebuttal_diff": -17.74}) == \
        ", which our interval excludes"
    assert bnwn._rebuttal_side({"ci_lo": -1.0, "ci_hi": 6.0, "rebuttal_diff": 5.59}) == ", which our interval includes"
    assert bnwn._rebuttal_side({"ci_lo": np.nan, "ci_hi": 6.0, "rebuttal_diff": 5.59}) == ""
    assert [bnwn._lower(0.187, 0.19), bnwn._lower(0.15, 0.19), bnwn._lower(0.25, 0.19)] == \
        ["about the same", "lower", "not lower"]


def test_fairness_page_is_one_family_and_its_bullets_show_every_measure():
    from sec_lib.chapters import fairness
    rng = np.random.default_rng(3)
    stats = pd.DataFrame([dict(loss=l, variant=v, seed=s, eta2_excess=(0.02 if v == "none" else 0.005) + rng.normal(0, 0.002),
                               difficulty_r=(-0.4 if v == "none" else -0.1) + rng.normal(0, 0.05),
                               hit_gap=10.0 + rng.normal(0, 0.2))
                          for l in ("a", "b") for v in ("none", "sec") for s in range(4)])
    rows = fairness.verdict_rows(stats)
    assert len(rows) == 5
    assert_one_family(rows)
    assert (rows["n"] == 4).all() and (rows["n_counts"] == "seeds").all()
    text = fairness.verdict(rows)
    assert text.count("could detect ≥") == 5 and text.count("n = 4 seeds, each the mean over the losses") == 5
    assert text.count(f"over {int(rows['m'].iloc[0])} comparisons") == 5
    # the opening puts each dependence against Cohen's small effect: 2% of the variance and r = −0.4 are above it
    opening = fairness.opening(rows)
    assert "at or above the 1% Cohen calls small" in opening and "|r| at or above the 0.1 Cohen calls small" in opening
    assert "tiny" not in opening
    small = rows.assign(estimate=rows["estimate"].where(rows["statistic"] != "eta2_excess", 0.002),
                        verdict="reproduced")
    assert "both dependences are tiny" in fairness.opening(small.assign(
        estimate=small["estimate"].where(small["statistic"] != "difficulty_r", -0.05)))
    assert "that dependence is tiny" in fairness.opening(small)
    assert fairness.size_words(0.0027, "eta2") == "0.27% of the variance, below the 1% Cohen calls small"
    assert fairness.size_words(-0.07, "r") == "|r| below the 0.1 Cohen calls small"
    with pytest.raises(ValueError, match="kind must be 'eta2' or 'r'"):
        fairness.size_words(0.1, "d")


def test_review_pages_sentences_show_every_measure():
    from sec_lib.chapters import face, review
    rows = []
    for loss, g in (("cosface", 3.0), ("arcface", 0.1)):
        for v in ("none", "sec"):
            for s, e in zip(range(3), (0.0, 0.5, -0.3)):
                rows.append(dict(key=f"{loss}{v}{s}", loss=loss, variant=v, seed=s, status="done", eta=0.5 * (v == "sec"),
                                 **{"R@1": 60 + e + (g + 0.1 * s) * (v == "sec")}))
    runs = pd.DataFrame(rows)
    fam = face.verdict_rows(runs)
    assert_one_family(fam)
    r = fam.set_index("loss")
    # arcface: +0.1 ± tiny, the whole interval inside the R@1 margin: a negligible effect
    assert r.loc["arcface", "margin"] == report.MARGINS["R@1"] and r.loc["arcface", "verdict"] == "not reproduced"
    text = face.verdict(runs)
    assert text.count("could detect ≥") == 2 and text.count("n = 3 seeds") == 2
    assert text.count("Holm-adjusted p") == 2 and "paired t-test" in text
    assert review.verdict_sentence(fam.iloc[0], "x", "y").startswith("x changes by +3.10 points (95% CI [")


def test_norms_page_is_one_family_and_its_closing_text_counts():
    from sec_lib.chapters import norms
    from test_review_pages import main_runs
    runs = main_runs(dict(triplet=3.0, semihard=-2.0, npair=1.0, ms=2.0), vary_var=True)
    red = norms.norm_reduction(runs)
    ok = red["p_value"].notna()
    assert ok.sum() >= 2 and red.loc[ok, "p_adj"].to_numpy() == pytest.approx(report.holm(red.loc[ok, "p_value"].to_numpy()))
    assert (red["n_counts"] == "seeds").all() and np.isfinite(red.loc[ok, "mde"]).all()
    corr = pd.DataFrame({"source": ["ours", "rebuttal"], "pearson_r": [0.3, -0.2], "n_losses": [4, 4]})
    per_run = pd.DataFrame({"slope_median": [-0.8, -0.9, 0.1]})
    text = norms.norms_verdict(red, corr, per_run)
    assert "with 4 losses neither settles" in text and "over all 3 runs is -0.80" in text
    assert "a description without a test" in text


def test_q1s_note_says_which_way_the_running_mean_differs(monkeypatch):
    """Q1 ('the batch mean works as well as a running mean') is not reproduced both when the running mean is better and
    when it is worse; its note says which, since the second favours the paper's choice."""
    from sec_lib.chapters import mu as mu_ch
    def row(lo, hi):
        return pd.DataFrame([{"comparison": "EMA ρ=0.01 − batch mean", "estimate": (lo + hi) / 2, "ci_lo": lo,
                              "ci_hi": hi, "n": 5, "p_value": 0.01, "p_adj": 0.01, "m": 3, "verdict": "not reproduced"}])
    for (lo, hi), said in (((-1.9, -1.0), "does worse"), ((1.0, 1.9), "does better"), ((-0.3, 0.2), None)):
        monkeypatch.setattr(mu_ch, "page_family", lambda ev, t=row(lo, hi): {"ema": t})
        note = mu_ch._est_ema(None)["note"]
        assert note.startswith("EMA ρ=0.01 − batch mean")
        assert (said in note) if said else note == "EMA ρ=0.01 − batch mean"


@pytest.mark.parametrize("centre, want", [(-2.0, "not reproduced"), (-1.1, "inconclusive")])
def test_q7a_reads_not_reproduced_only_when_its_test_against_minus_one_says_so(centre, want):
    """Q7a's 'not reproduced' (a negative slope, but not −1) rests on a test of slope = −1: scipy's one-sample t-test,
    times the family's m (Bonferroni). A slope whose interval just misses −1 but whose adjusted test does not reach
    α reads inconclusive."""
    from scipy import stats
    from sec_lib.chapters import instability
    spread = {-2.0: 0.3, -1.1: 0.15}[centre]   # -1.1: its interval ends at -1.012; p = 0.031, × m (2: no SEC runs) 0.062
    offsets = np.linspace(-1, 1, 8)
    rows, steps, tracked = [], [], []
    for i, o in enumerate(offsets):
        key = f"r{i}"
        rows.append(dict(key=key, loss="ms", variant="none", seed=i, status="done"))
        steps += [dict(key=key, step=st, grad_slope=centre + spread * o) for st in (1, 2)]
        tracked += [dict(key=key, step=st, sample=0, norm=1.0 + st * (1 + 0.1 * i)) for st in (0, 10)]
    fam = instability.instability_family(pd.DataFrame(rows), pd.DataFrame(steps), pd.DataFrame(tracked))
    r = fam.set_index("question").loc["slope"]
    x = centre + spread * offsets
    assert r["p_target"] == pytest.approx(stats.ttest_1samp(x, -1.0).pvalue)
    assert r["p_target_adj"] == pytest.approx(min(1.0, r["p_target"] * r["m"]))
    assert r["ci_hi"] < -1.0 and r["verdict"] == want
    assert (r["p_target_adj"] < 0.05) == (want == "not reproduced")
