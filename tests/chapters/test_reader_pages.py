"""The reader-facing pages: the landing page's headline numbers and sentences, Table 1 at a glance,
run titles, the runs index and its downloads, the η and norms selectors (on small made-up frames)."""
import base64
import io
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from sec_lib import reference
from sec_lib.chapters import compare, eta, home, norms, runs, table1
from sec_lib.chapters import train as train_page
from sec_lib.figures import results, sweeps
from sec_lib.figures.tables import file_link
from sec_lib.figures.widgets import link_records
from sec_lib.runs.train import TrainConfig

LOSSES = ("triplet", "semihard", "npair", "ms")


def headline_frame():
    rows = []
    for setting, shift in (("selected", 1.0), ("paper", -2.0)):
        for i, loss in enumerate(LOSSES):
            d = shift + i
            rows.append(dict(loss=loss, setting=setting, eta=0.5, estimate=d, ci_lo=d - 1.5, ci_hi=d + 1.5, p_value=0.1,
                             n=3, verdict="inconclusive"))
    g = pd.DataFrame(rows)
    g.attrs["metric"] = "R@1"
    return g


def test_headline_sentences_count_intervals_and_quote_the_paper():
    g = headline_frame()
    paper = home.paper_headline()
    s = home.headline_sentences(g, paper, {"holds": 2, "fails": 1, "undecided": 0, "rows": 7})
    assert len(s) == 3
    # selected: diffs 1, 2, 3, 4 with ±1.5 -> above zero for 2, 3, 4 (lo 0.5, 1.5, 2.5); none below
    assert "above zero for 3 of 4 losses and below zero for 0" in s[0]
    # paper's η: diffs -2, -1, 0, 1 -> lo -3.5..-0.5, hi -0.5..2.5: above 0, below 2
    assert "above zero for 0 of 4 losses and below zero for 1" in s[1]
    lo, hi = paper["paper_gain"].min(), paper["paper_gain"].max()
    assert f"{lo:+.1f} to {hi:+.1f}" in s[1] and "4 datasets" in s[1]
    # the tally counts questions, each once, with the rows beneath them
    assert "decided on the decisive tier, 3 in all, each counted once: **2** hold, **1** fails" in s[2]
    assert "(7 rows of evidence lie beneath them)" in s[2] and "undecided" not in s[2]
    assert "could not be computed" in home.headline_sentences(g, paper, {"error": "no runs"})[2]
    # each claim is read from the tier its page shows, and the sentence names every long tier the claims read
    s = home.headline_sentences(g, paper, {"holds": 1, "undecided": 2, "tiers": ("decisive", "gpu")})
    assert "decided on the decisive and gpu tiers, 3 in all" in s[2] and "**2** are undecided" in s[2]
    # a book that counts its own runs (the smoke book, a real-benchmark book) says so, as the claims page does
    s = home.headline_sentences(g, paper, {"holds": 0, "fails": 2, "rows": 2, "tiers": (), "own": True})
    assert "decided on this book's own runs, 2 in all" in s[2] and "tier" not in s[2]


def test_paper_headline_is_table1_sec_minus_none():
    p = home.paper_headline().set_index(["dataset", "loss"])["paper_gain"]
    t = reference.paper_table("Cars").set_index(["loss", "variant"])["R@1"]
    assert p[("Cars", "triplet")] == pytest.approx(t[("triplet", "sec")] - t[("triplet", "none")])
    assert set(p.index.get_level_values(0)) == set(reference.PAPER_DATASETS)


def test_headline_figure_draws_every_interval_and_paper_mark():
    g, paper = headline_frame(), home.paper_headline()
    fig = results.headline_figure(g, paper)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == list(LOSSES)
    assert len(ax.containers) == 2 * len(LOSSES)             # one errorbar per loss and setting
    assert ax.get_legend() is not None


