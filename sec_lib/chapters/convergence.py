"""The convergence page: how soon test R@1 reaches 90% of its final value, with and without SEC."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from .. import report
from ..report import fmt_estimate, pooled_diff
from . import profile_param
from .common import check_cols, name_means, paired, with_verdict

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()


def reach_step(steps, values, frac: float = 0.9) -> float:
    """The first iteration at which a curve reaches ``frac`` × its final value, interpolated.

    Definition: with evaluations ``(t_0 < t_1 < … < t_m, r_0 … r_m)`` (``t_0 = 0`` is the untrained
    model) and the threshold ``τ = frac · r_m``: 0 if ``r_0 ≥ τ``; otherwise, with ``j`` the first
    index such that ``r_j ≥ τ``, the linear interpolation ``t_{j−1} + (τ − r_{j−1}) / (r_j − r_{j−1}) ·
    (t_j − t_{j−1})``. It always exists (``r_m ≥ τ`` for ``r_m ≥ 0``); NaN for an empty curve,
    non-finite values or a negative final value. Non-monotone curves count their first crossing.
    """
    if not 0 < frac <= 1:
        raise ValueError(f"frac must be in (0, 1], got {frac!r}")
    t = np.asarray(steps, dtype=float)
    r = np.asarray(values, dtype=float)
    if t.shape != r.shape or t.ndim != 1:
        raise ValueError(f"steps and values must be 1-D of the same length, got shapes {t.shape} and {r.shape}")
    if len(t) == 0 or not np.all(np.isfinite(r)) or not np.all(np.isfinite(t)):
        return math.nan
    order = np.argsort(t, kind="stable")
    t, r = t[order], r[order]
    if r[-1] < 0:
        return math.nan
    tau = frac * r[-1]
    if r[0] >= tau:
        return float(t[0])
    j = int(np.argmax(r >= tau))
    return float(t[j - 1] + (tau - r[j - 1]) / (r[j] - r[j - 1]) * (t[j] - t[j - 1]))


def reach_table(runs: pd.DataFrame, evals: pd.DataFrame, frac: float = 0.9, metric: str = "R@1") -> pd.DataFrame:
    """``runs`` with ``reach`` (:func:`reach_step` of the run's ``metric`` curve), ``initial`` and
    ``final`` (first and last evaluation). Failed runs get NaN."""
    check_cols(evals, ["key", "step", metric], "evals")
    rows = []
    for key, e in evals.groupby("key", sort=False):
        e = e.sort_values("step")
        rows.append({"key": key, "reach": reach_step(e["step"], e[metric], frac),
                     "initial": float(e[metric].iloc[0]), "final": float(e[metric].iloc[-1])})
    per = pd.DataFrame(rows, columns=["key", "reach", "initial", "final"])
    out = runs.drop(columns=[c for c in ("reach", "initial", "final") if c in runs.columns]).merge(per, on="key", how="left")
    if "status" in out.columns:
        out.loc[out["status"] != "done", ["reach", "final"]] = np.nan
    return out


def curve_band(runs: pd.DataFrame, evals: pd.DataFrame, by: Sequence[str] = ("loss", "variant"),
               metric: str = "R@1") -> pd.DataFrame:
    """Per group × evaluation step: mean, t-CI (over seeds), min and max of ``metric``."""
    by = list(by)
    check_cols(runs, ["key", *by], "runs")
    check_cols(evals, ["key", "step", metric], "evals")
    m = evals.merge(runs[["key", *by]], on="key")
    s = report.summarize(m, [*by, "step"], [metric]).drop(columns="metric")
    mm = m.groupby([*by, "step"], sort=False)[metric].agg(["min", "max"]).reset_index()
    out = s.merge(mm, on=[*by, "step"], how="left")
    rank = {c: {v: i for i, v in enumerate(dict.fromkeys(runs[c]))} for c in by}
    keys = pd.DataFrame({c: out[c].map(rank[c]) for c in by}).assign(step=out["step"])
    return out.loc[keys.sort_values([*by, "step"], kind="stable").index].reset_index(drop=True)


def convergence_diffs(reach: pd.DataFrame) -> pd.DataFrame:
    """Paired SEC − none per loss of the iteration to reach the fraction (expected sign −1: SEC is
    faster) and of the final R@1 (expected +1), paired t-test over seeds."""
    d1 = with_verdict(paired(reach, ["loss"], "variant", "none", "sec", ["reach"]), -1)
    d2 = with_verdict(paired(reach, ["loss"], "variant", "none", "sec", ["final"]), +1)
    return name_means(pd.concat([d1, d2], ignore_index=True), "none", "sec")


def page_reading(reach: pd.DataFrame, diffs: pd.DataFrame) -> str:
    """One bullet per loss (:func:`convergence_diffs`) and the gain averaged over the losses with its verdict."""
    pooled = pooled_diff(reach, "variant", "none", "sec", "reach")
    v = report.verdict(pooled["estimate"], pooled["ci_lo"], pooled["ci_hi"], -1, n=pooled["n"])
    lines = [f"- **{r.loss}**: SEC − none = {r.diff:+.1f} iterations (95% CI [{r.ci_lo:+.1f}, {r.ci_hi:+.1f}], "
             f"p = {r.p_value:.2g}) → **{r.verdict}**" for r in diffs[diffs.metric == "reach"].itertuples(index=False)]
    return ("\n".join(lines) + f"\n\nAveraged over the losses, SEC changes the iteration to reach 90% of the "
            f"final R@1 by {fmt_estimate(pooled, 1)} iterations: *SEC converges faster*: **{v}**.")
