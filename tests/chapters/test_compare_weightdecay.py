"""C4W's section of the compare page (sec_lib.chapters.compare_weightdecay) and its figure
(sec_lib.figures.weightdecay): its states (another tier, underway, complete), its numbers against scipy and
statsmodels on a synthetic complete follow-up with known effects, and the figure's rows read back from its artists."""
import json

import matplotlib
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sec_lib.chapters import compare_weightdecay as c4w
from sec_lib.figures import weightdecay as wdfig
from sec_lib.runs import followup
from sec_lib.runs import weightdecay as wd

matplotlib.use("Agg")

#: Known effects (R@1 points): (SEC + WD) − (none + WD) per loss, (none + WD) − none, SEC − none without WD per loss.
GAIN_WD = {"triplet": 1.0, "semihard": 3.0, "npair": 0.0, "ms": -0.9}
WD_GAIN = 0.6
GAIN_MAIN = {"triplet": 0.7, "semihard": 0.5, "npair": 0.4, "ms": 0.3}
ETA_WD = {"triplet": 0.5, "semihard": 0.05, "npair": 0.1, "ms": 1.0}
WEIGHT = {"triplet": 2.5e-3, "semihard": 2.5e-3, "npair": 2.5e-4, "ms": 2.5e-2}


def synthetic(seed: int = 3):
    """(C4W's test runs as the parquet holds them, the main comparison's none and SEC runs) with noise."""
    rng = np.random.default_rng(seed)
    wd_rows, main_rows = [], []
    for s in range(5):
        for loss in wd.LOSSES:
            base = 70 + rng.normal(0, 0.5)             # a seed's shared draw: pairing on seed removes it
            main_rows.append({"seed": s, "loss": loss, "arm": "none", "eta": 0.0, "status": "done",
                              "R@1": base + rng.normal(0, 0.1)})
            main_rows.append({"seed": s, "loss": loss, "arm": "sec", "eta": 0.05, "status": "done",
                              "R@1": base + GAIN_MAIN[loss] + rng.normal(0, 0.1)})
            for eta in (0.0, ETA_WD[loss]):
                cfg = {"loss": loss, "eta": eta, "weight_decay": WEIGHT[loss], "seed": s}
                wd_rows.append({"key": f"{loss}-{eta}-{s}", "config": json.dumps(cfg), "seed": s, "loss": loss,
                                "eta": eta, "status": "done",
                                "R@1": base + WD_GAIN + (GAIN_WD[loss] if eta else 0) + rng.normal(0, 0.1)})
    return pd.DataFrame(wd_rows), pd.DataFrame(main_rows)


@pytest.fixture
def complete(monkeypatch):
    """A complete C4W: its test runs and the main runs read through the module's readers, monkeypatched."""
    test, main = synthetic()
    monkeypatch.setattr(wd, "test_runs", lambda root=None: test)
    monkeypatch.setattr(c4w, "main_frame", lambda root=None: main)
    return c4w.wd_frame(test), main


def t_interval(x):
    x = np.asarray(x, float)
    half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
    return x.mean(), x.mean() - half, x.mean() + half, stats.ttest_1samp(x, 0).pvalue


def per_seed(runs, b, a, loss=None):
    """Per seed, the mean over the losses (or ``loss`` alone) of ``b`` − ``a`` paired on seed."""
    w = runs.pivot_table(index=["seed", "loss"], columns="arm", values="R@1")
    d = (w[b] - w[a])
    return d.xs(loss, level="loss") if loss else d.groupby(level="seed").mean()