def fake_main_table():
    rows = []
    for loss in LOSSES:
        for v, m in (("none", 50.0), ("l2reg", 51.0), ("sec", 53.0)):
            for metric in table1.TABLE1_METRICS:
                rows.append(dict(loss=loss, variant=v, metric=metric, mean=m, ci_lo=m - 1, ci_hi=m + 1, n=3))
    return pd.DataFrame(rows)


def test_table1_glance_same_layout_for_paper_and_ours():
    t = table1.glance_tables(reference.paper_table(["CUB", "Cars"]), fake_main_table())
    assert list(t) == ["paper, CUB", "paper, Cars", "ours, glyphs"]
    cols = {tuple(df.columns) for df in t.values()}
    assert len(cols) == 1 and list(t["ours, glyphs"].columns) == ["loss", "variant", *table1.TABLE1_METRICS]
    assert t["ours, glyphs"].loc[0, "R@1"] == "50.0 [49.0, 51.0]"
    tiny = fake_main_table().assign(ci_lo=-0.01)
    assert "[0.0, " in table1.glance_tables(reference.paper_table("CUB"), tiny, ("CUB",))["ours, glyphs"].loc[0, "R@1"]
    cub = reference.paper_table("CUB").set_index(["loss", "variant"])
    assert t["paper, CUB"].loc[0, "R@1"] == f"{cub.loc[('triplet', 'none'), 'R@1']:.1f}"
    best = table1.best_variant_counts(t)
    assert (best[best["table"] == "ours, glyphs"]["best"] == "SEC").all()
    assert "ours, glyphs: SEC is best for 4 of 4 losses" in table1.glance_sentence(best)
    said = table1.answer(best)                  # the page's answer, above its tables, says where rows are tested
    assert said.startswith("**The answer.** " + table1.glance_sentence(best)) and "(compare.html)" in said


def test_a_real_benchmark_book_names_its_dataset_and_sets_the_papers_numbers_for_it_beside_ours():
    """Table1, compare and the landing page of a cub/cars/sop/inshop book name that dataset and show
    the paper's numbers for it, at its K values (SOP: R@1-1000, no clustering for In-Shop)."""
    from sec_lib.runs import benchmarks
    assert benchmarks.paper_datasets("sop") == ("SOP",) and home.paper_sets("sop") == ("SOP",)
    assert home.paper_sets("cpu") == reference.PAPER_DATASETS                 # a glyph book: all four of Table 1
    metrics = benchmarks.paper_metrics("sop")
    assert metrics == ("NMI", "F1", "R@1", "R@10", "R@100", "R@1000")
    assert not {"NMI", "F1"} & set(benchmarks.paper_metrics("inshop"))
    ours = pd.DataFrame([dict(loss=loss, variant=v, metric=m, mean=60.0, ci_lo=59.0, ci_hi=61.0, n=3)
                         for loss in LOSSES for v in ("none", "l2reg", "sec") for m in metrics])
    name = benchmarks.data_name("sop")
    t = table1.glance_tables(reference.paper_table(["SOP"]), ours, ("SOP",), metrics, ours_name=name)
    assert list(t) == ["paper, SOP", f"ours, {name}"] and "R@1000" in t["paper, SOP"].columns
    sop = reference.paper_table("SOP").set_index(["loss", "variant"])
    assert t["paper, SOP"].loc[0, "R@1000"] == f"{sop.loc[('triplet', 'none'), 'R@1000']:.1f}"
    assert t[f"ours, {name}"].loc[0, "R@100"] == "60.0 [59.0, 61.0]"
    paper = home.paper_headline(datasets=home.paper_sets("sop"))
    assert set(paper["dataset"]) == {"SOP"}
    assert home.answer_sentence({"estimate": 0.1, "ci_lo": -0.2, "ci_hi": 0.4, "n": 5}, paper, name).startswith(
        f"**On {name}, SEC changes R@1")
    g = pd.DataFrame([dict(loss=loss, variant="sec", baseline="none", comparison="SEC − none", metric="R@1",
                           estimate=0.5, ci_lo=0.1, ci_hi=0.9, p_value=0.03, n=5) for loss in LOSSES])
    gvp = compare.gains_vs_paper(None, dataset=("SOP",), metrics=("R@1",), gains=g, data=name)
    assert set(gvp["dataset"]) == {"SOP"} and gvp["source"].iloc[0].startswith(f"ours ({name}) vs")


