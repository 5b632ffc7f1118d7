"""The instability page: the per-batch gradient-against-norm slope, the tracked samples' norm growth
and spread, with and without SEC."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from .. import report
from ..report import one_family, pooled_diff, summary_table, values_ci
from . import profile_param
from ..report.claims import Claim, derived_family, from_row
from .common import SLOPE_TARGET, check_cols, measures_text, run_slopes, run_step_means, verdict_row_of

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()


def tracked_stats(runs: pd.DataFrame, tracked: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with per-run statistics of the tracked training samples' norms: mean norm at the
    first and last tracked step, their ratio ``growth``, the CV across samples at the end
    ``cv_end``, and ``max_rel_jump``, the largest relative change of one sample's norm between two
    consecutive tracked steps (after the first 10% of training)."""
    check_cols(tracked, ["key", "step", "sample", "norm"], "tracked")
    rows = []
    for key, t in tracked.groupby("key", sort=False):
        first, last = t["step"].min(), t["step"].max()
        n0 = t.loc[t["step"] == first, "norm"].astype(float)
        n1 = t.loc[t["step"] == last, "norm"].astype(float)
        w = t.pivot_table(index="step", columns="sample", values="norm").sort_index()
        rel = (w.diff().abs() / w.shift()).iloc[1:]
        rel = rel[rel.index > first + 0.1 * (last - first)]
        rows.append({"key": key, "norm_start": n0.mean(), "norm_end": n1.mean(),
                     "growth": n1.mean() / n0.mean() if n0.mean() > 0 else np.nan,
                     "cv_end": n1.std(ddof=0) / n1.mean() if n1.mean() > 0 else np.nan,
                     "max_rel_jump": float(np.nanmax(rel.to_numpy())) if rel.size else np.nan})
    per = pd.DataFrame(rows, columns=["key", "norm_start", "norm_end", "growth", "cv_end", "max_rel_jump"])
    return runs.merge(per, on="key", how="left")


INSTABILITY_METRICS = ("grad_slope", "grad_r2", "growth", "cv_end", "max_rel_jump")


def instability_table(runs: pd.DataFrame, steps: pd.DataFrame, tracked: pd.DataFrame,
                      by: Sequence[str] = ("loss", "variant")) -> pd.DataFrame:
    """Per group: each run's median log-log slope of ‖∂L/∂f_i‖ against ‖f_i‖ over training
    (:func:`~sec_lib.chapters.common.run_slopes`) and mean r², and the tracked samples' norm growth,
    final spread and largest step-to-step jump."""
    r = run_step_means(run_slopes(runs, steps), steps, ["grad_r2"])
    r = tracked_stats(r, tracked)
    return summary_table(r, list(by), list(INSTABILITY_METRICS), digits=3)


def slope_curve(runs: pd.DataFrame, steps: pd.DataFrame, by: Sequence[str] = ("loss", "variant"),
                col: str = "grad_slope", window: int = 5) -> pd.DataFrame:
    """Per group × step: the mean over seeds of ``col`` after a centred rolling median over ``window`` of the run's
    steps that log it (a run computing it every k steps has it on every k-th row only). A median, as each run's
    summary (:func:`~sec_lib.chapters.common.run_slopes`): a batch whose norms barely differ fits a wild slope."""
    by = list(by)
    check_cols(steps, ["key", "step", col], "steps")
    s = steps.loc[steps[col].notna(), ["key", "step", col]].sort_values(["key", "step"]).copy()
    s[col] = (s.groupby("key", sort=False)[col].rolling(window, center=True, min_periods=1).median()
              .reset_index(level=0, drop=True))
    m = s.merge(runs[["key", *by]], on="key")
    return report.summarize(m, [*by, "step"], [col]).drop(columns="metric")


#: The Holm family of the instability page (see :func:`instability_family`).
FAMILY = "instability page"
_POOLED = "runs pooled across losses"