def test_the_families_match_scipy_and_holm(complete):
    runs, main = complete
    res = c4w.evidence("decisive")
    est, lo, hi, p = t_interval(per_seed(runs, "sec + WD", "none + WD"))
    pooled = res["pooled"].iloc[0]
    assert (pooled["estimate"], pooled["ci_lo"], pooled["ci_hi"]) == pytest.approx((est, lo, hi))
    assert pooled["p_adj"] == pytest.approx(p) and pooled["m"] == 1               # a family alone: no adjustment
    raw = {l: t_interval(per_seed(runs, "sec + WD", "none + WD", l)) for l in wd.LOSSES}
    per = res["per"].set_index("loss")
    for l, (e, lo, hi, _) in raw.items():
        assert (per.loc[l, "estimate"], per.loc[l, "ci_lo"], per.loc[l, "ci_hi"]) == pytest.approx((e, lo, hi))
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    holm = multipletests([raw[l][3] for l in wd.LOSSES], method="holm")[1]
    assert per.loc[list(wd.LOSSES), "p_adj"].to_numpy() == pytest.approx(holm)
    assert (per["m"] == 4).all()
    # sized against the paper's gains (triplet's +3.2 to +7.5, semihard's +2.0 to +5.0), as the registration says
    assert per.loc["triplet", "verdict"] == "smaller than claimed" and per.loc["semihard", "verdict"] == "reproduced"
    assert per.loc["ms", "verdict"] == "not reproduced"


def test_the_verdicts_are_sized_as_the_scorecards_verdict_function_sizes_them(complete):
    """Each row's word equals sec_lib.report.verdict given its adjusted p's and the paper's gains (claim C4's for the
    pooled row, the loss's own for its row): the path the scorecard takes for C4 and C4a-d."""
    from sec_lib import reference
    from sec_lib.report import verdict
    res = c4w.evidence("decisive")
    for table, loss_of in ((res["pooled"], lambda r: None), (res["per"], lambda r: r["loss"])):
        for r in table.to_dict("records"):
            want = verdict(r["estimate"], r["ci_lo"], r["ci_hi"], +1, 0.5, n=r["n"], p_adj=r["p_adj"],
                           p_eq_adj=r["p_eq_adj"], paper=reference.paper_gain_values("none", "sec", loss_of(r)))
            assert r["verdict"] == want, r


def test_the_sentence_and_the_bullet_say_the_computed_numbers_in_the_verdict_words(complete):
    runs, _ = complete
    res = c4w.evidence("decisive")
    est, lo, hi, p = t_interval(per_seed(runs, "sec + WD", "none + WD"))
    said = c4w.families_sentence(res)
    assert f"{est:+.2f} points (95% CI [{lo:+.2f}, {hi:+.2f}]" in said
    assert f"→ **{res['pooled']['verdict'].iloc[0]}**" in said and "a family of its own" in said
    assert "Holm over 4" in said and "could detect ≥" in said and "n = 5 seeds" in said
    bullet = c4w.verdict_bullet("decisive")
    assert bullet.startswith("- **Over the authors' weight decay** (C4W, a registered follow-up;")
    assert f"{est:+.2f} R@1 points" in bullet and "triplet **smaller than claimed**" in bullet
    assert "semihard **reproduced**" in bullet and "ms **not reproduced**" in bullet


def test_the_descriptive_rows_are_pooled_per_seed_and_marked_outside_the_families(complete):
    runs, main = complete
    both = pd.concat([runs, main])
    res = c4w.evidence("decisive")
    desc = res["descriptive"].set_index("comparison")
    for name, b, a in (("(none + WD) − none", "none + WD", "none"), ("(SEC + WD) − SEC", "sec + WD", "sec")):
        est, lo, hi, _ = t_interval(per_seed(both, b, a))
        assert (desc.loc[name, "estimate"], desc.loc[name, "ci_lo"], desc.loc[name, "ci_hi"]) == pytest.approx(
            (est, lo, hi))
    assert desc.loc["(none + WD) − none", "estimate"] == pytest.approx(WD_GAIN, abs=0.15)
    said = c4w.descriptive_sentence(res)
    assert said.startswith("**Outside the families, descriptive only** (no test, no verdict")
    est, lo, hi, _ = t_interval(per_seed(both, "none + WD", "none"))
    assert f"(none + WD) − none {est:+.2f} (95% CI [{lo:+.2f}, {hi:+.2f}])" in said
    assert "verdict" not in said.split("(no test, no verdict;")[1]
    table = c4w.families_table(res)
    assert len(table) == 5 and not table.iloc[:, 0].str.contains("none \\+ WD\\) − none").any()


