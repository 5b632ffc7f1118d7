"""The instability page: the per-batch gradient-against-norm slope, the tracked samples' norm growth
and spread, with and without SEC."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .. import report
from ..report import fmt_estimate, pooled_diff, summary_table, values_ci
from . import profile_param
from .common import check_cols, run_step_means

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
    """Per group: mean log-log slope (and r²) of ‖∂L/∂f_i‖ against ‖f_i‖ over training, and the
    tracked samples' norm growth, final spread and largest step-to-step jump."""
    r = run_step_means(runs, steps, ["grad_slope", "grad_r2"])
    r = tracked_stats(r, tracked)
    return summary_table(r, list(by), list(INSTABILITY_METRICS), digits=3)


def slope_curve(runs: pd.DataFrame, steps: pd.DataFrame, by: Sequence[str] = ("loss", "variant"),
                col: str = "grad_slope", window: int = 5) -> pd.DataFrame:
    """Per group × step: the mean over seeds of ``col`` after a centred rolling mean of ``window`` steps per run."""
    by = list(by)
    check_cols(steps, ["key", "step", col], "steps")
    s = steps[["key", "step", col]].sort_values(["key", "step"]).copy()
    s[col] = (s.groupby("key", sort=False)[col].rolling(window, center=True, min_periods=1).mean()
              .reset_index(level=0, drop=True))
    m = s.merge(runs[["key", *by]], on="key")
    return report.summarize(m, [*by, "step"], [col]).drop(columns="metric")


def page_reading(runs: pd.DataFrame, steps: pd.DataFrame, tracked: pd.DataFrame) -> str:
    """The page's closing bullets: the gradient-vs-norm slope and the tracked norms' growth without
    SEC, and SEC's effect on the final spread of the tracked norms, each with its verdict."""
    slopes = run_step_means(runs, steps, ["grad_slope"])
    tr = tracked_stats(runs, tracked)
    sl = values_ci(slopes.loc[slopes.variant == "none", "grad_slope"])
    gr = values_ci(np.log(tr.loc[tr.variant == "none", "growth"].astype(float)))
    cv = pooled_diff(tr, "variant", "none", "sec", "cv_end")
    v_sl = report.verdict(sl["estimate"], sl["ci_lo"], sl["ci_hi"], -1, n=sl["n"])
    v_gr = report.verdict(gr["estimate"], gr["ci_lo"], gr["ci_hi"], +1, n=gr["n"])
    v_cv = report.verdict(cv["estimate"], cv["ci_lo"], cv["ci_hi"], -1, n=cv["n"])
    return (
        f"- Without SEC, the per-batch slope of log ‖∂L/∂f_i‖ against log ‖f_i‖ averages {fmt_estimate(sl, 3)} over runs "
        f"(theory: −1 at fixed directions): *the gradient magnitude falls with the norm*: **{v_sl}**.\n"
        f"- Without SEC, log(mean tracked norm at the end / at the start) = {fmt_estimate(gr, 3)}: "
        f"*norms grow during training*: **{v_gr}**.\n"
        f"- SEC − none of the final spread (CV) of the tracked norms, averaged over the losses: {fmt_estimate(cv, 3)}: "
        f"*SEC keeps individual norms together*: **{v_cv}**.")