def test_run_title_names_loss_variant_and_seed():
    cfg = TrainConfig(loss="npair", eta=0.5, mu="batch", seed=3)
    assert train_page.run_title(cfg) == "Run: Normalized N-pair, SEC (η = 0.5), seed 3"
    assert "no regularizer" in train_page.run_title(TrainConfig(loss="ms", eta=0.0))


def test_loss_noun_lowers_a_common_word_and_keeps_a_proper_name():
    from sec_lib.chapters.common import LOSS_TITLES, loss_noun
    from sec_lib.losses import LOSS_NAMES
    assert loss_noun("tml") == "tuplet margin" and loss_noun("npair") == "normalized N-pair"
    assert loss_noun("cosface") == "CosFace" and loss_noun("ntxent") == "NT-Xent"
    assert loss_noun("no-such-loss") == "no-such-loss"
    assert set(LOSS_NAMES) <= set(LOSS_TITLES), "every registered loss has a title"


def test_file_link_round_trips_and_rejects_bad_names(monkeypatch):
    monkeypatch.delenv("SEC_DOWNLOADS_DIR", raising=False)
    link = file_link(b"a,b\n1,2\n", "x.csv", "data")
    payload = re.search(r"base64,([^\"]+)", link).group(1)
    assert base64.b64decode(payload) == b"a,b\n1,2\n" and 'download="x.csv"' in link
    with pytest.raises(ValueError, match="extension"):
        file_link(b"", "x.exe", "data")
    with pytest.raises(ValueError, match="letters"):
        file_link(b"", "a b.csv", "data")


def test_file_link_writes_the_file_for_the_site_when_the_runner_asks(tmp_path, monkeypatch):
    """Under the runner ($SEC_DOWNLOADS_DIR) the page links to a file the build serves instead of carrying it."""
    monkeypatch.setenv("SEC_DOWNLOADS_DIR", str(tmp_path / "dl"))
    link = file_link(b"a,b\n1,2\n", "x.csv", "data")
    assert (tmp_path / "dl" / "x.csv").read_bytes() == b"a,b\n1,2\n"
    assert 'href="../../_static/downloads/x.csv"' in link and "base64" not in link
    assert not [p for p in (tmp_path / "dl").iterdir() if p.name.startswith(".tmp")]


def test_committed_downloads_thin_the_step_log(tmp_path):
    d = tmp_path / "data" / "reference" / "ref"
    d.mkdir(parents=True)
    pd.DataFrame({"key": ["a"], "R@1": [1.0]}).to_parquet(d / "runs.parquet")
    pd.DataFrame({"key": "a", "step": np.arange(1, 501), "norm_var": 1.0}).to_parquet(d / "steps.parquet")
    files = {name: (data, what) for name, data, what in runs.committed_downloads(tmp_path, 20)}
    assert set(files) == {"ref_runs.parquet", "ref_steps.parquet"}
    steps = pd.read_parquet(io.BytesIO(files["ref_steps.parquet"][0]))
    assert len(steps) <= 20 and steps["step"].max() == 500 and "at most 20 steps" in files["ref_steps.parquet"][1]
    assert files["ref_runs.parquet"][0] == (d / "runs.parquet").read_bytes()


def test_decimated_steps_keep_first_and_last_per_run():
    steps = pd.concat([pd.DataFrame({"key": k, "step": np.arange(1, 501), "norm_var": 1.0}) for k in ("a", "b")])
    d = runs._decimate_steps(steps, 10)
    for _, g in d.groupby("key"):
        assert len(g) <= 10 and g["step"].min() == 1 and g["step"].max() == 500
    with pytest.raises(ValueError, match="max_steps"):
        runs.tier_frames("smoke", max_steps=1)


