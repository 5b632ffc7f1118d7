"""What the review-record chapters share (SimCLR / SupCon, N-pair, ArcFace, fairness):
SEC − none paired on seed per loss, verdict rows and claim rows in the claims page's format.

One verdict per (loss, metric) comes from :func:`sec_lib.report.verdict_row` on the per-seed paired
differences (SEC − none, same seed), and a page's rows form one family (:func:`sec_lib.report.one_family`,
Holm). Claims are data: each chapter module holds ``CLAIMS`` (:class:`sec_lib.report.claims.Claim`),
whose estimates are rows of the page's own family (:func:`row_claim`).
"""
from __future__ import annotations

from typing import Sequence

import matplotlib
import pandas as pd

from .. import report
from ..report.claims import family_row
from ..figures import results as results_fig
from ..figures.style import empty_panel, figure, style
from .common import beside_cv, check_cols, measures_text, with_norm_cv

#: Width (inches) of a review page's paired-difference figure: narrower than the column, so that its labels
#: shrink less on a phone.
PAIRED_WIDTH = 4.8


def paired_figure(rows: pd.DataFrame, width: float = PAIRED_WIDTH):
    """A page's SEC − none paired differences around 0 with their 95% intervals
    (:func:`sec_lib.figures.results.paired_differences` of ``rows``, :func:`sec_lib.figures.results.family_paired_rows`);
    the losses in the family's order; where no loss has a paired seed yet, a figure that says so."""
    title = f"{rows.attrs.get('comparison', 'SEC − none')} in {rows.attrs.get('metric', 'R@1')}: mean and 95% interval"
    if len(rows):
        fig = results_fig.paired_differences(rows, title="", width=width, losses=list(dict.fromkeys(rows["loss"])),
                                             xlabel="paired difference [points]; right of 0: SEC helps")
        with style():   # long loss names narrow the axes: the title spans the figure, the axis label ends at the right
            fig.suptitle(title, fontsize=matplotlib.rcParams["axes.titlesize"])
            ax = fig.axes[0]
            ax.set_xlabel(ax.get_xlabel(), loc="right")
        return fig
    with style():
        fig = figure(width, 1.4)
        ax = fig.subplots()
        ax.set_axis_off()
        empty_panel(ax, "no loss has a seed with both runs yet: no paired difference to draw")
        fig.suptitle(title, fontsize=matplotlib.rcParams["axes.titlesize"])
    return fig


def done(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["status"] == "done"] if "status" in runs.columns else runs


def seed_diffs(runs: pd.DataFrame, metric: str = "R@1", by: str = "loss", a: str = "none", b: str = "sec") -> pd.DataFrame:
    """Per ``by`` level and seed: ``diff`` = metric(b) − metric(a), paired on seed (failed runs: no pair).

    Columns: ``by``, seed, a, b, diff. A seed missing either side is left out."""
    check_cols(runs, [by, "variant", "seed", metric], "runs")
    d = done(runs)
    w = d.pivot_table(index=[by, "seed"], columns="variant", values=metric, aggfunc="mean")
    if a not in w.columns or b not in w.columns:
        return pd.DataFrame(columns=[by, "seed", a, b, "diff"])
    w = w[[a, b]].dropna().reset_index()
    w.columns.name = None
    return w.assign(diff=w[b] - w[a])


def sec_rows(runs: pd.DataFrame, metric: str = "R@1", losses: Sequence[str] | None = None, expected_sign: int = +1,
             family: str | None = None, by: str = "loss") -> pd.DataFrame:
    """One verdict row per loss (SEC − none of ``metric`` over seeds, with the metric's declared margin,
    :data:`sec_lib.report.MARGINS`; none for a metric without one), Holm-adjusted as one family."""
    d = seed_diffs(runs, metric, by)
    levels = list(losses) if losses is not None else list(dict.fromkeys(runs[by]))
    margin = report.MARGINS.get(metric)
    rows = [{by: lv, "metric": metric,
             **report.verdict_row(d.loc[d[by] == lv, "diff"].to_numpy(float), expected_sign, margin)}
            for lv in levels]
    return report.one_family(pd.DataFrame(rows, columns=[by, "metric", *report.ROW_COLUMNS]), family=family)[0]


def family_rows(parts: Sequence[pd.DataFrame], family: str) -> pd.DataFrame:
    """Several :func:`sec_rows` tables adjusted together as one family (Holm over all their p-values,
    :func:`sec_lib.report.one_family`)."""
    return report.one_family(pd.concat(list(parts), ignore_index=True), family=family)[0]


def means_table(runs: pd.DataFrame, metrics: Sequence[str], losses: Sequence[str] | None = None) -> pd.DataFrame:
    """Tidy mean and 95% CI per loss × variant × metric (the input of ``figures.results.metric_bars``)."""
    d = done(runs)
    if losses is not None:
        d = d[d["loss"].isin(losses)]
    metrics = [m for m in metrics if m in d.columns]
    t = report.summarize(d, ["loss", "variant"], metrics)
    if losses is not None:
        t = t.assign(_o=t["loss"].map({l: i for i, l in enumerate(losses)})).sort_values(["_o", "variant"],
                                                                                        kind="stable").drop(columns="_o")
    return t.reset_index(drop=True)


def wide_means(runs: pd.DataFrame, metrics: Sequence[str], losses: Sequence[str] | None = None) -> pd.DataFrame:
    """:func:`means_table` as one row per loss × variant, cells "mean ± half-width (n)"; each norm variance
    among ``metrics`` has its CV (std / mean, scale-free; :func:`~sec_lib.chapters.common.with_norm_cv`)
    in the next column where the runs store the mean norm."""
    runs = with_norm_cv(runs)
    t = means_table(runs, beside_cv(metrics, runs.columns), losses)
    t = t.assign(cell=[report.format_ci(r.mean, r.ci_lo, r.ci_hi, r.n) for r in t.itertuples(index=False)])
    w = t.pivot_table(index=["loss", "variant"], columns="metric", values="cell", aggfunc="first", sort=False)
    w.columns.name = None
    return w.reset_index()


def row_estimate(row) -> dict:
    """A verdict row as an estimate dict (:func:`sec_lib.report.fmt_estimate`)."""
    r = dict(row)
    return {"estimate": r["estimate"], "ci_lo": r["ci_lo"], "ci_hi": r["ci_hi"], "n": r["n"]}


def verdict_sentence(row, what: str, claim: str, unit: str = "points") -> str:
    """'<what> changes by <estimate> <unit> (95% CI; paired t-test, Holm-adjusted p over m comparisons;
    could detect ≥ X; n = k seeds). Verdict for *claim*: **verdict**.' (:func:`~sec_lib.chapters.common.measures_text`)."""
    r = dict(row)
    return (f"{what} changes by {measures_text(r, 2, unit, test='paired t-test')}. "
            f"Verdict for *{claim}*: **{r['verdict']}**.")


#: A claim's estimate as a row of the page's family (:func:`sec_lib.report.claims.family_row`).
row_claim = family_row
