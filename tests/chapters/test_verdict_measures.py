"""The verdict measures on hand-made frames: C1 on the CV of the norms, C3 at fixed early fractions of the
run, Q7a's slope rule, Q9's range of η, Holm within a chapter's family, the tally counting runs once."""
import numpy as np
import pandas as pd
import pytest

from sec_lib import report
from sec_lib.chapters import claims, convergence, evidence, norms, eta as eta_ch
from sec_lib.runs.store import Frames


def _frames(runs, **tables):
    empty = {k: pd.DataFrame() for k in ("steps", "tracked", "evals", "test_norms", "cosines", "grad_scatter")}
    return Frames(runs=runs, **{**empty, **tables})


def test_norm_cv_is_std_over_mean():
    runs = pd.DataFrame({"train_norm_var": [4.0, 0.25], "train_norm_mean": [10.0, 1.0]})
    assert norms.norm_cv(runs).to_numpy() == pytest.approx([0.2, 0.5])   # the variance alone would rank them the other way


def test_early_table_uses_existing_eval_steps():
    runs = pd.DataFrame({"key": ["a", "b"], "status": ["done", "failed"]})
    ev = pd.DataFrame({"key": ["a"] * 5 + ["b"] * 2, "step": [0, 30, 60, 120, 200, 0, 200],
                       "R@1": [0.0, 10.0, 20.0, 30.0, 40.0, 0.0, 5.0]})
    e = convergence.early_table(runs, ev).set_index("key")
    # run length 200: 10% -> the eval nearest to step 20 is 30; 25% (50) -> 60; 50% (100) -> 120
    assert e.loc["a", ["step at 10%", "step at 25%", "step at 50%"]].tolist() == [30, 60, 120]
    assert e.loc["a", ["R@1 at 10%", "R@1 at 25%", "R@1 at 50%"]].tolist() == [10.0, 20.0, 30.0]
    assert e.loc["b"].drop("status").isna().all()           # failed run: no values
    assert convergence.early_steps(e.reset_index()) == "10% → step 30; 25% → step 60; 50% → step 120"
    with pytest.raises(ValueError, match="fractions"):
        convergence.early_table(runs, ev, fracs=(0.0,))
    # the decisive tier's curves: every 100 to 2,000, then every 1,687, and 13,500; 25% (3,375) is 3,374, not 5,061
    steps = [*range(0, 2001, 100), *range(1687 * 2, 13500, 1687), 13500]
    dense = pd.DataFrame({"key": "c", "step": steps, "R@1": np.arange(len(steps), dtype=float)})
    d = convergence.early_table(pd.DataFrame({"key": ["c"], "status": ["done"]}), dense).set_index("key")
    assert d.loc["c", ["step at 10%", "step at 25%", "step at 50%"]].tolist() == [1400, 3374, 6748]
    tie = pd.DataFrame({"key": "t", "step": [0, 40, 60, 100], "R@1": [0.0, 1.0, 2.0, 3.0]})
    assert convergence.early_table(pd.DataFrame({"key": ["t"]}), tie, fracs=(0.5,))["step at 50%"].tolist() == [60]


def test_convergence_diffs_are_one_holm_family():
    rng = np.random.default_rng(0)
    rows, ev = [], []
    for loss in ("triplet", "ms"):
        for v in ("none", "sec"):
            for s in range(4):
                key = f"{loss}-{v}-{s}"
                rows.append(dict(key=key, loss=loss, variant=v, seed=s, status="done"))
                final = 50 + rng.normal(0, 1)
                ev += [dict(key=key, step=st, **{"R@1": final * min(1.0, st / (60 if v == "sec" else 80)) + rng.normal(0, 1)})
                       for st in (0, 10, 25, 50, 75, 100)]
    runs, ev = pd.DataFrame(rows), pd.DataFrame(ev)
    d = convergence.convergence_diffs(convergence.reach_table(runs, ev), convergence.early_table(runs, ev))
    assert len(d) == 2 * 5                                 # reach, final, 3 early fractions, per loss
    ok = d["p_value"].notna()
    assert d.loc[ok, "p_adj"].to_numpy() == pytest.approx(report.holm(d.loc[ok, "p_value"].to_numpy()))
    assert (d["m"] == ok.sum()).all() and {"mde", "n_counts"} <= set(d.columns)
    for r in d.itertuples():
        sign = -1 if r.metric == "reach" else +1
        assert r.verdict == report.verdict(r.estimate, r.ci_lo, r.ci_hi, sign, n=r.n, p_adj=r.p_adj,
                                           p_eq_adj=r.p_eq_adj)