def test_index_sentence_says_which_seed_has_a_page():
    idx = pd.DataFrame([dict(loss=l, variant=v, seed=s, status="done", **{"run page": "yes" if s == 0 else ""})
                        for l in LOSSES for v in ("none", "sec") for s in range(3)])
    s = runs.index_sentence(idx, "smoke")
    assert "24 runs" in s and "3 seeds" in s and "8 run pages show seed 0 only" in s


def _index(profile, iterations, seeds, l2=0.005, sec=None):
    """A made-up run index of ``profile``'s main table (as :func:`runs.run_index` returns it, with its attrs)."""
    sec = sec or {"triplet": 1.0, "semihard": 0.5, "npair": 1.0, "ms": 1.0}
    idx = pd.DataFrame([dict(loss=l, variant=v, eta={"none": 0.0, "l2reg": l2, "sec": sec[l]}[v], seed=s, status="done",
                             **{"run page": "yes" if s == 0 else ""})
                        for l in LOSSES for v in ("none", "l2reg", "sec") for s in range(seeds)])
    idx.attrs.update(profile=profile, iterations=(iterations,))
    return idx


def test_the_index_sentence_names_its_tier_and_its_run_length():
    s = runs.index_sentence(_index("cpu", 120, 3), "cpu")
    assert "**36 runs** of the main table of the quick tier (profile `cpu`, 120 iterations, trained by " \
           "`make book`)" in s
    assert "4 losses × 3 variants × 3 seeds (0 failed)" in s and "main comparison" not in s
    g = runs.index_sentence(_index("gpu", 3000, 5), "gpu")
    assert "the gpu tier (committed under `data/reference/gpu/`, 3,000 iterations)" in g and "quick" not in g


def test_the_answer_says_the_verdicts_come_from_the_decisive_tier_not_from_these_runs():
    quick, decisive = _index("cpu", 120, 3), _index("decisive", 13500, 5, l2=0.001)
    a = runs.tier_answer(quick, "cpu", decisive)
    assert "The 12 run pages of this section and the table of every seed below show the quick tier (profile `cpu`, " \
           "120 iterations" in a
    assert "do not come from these runs" in a and "**decisive tier**" in a and "(compare.html)" in a
    assert "60 runs of 13,500 iterations (4 losses × 3 variants × 5 seeds)" in a
    assert "committed under `data/reference/decisive/`" in a and "held-out training classes" in a
    same = runs.tier_answer(quick, "cpu", None)
    assert "reads the same runs" in same and "decisive" not in same


def test_the_weights_sentence_is_read_from_the_runs_own_weights():
    fixed = runs.weights_sentence(_index("cpu", 120, 3))
    assert "were fixed before any run and tuned on no classes at all" in fixed
    assert "SEC at the paper's η for each loss (triplet 1, semihard triplet 0.5, normalized N-pair 1, " \
           "multi-similarity 1)" in fixed and "L2-reg at η = 0.005 for every loss" in fixed
    # L2 weights that are not the fixed constant were chosen on held-out classes: the sentence may not say "fixed"
    chosen = runs.weights_sentence(_index("gpu", 3000, 5, l2=0.001))
    assert "fixed before any run" not in chosen and "none was tuned on the test classes" in chosen
    assert "L2-reg at weights chosen on held-out training classes (triplet 0.001" in chosen
    beside = runs.weights_sentence(_index("cpu", 120, 3), _index("decisive", 13500, 5, l2=0.001))
    assert "The decisive tier, whose runs give the book's verdicts, chose its weights on held-out training classes" \
           in beside and "its L2-reg weights (triplet 0.001" in beside and "SEC at the selected η" in beside