def test_the_figure_draws_every_row_with_its_interval(complete):
    res = c4w.evidence("decisive")
    rows = c4w.figure_rows(res)
    assert len(rows) == 2 * (len(wd.LOSSES) + 1)
    fig = wdfig.weightdecay_figure(rows)
    ax = fig.axes[0]
    drawn = []
    for coll in ax.collections:                   # each errorbar's whisker: one segment [(lo, y), (hi, y)]
        for seg in coll.get_segments():
            (x0, y0), (x1, y1) = seg
            if y0 == y1:
                drawn.append((min(x0, x1), max(x0, x1)))
    want = sorted(zip(rows["ci_lo"], rows["ci_hi"]))
    assert len(drawn) == len(want) and np.ravel(sorted(drawn)) == pytest.approx(np.ravel(want))
    dots = sorted(float(l.get_xdata()[0]) for l in ax.lines if l.get_marker() not in (None, "None", "", "|")
                  and len(l.get_xdata()) == 1)
    assert dots == pytest.approx(sorted(rows["estimate"]))
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert c4w.POOLED in labels and "triplet" in labels
    assert "with weight decay, η = 0.5, WD 0.0025" in labels
    lo, hi = ax.get_xlim()
    assert lo < min(0, rows["ci_lo"].min()) and hi > max(0, rows["ci_hi"].max())
    cap = wdfig.weightdecay_caption(rows)
    assert "over 5 paired seeds" in cap and "ms: with weight decay η = 1, WD 0.025" in cap
    matplotlib.pyplot.close(fig)


def test_the_selection_table_and_sentence_read_choices_json():
    scores = {"weight_decay": {"0": 70.0, "0.00025": 70.5, "0.0025": 70.2, "0.025": 69.0}, "eta": {}}
    choices = {"triplet": {"weight_decay": 2.5e-4, "weight_decay_tested": 2.5e-4, "eta": 0.5, "eta_tested": 0.5,
                           "flags": [], "scores": scores},
               "ms": {"weight_decay": 0.0, "weight_decay_tested": 2.5e-3, "eta": 0.0, "eta_tested": 1.0,
                      "flags": ["weight decay: not selected", "SEC not selected"], "scores": scores}}
    table = c4w.selection_table(choices)
    assert list(table["loss"]) == ["triplet", "ms"]
    assert table.set_index("loss").loc["ms", "held-out R@1, tested weight decay"] == 70.2
    said = c4w.selection_sentence(table)
    assert "triplet: weight decay 0.00025; SEC's η 0.5 under it" in said
    assert "no weight decay scored best, so its least harmful weight, 0.0025, is tested (flagged)" in said
    assert "its best η, 1, is tested (flagged)" in said
    assert table.set_index("loss").loc["ms", "flags"] == "weight decay: not selected; SEC not selected"
    repeated = dict(choices["ms"], flags=["weight decay: weight decay not selected (no regularizer scored best)"])
    assert c4w.selection_table({"ms": repeated})["flags"].iloc[0] == "weight decay not selected (no regularizer scored best)"
    with pytest.raises(ValueError, match="valid values: triplet, semihard, npair, ms"):
        c4w.selection_table({"arcface": choices["ms"]})


def test_the_underway_state_on_the_real_folder_and_the_other_tier_line():
    (sel, _), test = c4w.own_selection_runs(), len(wd.stage_runs("test"))
    said = c4w.status_sentence()
    state = "is underway" if sel + test else "is registered; its runs have not started"
    assert said.startswith(f"**C4W {state}.** It asks: {wd.QUESTION}")
    assert f"So far {sel} held-out selection runs are committed" in said
    assert f"{test} of its 40 test runs; its verdict waits for all 40 test runs" in said
    try:
        wd.test_runs()
        complete = True
    except KeyError:
        complete = False
    if not complete:
        assert f"its runs {'are underway' if sel + test else 'have not started'}" in c4w.verdict_bullet("decisive")
        with pytest.raises(KeyError):
            c4w.evidence("decisive")
    assert c4w.verdict_bullet("quick") == ""
    assert c4w.absent_line("quick") == ("C4W, a registered follow-up, retrains the decisive tier's runs with weight "
                                        "decay; this page shows the quick tier, so it shows none of it.")
    with pytest.raises(KeyError, match="retrains the decisive tier"):
        c4w.evidence("quick")