def instability_family(runs: pd.DataFrame, steps: pd.DataFrame, tracked: pd.DataFrame) -> pd.DataFrame:
    """The page's three verdicts as ONE Holm family, one row each (``question``, ``what``,
    and the columns of :data:`sec_lib.report.ROW_COLUMNS`):

    * ``slope``: the per-batch log-log slope of ‖∂L/∂f_i‖ against ‖f_i‖ (median over each run's steps) of
      the runs without SEC, one value per run (n = runs pooled across losses and seeds), expected < 0;
    * ``growth``: log(mean tracked norm at the end / at the start) of the runs without SEC, per run, > 0;
    * ``cv_end``: SEC − none of the final CV of the tracked norms, paired on seed and averaged over the
      losses per seed (n = seeds), expected < 0.
    """
    slopes = run_slopes(runs, steps)
    tr = tracked_stats(runs, tracked)
    none_sl = slopes.loc[slopes.variant == "none"]
    none_tr = tr.loc[tr.variant == "none"]
    sl = values_ci(none_sl["grad_slope"])
    with np.errstate(divide="ignore", invalid="ignore"):
        gr = values_ci(np.log(none_tr["growth"].astype(float)))
    cv = pooled_diff(tr, "variant", "none", "sec", "cv_end")
    n_losses = lambda d, col: int(d.loc[d[col].notna(), "loss"].nunique()) if "loss" in d.columns else 0
    rows = [
        {"question": "slope", "what": "the gradient magnitude falls as 1/‖f‖ (slope −1)",
         **verdict_row_of(sl, -1, n_counts=_POOLED), "n_losses": n_losses(none_sl, "grad_slope")},
        {"question": "growth", "what": "norms grow during training",
         **verdict_row_of(gr, +1, n_counts=_POOLED), "n_losses": n_losses(none_tr, "growth")},
        {"question": "cv_end", "what": "SEC keeps individual norms together",
         **verdict_row_of(cv, -1, n_counts="seeds"), "n_losses": cv.get("n_groups", 0)},
    ]
    fam = one_family(pd.DataFrame(rows), family=FAMILY)[0]
    # Q7a's rule: a negative slope whose interval excludes −1 is a different power law, not 1/‖f‖. That word rests on
    # a test of its own, slope = −1 (one-sample t-test), adjusted over the family by Bonferroni (m times its p, at
    # least Holm's): below α it reads *not reproduced*; above, the law cannot be told apart and it reads inconclusive.
    sl = (fam["question"] == "slope").to_numpy()
    x = none_sl["grad_slope"].dropna().to_numpy(float)
    p_law = float(stats.ttest_1samp(x, SLOPE_TARGET).pvalue) if len(x) > 1 and x.std() > 0 else np.nan
    fam["p_target"] = np.where(sl, p_law, np.nan)
    fam["p_target_adj"] = np.where(sl, min(1.0, p_law * int(fam["m"].max())) if np.isfinite(p_law) else np.nan, np.nan)
    law = (fam["ci_lo"] <= SLOPE_TARGET) & (SLOPE_TARGET <= fam["ci_hi"])
    off = sl & (fam["verdict"] == "reproduced") & ~law
    fam.loc[off, "verdict"] = np.where(fam.loc[off, "p_target_adj"] < report.VERDICT_RULES.alpha, "not reproduced",
                                       "inconclusive")
    return fam