def _staged_checkout(root):
    """A checkout with a staged tier 'stg' (stages a and b; run k1 in both, as a re-export could leave it) and the
    retired reference tier."""
    base = root / "data" / "reference"
    for stage, keys in (("a", ["k1", "k2"]), ("b", ["k1", "k3"])):
        d = base / "stg" / stage
        d.mkdir(parents=True)
        pd.DataFrame({"key": keys, "status": "done", "loss": "ms", "seed": [0, 1]}).to_parquet(d / "runs.parquet")
        pd.DataFrame({"key": keys, "step": 10, "R@1": [1.0, 2.0], "src": stage}).to_parquet(d / "evals.parquet")
        pd.concat([pd.DataFrame({"key": k, "step": np.arange(1, 301), "norm_var": 1.0, "src": stage}) for k in keys]
                  ).to_parquet(d / "steps.parquet")
    ref = base / "reference"
    ref.mkdir(parents=True)
    pd.DataFrame({"key": ["r1", "r2"], "status": ["done", "failed"], "loss": "ms", "seed": [0, 1]}).to_parquet(
        ref / "runs.parquet")
    pd.DataFrame({"key": ["r1"], "step": 10, "R@1": 1.0}).to_parquet(ref / "evals.parquet")


def test_a_staged_tier_is_joined_for_download_and_a_retired_tier_is_labelled_and_not_offered(tmp_path):
    _staged_checkout(tmp_path)
    files = {name: (data, what) for name, data, what in runs.committed_downloads(tmp_path, 20)}
    assert set(files) == {"stg_runs.parquet", "stg_evals.parquet", "stg_steps.parquet"}     # no reference_*
    r = pd.read_parquet(io.BytesIO(files["stg_runs.parquet"][0]))
    assert list(r["key"]) == ["k1", "k2", "k3"] and list(r["stage"]) == ["a", "a", "b"] and r.columns[1] == "stage"
    ev = pd.read_parquet(io.BytesIO(files["stg_evals.parquet"][0]))
    assert sorted(ev["key"]) == ["k1", "k2", "k3"] and set(ev.loc[ev["key"] == "k1", "src"]) == {"a"}
    st = pd.read_parquet(io.BytesIO(files["stg_steps.parquet"][0]))
    assert set(st.loc[st["key"] == "k1", "src"]) == {"a"} and st.groupby("key").size().max() <= 20
    steps_what, runs_what = files["stg_steps.parquet"][1], files["stg_runs.parquet"][1]
    assert "2 stage folders joined" in steps_what and "at most 20 steps" in steps_what
    assert runs_what.startswith("stg tier, runs table") and "column stage" in runs_what
    summary = runs.committed_summary(tmp_path).set_index("tier")
    assert list(summary.index) == ["retired reference", "stg"]
    assert summary.loc["stg", "runs"] == 3 and summary.loc["stg", "folder"] == "data/reference/stg/ (2 stage folders)"
    assert summary.loc["stg", "status"] == "current"
    assert summary.loc["retired reference", "runs"] == 2 and summary.loc["retired reference", "done"] == 1
    status = summary.loc["retired reference", "status"]
    assert status.startswith("retired: replaced by the decisive tier") and "9649a31" in status
    assert "no downloads" in status
    text = runs.committed_sentence(tmp_path)
    assert "The stg tier is committed one folder per stage (2 stage folders" in text and "`stage` column" in text
    # a registered follow-up (data/followups/<name>/) is listed after the tiers, with its folder and README
    fu = tmp_path / "data" / "followups" / "fu" / "test"
    fu.mkdir(parents=True)
    pd.DataFrame({"key": ["f1"], "status": "done", "loss": "ms", "seed": [0]}).to_parquet(fu / "runs.parquet")
    summary = runs.committed_summary(tmp_path).set_index("tier")
    assert list(summary.index) == ["retired reference", "stg", "follow-up fu"]
    assert summary.loc["follow-up fu", "folder"] == "data/followups/fu/ (1 stage folder)"
    assert "data/followups/fu/README.md" in summary.loc["follow-up fu", "status"]
    files = {name: what for name, _, what in runs.committed_downloads(tmp_path, 20)}
    assert files["followup-fu_runs.parquet"].startswith("follow-up fu, runs table")
    assert "The follow-up fu is committed one folder per stage (1 stage folder)" in runs.committed_sentence(tmp_path)
    assert "The reference tier is retired, replaced by the decisive tier" in text and "not among the downloads" in text


