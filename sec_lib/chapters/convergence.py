"""The convergence page: how soon test R@1 reaches 90% of its final value, with and without SEC."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .. import report
from ..report import one_family, with_verdict
from ..report.claims import Claim, derived_family, from_row
from ..runs import densecurves
from . import profile_param
from .common import check_cols, measures_text, name_means, paired
# The page's measure, and its registered follow-up C3b; their names are this page's too.
from .dense_curves import (dense_applies, dense_family, dense_frames, dense_pairs, dense_reach,  # noqa: F401
                           dense_ready, dense_reading, dense_sentence, dense_vs_c3)
from .reach import (EARLY_INSTEAD, LOG_COLUMN, TWIN_COLS, pooled_reach, prefix_sentence, reach_family,  # noqa: F401
                    reach_step, reach_table, resolution_sentence, splice_early)

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()


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


#: The fixed early fractions of the run length at which C3 compares R@1.
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


def convergence_family(reach: pd.DataFrame, early: pd.DataFrame | None = None,
                       fracs: Sequence[float] = EARLY_FRACTIONS) -> dict:
    """Every verdict of the page as ONE Holm family: the per-loss table of
    :func:`convergence_diffs` and the iteration to 90% averaged over the losses per seed
    (:func:`sec_lib.report.pooled_diff`, expected sign −1; n = seeds). Returns ``{"diffs": ..., "pooled":
    one-row table}``, each row with ``p_adj`` and ``m`` of the whole family, ``mde``, n and ``n_counts``."""
    diffs, pooled = one_family(convergence_diffs(reach, early, fracs), pooled_reach(reach), family=FAMILY)
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


def dense_pooled_row(ev) -> dict:
    """C3b's estimate: the pooled row of :func:`dense_family`."""
    return from_row(dense_family(ev)["pooled"].iloc[0])


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


#: What C3 and C3b mean where they fail on the wrong side (the interval wholly above 0).
SLOWER = "SEC takes longer, not shorter, to reach 90% of its final R@1"

CLAIMS = [
    Claim(id="C3", claim="SEC converges faster", source="paper Sec. 4 (training curves)",
          measured="iterations until test R@1 first reaches 90% of the run's final R@1, SEC − none (above 0: SEC "
                   "takes longer), paired on seed, mean over the losses per seed (the convergence page's test)",
          unit="iterations", expected_sign=-1, page="convergence",
          estimate=pooled_row, failed_words=(SLOWER,)),
    Claim(id="C3b", claim="SEC converges faster, the crossing measured on dense curves",
          source="paper Sec. 4 (training curves); a registered follow-up to C3 (data/followups/dense-curves)",
          measured="C3's measure on curves evaluated every 100 iterations to 5,000 (C3's prefixes retraced further): "
                   "iterations until test R@1 first reaches 90% of the run's final R@1, SEC − none (above 0: SEC "
                   "takes longer), paired on seed, mean over the losses per seed",
          unit="iterations", expected_sign=-1, page="convergence", family=densecurves.FAMILY,
          estimate=dense_pooled_row, pooled=True, failed_words=(SLOWER,)),
]