def page_reading(runs: pd.DataFrame, steps: pd.DataFrame, tracked: pd.DataFrame,
                 family: pd.DataFrame | None = None) -> str:
    """The page's closing bullets from its one Holm family (:func:`instability_family`, computed unless
    given): the gradient-vs-norm slope and the tracked norms' growth without SEC, and SEC's effect on
    the final spread of the tracked norms, each with interval, adjusted p, detectable effect, n and verdict."""
    fam = instability_family(runs, steps, tracked) if family is None else family
    if not isinstance(fam, pd.DataFrame) or "question" not in fam.columns:
        raise ValueError("family must be the table of instability_family(runs, steps, tracked)")
    r = fam.set_index("question")
    sl, gr, cv = (r.loc[q].to_dict() for q in ("slope", "growth", "cv_end"))
    pooled = lambda d: f"{int(d['n_losses'])} losses × their seeds, without SEC"
    if np.isfinite(sl["ci_lo"]):
        minus_one = ("contains −1, as a 1/‖f‖ law predicts" if sl["ci_lo"] <= -1 <= sl["ci_hi"] else
                     "excludes −1: the gradient falls with the norm by a different power, so the claim of a "
                     "1/‖f‖ law is not reproduced even where the slope is negative")
        minus_one = f" The interval {minus_one}."
    else:
        minus_one = ""
    cv_note = f"each the mean over {int(cv['n_losses'])} losses"
    return (
        f"- Without SEC, the per-batch slope of log ‖∂L/∂f_i‖ against log ‖f_i‖ (each run's median) averages "
        f"{measures_text(sl, 3, detail=pooled(sl), test='t-test against 0')} (theory: −1 at fixed directions): "
        f"*{sl['what']}*: **{sl['verdict']}**.{minus_one}\n"
        f"- Without SEC, log(mean tracked norm at the end / at the start) = "
        f"{measures_text(gr, 3, detail=pooled(gr), test='t-test against 0')}: *{gr['what']}*: **{gr['verdict']}**.\n"
        f"- SEC − none of the final spread (CV) of the tracked norms, averaged over the losses per seed: "
        f"{measures_text(cv, 3, detail=cv_note, test='t-test against 0')}: "
        f"*{cv['what']}*: **{cv['verdict']}**.\n\n"
        f"The three verdicts are one Holm family ({int(fam['m'].iloc[0])} of them with a test, so m = "
        f"{int(fam['m'].iloc[0])}).")


# ------------------------------------------------------------------------------ the claims this page decides

def _instability_family(ev):
    f = ev.frames("instability")
    return instability_family(f.runs[f.runs["variant"].isin(["none", "sec"])], f.steps, f.tracked)


#: :func:`instability_family` on the page's evidence (runs without and with SEC), as the page computes it.
page_family = derived_family(__name__, "instability_family", _instability_family)


def _question(q: str):
    def estimate(ev) -> dict:
        row = page_family(ev).set_index("question").loc[q]
        p = row.get("p_target_adj", np.nan)
        note = (f"The test of the law itself, slope = {SLOPE_TARGET:+.0f} (one-sample t-test): p = "
                f"{row['p_target']:.2g}, Bonferroni-adjusted over the family's {int(row['m'])}: {p:.2g}."
                if np.isfinite(p) else "")
        return from_row(row, note=note)
    estimate.__name__ = f"instability_{q}"
    return estimate


CLAIMS = [
    Claim(id="Q7a", claim="The gradient magnitude follows 1/‖f‖ in real training (‖∂L/∂f‖ ∝ 1/‖f‖: a log-log "
                          "slope of −1 across a batch's samples; the law itself, at fixed directions, is Proposition 2 on "
                          "the theory page, where it holds)",
          source="review Q7; paper Prop. 2",
          measured="log-log slope of ‖∂L/∂f_i‖ against ‖f_i‖ in each batch, each run's median over training, runs "
                   "without SEC pooled across losses; reproduced only if the interval contains −1 and excludes 0",
          unit="slope", expected_sign=-1, page="instability", estimate=_question("slope"),
          n_counts="runs pooled across losses", target=SLOPE_TARGET),
    Claim(id="Q7b", claim="Without SEC the norms of training samples grow during training",
          source="review Q7; rebuttal Fig. 1",
          measured="log(mean tracked norm at the end / at the start), runs without SEC pooled across losses",
          unit="log ratio", expected_sign=+1, page="instability", estimate=_question("growth"),
          n_counts="runs pooled across losses"),
]