def test_the_committed_tiers_table_of_this_checkout_has_the_decisive_tier_and_a_retired_reference_tier():
    from sec_lib.runs import tier
    summary = runs.committed_summary().set_index("tier")
    if tier.has_tier("decisive"):
        assert summary.loc["decisive", "runs"] == len(tier.open_tier(tier.tier_dir("decisive")).runs)
        assert summary.loc["decisive", "status"] == "current"
    assert "reference" not in summary.index
    if "retired reference" in summary.index:
        assert summary.loc["retired reference", "status"].startswith("retired")
    names = {name for name, _, _ in runs.committed_downloads()}
    assert not any(n.startswith("reference_") for n in names)
    assert not tier.has_tier("decisive") or {"decisive_runs.parquet", "decisive_evals.parquet"} <= names


def fake_sweep_frames():
    rows, steps = [], []
    for loss in LOSSES[:2]:
        for e in (0.0, 0.1, 1.0):
            for s in range(2):
                k = f"{loss}-{e}-{s}"
                rows.append(dict(key=k, loss=loss, eta=e, seed=s, variant="sec" if e else "none",
                                 **{"R@1": 50 + 10 * e + s, "train_norm_var": 1 / (1 + e), "test_norm_var": 1.0}))
                steps.append(pd.DataFrame({"key": k, "step": np.arange(1, 6), "norm_var": 1.0 / (1 + e) + 0.1 * s}))
    return pd.DataFrame(rows), pd.concat(steps, ignore_index=True)


def test_eta_explorer_has_one_figure_per_eta_linked_in_the_browser():
    r, st = fake_sweep_frames()
    box = eta.eta_explorer(eta.eta_summary(r), r, st)
    assert [o for o in box.controls[0].options] == ["0", "0.1", "1"]
    assert len(box.stacks[0][0].children) == 3
    assert len(link_records(box)) == 1
    fig = sweeps.eta_panel(eta.eta_summary(r), st, r, 0.1)
    # the right panel marks η = 0.1 (grid index 1)
    assert any(len(l.get_xdata()) == 2 and np.allclose(l.get_xdata(), [1, 1]) for l in fig.axes[1].lines)


def test_norms_explorer_offers_every_loss_and_variant():
    r, st = fake_sweep_frames()
    r = r.assign(variant=np.where(r["eta"] == 0, "none", np.where(r["eta"] == 1.0, "sec", "l2reg")))
    tn = pd.concat([pd.DataFrame({"key": k, "norm": np.linspace(1, 2, 20)}) for k in r["key"]])
    box = norms.norms_explorer(SimpleNamespace(runs=r, steps=st, test_norms=tn))
    assert [list(c.options) for c in box.controls] == [["triplet", "semihard"], ["none", "l2reg", "sec"]]
    fig = results.norm_panel(tn, st, r, "triplet", "sec")
    assert "CV" in fig.axes[0].get_title()


