"""What the review-record chapters share (SimCLR / SupCon, N-pair, ArcFace, fairness):
SEC − none paired on seed per loss, verdict rows and claim rows in the claims page's format.

One verdict per (loss, metric) comes from :func:`sec_lib.report.verdict_row` on the per-seed paired
differences (SEC − none, same seed), and a page's rows form one family (:func:`sec_lib.report.one_family`,
Holm). Claims are data: each chapter module holds ``CLAIMS`` (:class:`sec_lib.report.claims.Claim`),
whose estimates are rows of the page's own family (:func:`row_claim`).
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from .. import report
from ..report.claims import family_row
from .common import beside_cv, check_cols, measures_text, with_norm_cv



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
    t = t.assign(cell=[report.fmt_cell(r.mean, r.ci_lo, r.ci_hi, r.n) for r in t.itertuples(index=False)])
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
