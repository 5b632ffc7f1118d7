"""sec_lib.chapters: the copied reference tables (against an independent csv read), the main table and
paired gains on hand-made frames (against hand-computed means, t-intervals and paired t-tests),
gains_vs_paper signs, and the train page's config (same store key as the main table's sweep)."""
import csv
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sec_lib import reference, report
from sec_lib.chapters import common, compare, norms
from sec_lib.chapters import data as data_page
from sec_lib.chapters import train as train_page
from sec_lib.params import ParameterError, notebook_params

T975 = {2: 4.302652729749464, 3: 3.182446305284263}     # Student t quantile 0.975 for df = 2, 3


def read_csv(name):
    with reference.paper_files().joinpath(name).open(newline="") as fh:
        return list(csv.DictReader(fh))


# ----------------------------------------------------------------------------------- the paper's tables


def test_paper_table_matches_the_csv_file():
    t = reference.paper_table()
    raw = read_csv("table1.csv") + read_csv("table1_sop_inshop.csv")
    assert len(t) == len(raw) == 48                       # 4 datasets x 4 losses x 3 variants
    assert set(t["dataset"]) == {"CUB", "Cars", "SOP", "InShop"}
    for row in raw:
        got = t[(t.dataset == row["dataset"]) & (t.loss == row["loss"]) & (t.variant == row["variant"])]
        assert len(got) == 1
        for col, val in row.items():
            if col in ("dataset", "loss", "variant") or val == "":
                continue
            assert got[col].iloc[0] == pytest.approx(float(val)), (row, col)
    assert t.attrs["source"].startswith("paper Table 1") and (t["source"] == t.attrs["source"]).all()


def test_paper_table_dataset_filter_and_known_cell():
    t = reference.paper_table(["CUB", "Cars"])
    assert t.shape[0] == 24
    assert list(t.columns) == ["dataset", "loss", "variant", "NMI", "F1", "R@1", "R@2", "R@4", "R@8", "source"]
    cell = t[(t.dataset == "CUB") & (t.loss == "triplet") & (t.variant == "sec")]["R@1"].iloc[0]
    assert cell == pytest.approx(60.82)                   # the paper's Table 1, CUB, triplet + SEC
    inshop = reference.paper_table("InShop")
    assert "NMI" not in inshop.columns and "R@50" in inshop.columns
    with pytest.raises(ValueError, match="valid values: CUB, Cars, SOP, InShop"):
        reference.paper_table("CUB200")


def test_paper_gains_are_variant_minus_none():
    g = reference.paper_gains(("CUB", "Cars"))
    assert len(g) == 2 * 4 * 2 * 6                       # datasets x losses x (sec, l2reg) x metrics
    raw = {(r["dataset"], r["loss"], r["variant"]): r for r in read_csv("table1.csv")}
    for r in g.itertuples():
        want = float(raw[(r.dataset, r.loss, r.variant)][r.metric]) - float(raw[(r.dataset, r.loss, "none")][r.metric])
        assert r.paper_gain == pytest.approx(want)
    tri = g[(g.dataset == "CUB") & (g.loss == "triplet") & (g.variant == "sec") & (g.metric == "R@1")]
    assert tri["paper_gain"].iloc[0] == pytest.approx(60.82 - 53.34)
    assert set(g["comparison"]) == {"SEC − none", "L2-reg − none"}


def test_the_rebuttals_two_semihard_variances_are_named_together():
    """The rebuttal's Table 2 and its variance answer give different norm variances for semihard on Cars; the note
    every such caption adds reads both from the copied files."""
    note = reference.rebuttal_variance_note()
    reg = {r["setting"]: r for r in read_csv("rebuttal_tables.csv") if r["table"] == "regularizers"
           and r["loss"] == "semihard" and r["setting"] in ("none", "sec")}
    var = next(r for r in read_csv("rebuttal_variance.csv") if r["loss"] == "semihard")
    assert (f"{float(reg['none']['mean_norm_var']):.3g} → {float(reg['sec']['mean_norm_var']):.3g} in its Table 2"
            in note)
    assert f"{float(var['norm_var_none']):.3g} → {float(var['norm_var_sec']):.3g} in its answer" in note
    assert note == "The rebuttal gives two norm variances for semihard on Cars without and with SEC: 7.63 → 3.2 in " \
                   "its Table 2 and 2.82 → 0.03 in its answer on variance reductions; it does not say why they " \
                   "differ, and both are shown as given."


def test_rebuttal_tables():
    reg = reference.rebuttal_table("regularizers")
    assert len(reg) == 6 and "Table 2" in reg.attrs["source"]
    assert "top1" not in reg.columns                      # empty for this table: dropped
    assert len(reference.rebuttal_table("bn_wn")) == 5
    assert list(reference.rebuttal_table("simclr")["top1"]) == [86.63, 87.00]
    with pytest.raises(ValueError, match="valid values"):
        reference.rebuttal_table("table9")
    v = reference.rebuttal_variance()
    assert list(v["loss"]) == ["triplet", "semihard", "npair", "ms"]
    raw = read_csv("rebuttal_variance.csv")
    for r, row in zip(v.itertuples(), raw):
        assert r.reduction == pytest.approx(float(row["norm_var_none"]) - float(row["norm_var_sec"]))
        assert r.ratio == pytest.approx(float(row["norm_var_none"]) / float(row["norm_var_sec"]))
    assert "rebuttal" in v.attrs["source"]


