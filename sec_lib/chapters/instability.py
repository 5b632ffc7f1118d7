"""The instability page: the per-batch gradient-against-norm slope, the tracked samples' norm growth
and spread, with and without SEC."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .. import report
from ..report import summary_table
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
