"""C4L on the convergence page (sec_lib.chapters.convergence_length, sec_lib.figures.longruns): a synthetic complete
C4L in a temporary repository (the real plan, hand-made runs with known per-seed changes), its sentence checked
against scipy's t-interval, the registered verdict in a stable, a still-moving and an undecided case, the landing
sentence, the figure read back from its artists, and the incomplete state on the real committed runs."""
import dataclasses
import json
import shutil
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sec_lib.chapters import convergence_length as L
from sec_lib.chapters.evidence import Evidence
from sec_lib.runs import longruns, tier
from sec_lib.runs.config import run_key
from sec_lib.runs.sweeps import MAIN_LOSSES

LENGTHS = (longruns.BASE_LENGTH, longruns.LENGTH)
#: Per case: (the shift of SEC − none from 13,500 to 20,250, the SD of that shift across seeds).
CASES = {"stable": (0.05, 0.04), "still moving": (0.8, 0.05), "undecided": (0.25, 0.6)}


def _raw(configs, r1):
    """A committed ``runs.parquet`` of ``configs`` with final R@1 ``r1(config)``."""
    return pd.DataFrame({"key": [run_key(c) for c in configs],
                         "config": [json.dumps(dataclasses.asdict(c)) for c in configs],
                         "status": "done", "R@1": [r1(c) for c in configs]})


def _repo(tmp_path, shift, sd, l2_shift=0.0, drop=0, seed=0):
    """A repository at ``tmp_path`` with the real plan, the 60 twins and C4L's runs (all but ``drop``): per seed s the
    SEC − none gap moves by ``shift`` + N(0, ``sd``) from 13,500 to 20,250, L2-reg by ``l2_shift`` beside none."""
    rng = np.random.default_rng(seed)
    moved = {s: shift + sd * rng.standard_normal() for s in longruns.SEEDS}
    level = {(loss, s, n): 70 + rng.normal() for loss in MAIN_LOSSES for s in longruns.SEEDS for n in LENGTHS}
    gap = {(loss, s): 0.5 + 0.3 * rng.standard_normal() for loss in MAIN_LOSSES for s in longruns.SEEDS}
    noise = {(loss, s, n, a): 0.05 * rng.standard_normal() for loss in MAIN_LOSSES for s in longruns.SEEDS
             for n in LENGTHS for a in longruns.ARMS}

    def r1(c):
        arm, longer = longruns.arm_of(dataclasses.asdict(c)), c.iterations == longruns.LENGTH
        add = {"none": 0.0, "l2reg": 0.2 + (l2_shift if longer else 0.0),
               "sec": gap[(c.loss, c.seed)] + (moved[c.seed] if longer else 0.0)}[arm]
        return level[(c.loss, c.seed, c.iterations)] + add + noise[(c.loss, c.seed, c.iterations, arm)]
    here = tier.tier_dir("decisive", tmp_path)
    (here / "main").mkdir(parents=True)
    shutil.copy(tier.tier_dir("decisive") / "plan.json", here / "plan.json")
    _raw(longruns.twin_configs(), r1).to_parquet(here / "main" / "runs.parquet")
    test = longruns.folder(tmp_path) / "test"
    test.mkdir(parents=True)
    configs = longruns.test_configs()
    _raw(configs[:len(configs) - drop], r1).assign(dataset="glyphs", iterations=longruns.LENGTH, test_classes=None,
                                                   holdout_classes=0, wall_s=1.0, device="cpu", torch="x",
                                                   date="2026-11-30").to_parquet(test / "runs.parquet")
    return tmp_path


def _expected(root):
    """Per comparison, computed here from the runs on disk: per seed, the mean over the losses of each gap at each
    length; Δ and each gap with scipy's 95% t-interval."""
    frames = []
    for path in (tier.tier_dir("decisive", root) / "main" / "runs.parquet",
                 longruns.folder(root) / "test" / "runs.parquet"):
        raw = pd.read_parquet(path)
        cfg = [json.loads(c) for c in raw["config"]]
        frames.append(pd.DataFrame({"loss": [c["loss"] for c in cfg], "seed": [c["seed"] for c in cfg],
                                    "n": [c["iterations"] for c in cfg],
                                    "arm": [("l2reg" if c["mu"] == "zero" else "sec") if c["eta"] else "none"
                                            for c in cfg], "r": raw["R@1"]}))
    runs = pd.concat(frames)
    out = {}
    for name, a, b in longruns.COMPARISONS:
        per = {}
        for n in LENGTHS:
            w = runs[runs["n"] == n].pivot_table(index=["seed", "loss"], columns="arm", values="r")
            per[n] = (w[a] - w[b]).groupby(level="seed").mean().sort_index().to_numpy()
        d = per[longruns.LENGTH] - per[longruns.BASE_LENGTH]

        def ci(x):
            return (x.mean(), *stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x)))
        out[name] = {"delta": ci(d), "seeds": d, **{n: ci(per[n]) for n in LENGTHS}}
    return out