# ------------------------------------------------------------------------------- ours, hand-made runs

R1 = {  # loss -> variant -> R@1 per seed 0, 1, 2
    "triplet": {"none": [50.0, 52.0, 57.0], "l2reg": [51.0, 52.0, 57.5], "sec": [53.0, 56.0, 60.0]},
    "ms": {"none": [60.0, 61.0, 62.0], "l2reg": [60.0, 60.0, 63.0], "sec": [59.0, 60.5, 61.0]},
}
VAR = {"none": [4.0, 5.0, 6.0], "l2reg": [0.5, 0.6, 0.4], "sec": [0.1, 0.2, 0.15]}


def hand_runs(order=None):
    rows = []
    for loss, per in R1.items():
        for v, vals in per.items():
            for seed, r1 in enumerate(vals):
                rows.append(dict(key=f"{loss}-{v}-{seed}", status="done", loss=loss, variant=v, seed=seed,
                                 **{"R@1": r1, "NMI": r1 / 2}, test_norm_var=VAR[v][seed],
                                 train_norm_var=VAR[v][seed] * 2))
    df = pd.DataFrame(rows)
    return df.iloc[order].reset_index(drop=True) if order is not None else df


def hand_ci(x):
    x = np.asarray(x, float)
    h = T975[len(x) - 1] * x.std(ddof=1) / math.sqrt(len(x))
    return x.mean(), x.mean() - h, x.mean() + h


def test_main_table_means_and_t_intervals_by_hand():
    t = compare.main_table(hand_runs())
    assert list(t.columns) == ["loss", "variant", "metric", "mean", "ci_lo", "ci_hi", "n", "n_runs", "n_failed"]
    assert len(t) == 2 * 3 * 4                            # losses x variants x metrics present
    row = t[(t.loss == "triplet") & (t.variant == "none") & (t.metric == "R@1")].iloc[0]
    # mean 53, sd = sqrt(13), half-width = 4.3027 * sqrt(13/3)
    assert row["mean"] == pytest.approx(53.0)
    assert row.ci_hi - row["mean"] == pytest.approx(4.302652729749464 * math.sqrt(13 / 3))
    for loss, per in R1.items():
        for v, vals in per.items():
            r = t[(t.loss == loss) & (t.variant == v) & (t.metric == "R@1")].iloc[0]
            assert (r["mean"], r.ci_lo, r.ci_hi) == pytest.approx(hand_ci(vals))
            assert r.n == 3 and r.n_runs == 3
    # the book's order: paper's losses, then none / l2reg / sec
    assert list(dict.fromkeys(t["variant"])) == ["none", "l2reg", "sec"]


def test_main_table_failed_run_counts_in_no_mean():
    df = hand_runs()
    failed = (df.loss == "ms") & (df.variant == "sec") & (df.seed == 2)   # a diverged run: no metrics
    df.loc[failed, "status"] = "failed"
    df.loc[failed, ["R@1", "NMI", "test_norm_var", "train_norm_var"]] = np.nan
    t = compare.main_table(df)
    r = t[(t.loss == "ms") & (t.variant == "sec") & (t.metric == "R@1")].iloc[0]
    assert r.n == 2 and r.n_runs == 3 and r.n_failed == 1 and r["mean"] == pytest.approx(59.75)
    d = compare.main_table_display(t)
    cell = d[(d.loss == "ms") & (d.variant == "sec")].iloc[0]
    assert cell["seeds"] == 2 and cell["failed"] == 1
    assert list(d.attrs["sec_folded_columns"].values()) == [["test_norm_var", "train_norm_var"]]
    assert d[(d.loss == "ms") & (d.variant == "none")]["failed"].iloc[0] == 0
    tri = d[(d.loss == "triplet") & (d.variant == "none")].iloc[0]
    assert tri["R@1"] == f"53.00 ± {4.302652729749464 * math.sqrt(13 / 3):.2f}"
    assert tri["test_norm_var"] == f"5 ± {T975[2] * 1.0 / math.sqrt(3):.3g}"   # 3 significant digits


