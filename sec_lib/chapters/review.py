"""What the review-record chapters of issue 13 share (SimCLR / SupCon, N-pair, ArcFace, fairness):
SEC − none paired on seed per loss, verdict rows and claim rows in the claims page's format.

One verdict per (loss, metric) comes from :func:`sec_lib.report.verdict_row` on the per-seed paired
differences (SEC − none, same seed), and a page's rows form one family (:func:`sec_lib.report.adjust_family`,
Holm). Claims are data: each chapter module holds ``CLAIMS`` (dicts with the keys of the claims page:
id, claim, source, measured, unit, expected_sign, estimate, paper, link; ``estimate(ev)`` returns a
verdict row computed from ``ev.runs(chapter)``) and :func:`claim_rows` turns them into the claims page's rows.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from .. import report
from .common import check_cols, measures_text

#: Keys of a claim definition (the claims page's CLAIMS entries).
CLAIM_KEYS = ("id", "claim", "source", "measured", "unit", "expected_sign", "estimate", "paper", "link")


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
    return report.adjust_family(rows, family)


def family_rows(parts: Sequence[pd.DataFrame], family: str) -> pd.DataFrame:
    """Several :func:`sec_rows` tables adjusted together as one family (Holm over all their p-values)."""
    return report.adjust_family(pd.concat(list(parts), ignore_index=True), family)


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
    """:func:`means_table` as one row per loss × variant, cells "mean ± half-width (n)"."""
    t = means_table(runs, metrics, losses)
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


def claim_rows(ev, claims: Sequence[dict]) -> list[dict]:
    """The claims page's rows (same keys as ``sec_lib.chapters.claims.claim_rows``) for ``claims``,
    each estimate computed from ``ev`` (an object with ``runs(chapter)``, e.g. the claims page's Evidence)."""
    rows = []
    for c in claims:
        missing = [k for k in ("id", "claim", "expected_sign", "estimate") if k not in c]
        if missing:
            raise ValueError(f"claim {c.get('id', '?')!r} lacks keys {missing}; keys: {list(CLAIM_KEYS)}")
        e = c["estimate"](ev)
        n = e.get("n")
        paper = c.get("paper")
        rows.append({"claim": c["id"], "text": c["claim"], "estimate": e.get("estimate"), "ci_lo": e.get("ci_lo"),
                     "ci_hi": e.get("ci_hi"), "n": int(n) if n is not None and not _nan(n) else None,
                     "paper": paper() if callable(paper) else paper, "link": c.get("link"),
                     "expected_sign": c["expected_sign"], "source": c.get("source", ""),
                     "measured": c.get("measured", ""), "unit": c.get("unit", ""),
                     "p_value": e.get("p_value", math.nan), "note": e.get("note", "")})
    return rows


def _nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


def loss_claim(chapter: str, loss: str, metric: str = "R@1", expected_sign: int = +1):
    """An ``estimate(ev)`` for a claim: the verdict row of SEC − none of ``metric`` for ``loss``
    in ``chapter``'s runs (a family of one; the claims page adjusts its own family)."""
    def estimate(ev) -> dict:
        runs = ev.runs(chapter)
        d = seed_diffs(runs[runs["loss"] == loss], metric)
        return report.verdict_row(d["diff"].to_numpy(float), expected_sign)
    estimate.__name__ = f"sec_minus_none_{chapter}_{loss}_{metric}"
    return estimate
