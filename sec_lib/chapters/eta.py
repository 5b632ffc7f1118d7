"""The η page (review question 9): R@1 and norm variance against the SEC weight η, paired on seed
against η = 0, and the gain averaged over the whole grid."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .. import report
from ..figures import sweeps, widgets
from ..report import one_family, summary_table, values_ci, with_verdict
from . import profile_param
from ..report.claims import Claim, derived_family
from ..runs.experiments import ETA_SEC
from .gains import paper_sizes
from .common import (NORM_CV, beside_cv, check_cols, measures_text, name_means, paired, shared_steps, var_cv_text,
                     with_batch_cv, with_norm_cv)

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()

#: R@1 and the norm variances, each followed by its CV (std / mean, scale-free) where the runs allow it.
ETA_METRICS = ("R@1", "train_norm_var", "train_norm_cv", "test_norm_var", "test_norm_cv")


def _metrics(runs: pd.DataFrame, metrics: Sequence[str]) -> tuple[pd.DataFrame, list[str]]:
    """``runs`` with the norm CVs (:func:`~sec_lib.chapters.common.with_norm_cv`) and ``metrics`` with
    each norm variance's CV beside it; a CV the runs cannot give is left out (no mean norm), the rest is required."""
    runs = with_norm_cv(runs)
    metrics = [m for m in beside_cv(metrics, runs.columns) if m in runs.columns or m not in NORM_CV.values()]
    check_cols(runs, ["loss", "eta", *metrics], "runs")
    return runs, metrics


def eta_summary(runs: pd.DataFrame, metrics: Sequence[str] = ETA_METRICS) -> pd.DataFrame:
    """Tidy mean ± CI per loss × η (η = 0: no SEC); beside each norm variance its CV (std / mean)."""
    runs, metrics = _metrics(runs, metrics)
    return report.summarize(runs.sort_values(["eta"], kind="stable"), ["loss", "eta"], metrics)