def test_verdict_tables_show_key_columns_first_and_fold_the_rest():
    from sec_lib.figures.tables import FOLDED_ATTR, compact_verdict_table, table_html
    raw = pd.DataFrame({"head": ["paper", "nobn"], "metric": ["R@1", "R@1"], "mean none": [70.0, 69.0],
                        "mean sec": [71.0, 68.5], "estimate": [1.0, -0.5], "ci_lo": [0.2, np.nan],
                        "ci_hi": [1.8, np.nan],
                        "p_value": [0.01, 0.3], "n": [5, 5], "margin": [0.5, 0.5], "p_adj": [0.02, 0.6],
                        "m": [2, 2], "mde": [0.9, 0.9], "n_counts": ["5", "5"], "verdict": ["reproduced", "inconclusive"],
                        "family": ["bnwn page", "bnwn page"]})
    t = compact_verdict_table(raw)
    main = [c for c in t.columns if c not in sum(t.attrs[FOLDED_ATTR].values(), [])]
    assert main == ["head", "metric", "estimate [95% CI]", "adj. p", "verdict", "could detect", "n"]
    assert t.loc[0, "estimate [95% CI]"] == "+1.00 [+0.20, +1.80]" and t.loc[1, "estimate [95% CI]"] == "-0.50"
    assert list(t["adj. p"]) == ["0.02", "0.6"] and t.loc[0, "could detect"] == "≥ 0.90" and t.loc[0, "n"] == "5"
    assert t.attrs[FOLDED_ATTR] == {"Means and test": ["mean none", "mean sec", "p_value"],
                                    "How the verdict was reached": ["m", "n_counts", "margin", "family"]}
    page = table_html(raw, "bnwn_paired")
    assert page.index("estimate [95% CI]") < page.index("Means and test")
    csv = base64.b64decode(re.search(r"base64,([^\"]+)", page).group(1)).decode()
    assert csv.splitlines()[0] == ",".join(raw.columns)            # the CSV keeps the raw table
    assert compact_verdict_table(raw.drop(columns="verdict")) is None
    # a 'not reproduced' the equivalence test gave (the interval inside ±margin) shows that test's p beside the
    # difference test's, as the scorecard does; one from an effect of the wrong sign does not
    eq = raw.assign(estimate=[0.1, -0.9], ci_lo=[-0.2, -1.2], ci_hi=[0.4, -0.6], verdict="not reproduced",
                    p_eq_adj=[0.012, 0.9])
    assert list(compact_verdict_table(eq)["adj. p"]) == ["0.02 (equivalence: 0.012)", "0.6"]


def test_the_primary_badge_words_an_equivalence_verdict_as_no_effect_larger_than_the_margin():
    """A 'not reproduced' that comes from the interval lying inside ±0.5 reads 'no effect larger than 0.5
    points'; one that comes from an effect of the wrong sign, or another verdict, does not."""
    def rec(verdict, lo, hi, sign=+1, margin=0.5):
        return SimpleNamespace(verdict=verdict, ci_lo=lo, ci_hi=hi, estimate=(lo + hi) / 2, expected_sign=sign,
                               margin=margin)
    assert home.equivalence_words(rec("not reproduced", 0.06, 0.43)) == ": no effect larger than 0.5 points"
    assert home.equivalence_words(rec("not reproduced", -0.9, -0.6)) == ""          # SEC lowers R@1
    assert home.equivalence_words(rec("inconclusive", -0.2, 0.8)) == ""
    assert home.equivalence_words(rec("reproduced", 0.6, 1.2)) == ""
    assert home.equivalence_words(rec("not reproduced", 0.1, 0.3, margin=None)) == ""
    row = vars(rec("not reproduced", -0.3, 0.2))                                        # a row, not a record
    assert home.equivalence_words(row) == ": no effect larger than 0.5 points"
    assert home.equivalence_words(vars(rec("not reproduced", -0.3, 0.2, margin=float("nan")))) == ""
    assert home.equivalence_words(rec("reproduced", -0.3, 0.2, sign=0)) == ": within ±0.5 points"     # no-change claim
    assert home.equivalence_words(rec("not reproduced", 0.8, 1.4, sign=0)) == ""       # it differs: not equivalence


def test_the_rerun_and_cite_pages_tell_the_reference_profile_from_the_retired_tier_and_ask_for_the_commit():
    from pathlib import Path

    from sec_lib.runs import tier
    book = Path(__file__).resolve().parents[2] / "book"
    row = next(line for line in (book / "rerun.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| `reference` |"))
    assert "named `reference` but builds the decisive tier" in row and "*retired reference tier*" in row
    assert f"commit `{tier.RETIRED_AT['reference']}`" in row and "data/reference/reference/README.md" in row
    cite = (book / "cite.md").read_text(encoding="utf-8")
    versions = " ".join(cite.split("## Versions")[1].split())
    assert "give the commit you read, its git hash" in versions and "*Unreleased*" in versions
    assert "the evidence changes between releases" in versions