def _selection_parquet(path, rows):
    path.mkdir(parents=True)
    pd.DataFrame([{"key": k, "loss": loss, "eta": eta, "config": json.dumps({"weight_decay": w})}
                  for k, loss, eta, w in rows]).to_parquet(path / "runs.parquet")


def test_the_status_counts_only_the_follow_ups_own_runs_and_names_the_points_an_edge_added(tmp_path):
    """The export holds the tier's η = 0 held-out runs (the point 0): not counted. A weight decay outside the first
    grid (2.5e-5) and an η outside the loss's first grid (triplet's 0.0005; the tier chose 0.05) are counted as added
    by the edge rule; the first grids' points are not."""
    plan_eta = followup.tier_plan().eta
    _selection_parquet(tmp_path / "data" / "reference" / "decisive" / "selection",
                       [("t0", "triplet", 0.0, 0.0), ("t1", "ms", 0.0, 0.0)])
    base = wd.eta_grid(plan_eta["triplet"])
    assert 0.0005 not in base and 0.005 in base
    _selection_parquet(wd.folder(tmp_path) / "selection",
                       [("t0", "triplet", 0.0, 0.0), ("t1", "ms", 0.0, 0.0), ("a", "ms", 0.0, 2.5e-3),
                        ("b", "ms", 0.0, 2.5e-5), ("c", "triplet", 0.005, 2.5e-5), ("d", "triplet", 0.0005, 2.5e-5)])
    assert c4w.own_selection_runs(tmp_path) == (4, 2)
    said = c4w.status_sentence(tmp_path)
    assert ("So far 4 held-out selection runs are committed (2 of them at points the rule added where a grid grew at "
            "its edge; the plan is 72 if no grid grows) and 0 of its 40 test runs") in said, said
    _selection_parquet(tmp_path / "other" / "data" / "followups" / "weight-decay" / "selection",
                       [("a", "ms", 0.0, 2.5e-3)])
    assert c4w.own_selection_runs(tmp_path / "other") == (1, 0)     # no tier folder: every run is its own
    assert "(the plan is 72 if no grid grows)" in c4w.status_sentence(tmp_path / "other")
    assert c4w.own_selection_runs(tmp_path / "none") == (0, 0)
    assert "is registered; its runs have not started" in c4w.status_sentence(tmp_path / "none")


def test_bad_input_is_refused_with_the_valid_choices(complete):
    runs, main = complete
    with pytest.raises(ValueError, match="valid values: none, sec"):
        c4w.results(runs, main.assign(arm="l2reg"))
    with pytest.raises(ValueError, match="needs arm, loss, seed and R@1"):
        c4w.results(runs.drop(columns="R@1"), main)
    with pytest.raises(ValueError, match="trains with weight decay"):
        c4w.arm_of({"loss": "ms", "eta": 0.0, "weight_decay": 0.0})
    with pytest.raises(ValueError, match="needs loss, arm"):
        wdfig.weightdecay_figure(pd.DataFrame({"loss": []}))


def test_c4w_joins_the_scorecard_with_its_committed_test_runs_not_before():
    """Its claim joins compare.CLAIMS with its committed test runs, not before (as optim's follow-ups do)."""
    from sec_lib.chapters import compare
    try:
        wd.test_runs()
        committed = True
    except KeyError:
        committed = False
    ids = {c.id for c in compare.CLAIMS}
    if committed:
        assert wd.ID in ids, "C4W's test runs are committed: add compare_weightdecay.CLAIM to compare.CLAIMS"
    else:
        assert wd.ID not in ids


def _page_cells():
    """The compare notebook's C4W code cells (its section, figure, caption and verdict bullet), in order."""
    import nbformat
    from pathlib import Path
    nb = nbformat.read(Path(__file__).resolve().parents[2] / "notebooks" / "compare.ipynb", as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and ("c4w" in c.source or "wdfig" in c.source)]
    assert len(cells) == 4
    return cells