def test_sec_gain_paired_by_seed_against_hand_computation():
    shuffled = hand_runs(order=np.random.default_rng(0).permutation(18))   # pairing must use the seed
    g = compare.sec_gain(shuffled)
    assert set(g["comparison"]) == {"SEC − none", "L2-reg − none"}
    assert (g["test"] == common.TEST_NAME).all()
    r = g[(g.loss == "triplet") & (g.variant == "sec") & (g.metric == "R@1")].iloc[0]
    d = np.array(R1["triplet"]["sec"]) - np.array(R1["triplet"]["none"])    # 3, 4, 3
    mean, lo, hi = hand_ci(d)
    assert (r["estimate"], r.ci_lo, r.ci_hi) == pytest.approx((mean, lo, hi))
    tstat = d.mean() / (d.std(ddof=1) / math.sqrt(3))
    assert r.p_value == pytest.approx(2 * stats.t.sf(abs(tstat), df=2))
    # Holm runs within declared families: one per comparison and kind of measure (R@1, the secondary
    # metrics, the norm statistics), never the whole table at once
    assert set(g["family"]) == {f"{c}, {w}" for c in ("SEC − none", "L2-reg − none")
                                for w in ("R@1", "secondary metrics", "norm statistics")}
    for fam, sub in g.groupby("family"):
        ok = sub["p_value"].notna()
        assert sub.loc[ok, "p_adj"].to_numpy() == pytest.approx(report.holm(sub.loc[ok, "p_value"].to_numpy())), fam
        assert (sub["m"] == ok.sum()).all(), fam
    # SEC − none in R@1 is a family of the two losses: p_adj = Holm over 2, and the interval above 0 decides
    assert r.family == "SEC − none, R@1" and r.m == 2 and r.n == 3 and r.ci_lo > 0
    assert r.p_adj < 0.05 and r.verdict == "reproduced"
    # the detectable effect at the strictest level the family uses, α/m
    assert r.mde == pytest.approx(report.min_detectable_effect(d.std(ddof=1), 3, alpha=0.05 / 2)) and r.n_counts == "seeds"
    assert r.role == "primary" and (g.loc[g.metric == "NMI", "role"] == "secondary").all()
    alone = compare.sec_gain(shuffled, variants=("sec",), metrics=("R@1",))   # the same family on its own
    assert alone.set_index("loss")["p_adj"].to_dict() == pytest.approx(
        g[(g.variant == "sec") & (g.metric == "R@1")].set_index("loss")["p_adj"].to_dict())
    ms = g[(g.loss == "ms") & (g.variant == "sec") & (g.metric == "R@1")].iloc[0]
    # ms: the interval lies below 0; "not reproduced" answers to Holm as "reproduced" does
    assert ms["estimate"] == pytest.approx(-2.5 / 3) and ms.ci_hi < 0
    assert ms.verdict == ("not reproduced" if ms.p_adj < 0.05 else "inconclusive")
    ms_alone = compare.sec_gain(shuffled[shuffled.loss == "ms"], variants=("sec",), metrics=("R@1",)).iloc[0]
    assert ms_alone.p_adj == pytest.approx(ms_alone.p_value) and ms_alone.p_adj < 0.05
    assert ms_alone.verdict == "not reproduced"
    # norm variance: SEC should lower it, so a decrease is the paper's direction
    nv = g[(g.loss == "ms") & (g.variant == "sec") & (g.metric == "test_norm_var")].iloc[0]
    assert nv["estimate"] == pytest.approx(np.mean(VAR["sec"]) - np.mean(VAR["none"])) and nv.ci_hi < 0
    assert nv.verdict == ("reproduced" if nv.p_adj < 0.05 else "inconclusive")


def test_sec_gain_unpaired_seed_and_other_baseline():
    df = hand_runs()
    df = df[~((df.loss == "triplet") & (df.variant == "sec") & (df.seed == 0))]
    g = compare.sec_gain(df, variants=("sec",), metrics=("R@1",))
    r = g[g.loss == "triplet"].iloc[0]
    assert r.n == 2 and r.n_unpaired == 1 and r["estimate"] == pytest.approx(3.5)
    vs = compare.sec_gain(hand_runs(), variants=("sec",), baseline="l2reg", metrics=("R@1",))
    assert set(vs["comparison"]) == {"SEC − L2-reg"}
    want = np.mean(np.array(R1["triplet"]["sec"]) - np.array(R1["triplet"]["l2reg"]))
    assert vs[vs.loss == "triplet"]["estimate"].iloc[0] == pytest.approx(want)
    with pytest.raises(ValueError, match="baseline variant"):
        compare.sec_gain(df[df.variant != "none"])


def test_gains_vs_paper_signs_and_values():
    gains = compare.sec_gain(hand_runs())
    gvp = compare.gains_vs_paper(hand_runs(), metrics=("R@1",), gains=gains)
    assert len(gvp) == 2 * 2 * 2                          # datasets x our losses x comparisons
    pg = reference.paper_gains(("CUB", "Cars"), ("R@1",)).set_index(["dataset", "loss", "variant"])["paper_gain"]
    for r in gvp.itertuples():
        assert r.paper == pytest.approx(pg[(r.dataset, r.loss, r.variant)])
        assert r.same_sign == (np.sign(r.ours) == np.sign(r.paper))
    tri = gvp[(gvp.loss == "triplet") & (gvp.variant == "sec")]
    assert (tri["ours"] > 0).all() and tri["same_sign"].all()      # both improve
    ms = gvp[(gvp.loss == "ms") & (gvp.variant == "sec")]
    assert (ms["ours"] < 0).all() and not ms["same_sign"].any()    # the paper gains, we lose
    assert list(dict.fromkeys(gvp["dataset"])) == ["CUB", "Cars"]


