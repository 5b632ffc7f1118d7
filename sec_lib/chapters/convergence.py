"""The convergence page: how soon test R@1 reaches 90% of its final value, with and without SEC."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from .. import report
from ..report import one_family, pooled_diff, with_verdict
from . import profile_param
from ..report.claims import Claim, from_row
from .common import check_cols, measures_text, name_means, paired, verdict_row_of

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


#: The columns that identify a run apart from its length (a full run and its dense-early prefix,
#: ``experiments.early_twin``, share them).
TWIN_COLS = ("dataset", "model", "width", "head", "embed_dim", "loss", "optimizer", "lr", "eta", "mu",
             "momentum", "seed", "batch_size", "image_size", "device")


def splice_early(runs: pd.DataFrame, evals: pd.DataFrame, metric: str = "R@1"):
    """Join each run to its dense-early prefix (the same run stopped early and evaluated more often,
    ``experiments.early_twin``), when the chapter has prefixes.

    Returns ``(runs, evals, check)``. Without prefixes (the quick profiles): the inputs and ``None``.
    With them: only the full runs that have a prefix (so that every curve has the same resolution), each
    curve made of its prefix's evaluations up to the prefix's length and its own after it; ``check``
    has one row per pair with the steps both evaluated and the largest absolute ``metric`` difference
    there (0 when the prefix retraces its run, as it does under a constant learning rate)."""
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
    parts, rows = [], []
    for key, pkey in pairs:
        e, d = by_key.get(key, evals.iloc[:0]), by_key.get(pkey, evals.iloc[:0])
        upto = d["step"].max() if len(d) else -1
        both = e.merge(d, on="step", suffixes=("", "_prefix"))
        rows.append({"key": key, "prefix_key": pkey, "shared_steps": ", ".join(str(int(t)) for t in both["step"]),
                     f"max |Δ{metric}|": float((both[metric] - both[f"{metric}_prefix"]).abs().max())
                     if len(both) else np.nan})
        parts.append(pd.concat([d.assign(key=key), e[e["step"] > upto]], ignore_index=True))
    spliced = pd.concat(parts, ignore_index=True) if parts else evals.iloc[:0]
    keep = full[full["key"].isin([k for k, _ in pairs])].reset_index(drop=True)
    return keep, spliced, pd.DataFrame(rows)


def prefix_sentence(check: "pd.DataFrame | None", evals: pd.DataFrame, metric: str = "R@1") -> str:
    """What :func:`splice_early` did, computed: how many runs, evaluated how densely up to which step,
    and how well the prefixes retrace their runs. Empty without prefixes."""
    if check is None or not len(check):
        return ""
    e = evals[evals["key"].isin(check["key"])].sort_values("step")
    steps = sorted(e["step"].unique())
    gaps = np.diff(steps)
    dense = int(gaps.min()) if len(gaps) else 0
    upto = max((int(t) for t, g in zip(steps[1:], gaps) if g == dense), default=0)
    worst = check[f"max |Δ{metric}|"].max()
    shared = check["shared_steps"].iloc[0]
    return (f"Each of these {len(check)} runs was also retraced from the start to iteration {upto:,} and "
            f"evaluated every {dense} iterations there; its curve uses those evaluations up to {upto:,} and its "
            f"own every {int(gaps.max()) if len(gaps) else 0} after. The retraced runs are exact prefixes: at the "
            f"steps both evaluated ({shared}) the {metric} differs by at most {worst:.2g} points.")


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


#: The fixed early fractions of the run length at which C3 compares R@1 (issue 9).
EARLY_FRACTIONS = (0.10, 0.25, 0.50)


def early_column(frac: float) -> str:
    """Column of :func:`early_table` holding R@1 at fraction ``frac`` of the run ('R@1 at 25%')."""
    return f"R@1 at {frac:.0%}"


def early_table(runs: pd.DataFrame, evals: pd.DataFrame, fracs: Sequence[float] = EARLY_FRACTIONS,
                metric: str = "R@1") -> pd.DataFrame:
    """``runs`` with, for each fraction ``f`` of ``fracs``, the run's ``metric`` at the first evaluation
    step at or after ``f`` × its run length (its last evaluation step), and that step.

    Columns ``R@1 at 10%`` (:func:`early_column`) and ``step at 10%``; only evaluation steps that exist
    in the run are used (no interpolation). Failed runs and runs without evaluations get NaN."""
    fracs = [float(f) for f in fracs]
    bad = [f for f in fracs if not 0 < f <= 1]
    if bad:
        raise ValueError(f"fractions must lie in (0, 1], got {bad}")
    check_cols(evals, ["key", "step", metric], "evals")
    rows = []
    for key, e in evals.groupby("key", sort=False):
        e = e.sort_values("step")
        t, r = e["step"].to_numpy(float), e[metric].to_numpy(float)
        rec = {"key": key}
        for f in fracs:
            j = int(np.argmax(t >= f * t[-1] - 1e-9))
            rec[early_column(f)], rec[f"step at {f:.0%}"] = float(r[j]), float(t[j])
        rows.append(rec)
    cols = ["key"] + [c for f in fracs for c in (early_column(f), f"step at {f:.0%}")]
    per = pd.DataFrame(rows, columns=cols)
    out = runs.drop(columns=[c for c in cols[1:] if c in runs.columns]).merge(per, on="key", how="left")
    if "status" in out.columns:
        out.loc[out["status"] != "done", cols[1:]] = np.nan
    return out


def early_steps(early: pd.DataFrame, fracs: Sequence[float] = EARLY_FRACTIONS) -> str:
    """Which evaluation steps the early fractions used, e.g. '10% → step 500, 25% → step 1250'."""
    parts = []
    for f in fracs:
        s = sorted({int(v) for v in early[f"step at {f:.0%}"].dropna()})
        parts.append(f"{f:.0%} → step {', '.join(map(str, s)) if s else 'n/a'}")
    return "; ".join(parts)


def convergence_diffs(reach: pd.DataFrame, early: pd.DataFrame | None = None,
                      fracs: Sequence[float] = EARLY_FRACTIONS) -> pd.DataFrame:
    """Paired SEC − none per loss, the chapter's comparisons as ONE Holm family: the iteration to reach
    90% of the final R@1 (expected sign −1: SEC is faster), the final R@1 (+1) and, given ``early``
    (:func:`early_table`), R@1 at each early fraction of the run (+1). Paired t-test over seeds."""
    parts = [paired(reach, ["loss"], "variant", "none", "sec", ["reach"]).assign(_sign=-1),
             paired(reach, ["loss"], "variant", "none", "sec", ["final"]).assign(_sign=+1)]
    if early is not None:
        parts.append(paired(early, ["loss"], "variant", "none", "sec", [early_column(f) for f in fracs]).assign(_sign=+1))
    d = pd.concat(parts, ignore_index=True)
    return name_means(with_verdict(d, "_sign").drop(columns="_sign"), "none", "sec")


#: The Holm family of the convergence page (see :func:`convergence_family`).
FAMILY = "convergence page"


def convergence_family(reach: pd.DataFrame, early: pd.DataFrame | None = None,
                       fracs: Sequence[float] = EARLY_FRACTIONS) -> dict:
    """Every verdict of the page as ONE Holm family (issue 9): the per-loss table of
    :func:`convergence_diffs` and the iteration to 90% averaged over the losses per seed
    (:func:`sec_lib.report.pooled_diff`, expected sign −1; n = seeds). Returns ``{"diffs": ..., "pooled":
    one-row table}``, each row with ``p_adj`` and ``m`` of the whole family, ``mde``, n and ``n_counts``."""
    diffs = convergence_diffs(reach, early, fracs)
    e = pooled_diff(reach, "variant", "none", "sec", "reach")
    pooled = pd.DataFrame([{"comparison": "SEC − none, mean over the losses", "metric": "reach",
                            **verdict_row_of(e, -1), "n_losses": e.get("n_groups", 0)}])
    diffs, pooled = one_family(diffs, pooled, family=FAMILY)
    return {"diffs": diffs, "pooled": pooled}


def page_reading(reach: pd.DataFrame, family: dict | None = None) -> str:
    """One bullet per loss and the change averaged over the losses, each with its verdict, from the
    page's one Holm family (:func:`convergence_family`, computed from ``reach`` unless given)."""
    fam = convergence_family(reach) if family is None else family
    if not isinstance(fam, dict) or not {"diffs", "pooled"} <= set(fam):
        raise ValueError("family must be the dict of convergence_family(reach, early) (keys diffs, pooled), "
                         f"got {type(fam).__name__}")
    diffs, p = fam["diffs"], fam["pooled"].iloc[0]
    lines = [f"- **{r['loss']}**: SEC − none = {measures_text(r, 1, 'iterations', test='paired t-test')} → "
             f"**{r['verdict']}**" for r in diffs[diffs.metric == "reach"].to_dict("records")]
    detail = f"each the mean over {int(p['n_losses'])} losses"
    return ("\n".join(lines) + f"\n\nAveraged over the losses, SEC changes the iteration to reach 90% of the "
            f"final R@1 by {measures_text(p, 1, 'iterations', detail, 't-test against 0')}: *SEC converges "
            f"faster*: **{p['verdict']}**.\n\nEvery verdict on this page comes from one Holm family of "
            f"{int(p['m'])} comparisons (the paired table and this average).")


# ------------------------------------------------------------------------------ the claims this page decides

def page_family(ev) -> dict:
    """:func:`convergence_family` on the page's evidence, exactly as the page computes it."""
    def compute():
        f = ev.frames("convergence")
        runs, evals, _ = splice_early(f.runs[f.runs["variant"].isin(["none", "sec"])], f.evals)
        return convergence_family(reach_table(runs, evals), early_table(runs, evals))
    return ev.derived("convergence_family", compute)


CLAIMS = [
    Claim(id="C3", claim="SEC converges faster", source="paper Sec. 4 (training curves)",
          measured="iterations until test R@1 first reaches 90% of the run's final R@1, SEC − none, paired on seed, "
                   "mean over the losses per seed (the convergence page's test)",
          unit="iterations", expected_sign=-1, page="convergence",
          estimate=lambda ev: from_row(page_family(ev)["pooled"].iloc[0])),
]