def _fmt(m, lo, hi):
    return f"{m:+.2f} (95% CI [{lo:+.2f}, {hi:+.2f}]"


@pytest.mark.parametrize("case", list(CASES))
def test_the_sentence_gives_each_comparisons_change_and_gaps_with_scipys_interval_and_the_registered_verdict(
        tmp_path, case):
    root = _repo(tmp_path, *CASES[case])
    exp = _expected(root)
    said = L.section(root)
    fam = L.results(root=root)["family"].set_index("comparison")
    for name, _, _ in longruns.COMPARISONS:
        m, lo, hi = exp[name]["delta"]
        assert f"Δ = {_fmt(m, lo, hi)}; t-test against 0" in said
        assert fam.loc[name, "verdict"] == longruns.verdict(lo, hi, m)
        for n in LENGTHS:
            g = exp[name][n]
            assert f"{g[0]:+.2f} R@1 points (95% CI [{g[1]:+.2f}, {g[2]:+.2f}]) at 13,500" in said if n == LENGTHS[0] \
                else f"and {g[0]:+.2f} (95% CI [{g[1]:+.2f}, {g[2]:+.2f}]) at 20,250" in said
    m, lo, hi = exp["SEC − none"]["delta"]
    assert fam.loc["SEC − none", "verdict"] == case          # the case is built to read as its name
    primary = said.split("Its second comparison")[0]
    assert f"→ **{case}**" in primary and "Its primary: SEC − none" in primary
    assert "60 runs over 5 seeds" in said and "±0.3 R@1 points" in said
    assert f"→ **{case}**" in L.reading(root)
    t = L.table(L.results(root=root)).set_index("comparison")
    assert t.loc["SEC − none", "Δ"] == pytest.approx(m) and t.loc["SEC − none", "Δ lo"] == pytest.approx(lo)
    assert t.loc["SEC − none", "gap at 20,250"] == pytest.approx(exp["SEC − none"][longruns.LENGTH][0])
    assert list(t["verdict"]) == list(fam["verdict"])


def test_the_landing_sentence_says_what_the_longer_runs_change_by_the_primarys_verdict(tmp_path):
    opening = {"still moving": "The 13,500-iteration estimate is not the converged one",
               "stable": "The 13,500-iteration estimate is the converged one",
               "undecided": "Whether the 13,500-iteration estimate is the converged one, the longer runs cannot tell"}
    for case, start in opening.items():
        root = _repo(tmp_path / case.replace(" ", "-"), *CASES[case])
        g = _expected(root)["SEC − none"]
        said = L.landing_sentence(root)
        long, base = g[longruns.LENGTH], g[longruns.BASE_LENGTH]
        assert said.startswith(start), said
        assert f"reads {long[0]:+.2f} R@1 points (95% CI [{long[1]:+.2f}, {long[2]:+.2f}]; n = 5 seeds)" in said
        assert f"against {base[0]:+.2f} at 13,500" in said
        assert "C4L" not in said                                  # the landing page names no follow-up id
        m, lo, hi = g["delta"]
        assert (f"Δ = {m:+.2f}, 95% CI [{lo:+.2f}, {hi:+.2f}]" in said) == (case != "still moving")
        assert ("the primary test stays as registered" in said) == (case == "still moving")
    # SEC − L2-reg still moving while the primary is stable: the landing page reads the primary only
    said = L.landing_sentence(_repo(tmp_path / "l2", 0.05, 0.04, l2_shift=-0.9))
    assert said.startswith(opening["stable"]) and "L2" not in said


def test_the_landing_brief_is_one_short_line_by_the_primarys_verdict(tmp_path):
    for case in CASES:
        root = _repo(tmp_path / case.replace(" ", "-"), *CASES[case])
        long = _expected(root)["SEC − none"][longruns.LENGTH]
        said = L.landing_brief(root)
        assert said == (f"Trained 1.5 times as long, SEC's gain reads {long[0]:+.2f} [{long[1]:+.2f}, {long[2]:+.2f}]: "
                        f"{L.BRIEF_WORDS[case]}.")
        assert len(said) <= 110                     # with C4W's, two lines at most on the first screen
    assert L.landing_brief(_repo(tmp_path / "missing", *CASES["stable"], drop=1)) == ""