def test_sentences_are_computed_from_the_numbers():
    gains = compare.sec_gain(hand_runs())
    s = compare.gain_sentences(gains, "R@1", "sec")
    # SEC − none in R@1 is one family of the two losses (Holm over 2): triplet's interval [1.9, 4.8] holds
    assert len(s) == 2 and "+3.33" in s[0] and "**reproduced**" in s[0] and "Holm-adjusted p" in s[0]
    # ms: differences -1, -0.5, -1 -> CI [-1.55, -0.12] entirely below zero, Holm-adjusted p 0.038: a finding
    assert "could detect effects of ≥" in s[0] and "**not reproduced**" in s[1]
    overall = compare.overall_sentence(gains, "R@1", "sec")
    assert "for 1 of 2 losses; of the others, 0 inconclusive and 1 not reproduced" in overall
    assert "For ms the difference is negative with a 95% interval entirely below zero" in overall
    # where the adjusted p does not reach 0.05 the same interval is a hint, not a finding
    hint = gains.assign(p_adj=np.where(gains["loss"] == "ms", 0.2, gains["p_adj"]))
    assert "For ms the 95% interval lies below zero, but the Holm-adjusted p does not reach 0.05" in \
        compare.overall_sentence(hint)
    ids = compare.gain_sentences(gains, "R@1", "sec", claims=compare.LOSS_CLAIMS)
    assert ids[0].endswith("**reproduced** (claim C4a).") and "(claim C4d)" in ids[1]
    good = gains.assign(verdict="reproduced")
    assert "all 2 losses" in compare.overall_sentence(good)
    bad = gains.assign(verdict="not reproduced")
    assert "not reproduced" in compare.overall_sentence(bad)
    para = compare.gains_paragraph(gains, "R@1", "sec", title="SEC − none, R@1")
    assert para == "**SEC − none, R@1:**\n\n" + "\n".join("- " + x for x in s) + "\n\n" + overall
    assert compare.gains_paragraph(gains, "R@1", "sec", closing=False) == "\n".join("- " + x for x in s)


def test_sec_gain_display_is_one_row_per_loss_and_comparison():
    d = compare.sec_gain_display(compare.sec_gain(hand_runs()))
    assert len(d) == 4 and {"R@1 (primary)", "NMI (secondary)", "adj. p (R@1)", "verdict (R@1)", "could detect",
                            "n"} <= set(d.columns)
    assert list(d.columns[2:5]) == ["R@1 (primary)", "adj. p (R@1)", "verdict (R@1)"]   # key columns first
    assert (d["n"] == "3 seeds").all()
    cell = d[(d.loss == "triplet") & (d.comparison == "SEC − none")]["R@1 (primary)"].iloc[0]
    mean, lo, hi = hand_ci([3.0, 4.0, 3.0])
    assert cell == f"{mean:+.2f} [{lo:+.2f}, {hi:+.2f}]"
    # on the page: key columns in the main table, the other metrics folded in tables of their own
    from sec_lib.figures.tables import FOLDED_ATTR, KEY_COLUMNS_ATTR, table_html
    folded = d.attrs[FOLDED_ATTR]
    assert d.attrs[KEY_COLUMNS_ATTR] == ["loss", "comparison"]
    assert [c for cols in folded.values() for c in cols] == [c for c in d.columns if c not in
                                                           ("loss", "comparison", "R@1 (primary)", "adj. p (R@1)",
                                                            "verdict (R@1)", "could detect", "n")]
    assert "NMI (secondary)" in next(iter(folded.values()))
    assert table_html(d, "g").count('<details class="sec-more">') == len(folded)


