"""The convergence page: how soon test R@1 reaches 90% of its final value, with and without SEC."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from .. import report
from ..report import one_family, pooled_diff, with_verdict
from ..report.claims import Claim, derived_family, from_row
from ..runs import densecurves
from ..runs.pilot import TIER
from . import profile_param
from .common import check_cols, measures_text, name_means, paired, record_row, verdict_row_of
from .evidence import page_claims, page_records, runs_sentence

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


def prefix_sentence(check: "pd.DataFrame | None", evals: pd.DataFrame, metric: str = "R@1") -> str:
    """What :func:`splice_early` did, computed from its ``check``: how many runs, evaluated how densely up to which
    step, and how the data show that the prefixes retrace their runs (the training logs where ``check`` has them,
    the evaluations both made otherwise). Empty without prefixes."""
    if check is None or not len(check):
        return ""

    def one(col):
        vals = sorted({int(v) for v in check[col]})
        return ", ".join(f"{v:,}" for v in vals)
    text = (f"Each of these {len(check)} runs was also retraced from the start to iteration {one('prefix_last')} and "
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
    """``runs`` with, for each fraction ``f`` of ``fracs``, the run's ``metric`` at the evaluation step nearest to
    ``f`` × its run length (its last evaluation step; a tie goes to the later step), and that step. (The first
    evaluation at or after ``f`` × length took the decisive tier's 25% to 37%: its runs evaluate every 1,687 of
    13,500 iterations after their dense start, and 2 × 1,687 falls one iteration short of 25%.)

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
            dist = np.abs(t - f * t[-1])
            j = int(np.flatnonzero(dist <= dist.min() + 1e-9)[-1])
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


def _pooled_reach(reach: pd.DataFrame) -> pd.DataFrame:
    """The iteration to 90% averaged over the losses per seed (:func:`sec_lib.report.pooled_diff`, expected sign −1;
    n = seeds), one row before its family adjusts it."""
    e = pooled_diff(reach, "variant", "none", "sec", "reach")
    return pd.DataFrame([{"comparison": "SEC − none, mean over the losses", "metric": "reach",
                          **verdict_row_of(e, -1), "n_losses": e.get("n_groups", 0)}])


def convergence_family(reach: pd.DataFrame, early: pd.DataFrame | None = None,
                       fracs: Sequence[float] = EARLY_FRACTIONS) -> dict:
    """Every verdict of the page as ONE Holm family (issue 9): the per-loss table of
    :func:`convergence_diffs` and the iteration to 90% averaged over the losses per seed
    (:func:`sec_lib.report.pooled_diff`, expected sign −1; n = seeds). Returns ``{"diffs": ..., "pooled":
    one-row table}``, each row with ``p_adj`` and ``m`` of the whole family, ``mde``, n and ``n_counts``."""
    diffs, pooled = one_family(convergence_diffs(reach, early, fracs), _pooled_reach(reach), family=FAMILY)
    return {"diffs": diffs, "pooled": pooled}


def reach_family(reach: pd.DataFrame, family: str) -> dict:
    """C3b's registered family (``sec_lib.runs.densecurves``): the iteration to 90% of the final R@1, SEC − none
    paired on seed per loss (expected sign −1) and averaged over the losses per seed, ONE Holm family named
    ``family`` (4 losses: 5 comparisons). Returns ``{"diffs", "pooled"}`` as :func:`convergence_family`."""
    d = paired(reach, ["loss"], "variant", "none", "sec", ["reach"]).assign(_sign=-1)
    diffs = name_means(with_verdict(d, "_sign").drop(columns="_sign"), "none", "sec")
    diffs, pooled = one_family(diffs, _pooled_reach(reach), family=family)
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
            f"faster*: **{p['verdict']}**.\n\nEvery verdict above comes from one Holm family of "
            f"{int(p['m'])} comparisons (the paired table and this average).")


# ------------------------------------------------------------------------------ C3b, the registered follow-up

def dense_applies(ev) -> bool:
    """Whether this page shows C3b: only where it shows the decisive tier, whose runs C3b retraces (a quick book, or a
    real-benchmark book, has none of them)."""
    ev.frames("convergence")
    return ev.profile_of("convergence") == TIER