def _slope_evidence(slopes):
    runs = pd.DataFrame({"key": [f"k{i}" for i in range(len(slopes))], "variant": "none", "loss": "ms",
                         "seed": range(len(slopes)), "status": "done"})
    steps = pd.DataFrame({"key": runs["key"], "step": 1, "grad_slope": slopes})
    tracked = pd.DataFrame({"key": runs["key"].repeat(2).to_numpy(), "step": [0, 10] * len(slopes), "sample": 0,
                            "norm": [1.0, 2.0] * len(slopes)})
    return evidence.Evidence.from_frames({"instability": _frames(runs, steps=steps, tracked=tracked)})


def _q7a(slopes):
    return {r.id: r for r in evidence.page_records("instability", _slope_evidence(slopes))}["Q7a"]


def test_q7a_claim_row_uses_the_slope_interval():
    """Reproduced only if the interval holds −1 (∝ 1/‖f‖) and excludes 0: the book's −2.27 is negative, but not 1/‖f‖."""
    t = _q7a([-2.2, -2.3, -2.31, -2.27])
    assert t.ci_hi < -1 and t.verdict == "not reproduced"
    t = _q7a([-0.9, -1.05, -1.1, -0.95])
    assert t.ci_lo < -1 < t.ci_hi and t.verdict == "reproduced"
    assert t.n_counts == "runs pooled across losses"
    t = _q7a([-1.5, 0.2, -0.4, 0.1])
    assert t.ci_lo < 0 < t.ci_hi and t.verdict == "inconclusive"


def test_run_slopes_take_each_runs_median_so_one_degenerate_batch_does_not_move_q7a():
    """A batch whose norms barely differ fits a wild slope (the decisive tier has −253): the per-run summary
    behind Q7a, the normalize head and the pretrained contrast is the median over the run's steps."""
    from sec_lib.chapters import common, instability, normlayer, pretrained
    runs = pd.DataFrame({"key": ["a", "b"], "variant": "none", "loss": "ms", "seed": [0, 1], "head": "normalize",
                         "R@1": 50.0, "status": "done"})
    steps = pd.DataFrame({"key": ["a"] * 5 + ["b"] * 5, "step": [1, 2, 3, 4, 5] * 2,
                          "grad_slope": [-1.0, -1.1, -0.9, -1.0, -200.0, -2.0, -2.1, np.nan, -1.9, -2.0]})
    got = common.run_slopes(runs, steps).set_index("key")["grad_slope"]
    assert got.to_dict() == pytest.approx({"a": -1.0, "b": -2.0})
    assert common.run_step_means(runs, steps, ["grad_slope"]).set_index("key").loc["a", "grad_slope"] == \
        pytest.approx(-40.8)                                            # what the per-run mean would have said
    assert common.run_slopes(runs, steps, last_frac=0.4).set_index("key")["grad_slope"].to_dict() == \
        pytest.approx({"a": -100.5, "b": -1.95})
    with pytest.raises(ValueError, match="stat must be 'mean' or 'median'"):
        common.run_step_means(runs, steps, ["grad_slope"], stat="max")
    fam = instability.instability_family(runs, steps, pd.DataFrame({
        "key": ["a", "a", "b", "b"], "step": [0, 5] * 2, "sample": 0, "norm": [1.0, 2.0] * 2}))
    assert fam.set_index("question").loc["slope", "estimate"] == pytest.approx(-1.5)
    assert normlayer.prenorm_slope(runs, steps)["estimate"] == pytest.approx(-1.5)
    assert pretrained._run_slopes(runs.assign(regime="from scratch"), steps)["slope"].tolist() == \
        pytest.approx([-1.0, -2.0])