def _run_cells(tier):
    shown = []
    ns = {"T": tier, "display": lambda x: shown.append(getattr(x, "data", x)), "Markdown": lambda s: type(
        "M", (), {"data": s})(), "show_table": lambda df, name, **kw: shown.append(name)}
    values = []
    for c in _page_cells():
        *body, last = c.source.rstrip().split("\n")
        if c.metadata.get("mystnb", {}).get("figure"):     # a figure cell: its last line is the figure's value
            exec("\n".join(body), ns)
            values.append(eval(last.split("#")[0], ns))
        else:
            exec(c.source, ns)
    return shown, values


def test_the_page_cells_show_the_complete_follow_up_and_one_line_on_another_tier(complete):
    shown, values = _run_cells("decisive")
    assert "c4w_families" in shown and values[0] is not None and len(values[0].axes) == 1
    assert any(isinstance(s, str) and s.startswith("**Figure.**") for s in shown)
    assert any(isinstance(s, str) and s.startswith("- **Over the authors' weight decay**") for s in shown)
    matplotlib.pyplot.close(values[0])
    shown, values = _run_cells("cpu")
    assert shown == [c4w.absent_line("cpu")] and values == [None]


def test_the_page_cells_say_underway_while_the_runs_train():
    try:
        wd.test_runs()
        pytest.skip("C4W's test runs are committed")
    except KeyError:
        pass
    shown, values = _run_cells("decisive")
    assert values == [None] and shown[:2] == [c4w.INTRO, c4w.status_sentence()]
    assert "underway" in shown[-1] or "have not started" in shown[-1]


def test_the_landing_sentence_gives_the_pooled_row_in_plain_words_once_complete(complete):
    from sec_lib.chapters import home
    runs, main = complete
    est, lo, hi, _ = t_interval(per_seed(runs, "sec + WD", "none + WD"))
    without = per_seed(main, "sec", "none").mean()
    said = c4w.landing_sentence("decisive")
    assert said.startswith("Against a baseline trained with the weight decay the authors use")
    assert f"SEC − none reads {est:+.2f} (95% CI [{lo:+.2f}, {hi:+.2f}]) R@1 points (n = 5 seeds)" in said
    assert f"against {without:+.2f} without weight decay" in said
    verdict = c4w.evidence("decisive")["pooled"].iloc[0]["verdict"]
    assert f"In the book's words, **{verdict}**: {c4w.meaning(c4w.evidence('decisive')['pooled'].iloc[0])}." in said
    assert "C4W" not in said     # the landing page names no follow-up id
    assert home.weight_decay_sentence("decisive") == said
    assert c4w.landing_sentence("quick") == home.weight_decay_sentence("cpu") == ""


