"""The one "mean ± half-width" / "mean [lo, hi]" formatter of the book and the display tables
built on it (see :mod:`sec_lib.report`)."""
from __future__ import annotations

import math
import numbers
from typing import Sequence

import numpy as np
import pandas as pd

from ._common import SUMMARY_COLS, as_list, check_columns, check_frame, iter_groups
from .intervals import summarize


def is_percent(metric: str) -> bool:
    """Whether ``metric`` is reported in percent: Recall@K, MAP@R, NMI and F1."""
    return metric.startswith("R@") or metric in ("MAP@R", "NMI", "F1")


def fmt_metric(x, metric: str, digits: int = 2, sign: bool = False) -> str:
    """One number of ``metric`` as the book prints it: percent metrics (:func:`is_percent`) with ``digits``
    decimals, other quantities (norm variances, CVs, slopes) with 3 significant digits; '−0.00' is printed as
    '0.00', a missing or infinite value as 'n/a'."""
    if x is None or not np.isfinite(x):
        return "n/a"
    plus = "+" if sign else ""
    if is_percent(metric):
        return f"{round(float(x), digits) + 0.0:{plus}.{digits}f}"
    return f"{float(x) + 0.0:{plus}.3g}"


def _finite_number(x) -> bool:
    return x is not None and isinstance(x, numbers.Real) and math.isfinite(x)


def format_ci(mean, lo, hi, n=None, *, digits: int = 2, style: str = "pm", number=None, unit: str = "",
              missing: str = "n/a") -> str:
    """A mean with its confidence interval, as every table and sentence of the book prints it.

    ``style="pm"``: ``"mean ± half-width"``, ``"mean (n=N)"`` without an interval, ``missing`` without
    data (``n`` 0 or None, or a non-finite mean). ``style="interval"``: ``"mean[unit] [lo, hi] (n=N)"``,
    the interval left out when it is not finite, ``(n=N)`` when ``n`` is given. ``number`` formats one
    value (default: ``digits`` decimals).
    """
    if style not in ("pm", "interval"):
        raise ValueError(f"style = {style!r} is not valid; valid values: 'pm', 'interval'")
    num = number or (lambda v: f"{v:.{digits}f}")
    if not _finite_number(mean) or (style == "pm" and not n):
        return missing
    has_ci = _finite_number(lo) and _finite_number(hi)
    if style == "pm":
        return f"{num(mean)} ± {num((hi - lo) / 2.0)}" if has_ci else f"{num(mean)} (n={int(n)})"
    ci = f" [{num(lo)}, {num(hi)}]" if has_ci else ""
    return f"{num(mean)}{unit}{ci}" + (f" (n={int(n)})" if n is not None else "")


def _fmt(mean: float, lo: float, hi: float, n: int, digits: int) -> str:
    return format_ci(mean, lo, hi, n, digits=digits)


def wide(summary: pd.DataFrame, by=None, digits: int = 2) -> pd.DataFrame:
    """Display form of :func:`summarize` output: one row per group, one column per metric, cells
    ``"mean ± half-width"`` (``"mean (n=1)"`` without an interval, ``"n/a"`` without data).

    ``by`` defaults to every column that is not a summary column.
    """
    s = check_frame(summary, "summary")
    check_columns(s, SUMMARY_COLS, "summary columns")
    if isinstance(digits, bool) or not isinstance(digits, numbers.Integral) or digits < 0:
        raise ValueError(f"digits must be an integer >= 0, got {digits!r}")
    by = [c for c in s.columns if c not in SUMMARY_COLS] if by is None else as_list(by, "by")
    check_columns(s, by, "by columns")
    cells = s.assign(
        cell=[_fmt(r.mean, r.ci_lo, r.ci_hi, int(r.n), digits) for r in s.itertuples(index=False)]
    )
    metric_order = list(dict.fromkeys(s["metric"]))
    rows = []
    for key, sub in iter_groups(cells, by):
        row = dict(key)
        for m in metric_order:
            hit = sub.loc[sub["metric"] == m, "cell"]
            row[m] = hit.iloc[0] if len(hit) else "n/a"
        rows.append(row)
    return pd.DataFrame(rows, columns=[*by, *metric_order])


def fmt_cell(mean, lo, hi, n, digits: int = 2) -> str:
    """'mean ± half-width' with ``digits`` decimals, or 3 significant digits for values below 0.01 or
    above 10^4 in magnitude (norm variances) and where a nonzero half-width would print as zero at ``digits``
    decimals (a CV of 0.0215 ± 0.0004 would read "0.02 ± 0.00"); 'mean (n=1)' without an interval, 'n/a' without
    data."""
    hw = (hi - lo) / 2.0 if all(v is not None and np.isfinite(v) for v in (lo, hi)) else np.nan
    hidden = np.isfinite(hw) and 0 < abs(hw) < 0.5 * 10.0 ** -digits
    small = mean is not None and np.isfinite(mean) and mean != 0 and (abs(mean) < 0.01 or abs(mean) >= 1e4 or hidden)
    return format_ci(mean, lo, hi, n, digits=digits, number=(lambda v: f"{v:.3g}") if small else None)


def summary_table(runs: pd.DataFrame, by: Sequence[str], metrics: Sequence[str], digits: int = 2) -> pd.DataFrame:
    """Display table: one row per group (first-appearance order), cells "mean ± CI half-width"
    (Student t, 95%, :func:`summarize`; see :func:`fmt_cell`), plus the number of runs
    and of failed (diverged) runs per group. Failed runs (``status`` other than 'done') are not averaged, even
    where they carry values (a diverged run's step statistics until it stopped); a group whose runs all failed
    keeps its row, with "n/a" cells."""
    by = list(by)
    check_columns(check_frame(runs, "runs"), [*by, *metrics], "runs columns")
    status = runs["status"] if "status" in runs.columns else pd.Series("done", index=runs.index)
    s = summarize(runs[status == "done"], by, list(metrics))
    found = {(k if isinstance(k, tuple) else (k,)): sub for k, sub in s.groupby(by, sort=False, dropna=False)}
    out = []
    for key, _ in runs.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        row, sub = dict(zip(by, key)), found.get(key)
        for m in metrics:
            hit = sub[sub["metric"] == m] if sub is not None else s.iloc[:0]
            row[m] = (fmt_cell(hit["mean"].iloc[0], hit["ci_lo"].iloc[0], hit["ci_hi"].iloc[0], hit["n"].iloc[0], digits)
                      if len(hit) else "n/a")
        out.append(row)
    w = pd.DataFrame(out, columns=[*by, *metrics])
    counts = (runs.assign(_failed=(status != "done").astype(int))
              .groupby(by, sort=False, dropna=False)
              .agg(runs=("_failed", "size"), failed=("_failed", "sum")).reset_index())
    return w.merge(counts, on=by, how="left")


def fmt_estimate(d: dict, digits: int = 2, unit: str = "") -> str:
    """'+1.23 [0.45, 2.01] (n=3)' for an estimate dict; 'no evidence' when there is none."""
    return format_ci(d.get("estimate"), d.get("ci_lo"), d.get("ci_hi"), d.get("n"), digits=digits, style="interval",
                     number=lambda v: f"{v:+.{digits}f}", unit=unit, missing="no evidence")