def test_an_inconclusive_interval_that_misses_zero_says_which_gate_held_it_back():
    """'-0.40 [-0.67, -0.13] inconclusive' reads as a contradiction; the words give :func:`verdict`'s reason."""
    import itertools

    import numpy as np

    from sec_lib.report.verdicts import inconclusive_words, verdict
    row = dict(verdict="inconclusive", ci_lo=-0.67, ci_hi=-0.13, expected_sign=1, margin=0.5, p_adj=0.077, m=5, n=5)
    assert inconclusive_words(row) == ("; its interval excludes 0, but not after Holm over the 5 rows of its family "
                                       "(adjusted p = 0.077)")
    assert inconclusive_words({**row, "ci_lo": -0.2, "ci_hi": 0.3}) == ""               # contains 0: no reason owed
    assert inconclusive_words({**row, "verdict": "not reproduced"}) == ""
    assert inconclusive_words({**row, "n": 1}) == ""                                     # no usable interval
    assert inconclusive_words({**row, "expected_sign": 0, "ci_lo": -1.45, "ci_hi": -0.35}) == (
        "; its interval crosses the ±0.5-point margin, so it neither shows a change nor rules one out")
    assert inconclusive_words({**row, "ci_lo": 0.1, "ci_hi": 0.4, "p_eq_adj": 0.12}) == (
        "; within ±0.5 points, but not after Holm over the 5 rows of its family (equivalence: adjusted p = 0.12)")
    # Against verdict() itself: every inconclusive interval that misses 0 gets a reason, and no other row does
    rng = np.random.default_rng(0)
    for sign, margin, p, q in itertools.product((1, -1, 0), (0.0, 0.5), (0.01, 0.2), (0.01, 0.2)):
        for lo, width in rng.uniform([-2, 0.05], [2, 2], size=(40, 2)):
            hi = lo + width
            if sign == 0 and margin == 0:
                continue
            r = dict(ci_lo=lo, ci_hi=hi, expected_sign=sign, margin=margin, p_adj=p, p_eq_adj=q, m=4, n=5)
            r["verdict"] = verdict((lo + hi) / 2, lo, hi, sign, margin, 5, p, q)
            words = inconclusive_words(r)
            misses_zero = lo > 0 or hi < 0
            if r["verdict"] != "inconclusive" or (sign != 0 and not misses_zero):
                assert words == "", r
            elif sign != 0 or not (-margin <= lo and hi <= margin) or q >= 0.05:
                assert words.startswith("; ") and ("Holm" in words or "crosses" in words), r


def test_the_review_pages_state_the_eta_grids_as_the_profile_and_the_selection_define_them():
    """The face, N-pair and SimCLR pages show the decisive tier, whose selection grows a grid past its edge, and
    name the quick tier's grid: their text (the method paragraph below the answer) must say both, in the numbers the
    code uses."""
    import json
    from pathlib import Path

    from sec_lib.runs import selection
    from sec_lib.runs.experiments import get_profile
    assert selection.FACTOR == 10 and selection.MAX_EXTENSIONS == 2     # the words below: "tenfold", "twice"
    grid = ", ".join(f"{w:g}" for w in get_profile("cpu").review_eta_grid)
    nb_dir = Path(__file__).resolve().parents[2] / "notebooks"
    for page in ("face", "npair", "ssl"):
        cells = json.loads((nb_dir / f"{page}.ipynb").read_text(encoding="utf-8"))["cells"]
        intro = " ".join(" ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown").split())
        assert "grows a grid tenfold past an edge where the best weight sits, at most twice a side" in intro, page
        assert "`cpu` profile" not in intro, page            # the grid is the quick tier's, not the decisive tier's
        numbers = grid.replace(", 1", " and 1") if page != "ssl" else grid
        assert numbers in intro, (page, numbers)