def test_the_compare_pointer_gives_the_pooled_row_under_the_answer_and_says_while_it_trains(complete, monkeypatch):
    """The compare page's pointer, beside C4L's: the pooled row with its interval and verdict once complete, that its
    runs still train while a test run is missing, nothing on another tier; the page's pointer cell shows it."""
    import nbformat
    from pathlib import Path
    runs, _ = complete
    est, lo, hi, _ = t_interval(per_seed(runs, "sec + WD", "none + WD"))
    p = c4w.evidence("decisive")["pooled"].iloc[0]
    said = c4w.compare_pointer("decisive")
    assert said.startswith(c4w.POINTER_QUESTION) and "still train" not in said
    assert (f"(SEC + WD) − (none + WD) = {est:+.2f} (95% CI [{lo:+.2f}, {hi:+.2f}]) R@1 points (n = 5 seeds), "
            f"**{p['verdict']}**: {c4w.meaning(p)}.") in said
    assert c4w.compare_pointer("cpu") == c4w.compare_pointer("smoke") == ""

    def missing(root=None):
        raise KeyError("C4W: 38 of 40 test runs are committed")
    monkeypatch.setattr(wd, "test_runs", missing)
    waiting = c4w.compare_pointer("decisive")
    assert waiting.startswith(c4w.POINTER_QUESTION) and "its runs still train" in waiting and "95% CI" not in waiting
    nb = nbformat.read(Path(__file__).resolve().parents[2] / "notebooks" / "compare.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "COMPARE_POINTER" in c.source)
    assert "compare_weightdecay.compare_pointer(T)" in cell.source


def test_the_landing_sentence_is_empty_while_runs_are_missing():
    try:
        wd.test_runs()
    except KeyError:
        assert c4w.landing_sentence("decisive") == ""


def test_the_landing_brief_is_one_short_line_with_the_pooled_row(complete):
    runs, _ = complete
    est, lo, hi, _ = t_interval(per_seed(runs, "sec + WD", "none + WD"))
    p = c4w.evidence("decisive")["pooled"].iloc[0]
    said = c4w.landing_brief("decisive")
    assert said == (f"Over the authors' weight decay, SEC's gain reads {est:+.2f} [{lo:+.2f}, {hi:+.2f}]: "
                    f"{c4w.brief_words(p)}.")
    longest = max(len(said.replace(c4w.brief_words(p), w)) for w in ("still a gain, smaller than the paper's",
                                                                       "SEC adds nothing that matters there"))
    assert longest <= 110 and c4w.landing_brief("quick") == ""   # with C4L's, two lines at most on the first screen
    words = {v: c4w.brief_words({"verdict": v, "ci_lo": -1.0, "ci_hi": 1.0})
             for v in ("reproduced", "negligible", "not reproduced", "inconclusive")}
    assert words == {"reproduced": "still a gain, in the paper's range", "negligible": "a gain too small to matter",
                     "not reproduced": "SEC adds nothing that matters there", "inconclusive": "these seeds cannot tell"}
    assert c4w.brief_words({"verdict": "not reproduced", "ci_lo": -1.0, "ci_hi": -0.2}) == "SEC lowers R@1 there"
    with pytest.raises(ValueError, match="valid values"):
        c4w.brief_words({"verdict": "maybe", "ci_lo": 0.0, "ci_hi": 1.0})


def test_its_claim_decides_as_the_page_does_once_complete(complete):
    """compare_weightdecay.CLAIM, decided by the scorecard's machinery (report.claims.decide), carries the page's
    pooled row: its estimate, interval, p and sized verdict; on another tier it has no evidence."""
    from sec_lib.chapters.evidence import Evidence
    from sec_lib.report.claims import decide
    pooled = c4w.evidence("decisive")["pooled"].iloc[0]
    (rec,) = decide([c4w.CLAIM], Evidence.from_frames({"compare": None}, "decisive"))
    assert rec.id == "C4W" and rec.page == "compare" and rec.m == 1
    assert (rec.estimate, rec.ci_lo, rec.ci_hi, rec.p_adj) == pytest.approx(
        (pooled["estimate"], pooled["ci_lo"], pooled["ci_hi"], pooled["p_adj"]))
    assert rec.verdict == pooled["verdict"]
    (none,) = decide([c4w.CLAIM], Evidence.from_frames({"compare": None}, "quick"))
    assert none.verdict == "not testable offline" and "retrains the decisive tier" in none.note


def test_the_evidence_line_counts_its_own_runs_as_the_status_does(tmp_path):
    """C4W's evidence line says what produced its numbers: its own selection runs (the tier's η = 0 runs its export
    holds left out, as the status counts them) and its test runs, each with its run-hours; nothing without runs."""
    own, _ = c4w.own_selection_runs()
    test = followup.committed_runs(wd.folder() / "test")
    if not own or not len(test):
        pytest.skip("C4W's runs are not committed in this checkout")
    said = c4w.evidence_sentence()
    assert said.startswith(f"**Evidence for C4W:** its own held-out selection, {own} runs of ")
    hours = float(test["wall_s"].sum()) / 3600
    assert f"; its test, {len(test)} runs of 13,500 iterations" in said and f"{hours:.2f} run-hours" in said
    assert said.endswith("committed under `data/followups/weight-decay/`.")
    assert c4w.evidence_sentence(tmp_path) == ""