def test_while_runs_are_missing_the_page_counts_them_and_has_no_verdict(tmp_path):
    root = _repo(tmp_path, *CASES["stable"], drop=1)
    assert L.progress(root) == (59, 60) and not L.ready(root)
    assert L.section(root) == ("C4L retrains the main comparison's runs for 20,250 iterations: 59 of 60 runs "
                               "committed; its verdict waits for all of them.")
    assert "59 of 60 committed" in L.reading(root) and "no verdict yet" in L.reading(root)
    assert L.landing_sentence(root) == ""
    with pytest.raises(KeyError, match="59 of 60"):
        L.results(root=root)


def test_the_incomplete_sentence_counts_the_real_committed_runs():
    path = longruns.folder() / "test" / "runs.parquet"
    k = len(set(pd.read_parquet(path, columns=["key"])["key"]) & {run_key(c) for c in longruns.test_configs()})
    said = L.section()
    if k < 60:
        assert said == (f"C4L retrains the main comparison's runs for 20,250 iterations: {k} of 60 runs committed; "
                        "its verdict waits for all of them.")
        assert L.landing_sentence() == ""
    else:
        assert "of 60 runs committed" not in said and "Its primary: SEC − none" in said
        runs = pd.read_parquet(path)                     # what produced the numbers, in the evidence box's words
        assert said.endswith(f"**Evidence for C4L:** {len(runs)} runs of 20,250 iterations on glyphs, scored on all "
                             f"test classes, {runs['wall_s'].sum() / 3600:.2f} run-hours of wall time on cpu (torch "
                             f"2.13.0+cpu, one thread per run: at most that many core-hours, less where the machine "
                             f"was shared), trained {runs['date'].astype(str).str[:10].min()} to "
                             f"{runs['date'].astype(str).str[:10].max()}; committed under `data/followups/longer-runs/`.")


def test_the_twins_are_the_decisive_tiers_committed_main_runs():
    t = L.twin_runs()
    assert len(t) == 60 and set(t["length"]) == {13500} and t["R@1"].notna().all()
    assert t.groupby(["arm", "loss"]).size().eq(5).all() and set(t["arm"]) == set(longruns.ARMS)
    main = pd.read_parquet(tier.tier_dir("decisive") / "main" / "runs.parquet").set_index("key")
    assert (t.set_index("key")["R@1"] == main.loc[t["key"], "R@1"]).all()


def test_bad_input_is_refused_naming_the_valid_choices(tmp_path):
    res = L.results(root=_repo(tmp_path, *CASES["stable"]))
    with pytest.raises(ValueError, match="valid: SEC − none, SEC − L2-reg"):
        L._row(res, "SEC − weight decay")
    with pytest.raises(ValueError, match=r"runs lacks column\(s\) \['length'\]"):
        L.results(pd.DataFrame(columns=["loss", "arm", "seed", "R@1"]))
    with pytest.raises(ValueError, match="margin must be a positive number"):
        L.longruns_figure.delta_figure(res["deltas"], res["family"], margin=0)
    with pytest.raises(ValueError, match="valid: SEC − none"):
        L.longruns_figure.delta_figure(res["deltas"], res["family"].iloc[:1], margin=0.3)