def test_sec_gain_display_says_whether_each_interval_includes_the_papers_gain():
    """The paper's-gain column: for each SEC or L2-reg − none row of a loss the paper reports, its gain on each of its
    datasets and whether our 95% interval includes it, by hand from the paper's Table 1."""
    gains = compare.sec_gain(hand_runs())
    paper = reference.paper_gains(["CUB", "Cars"], ("R@1",))
    d = compare.sec_gain_display(gains, paper=paper).set_index(["loss", "comparison"])
    col = "paper's gain (R@1)"
    assert col in d.columns and list(d.columns).index(col) == list(d.columns).index("could detect") + 1
    for (loss, comp), cell in d[col].items():
        g = gains[(gains.loss == loss) & (gains.comparison == comp) & (gains.metric == "R@1")].iloc[0]
        want = paper[(paper.loss == loss) & (paper.variant == g["variant"])].set_index("dataset")["paper_gain"]
        assert cell.startswith(f"CUB {want['CUB']:+.2f}, Cars {want['Cars']:+.2f}: ")
        inside = [ds for ds in ("CUB", "Cars") if g["ci_lo"] <= want[ds] <= g["ci_hi"]]
        assert cell.endswith({0: "both excluded", 2: "inside"}.get(len(inside), "excluded")), cell
    # triplet L2-reg − none: +0.50 [-0.74, +1.74] (diffs 1, 0, 0.5) holds CUB's +1.47, not Cars's +2.23; SEC − none
    # +3.33 [+1.90, +4.77] holds neither +7.48 nor +7.10; ms L2-reg − none +0.00 [-2.48, +2.48] holds both
    assert d.loc[("triplet", "L2-reg − none"), col] == "CUB +1.47, Cars +2.23: CUB inside, Cars excluded"
    assert d.loc[("triplet", "SEC − none"), col] == "CUB +7.48, Cars +7.10: both excluded"
    assert d.loc[("ms", "L2-reg − none"), col] == "CUB -0.47, Cars +0.75: inside"
    assert compare.paper_gain_cell(float("nan"), float("nan"), {"CUB": 1.0}) == "CUB +1.00: no interval"
    # rows the paper does not report (SEC − L2-reg) stay empty; a table with none of them has no such column
    vs_l2 = compare.sec_gain(hand_runs(), variants=("sec",), baseline="l2reg")
    assert col not in compare.sec_gain_display(vs_l2, paper=paper).columns
    assert col not in compare.sec_gain_display(gains).columns


def frames_with_norms():
    from types import SimpleNamespace
    runs = hand_runs()
    rng = np.random.default_rng(1)
    tn = pd.concat([pd.DataFrame({"key": k, "label": 0, "norm": 3 + rng.random(20) * (2 if "none" in k else 0.2)})
                    for k in runs["key"]], ignore_index=True)
    steps = pd.concat([pd.DataFrame({"key": k, "step": np.arange(1, 11), "grad_slope": -1.0 + 0.1 * np.arange(10),
                                     "grad_r2": 0.5}) for k in runs["key"]], ignore_index=True)
    return SimpleNamespace(runs=runs, test_norms=tn, steps=steps)


def test_variance_vs_gain_and_rank_correlation():
    F = frames_with_norms()
    vvg = norms.variance_vs_gain(F)
    ours = vvg[vvg.source == "ours"].set_index("loss")
    assert ours.loc["triplet", "reduction"] == pytest.approx(2 * (np.mean(VAR["none"]) - np.mean(VAR["sec"])))
    assert ours.loc["triplet", "gain"] == pytest.approx(10 / 3)
    reb = vvg[vvg.source == "rebuttal"].set_index("loss")
    assert len(reb) == 4
    assert reb.loc["triplet", "gain"] == pytest.approx(67.89 - 60.79)     # paper Table 1, Cars, R@1
    assert reb.loc["ms", "reduction"] == pytest.approx(1.68 - 0.004)
    assert reb.loc["ms", "log10_ratio"] == pytest.approx(np.log10(1.68 / 0.004))
    corr = norms.q4_table(F.runs).set_index("source")
    # rebuttal: log10 ratios of 5.77/0.02, 2.82/0.03, 1.76/0.13, 1.68/0.004 vs Cars gains 7.10, 5.02, 3.70, 1.66
    x = np.log10([5.77 / 0.02, 2.82 / 0.03, 1.76 / 0.13, 1.68 / 0.004])
    expected = stats.pearsonr(x, [67.89 - 60.79, 5.02, 3.70, 1.66]).statistic
    assert corr.loc["rebuttal", "pearson_r"] == pytest.approx(expected, abs=0.01)
    assert f"{corr.loc['rebuttal', 'pearson_r']:+.2f}" in norms.q4_sentence(corr.reset_index())


def test_q4_correlation_is_pearson_per_seed_averaged():
    rng = np.random.default_rng(0)
    rows = []
    for seed in range(3):
        for i, loss in enumerate(("triplet", "semihard", "npair", "ms")):
            for v in ("none", "sec"):
                var = 1.0 if v == "none" else 10.0 ** -(i + 1 + rng.random())
                r1 = 50.0 + (rng.normal(3 * i, 1) if v == "sec" else 0.0)
                rows.append({"loss": loss, "variant": v, "seed": seed, "train_norm_var": var, "R@1": r1})
    runs = pd.DataFrame(rows)
    q = norms.q4_correlation(runs)
    per = []
    for seed, sub in runs.groupby("seed"):
        w = sub.pivot(index="loss", columns="variant")
        per.append(stats.pearsonr(np.log10(w[("train_norm_var", "none")] / w[("train_norm_var", "sec")]),
                                  w[("R@1", "sec")] - w[("R@1", "none")]).statistic)
    z = np.arctanh(per)                                      # averaged on Fisher's z scale
    assert q["estimate"] == pytest.approx(np.tanh(np.mean(z)))
    half = stats.t.ppf(0.975, len(z) - 1) * np.std(z, ddof=1) / np.sqrt(len(z))
    assert [q["ci_lo"], q["ci_hi"]] == pytest.approx(list(np.tanh([np.mean(z) - half, np.mean(z) + half])))
    assert q["p_value"] == pytest.approx(stats.ttest_1samp(z, 0.0).pvalue)
    assert q["n"] == 3 and q["n_losses"] == 4 and -1 < q["ci_lo"] < q["estimate"] < q["ci_hi"] < 1
    with pytest.raises(ValueError, match="train_norm_var"):
        norms.q4_correlation(runs.drop(columns="train_norm_var"))