def test_q9_reports_the_range_of_eta():
    rows = []
    gain = {0.0: 0.0, 0.001: -0.4, 0.01: 3.0, 0.1: 4.0, 1.0: -6.0}   # helps only at 0.01 and 0.1
    for loss in ("triplet", "ms"):
        for e, g in gain.items():
            for s in range(5):
                rows.append(dict(key=f"{loss}{e}{s}", loss=loss, eta=e, seed=s, status="done",
                                 **{"R@1": 50 + s + (g + 0.2 * s * (e > 0))}))
    runs = pd.DataFrame(rows)
    g = eta_ch.eta_grid_gains(runs).set_index("eta")
    assert list(g.index) == [0.001, 0.01, 0.1, 1.0]
    assert g.loc[0.01, "verdict"] == g.loc[0.1, "verdict"] == "reproduced"
    assert g.loc[1.0, "verdict"] == "not reproduced" and g.loc[0.001, "verdict"] != "reproduced"
    assert g["p_adj"].to_numpy() == pytest.approx(report.holm(g["p_value"].to_numpy()))
    q9 = lambda r: evidence.page_records("eta", evidence.Evidence.from_frames({"eta": _frames(r)}))[0]  # noqa: E731
    fam = eta_ch.eta_family(runs)["grid"].set_index("eta")          # the page's family: the grid and the per-loss rows
    t = q9(runs)
    assert t.id == "Q9" and t.m == fam["m"].max()
    ok = fam[fam["verdict"] == "reproduced"].index
    assert t.estimate == pytest.approx(np.log10(ok.max() / ok.min())) and t.verdict == eta_ch.range_verdict(fam.reset_index())
    assert "η from 0.01 to 0.1" in t.note and t.verdict == "reproduced"             # 0.01 to 0.1: one decade
    assert np.isnan(t.mde) and t.detectable == "" and "could detect ≥" in t.note     # R@1's, per η, in the note
    narrow = runs[runs["eta"].isin([0.0, 0.01, 1.0])]
    assert q9(narrow).verdict == "inconclusive"                                     # one η: no range shown


def test_tally_counts_each_body_of_evidence_once():
    table = pd.DataFrame({"claim": ["C4", "Q6a", "Q3", "C1", "Q8a"],
                          "verdict": ["reproduced"] * 3 + ["inconclusive", "reproduced"],
                          "same_runs_as": ["", "C4", "C4", "", ""], "tier": ["decisive"] * 4 + ["cpu"]})
    assert claims.verdict_counts(table) == {"reproduced": 1, "larger than claimed": 0, "smaller than claimed": 0,
                                            "negligible": 0, "not reproduced": 0, "inconclusive": 1,
                                            "not testable offline": 0, claims.QUICK_ONLY: 1}
    s = claims.counts_sentence(table)
    assert s.startswith("Of 2 bodies of evidence on the decisive tier (Q6a uses the same runs as C4")
    assert "**1** more (Q8a) have quick-tier evidence only" in s


def test_rules_and_margins_tables():
    rules = claims.rules_table()
    assert set(report.VERDICTS) <= set(rules["rule"]) and "partly" not in set(rules["rule"])
    assert "R@1" in claims.margins_html() and "primary" in claims.role_sentence()


def test_n_text_counts_in_the_singular_for_one():
    from sec_lib.chapters.common import n_text
    assert n_text(1) == "n = 1 seed"
    assert n_text(1, "runs pooled across losses") == "n = 1 run pooled across losses"
    assert n_text(3) == "n = 3 seeds"
    assert n_text(3, "runs pooled across losses", "paired") == "n = 3 runs pooled across losses, paired"