def _committed(ev):
    """C3b's committed runs (``densecurves.test_frames``), read once per evidence; KeyError before all are there."""
    return ev.derived("c3b_committed", densecurves.test_frames)


def dense_frames(ev) -> tuple:
    """``(runs, evals, check)`` of C3b (:func:`splice_early`'s): the page's full runs without and with SEC, each with
    its prefix retraced to ``densecurves.PREFIX`` iterations (:mod:`sec_lib.runs.densecurves`) spliced in, in place of
    C3's shorter one. Read once per evidence. KeyError (no evidence) on another tier, or while C3b's runs are not all
    committed."""
    if not dense_applies(ev):
        raise KeyError(f"C3b is a follow-up on the {TIER} tier's runs; the {ev.profile_of('convergence')} tier has "
                       "none")

    return ev.derived("c3b_frames", lambda: _with_dense(ev, longer=True))


def _with_dense(ev, longer: bool) -> tuple:
    """:func:`splice_early` of C3b's prefixes with the page's runs without and with SEC that are longer than them
    (``longer``: the full runs, into whose curves they are spliced) or shorter (C3's prefixes, which they must
    retrace), each of those runs' evaluations and training logs beside C3b's."""
    f, dense = ev.frames("convergence"), _committed(ev)
    runs = f.runs[f.runs["variant"].isin(["none", "sec"])]
    runs = runs[runs["iterations"] > densecurves.PREFIX if longer else runs["iterations"] < densecurves.PREFIX]

    def both(name):
        table = getattr(f, name)
        return pd.concat([table[table["key"].isin(runs["key"])], getattr(dense, name)], ignore_index=True)
    joined = pd.concat([runs, dense.runs[[c for c in runs.columns if c in dense.runs.columns]]], ignore_index=True)
    return splice_early(joined, both("evals"), steps=both("steps"))


def dense_vs_c3(ev) -> pd.DataFrame:
    """:func:`splice_early`'s check of each C3b prefix against C3's prefix of the same run (the shorter of the two):
    the evaluations both made (``shared_steps``) and the largest R@1 difference there, 0 where C3b retraces C3's
    prefix exactly. KeyError where C3b has none."""
    dense_frames(ev)
    return _with_dense(ev, longer=False)[2]


def dense_reach(ev) -> pd.DataFrame:
    """:func:`reach_table` of the full runs' curves with C3b's prefixes spliced in, computed once per evidence;
    KeyError where C3b has none."""
    return ev.derived("c3b_reach", lambda: reach_table(*dense_frames(ev)[:2]))


def dense_ready(ev) -> bool:
    """Whether C3b has evidence on this page: the decisive tier shown and all of C3b's runs committed."""
    try:
        dense_frames(ev)
    except KeyError:
        return False
    return True


def dense_family(ev) -> dict:
    """C3b's registered Holm family (:func:`reach_family`) on :func:`dense_frames`; KeyError where it has none."""

    return ev.derived("c3b_family", lambda: reach_family(dense_reach(ev), densecurves.FAMILY))


def dense_pairs(ev, reach: pd.DataFrame) -> pd.DataFrame:
    """Per full run: ``reach_C3``, its iteration to 90% of the final R@1 on C3's curve (``reach``: the page's
    :func:`reach_table`), beside ``reach_C3b``, the same on C3b's (:func:`dense_frames`); KeyError where C3b has
    none."""
    dense = dense_reach(ev)[["key", "reach"]].rename(columns={"reach": "reach_C3b"})
    check_cols(reach, ["key", "loss", "variant", "seed", "reach"], "reach")
    return (reach[["key", "loss", "variant", "seed", "reach"]].rename(columns={"reach": "reach_C3"})
            .merge(dense, on="key", how="inner"))


def dense_pooled_row(ev) -> dict:
    """C3b's estimate: the pooled row of :func:`dense_family`."""
    return from_row(dense_family(ev)["pooled"].iloc[0])