def test_the_figure_draws_each_seeds_change_and_the_mean_with_its_interval_around_the_band(tmp_path):
    root = _repo(tmp_path, *CASES["undecided"])
    exp = _expected(root)
    fig = L.figure(L.results(root=root))
    ax = fig.axes[0]
    by_gid = {a.get_gid(): a for a in [*ax.lines, *ax.collections] if a.get_gid()}
    for name, _, _ in longruns.COMPARISONS:
        assert list(by_gid[f"seeds: {name}"].get_xdata()) == pytest.approx(list(exp[name]["seeds"]))
        m, lo, hi = exp[name]["delta"]
        assert list(by_gid[f"mean: {name}"].get_xdata()) == pytest.approx([m])
        (seg,) = by_gid[f"interval: {name}"].get_segments()
        assert sorted(seg[:, 0]) == pytest.approx([lo, hi])
    (band,) = [p for p in ax.patches if "stable if the interval lies inside" in p.get_label()]
    assert (band.get_x(), band.get_x() + band.get_width()) == pytest.approx((-0.3, 0.3))
    lo_x, hi_x = ax.get_xlim()
    every = [v for name in exp for v in (*exp[name]["seeds"], *exp[name]["delta"])] + [-0.3, 0.3, 0.0]
    assert lo_x < min(every) and hi_x > max(every)
    assert hi_x - lo_x < 1.3 * (max(every) - min(every))     # fitted: no more than the data, the band and a margin
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        f"{n}\n({v})" for n, v in zip(L.results(root=root)["family"]["comparison"],
                                      L.results(root=root)["family"]["verdict"])]
    assert {t.get_text() for t in fig.legends[0].get_texts()} == {
        "±0.3 R@1 points: stable if the interval lies inside", "one seed (mean over the losses)",
        "mean and 95% interval"}


def test_the_page_shows_c4l_only_where_it_shows_the_decisive_tier():
    class Ev(Evidence):
        def __init__(self, shown):
            super().__init__("x", {"convergence": object()}, loader=lambda ch: None)
            self.shown = shown

        def profile_of(self, sweep):
            return self.shown
    assert L.applies(Ev("decisive")) and not L.applies(Ev("cpu"))
    assert L.absent(Ev("cub-smoke")) == ("C4L is a follow-up on the decisive tier's runs; this page shows the "
                                         "cub-smoke tier, which has none, so it shows no part of it.")


def test_the_notebook_shows_c4l_after_c3b_before_the_verdict_with_the_figures_caption():
    nb = nbformat.read(tier.REPO / "notebooks" / "convergence.ipynb", as_version=4)
    heads = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("## ")]
    titles = [nb.cells[i].source.splitlines()[0] for i in heads]
    c3b, c4l, verdict = (next(i for i, t in zip(heads, titles) if t.startswith(p))
                         for p in ("## The crossing, measured: C3b", "## Has the gap stopped moving? C4L", "## Verdict"))
    assert c3b < c4l < verdict
    # its question and design open the section where it applies (the decisive tier), and nowhere else
    assert "data/followups/longer-runs/README.md" in L.INTRO and "convergence_length.INTRO" in nb.cells[c4l + 1].source
    figures = [c for c in nb.cells[c4l:verdict] if "figure" in c.metadata.get("mystnb", {})]
    assert len(figures) == 1 and figures[0].metadata["mystnb"]["figure"]["caption"] == L.caption()
    assert "convergence_length.reading(" in nb.cells[verdict + 1].source


def test_the_landing_page_says_it_only_where_it_reads_the_decisive_tier(tmp_path):
    from sec_lib.chapters import home
    root = _repo(tmp_path / "moving", *CASES["still moving"])
    assert home.longer_runs_sentence(L.TIER, root) == L.landing_sentence(root) != ""
    for other in ("cpu", "smoke", "cub"):          # a quick or real-benchmark book: its runs are not C4L's
        assert home.longer_runs_sentence(other, root) == ""
    nb = (Path(__file__).resolve().parents[2] / "notebooks" / "home.ipynb").read_text(encoding="utf-8")
    assert "home.longer_runs_sentence(T)" in nb


def test_the_compare_page_links_the_page_that_owns_the_question():
    nb = nbformat.read(Path(__file__).resolve().parents[2] / "notebooks" / "compare.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "COMPARE_POINTER" in c.source)   # shown where the page reads the decisive tier
    assert "if convergence_length.TIER == T:" in cell.source
    assert "[the convergence page](convergence.html)" in L.COMPARE_POINTER and "20,250 iterations" in L.COMPARE_POINTER


def test_the_table_folds_the_gaps_beneath_the_delta_columns_so_that_it_fits(tmp_path):
    from sec_lib.figures.tables import FOLDED_ATTR, KEY_COLUMNS_ATTR
    t = L.table(L.results(root=_repo(tmp_path, *CASES["stable"])))
    assert t.attrs[KEY_COLUMNS_ATTR] == ["comparison"]
    (cols,) = t.attrs[FOLDED_ATTR].values()
    assert cols == ["gap at 13,500", "lo (13,500)", "hi (13,500)", "gap at 20,250", "lo (20,250)", "hi (20,250)"]
    assert {"Δ", "Δ lo", "Δ hi", "verdict", *cols} <= set(t.columns)       # the frame (and its CSV) keeps them all