def eta_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Display table of R@1 and norm variances per loss × η (losses in their order, η ascending), each
    variance with its CV (std / mean) beside it."""
    runs, metrics = _metrics(runs, ETA_METRICS)
    rank = {l: i for i, l in enumerate(dict.fromkeys(runs["loss"]))}
    order = runs.assign(_l=runs["loss"].map(rank)).sort_values(["_l", "eta"], kind="stable").drop(columns="_l")
    return summary_table(order, ["loss", "eta"], metrics)


def eta_diffs(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """Paired difference (over seeds) of ``metric`` at each η > 0 minus η = 0, per loss, with the
    paired t-test p-value and a verdict for "SEC at this η beats no SEC" (expected sign +1)."""
    check_cols(runs, ["loss", "eta", "seed", metric], "runs")
    parts = []
    for eta in sorted(e for e in runs["eta"].unique() if e > 0):
        sub = runs[runs["eta"].isin([0.0, eta])]
        d = paired(sub, ["loss"], "eta", 0.0, eta, [metric])
        if len(d):
            parts.append(d.assign(eta=eta))
    if not parts:
        return pd.DataFrame(columns=["loss", "eta", "metric", "estimate", "ci_lo", "ci_hi", "p_value", "n", "verdict"])
    out = pd.concat(parts, ignore_index=True)
    out = out[["loss", "eta", *[c for c in out.columns if c not in ("loss", "eta")]]]
    order = {l: i for i, l in enumerate(dict.fromkeys(runs["loss"]))}
    out = out.sort_values(["loss", "eta"], key=lambda s: s.map(order) if s.name == "loss" else s, kind="stable")
    return name_means(with_verdict(out.reset_index(drop=True), +1, report.MARGINS.get(metric)), "η = 0", "at η")


def eta_reading(diffs: pd.DataFrame) -> str:
    """One sentence per loss: the η at which SEC's gain has a CI above 0, the η at which it has a CI
    below 0, the best η by mean difference, and (given ``verdict`` and ``p_adj`` columns, e.g. from
    :func:`eta_diffs`) the η whose gain is *reproduced*: interval above 0 and Holm-adjusted p < 0.05."""
    parts = []
    for loss, sub in diffs.groupby("loss", sort=False):
        up = [f"{e:g}" for e, lo in zip(sub["eta"], sub["ci_lo"]) if np.isfinite(lo) and lo > 0]
        down = [f"{e:g}" for e, hi in zip(sub["eta"], sub["ci_hi"]) if np.isfinite(hi) and hi < 0]
        best = sub.loc[sub["estimate"].astype(float).idxmax()] if sub["estimate"].notna().any() else None
        s = f"**{loss}**: SEC beats η = 0 with a CI above 0 at " + (f"η ∈ {{{', '.join(up)}}}" if up else "no η")
        if "verdict" in sub.columns and up:
            rep = [f"{e:g}" for e, v in zip(sub["eta"], sub["verdict"]) if v == "reproduced"]
            m = int(sub["m"].iloc[0]) if "m" in sub.columns else 0
            s += (f" (of these, Holm's adjustment over {m} comparisons keeps "
                  + (f"η ∈ {{{', '.join(rep)}}}: reproduced there)" if rep else "none: reproduced at no η)"))
        s += ", and is worse with a CI below 0 at " + (f"η ∈ {{{', '.join(down)}}}" if down else "no η")
        if best is not None:
            s += f"; best η by mean difference: {best['eta']:g} ({best['estimate']:+.2f})"
        parts.append("- " + s + ".")
    return "\n".join(parts)


def eta_robustness(runs: pd.DataFrame, metric: str = "R@1") -> dict:
    """Gain over η = 0 averaged over every η > 0 of the grid and every loss, per seed; mean ± CI
    over seeds (one-sample t-test). Positive = SEC helps across the whole η range tried."""
    check_cols(runs, ["loss", "eta", "seed", metric], "runs")
    base = runs[runs["eta"] == 0].set_index(["seed", "loss"])[metric].astype(float)
    sec = runs[runs["eta"] > 0]
    if not len(sec) or not len(base):
        return values_ci([])
    d = sec.assign(_d=[float(v) - base.get((s, l), np.nan) for v, s, l in zip(sec[metric], sec["seed"], sec["loss"])])
    return values_ci(d.groupby("seed")["_d"].mean().to_numpy())


def eta_grid_gains(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """Per η > 0 of the grid: the gain over η = 0 averaged over the losses per seed, as a verdict row
    (:func:`sec_lib.report.verdict_row`), the grid Holm-adjusted as one family
    (:func:`sec_lib.report.one_family`). Columns: eta, estimate, ci_lo, ci_hi, p_value, p_adj, m, n,
    n_counts, sd, mde, expected_sign, margin, verdict. Empty without η = 0 or η > 0 runs."""
    check_cols(runs, ["loss", "eta", "seed", metric], "runs")
    base = runs[runs["eta"] == 0].set_index(["seed", "loss"])[metric].astype(float)
    sec = runs[runs["eta"] > 0]
    if not len(sec) or not len(base):
        return pd.DataFrame(columns=["eta", *report.ROW_COLUMNS])
    d = sec.assign(_d=[float(v) - base.get((s, l), np.nan) for v, s, l in zip(sec[metric], sec["seed"], sec["loss"])])
    rows = [{"eta": float(eta), **report.verdict_row(g.groupby("seed")["_d"].mean().to_numpy(), +1,
                                                     report.margin_for(metric))}
            for eta, g in d.groupby("eta", sort=True)]
    return one_family(pd.DataFrame(rows, columns=["eta", *report.ROW_COLUMNS]))[0]


#: The Holm family of the η page (see :func:`eta_family`).
FAMILY = "eta page"


def eta_family(runs: pd.DataFrame, metric: str = "R@1") -> dict:
    """Every verdict of the η page as ONE Holm family: the per-loss table against η = 0
    (:func:`eta_diffs`) and the gain per η averaged over the losses per seed (:func:`eta_grid_gains`,
    which on its own adjusts the grid alone, as the claims page's Q9 reads it). Returns
    ``{"diffs": ..., "grid": ...}``, every row with ``p_adj`` and ``m`` of the whole family."""
    diffs, grid = eta_diffs(runs, metric), eta_grid_gains(runs, metric)
    tables = [t for t in (diffs, grid) if len(t)]
    adjusted = iter(one_family(*tables, family=FAMILY))
    diffs, grid = (next(adjusted) if len(t) else t for t in (diffs, grid))
    return {"diffs": at_papers_eta_sized(diffs, metric), "grid": grid}


def at_papers_eta_sized(diffs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """The per-loss rows with a word sized against the paper where the paper reports the row: at the paper's η for
    the loss (:data:`~sec_lib.runs.experiments.ETA_SEC`), Table 1's R@1 gains of SEC for that loss are the claimed
    size, and a signal whose whole interval lies below them reads *smaller than claimed*
    (:func:`sec_lib.report.refine`), as the compare page sizes the same loss at the same η. Rows at another η, which
    the paper does not report, keep their word."""
    if not len(diffs) or metric != report.PRIMARY_METRIC:
        return diffs
    words = [report.refine(v, lo, hi, +1, paper_sizes(loss, "sec")) if float(eta) == ETA_SEC.get(loss) else v
             for loss, eta, v, lo, hi in zip(diffs["loss"], diffs["eta"], diffs["verdict"], diffs["ci_lo"],
                                             diffs["ci_hi"])]
    return diffs.assign(verdict=words)


def norm_var_ratios(summary: pd.DataFrame) -> tuple[float, dict]:
    """The largest η of the grid and, per loss, the training-set norm variance there divided by its
    value without SEC (η = 0), from :func:`eta_summary`."""
    var = summary[summary["metric"] == "train_norm_var"]
    eta_max = float(var["eta"].max())
    ratios = {loss: s.loc[s.eta == eta_max, "mean"].iloc[0] / s.loc[s.eta == 0, "mean"].iloc[0]
              for loss, s in var.groupby("loss", sort=False) if (s.eta == 0).any() and (s.eta == eta_max).any()}
    return eta_max, ratios


def norm_var_ends(summary: pd.DataFrame, eta: float | None = None) -> dict:
    """Per loss, the training-set norm variance and its CV (std / mean) without SEC (η = 0) and at ``eta``
    (default: the largest η of the grid), means over seeds from :func:`eta_summary`:
    {loss: (var at 0, var at η, CV at 0, CV at η)}, a CV NaN where the summary has none."""
    eta = float(summary.loc[summary["metric"] == "train_norm_var", "eta"].max()) if eta is None else float(eta)

    def at(metric, loss, e):
        hit = summary[(summary["metric"] == metric) & (summary["loss"] == loss) & np.isclose(summary["eta"], e)]
        return float(hit["mean"].iloc[0]) if len(hit) else np.nan
    return {loss: (at("train_norm_var", loss, 0.0), at("train_norm_var", loss, eta),
                   at("train_norm_cv", loss, 0.0), at("train_norm_cv", loss, eta))
            for loss in dict.fromkeys(summary.loc[summary["metric"] == "train_norm_var", "loss"])}


def range_sentence(grid: pd.DataFrame) -> str:
    """Q9 from :func:`eta_grid_gains` (or the ``grid`` of :func:`eta_family`): the η at which the gain
    over η = 0 (pooled over the losses per seed) is reproduced, and the range they span; each η with
    its interval, Holm-adjusted p (over the ``m`` comparisons of its family), detectable effect and n."""
    if not len(grid):
        return "No η > 0 is paired with η = 0, so the range of η where SEC helps cannot be measured."
    cells = "; ".join(f"η = {r['eta']:g}: {measures_text(r, 2)} → {r['verdict']}" for r in grid.to_dict("records"))
    ok = grid[grid["verdict"] == "reproduced"]
    where = (f"the gain's interval lies above 0 (with adjusted p < 0.05) for η from {ok['eta'].min():g} to "
             f"{ok['eta'].max():g}, {len(ok)} of {len(grid)} grid values" if len(ok)
             else "no η of the grid has its gain's interval above 0 with adjusted p < 0.05")
    return (f"Gain in R@1 over η = 0, mean over the losses per seed (n = seeds): {cells}. So {where}.")


#: What a per-loss row sized against the paper is (:func:`at_papers_eta_sized`).
PAPERS_ETA_NOTE = ": the paper's η, set against its Table 1 gains for the loss"


def answer_sentence(fam: dict) -> str:
    """The page's answer, first on the page, from :func:`eta_family`'s two tables: the range of the gain over η = 0
    averaged over the losses across the grid, which η's 95% intervals lie above 0 before and after Holm's
    adjustment (with the detectable effects where none survives it), Q9's verdict (:func:`range_verdict`), and how
    many per-loss rows are reproduced or not."""
    grid, diffs = fam["grid"], fam["diffs"]
    if not len(grid):
        return range_sentence(grid)
    etas = grid["eta"].astype(float)
    est = grid["estimate"].astype(float)
    m, n_losses = int(grid["m"].max()), diffs["loss"].nunique() if len(diffs) else 0

    def eset(rows) -> str:
        return "{" + ", ".join(f"{e:g}" for e in rows["eta"]) + "}"
    above = grid[grid["ci_lo"].astype(float) > 0]
    rep = grid[grid["verdict"] == "reproduced"]
    seeds = sorted({int(n) for n in grid["n"]})
    k = int((est > 0).sum())
    s = (f"Averaged over the {n_losses} losses per seed, SEC's R@1 gain over η = 0 lies between {est.min():+.2f} "
         f"and {est.max():+.2f} points across the grid's η from {etas.min():g} to {etas.max():g} "
         + ("(every one of these means above 0). " if k == len(grid) else f"({k} of these {len(grid)} means above 0). "))
    s += (f"Before adjustment the 95% interval lies above 0 at η ∈ {eset(above)}; " if len(above)
          else "No η's 95% interval lies above 0, even before adjustment; ")
    if len(rep):
        s += f"Holm's adjustment over the page's {m} comparisons keeps η ∈ {eset(rep)} (reproduced there). "
    else:
        s += (f"after Holm's adjustment over the page's {m} comparisons none remains: with "
              f"{'/'.join(map(str, seeds))} seeds a point the design could detect gains of "
              f"{grid['mde'].min():.1f} to {grid['mde'].max():.1f} points. ")
    s += f"So the claim that SEC helps over a wide range of η (at least 10× in η) is **{range_verdict(grid)}**."
    if len(diffs):
        words = ("reproduced", "smaller than claimed", "not reproduced")
        per = {v: diffs[diffs["verdict"] == v] for v in words}
        cells = {v: ", ".join(f"{r['loss']} at η = {r['eta']:g}" for r in d.to_dict("records"))
                 for v, d in per.items()}
        said = [f"{v}: {len(per[v])}" + (f" ({cells[v]}{PAPERS_ETA_NOTE if v == 'smaller than claimed' else ''})"
                                          if len(per[v]) else "")
                for v in words if v != "smaller than claimed" or len(per[v])]
        s += f" Of the {len(diffs)} per-loss rows (loss, η), " + "; ".join(said) + "; the rest inconclusive."
    return s


def page_reading(summary: pd.DataFrame, diffs: pd.DataFrame, rob: dict, grid: pd.DataFrame | None = None) -> str:
    """The page's closing paragraph: where SEC helps or hurts per loss (:func:`eta_reading`), the range of
    η where the gain is reproduced (:func:`range_sentence`, given ``grid``; ``rob`` is not judged: an
    average over a grid lets its width decide), and how far the largest η lowers
    the norm variance (:func:`norm_var_ratios`), with the change of its CV (std / mean) beside it
    (:func:`norm_var_ends`). Pass ``diffs`` and ``grid`` from :func:`eta_family`, so
    that their verdicts are one Holm family; tables adjusted apart are refused."""
    fams = {str(f) for t in (diffs, grid) if t is not None and len(t)
            for f in (t["family"].unique() if "family" in t.columns else ["(none)"])}
    if grid is not None and len(grid) and len(diffs) and fams != {FAMILY}:
        raise ValueError(f"diffs and grid must come from eta_family(runs) (one Holm family, {FAMILY!r}); "
                         f"their families: {sorted(fams)}")
    eta_max, ratios = norm_var_ratios(summary)
    ends = norm_var_ends(summary, eta_max)
    rng = range_sentence(grid) + " " if grid is not None else ""
    fam = (f"\n\nEvery verdict on this page comes from one Holm family of {int(diffs['m'].iloc[0])} comparisons "
           f"(the paired table and the per-η averages), each on the η sweep's {int(diffs['n'].max())} seeds. The "
           "compare page's per-loss claims (C4a–d) test SEC at the paper's η on the main comparison's own seeds, in a "
           "family of four: a row here and that claim can differ in verdict, and the claim decides."
           if fams == {FAMILY} and len(diffs) else "")
    no_cv = not any(np.isfinite(e[2]) and np.isfinite(e[3]) for e in ends.values())
    return (eta_reading(diffs) + "\n\n" + rng
            + "At the largest η (" + f"{eta_max:g}" + ") the training-set norm variance is "
            + ", ".join(f"{r:.2g}× ({loss})" for loss, r in ratios.items()) + " of its value without SEC; "
            + "beside it the CV (std / mean) of the same norms, which does not shrink with their scale "
            + f"(η = 0 → η = {eta_max:g}, means over seeds): "
            + "; ".join(f"{loss} {var_cv_text(*ends[loss])}" for loss in ratios if loss in ends) + "."
            + (" These runs store no mean norm, so no CV can be given." if no_cv else "") + fam)


def eta_explorer(summary: pd.DataFrame, runs: pd.DataFrame, steps: pd.DataFrame, y: str = "norm_var", dpi: int = 100):
    """A kernel-free slider over the η sweep (η = 0 first): for each η, the batch norm statistic ``y``
    over training per loss (the batch variance with its CV, std / mean, dashed beside it) and R@1 against η
    with that η marked (:func:`sec_lib.figures.sweeps.eta_panel`), precomputed and switched in the browser
    (:func:`sec_lib.figures.widgets.slider_stack`)."""
    check_cols(runs, ["key", "loss", "eta", "seed"], "runs")
    steps = with_batch_cv(steps)
    steps = shared_steps(steps, [c for c in dict.fromkeys((y, "norm_cv")) if c in steps.columns])
    etas = sorted(float(e) for e in runs["eta"].unique())
    figs = [sweeps.eta_panel(summary, steps, runs, e, y=y) for e in etas]
    return widgets.slider_stack(figs, [f"{e:g}" for e in etas], description="η", dpi=dpi)


# ------------------------------------------------------------------------------ the claims this page decides

#: :func:`eta_family` on the page's evidence, exactly as the page computes it.
page_family = derived_family(__name__, "eta_family", lambda ev: eta_family(ev.runs("eta")))


def range_verdict(grid: pd.DataFrame) -> str:
    """Q9's rule on the page's grid rows: *reproduced* when the η whose gain is reproduced span at least
    a factor 10; *not reproduced* when none is and every η is *not reproduced*; else *inconclusive*."""
    ok = grid[grid["verdict"] == "reproduced"]
    if len(ok) and np.log10(ok["eta"].max() / ok["eta"].min()) >= 1.0:
        return "reproduced"
    if not len(ok) and len(grid) and (grid["verdict"] == "not reproduced").all():
        return "not reproduced"
    return "inconclusive"


def _est_range(ev) -> dict:
    g = page_family(ev)["grid"]
    if not len(g):
        raise KeyError("no η > 0 paired with η = 0")
    ok = g[g["verdict"] == "reproduced"]
    span = float(np.log10(ok["eta"].max() / ok["eta"].min())) if len(ok) else 0.0
    return {"estimate": span, "ci_lo": np.nan, "ci_hi": np.nan, "n": int(g["n"].min()), "p_value": np.nan,
            # no detectable effect in decades: each η's, in R@1 points, is in the note
            "mde": np.nan, "m": int(g["m"].max()), "verdict": range_verdict(g),
            "note": range_sentence(g) + " Estimate: decades of η spanned (no interval)."}


CLAIMS = [
    Claim(id="Q9", claim="SEC helps over a wide range of η", source="review Q9; paper Fig. (η sensitivity)",
          measured="how many decades of η (log10 of the largest over the smallest) the grid's η > 0 span at which "
                   "R@1 − R@1 at η = 0 (mean over the losses per seed) is reproduced in the η page's Holm family; "
                   "reproduced if they span ≥ 1 decade (10× in η)",
          unit="decades", expected_sign=+1, page="eta", estimate=_est_range),
]