def dense_sentence(ev) -> str:
    """What produced C3b's numbers (its runs, as the evidence banner words a tier, and how their prefixes were
    checked), where it crosses, or why this page has none of it."""
    if not dense_applies(ev):
        return (f"C3b is a follow-up on the decisive tier's runs; this page shows the {ev.profile_of('convergence')} "
                "tier, which has none, so it shows no part of it.")
    try:
        _, evals, check = dense_frames(ev)
    except KeyError as e:
        return f"**C3b has no evidence here yet.** {e.args[0]}."
    reach = dense_reach(ev)
    c3 = dense_vs_c3(ev)
    shared = c3["shared_steps"].str.count(",") + 1
    worst = float(c3["max |ΔR@1|"].max())
    agree = (f"R@1 agrees exactly with C3's prefix of the same run at the {shared.min()} evaluations each pair shares"
             if worst == 0 else f"R@1 differs from C3's prefix of the same run by at most {worst:.2g} points at the "
             "evaluations each pair shares") if len(c3) and shared.min() > 1 else ""
    return (f"**Evidence for C3b:** {runs_sentence(densecurves.stage_runs())}; committed under "
            f"`{densecurves.FOLDER_TEXT}`. {prefix_sentence(check, evals)}"
            f"{' And ' + agree + '.' if agree else ''} {resolution_sentence(reach, check, '')}")


def dense_reading(ev) -> str:
    """C3b's bullet for the page's verdict, from its record (the claim decides it), and its family in words."""
    head = "- **The crossing measured on dense curves** (C3b, a registered follow-up"
    if not dense_applies(ev):
        return ""
    if "C3b" not in {c.id for c in page_claims("convergence")}:    # registered, its runs underway: not scored yet
        return f"{head}): its runs are underway, so it is not on the scorecard yet."
    rec = next(r for r in page_records("convergence", ev) if r.id == "C3b")
    if not rec.has_estimate:
        return f"{head}): no evidence. {rec.note}."
    p = dense_family(ev)["pooled"].iloc[0]
    over = f"each the mean over {int(p['n_losses'])} losses"
    said = measures_text(record_row(rec), 1, 'iterations', over, 't-test against 0')
    return (f"{head}; Holm family: {rec.family}, {int(p['m'])} comparisons: this average and the per-loss rows of "
            f"C3b's table): SEC − none = {said} → *{rec.statement}*: **{rec.verdict}**. It is registered in "
            f"`{densecurves.FOLDER_TEXT}README.md`.")


# ------------------------------------------------------------------------------ the claims this page decides

def _convergence_family(ev):
    f = ev.frames("convergence")
    runs, evals, _ = splice_early(f.runs[f.runs["variant"].isin(["none", "sec"])], f.evals, steps=f.steps)
    return convergence_family(reach_table(runs, evals), early_table(runs, evals))


#: :func:`convergence_family` on the page's evidence, exactly as the page computes it.
page_family = derived_family(__name__, "convergence_family", _convergence_family)


def pooled_row(ev) -> dict:
    """C3's estimate: the pooled row (SEC − none, mean over the losses per seed) of the page's family."""
    return from_row(page_family(ev)["pooled"].iloc[0])


CLAIMS = [
    Claim(id="C3", claim="SEC converges faster", source="paper Sec. 4 (training curves)",
          measured="iterations until test R@1 first reaches 90% of the run's final R@1, SEC − none, paired on seed, "
                   "mean over the losses per seed (the convergence page's test)",
          unit="iterations", expected_sign=-1, page="convergence",
          estimate=pooled_row),
    Claim(id="C3b", claim="SEC converges faster, the crossing measured on dense curves",
          source="paper Sec. 4 (training curves); a registered follow-up to C3 (data/followups/dense-curves)",
          measured="C3's measure on curves evaluated every 100 iterations to 5,000 (C3's prefixes retraced further): "
                   "iterations until test R@1 first reaches 90% of the run's final R@1, SEC − none, paired on seed, "
                   "mean over the losses per seed",
          unit="iterations", expected_sign=-1, page="convergence", family=densecurves.FAMILY,
          estimate=dense_pooled_row, pooled=True),
]