def test_norm_reduction_uses_scale_free_cv():
    F = frames_with_norms()
    red = norms.norm_reduction(F)
    cv = red[(red.metric == "test_norm_cv") & (red.variant == "sec") & (red.loss == "triplet")].iloc[0]
    # population std, like the stored test_norm_var (torch.var(unbiased=False)) whose CV it is
    per = F.test_norms.groupby("key")["norm"].agg(lambda x: np.std(x.to_numpy()) / x.mean())
    want = np.mean([per[f"triplet-sec-{s}"] - per[f"triplet-none-{s}"] for s in range(3)])
    assert cv["estimate"] == pytest.approx(want) and cv["estimate"] < 0


def test_grad_slopes_per_run():
    F = frames_with_norms()
    per = norms.grad_slopes_per_run(F)
    assert len(per) == 18
    assert per["slope_median"].iloc[0] == pytest.approx(-0.55)           # median of -1.0 ... -0.1
    assert per["frac_negative"].iloc[0] == pytest.approx(1.0)
    late = norms.grad_slopes_per_run(F, skip_fraction=0.5)
    assert late["n_steps"].iloc[0] == 5 and late["slope_median"].iloc[0] == pytest.approx(-0.3)
    with pytest.raises(ValueError, match="skip_fraction"):
        norms.grad_slopes_per_run(F, skip_fraction=1.0)


# ------------------------------------------------------------------------------------ notebook parameters


def test_notebook_params_specs():
    for page in (data_page, train_page, compare, norms):
        assert "profile" in page.PARAMS
    spec = train_page.PARAMS
    ok = dict(profile="smoke", dataset="glyphs", loss="ms", variant="sec", eta=None, mu=None, optimizer="adam",
              iterations=None, seed=0, device=None)
    assert notebook_params(dict(ok), spec)["eta"] is None
    assert notebook_params(dict(ok, mu="2.5"), spec)["mu"] == 2.5
    with pytest.raises(ParameterError, match="'variant'.*valid values"):
        notebook_params(dict(ok, variant="L2"), spec)
    with pytest.raises(ParameterError, match="or None"):
        notebook_params(dict(ok, eta=-1.0), spec)
    with pytest.raises(ParameterError, match="unknown parameter"):
        notebook_params(dict(ok, lr=0.1), spec)


def test_train_page_config_has_the_sweep_key(tmp_path, monkeypatch):
    """With default settings the train page's run is exactly the main table's run (same store key)."""
    from sec_lib.runs import experiments as ex
    from sec_lib.runs.store import ResultStore, run_key
    from sec_lib.runs.train import RunResult

    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path))
    store = ResultStore()
    p = ex.get_profile("smoke")
    empty = pd.DataFrame({"step": []})
    for i, cfg in enumerate(ex.lr_pilot(p)):             # a fake pilot: only its R@1 matters
        store.save(RunResult(cfg, "done", {"R@1": 10.0 + i}, empty, empty, empty, empty, empty, empty))
    sweep = {run_key(c) for c in ex.sweep_configs("compare", "smoke", store)}
    for loss in ex.MAIN_LOSSES:
        for v in ex.VARIANTS:
            cfg = train_page.train_page_config("smoke", loss=loss, variant=v, seed=0)
            assert run_key(cfg) in sweep, (loss, v)
            assert train_page.is_main_table_run(cfg, "smoke")
    changed = train_page.train_page_config("smoke", loss="ms", variant="sec", eta=0.1)
    assert changed.eta == 0.1 and run_key(changed) not in sweep
    toy = train_page.train_page_config("smoke", dataset="toy", loss="semihard", variant="l2reg")
    assert toy.dataset == "toy" and toy.mu == "zero" and toy.eta == ex.ETA_L2
    with pytest.raises(ParameterError, match="variant 'none'"):
        train_page.train_page_config("smoke", variant="none", eta=0.5)
    with pytest.raises(ParameterError, match="'dataset'"):
        train_page.train_page_config("smoke", dataset="cub")
    # root= reaches the pilot read: the store given wins over $SEC_RUNS_DIR
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "empty"))
    assert run_key(train_page.train_page_config("smoke", loss="ms", variant="sec", root=tmp_path)) in sweep
    with pytest.raises(KeyError, match="pilot.*python -m sec_lib.book run --profile smoke --only"):
        train_page.train_page_config("smoke")


