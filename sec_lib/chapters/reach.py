"""How soon test R@1 reaches 90% of its final value: each run's curve, with a denser prefix spliced in where one
retraces the run's start (:func:`splice_early`), the iteration to 90% per run (:func:`reach_table`), and SEC − none
on it as one Holm family (:func:`reach_family`). The convergence page measures with it, and so does its registered
follow-up C3b (:mod:`.dense_curves`).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..report import one_family, pooled_diff, with_verdict
from .common import check_cols, name_means, paired, verdict_row_of


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


#: The columns that identify a run apart from its length (a full run and its dense-early prefix,
#: ``experiments.early_twin``, share them).
TWIN_COLS = ("dataset", "model", "width", "head", "embed_dim", "loss", "optimizer", "lr", "eta", "mu",
             "momentum", "seed", "batch_size", "image_size", "device")


def _spacing(steps) -> int:
    """The most common gap between consecutive evaluation steps (0 for fewer than two)."""
    gaps = np.diff(np.sort(np.asarray(steps, dtype=float)))
    gaps = gaps[gaps > 0]
    if not len(gaps):
        return 0
    vals, counts = np.unique(gaps, return_counts=True)
    return int(vals[np.argmax(counts)])


#: The training-log column by which :func:`splice_early` checks that a prefix retraces its run.
LOG_COLUMN = "loss_metric"


def splice_early(runs: pd.DataFrame, evals: pd.DataFrame, metric: str = "R@1", steps: pd.DataFrame | None = None):
    """Join each run to its dense-early prefix (the same run stopped early and evaluated more often,
    ``experiments.early_twin``), when the chapter has prefixes.

    Returns ``(runs, evals, check)``. Without prefixes (the quick profiles): the inputs and ``None``.
    With them: only the full runs that have a prefix (so that every curve has the same resolution), each
    curve made of its prefix's evaluations up to the prefix's length and its own after it; ``check``
    has one row per pair: ``prefix_last`` (the prefix's last evaluation), ``prefix_every`` and ``own_every``
    (the usual spacing of the prefix's and the run's evaluations), the steps both evaluated and the largest
    absolute ``metric`` difference there (0 when the prefix retraces its run). Given the training logs
    ``steps``, also ``logged_steps``, the steps both logged up to the prefix's end, and ``max |Δloss|``, the
    largest difference of their training loss (:data:`LOG_COLUMN`) there: a check that still works where the
    two runs share no evaluation step but the untrained one."""
    check_cols(evals, ["key", "step", metric], "evals")
    if "iterations" not in runs.columns:     # hand-made frames without run lengths hold no prefixes
        return runs, evals, None
    cols = [c for c in TWIN_COLS if c in runs.columns]
    check_cols(runs, ["key", *cols], "runs")
    ident = runs[cols].astype(str).agg("|".join, axis=1)
    longest = runs["iterations"].groupby(ident).transform("max")
    is_prefix = runs["iterations"] < longest
    if not is_prefix.any():
        return runs, evals, None
    full, pre = runs[~is_prefix], runs[is_prefix]
    twin = dict(zip(ident[is_prefix], pre["key"]))
    pairs = [(k, twin[i]) for k, i in zip(full["key"], ident[~is_prefix]) if i in twin]
    by_key = dict(tuple(evals.groupby("key", sort=False)))
    logs = {}
    if steps is not None:
        check_cols(steps, ["key", "step", LOG_COLUMN], "steps")
        logs = dict(tuple(steps.groupby("key", sort=False)))
    parts, rows = [], []
    for key, pkey in pairs:
        e, d = by_key.get(key, evals.iloc[:0]), by_key.get(pkey, evals.iloc[:0])
        upto = d["step"].max() if len(d) else -1
        both = e.merge(d, on="step", suffixes=("", "_prefix"))
        row = {"key": key, "prefix_key": pkey, "prefix_last": int(upto), "prefix_every": _spacing(d["step"]),
               "own_every": _spacing(e["step"]), "shared_steps": ", ".join(str(int(t)) for t in both["step"]),
               f"max |Δ{metric}|": float((both[metric] - both[f"{metric}_prefix"]).abs().max())
               if len(both) else np.nan}
        if steps is not None:
            lf, lp = logs.get(key), logs.get(pkey)
            if lf is not None and lp is not None:
                b = lf[["step", LOG_COLUMN]].merge(lp[["step", LOG_COLUMN]], on="step", suffixes=("", "_prefix"))
                b = b[b["step"] <= upto]
                row["logged_steps"] = len(b)
                row["max |Δloss|"] = float((b[LOG_COLUMN] - b[f"{LOG_COLUMN}_prefix"]).abs().max()) if len(b) else np.nan
            else:
                row["logged_steps"], row["max |Δloss|"] = 0, np.nan
        rows.append(row)
        parts.append(pd.concat([d.assign(key=key), e[e["step"] > upto]], ignore_index=True))
    spliced = pd.concat(parts, ignore_index=True) if parts else evals.iloc[:0]
    keep = full[full["key"].isin([k for k, _ in pairs])].reset_index(drop=True)
    return keep, spliced, pd.DataFrame(rows)


def prefix_sentence(check: "pd.DataFrame | None", evals: pd.DataFrame, metric: str = "R@1",
                    whose: str = "these") -> str:
    """What :func:`splice_early` did, computed from its ``check``: how many runs, evaluated how densely up to which
    step, and how the data show that the prefixes retrace their runs (the training logs where ``check`` has them,
    the evaluations both made otherwise). ``whose``: whose runs were retraced ("these": the runs just named; "C3's",
    where the runs just named are the retraces). Empty without prefixes."""
    if check is None or not len(check):
        return ""

    def one(col):
        vals = sorted({int(v) for v in check[col]})
        return ", ".join(f"{v:,}" for v in vals)
    also = "also " if whose == "these" else ""
    text = (f"Each of {whose} {len(check)} runs was {also}retraced from the start to iteration {one('prefix_last')} and "
            f"evaluated every {one('prefix_every')} iterations there; its curve uses those evaluations up to "
            f"{one('prefix_last')} and its own, every {one('own_every')} iterations, after.")
    worst = check[f"max |Δ{metric}|"].max()
    shared = sorted({int(t) for s in check["shared_steps"] for t in str(s).split(", ") if t != ""})
    beyond = [t for t in shared if t > 0]
    evals_text = (f"at the evaluations both made ({', '.join(f'{t:,}' for t in shared)}) {metric} differs by at most "
                  f"{worst:.2g} points")
    if "max |Δloss|" in check.columns and check["logged_steps"].min() > 0:
        gap = check["max |Δloss|"].max()
        same = "agree exactly" if gap == 0 else f"differ by at most {gap:.2g}"
        lo, hi = int(check["logged_steps"].min()), int(check["logged_steps"].max())
        text += (f" Whether the retraced runs are exact prefixes, their training logs say: their training losses "
                 f"{same} at every step both logged up to the prefix's end ({lo if lo == hi else f'{lo} to {hi}'} "
                 f"steps a pair)")
        text += (f", and {evals_text}." if beyond else
                 "; their evaluations cannot check it, since the two share none but the untrained network's.")
    elif beyond:
        text += f" The retraced runs are exact prefixes: {evals_text}."
    else:
        text += (" The two share no evaluation but the untrained network's, so these evaluations cannot show that the "
                 "prefixes retrace their runs.")
    return text


#: What :func:`resolution_sentence` adds where runs cross after their dense start: the page's other measure.
EARLY_INSTEAD = " The early fractions below read R@1 at fixed steps instead."


def resolution_sentence(reach: pd.DataFrame, check: "pd.DataFrame | None", after: str = EARLY_INSTEAD) -> str:
    """How many runs reach 90% of their final R@1 after the dense prefix ends (``check``: :func:`splice_early`'s),
    where their reach is interpolated across the full run's evaluation spacing (then ``after``). Empty without
    prefixes."""
    if check is None or not len(check) or "reach" not in reach.columns:
        return ""
    c = check.set_index("key")
    r = reach[reach["key"].isin(c.index) & reach["reach"].notna()]
    if not len(r):
        return ""
    late = r[r["reach"] > c.loc[r["key"], "prefix_last"].to_numpy()]
    if not len(late):
        return (f"Every run reaches 90% of its final R@1 within its dense start, so each reach is interpolated across "
                f"at most {int(c['prefix_every'].max())} iterations.")
    return (f"{len(late)} of {len(r)} runs reach 90% of their final R@1 after their dense start ends (iteration "
            f"{int(c['prefix_last'].max()):,}), where their evaluations are up to {int(c['own_every'].max()):,} "
            f"iterations apart: there their reach is a straight-line interpolation across that gap, not a measured "
            f"crossing.{after}")


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


def pooled_reach(reach: pd.DataFrame) -> pd.DataFrame:
    """The iteration to 90% averaged over the losses per seed (:func:`sec_lib.report.pooled_diff`, expected sign −1;
    n = seeds), one row before its family adjusts it."""
    e = pooled_diff(reach, "variant", "none", "sec", "reach")
    return pd.DataFrame([{"comparison": "SEC − none, mean over the losses", "metric": "reach",
                          **verdict_row_of(e, -1), "n_losses": e.get("n_groups", 0)}])


def reach_family(reach: pd.DataFrame, family: str) -> dict:
    """C3b's registered family (``sec_lib.runs.densecurves``): the iteration to 90% of the final R@1, SEC − none
    paired on seed per loss (expected sign −1) and averaged over the losses per seed, ONE Holm family named
    ``family`` (4 losses: 5 comparisons). Returns ``{"diffs", "pooled"}`` as :func:`sec_lib.chapters.convergence.convergence_family`."""
    d = paired(reach, ["loss"], "variant", "none", "sec", ["reach"]).assign(_sign=-1)
    diffs = name_means(with_verdict(d, "_sign").drop(columns="_sign"), "none", "sec")
    diffs, pooled = one_family(diffs, pooled_reach(reach), family=family)
    return {"diffs": diffs, "pooled": pooled}