# ------------------------------------------------------------------------------------------ data page


def test_data_page_tables_from_dataset_objects():
    import torch

    class SimpleNamespace:          # a minimal dataset object: attributes and len()
        def __init__(self, **kw):
            self.__dict__.update(kw)

        def __len__(self):
            return len(self.labels)

    tr = SimpleNamespace(labels=torch.tensor([0, 0, 1, 1, 1]), num_classes=2, x=torch.zeros(5, 1, 8, 8),
                         class_names=["a", "b"], font_index=torch.tensor([0, 1, 1, 0, 1]),
                         manifest={"fonts": [{"file": "f0.ttf", "name": "F0", "version": "1"},
                                             {"file": "f1.ttf", "name": "F1", "version": "2"}],
                                   "image_size": 8, "versions": {"pillow": "13"}})
    te = SimpleNamespace(labels=torch.tensor([0, 1, 2]), num_classes=3, x=torch.zeros(3, 1, 8, 8), class_names=["c", "d", "a"])
    s = data_page.data_summary(tr, te)
    assert s.to_dict("list") == {"split": ["train", "test"], "classes": [2, 3], "samples": [5, 3],
                                 "per_class_min": [2, 1], "per_class_max": [3, 1],
                                 "sample_shape": ["1 × 8 × 8", "1 × 8 × 8"]}
    assert list(data_page.font_table(tr)["images"]) == [2, 3]
    info = data_page.render_info(tr).set_index("setting")["value"]
    assert info["image_size"] == "8" and info["pillow version"] == "13"
    from sec_lib.runs import experiments as ex
    text = data_page.data_sentence(tr, te, ex.get_profile("smoke"))
    assert "2 training classes" in text and "1 classes appear in both" in text
    with pytest.raises(ValueError, match="manifest"):
        data_page.font_table(te)


def test_the_profile_table_shows_the_decisive_tiers_settings_for_the_reference_profile():
    from sec_lib.runs import decisive
    from sec_lib.runs import experiments as ex
    t = data_page.profile_table().set_index("profile")
    assert list(t.index) == list(ex.PROFILES)
    plan = decisive.read_plan()
    ref = t.loc["reference"]
    assert ref["tier"] == "decisive tier (data/reference/decisive/)"
    assert ref["iterations"] == plan.length and ref["schedule"] == plan.shape and ref["seeds"] == plan.seeds
    assert "–" not in str(ref["iterations"])                # not the retired tier's pilot range
    assert t.loc["cpu", "tier"] == "quick tier (make book)" and t.loc["cpu", "schedule"] == "constant"
    assert t.loc["gpu", "tier"].startswith("gpu tier") and t.loc["gpu", "schedule"] == "step"
    s = data_page.profile_sentence()
    assert f"**{len(ex.PROFILES)} profiles**" in s and "three sizes" not in s
    assert f"a {plan.shape} learning-rate schedule over {plan.length:,} iterations" in s
    assert "**decisive tier**" in s and "retired reference tier" in s and "takes its verdicts from the decisive tier" in s
    assert "`cpu` is the quick tier" in s and "is what the published book shows" not in s


def test_the_profile_table_before_the_decisive_plan_shows_the_reference_profiles_own_settings(monkeypatch):
    from sec_lib.runs import decisive
    from sec_lib.runs import experiments as ex

    def no_plan(root=None):
        raise KeyError("no plan")
    monkeypatch.setattr(decisive, "read_plan", no_plan)
    ref = data_page.profile_table().set_index("profile").loc["reference"]
    assert ref["tier"] == "decisive tier (not planned yet)"
    grid = ex.PROFILES["reference"].iteration_grid
    assert ref["iterations"] == f"{min(grid)}–{max(grid)}"
    assert "`reference` is the network and data of the decisive tier, which has no plan yet" in \
        data_page.profile_sentence()


# ------------------------------------------------------------------------------------------ train page


def test_run_readings_and_final_metrics_from_a_hand_made_run():
    from sec_lib.runs.train import RunResult, TrainConfig
    cfg = TrainConfig(loss="semihard", eta=0.5, iterations=20)
    st = pd.DataFrame({"step": np.arange(1, 21), "loss_metric": np.linspace(2.0, 1.0, 20), "loss_sec": 0.1,
                       "norm_mean": np.linspace(3.0, 5.0, 20), "norm_var": np.linspace(4.0, 1.0, 20),
                       "mu": np.linspace(3.0, 5.0, 20), "violations": 0.1, "grad_slope": -1.0,
                       "dtheta_mean": np.nan, "dtheta_std": np.nan, "dtheta_cv": np.nan})
    tracked = pd.DataFrame({"step": [0, 0, 20, 20], "sample": [0, 1, 0, 1], "norm": [1.0, 2.0, 3.0, 9.0]})
    evals = pd.DataFrame({"step": [0, 20], "R@1": [10.0, 42.5]})
    cos = pd.DataFrame({"kind": ["pos", "pos", "neg"], "cos": [0.9, 0.7, 0.1]})
    x = np.geomspace(1, 8, 10)
    gs = pd.DataFrame({"step": 1, "norm": x, "grad_norm": 2.0 / x})
    res = RunResult(cfg, "done", {"R@1": 42.5, "test_norm_var": 0.25}, st, tracked, evals,
                    pd.DataFrame(columns=["label", "norm"]), cos, gs, wall_s=12.0)
    rd = train_page.run_readings(res)
    assert "fell from 1.97 (first 2 steps) to 1.03" in rd["loss"]           # means of the first/last 10%
    assert "span 1–2 (max/min 2×)" in rd["tracked"] and "span 3–9 (max/min 3×)" in rd["tracked"]
    assert "ending at 5" in rd["mean_norm"]
    assert "-1.00 at step 1" in rd["grad"]                                   # exact power law, slope -1
    assert "positive pairs have mean cosine 0.80 and negative pairs 0.10" in rd["cosines"]
    assert "No angle changes" in rd["dtheta"]
    assert "42.50 % at step 20" in rd["evals"]
    fm = train_page.final_metrics(res).set_index("metric")["value"]
    assert fm["R@1"] == 42.5 and fm["wall_s"] == 12.0 and "NMI" not in fm.index
    assert "R@1 = 42.50" in train_page.run_sentence(res)
    failed = RunResult(cfg, "failed", {}, st.iloc[:0], tracked.iloc[:0], evals.iloc[:0], pd.DataFrame(),
                       cos.iloc[:0], gs.iloc[:0], error="non-finite loss at step 3")
    assert "failed" in train_page.run_sentence(failed) and "step 3" in train_page.run_sentence(failed)
    assert all("No steps" in v for v in train_page.run_readings(failed).values())


def test_the_answer_sentence_states_the_primary_estimate_and_what_it_excludes():
    from sec_lib.chapters import home
    from sec_lib.report import pooled_diff
    runs = hand_runs()
    e = home.primary_estimate(runs)
    main = runs[runs["loss"].isin(("triplet", "semihard", "npair", "ms")) & runs["variant"].isin(("none", "sec"))]
    assert e == pooled_diff(main, "variant", "none", "sec", "R@1")
    paper = pd.DataFrame({"loss": ["triplet", "ms", "tml"], "paper_gain": [7.48, 1.66, 99.0]})
    low = home.answer_sentence({"estimate": 0.38, "ci_lo": 0.01, "ci_hi": 0.74, "n": 5}, paper)
    assert low.startswith("**On glyphs, SEC changes R@1 by +0.38 [+0.01, +0.74] points") and "1.7–7.5" in low
    assert low.endswith("are excluded.**")
    high = home.answer_sentence({"estimate": 2.0, "ci_lo": 1.0, "ci_hi": 3.0, "n": 5}, paper)
    assert "not all excluded (gains up to 3.00 points" in high
    assert "cannot be computed" in home.answer_sentence({"estimate": float("nan"), "ci_lo": float("nan"),
                                                          "ci_hi": float("nan"), "n": 0}, paper)


def test_a_run_pages_summary_and_its_readings_use_one_window():
    """The run page's opening summary and its readings below give the same norms over the same window (the first and
    the last tenth of the logged steps), so that one noisy batch cannot make them disagree on a direction."""
    from sec_lib.runs.train import RunResult, TrainConfig
    n = 40
    var = np.r_[5.0, np.full(n - 2, 2.0), 0.5]          # a noisy first and last batch, a steady middle
    norm = np.r_[9.0, np.full(n - 2, 4.0), 1.0]
    st = pd.DataFrame({"step": np.arange(1, n + 1), "loss_metric": np.linspace(2.0, 1.0, n), "loss_sec": 0.0,
                       "norm_mean": norm, "norm_var": var, "grad_slope": -1.0})
    res = RunResult(TrainConfig(loss="semihard", iterations=n), "done", {"R@1": 50.0}, st,
                    pd.DataFrame(columns=["step", "sample", "norm"]), pd.DataFrame({"step": [n], "R@1": [50.0]}),
                    pd.DataFrame(columns=["label", "norm"]), pd.DataFrame(columns=["kind", "cos"]),
                    pd.DataFrame(columns=["step", "norm", "grad_norm"]))
    said = train_page.run_sentence(res)
    reading = train_page.run_readings(res)
    k = n // 10
    v0, v1, m0, m1 = var[:k].mean(), var[-k:].mean(), norm[:k].mean(), norm[-k:].mean()
    assert f"Over the first and the last {k} steps, the batch mean norm went from {m0:.3g} to {m1:.3g}" in said
    assert f"variance {v0:.3g} → {v1:.3g}" in said and "the variance down" in said
    assert f"went from {v0:.3g} to {v1:.3g} (down" in reading["norm_var"]
    assert reading["mean_norm"].startswith(f"The batch mean norm went from {m0:.3g} to {m1:.3g} (first vs last {k} steps)")
