"""Tidy summaries, paired comparisons and rule-based verdicts for the book's tables.

Everything takes and returns pandas frames in long ("tidy") form; nothing is printed or written.
Statistics:

* confidence intervals are Student-t intervals of the mean, ``mean +- t_{(1+level)/2, n-1} * s / sqrt(n)``
  with the sample standard deviation ``s`` (ddof=1);
* paired comparisons use the paired (dependent-samples) t-test, ``scipy.stats.ttest_rel``, two-sided,
  on the per-seed differences ``b - a``;
* verdicts are computed from the estimate and its CI by :func:`verdict` with the thresholds in
  :data:`VERDICT_RULES`. No verdict is ever written by hand.

The paper reports single runs; here each configuration is repeated over seeds, so every number
comes with its interval.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple, Sequence

import numpy as np
import pandas as pd
from scipy import stats

__all__ = [
    "mean_ci",
    "summarize",
    "wide",
    "paired_diff",
    "VerdictRules",
    "VERDICT_RULES",
    "VERDICTS",
    "verdict",
    "verdict_table",
    "DEFAULT_METRICS",
    "format_ci",
    "fmt_cell",
    "fmt_estimate",
    "loglog_fit",
    "loglog_fits",
    "values_ci",
    "pooled_diff",
    "summary_table",
]

#: Metric columns of the runs frame (see the contract); the default for :func:`paired_diff`.
DEFAULT_METRICS = ("R@1", "R@2", "R@4", "R@8", "NMI", "F1", "MAP@R")

#: All possible verdicts, best first.
VERDICTS = ("reproduced", "partly", "not reproduced", "not testable offline")

_SUMMARY_COLS = ("metric", "mean", "ci_lo", "ci_hi", "n")


# ----------------------------------------------------------------------------------------- helpers


def _check_level(level) -> float:
    if isinstance(level, bool) or not isinstance(level, numbers.Real) or not (0.0 < float(level) < 1.0):
        raise ValueError(f"level must be a number strictly between 0 and 1 (e.g. 0.95), got {level!r}")
    return float(level)


def _as_list(by, name: str) -> list:
    if by is None:
        return []
    if isinstance(by, str):
        return [by]
    try:
        return list(by)
    except TypeError as err:
        raise ValueError(f"{name} must be a column name or a list of column names, got {by!r}") from err


def _check_frame(df, name: str = "runs_df") -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame, got {type(df).__name__}")
    return df


def _check_columns(df: pd.DataFrame, cols: Iterable, what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what} {missing} not in the frame; valid columns are {list(df.columns)}")


def _groups(df: pd.DataFrame, by: list):
    """Iterate (key_dict, sub_frame) in first-appearance order; NaN keys are kept as groups."""
    if not by:
        yield {}, df
        return
    for key, sub in df.groupby(by, sort=False, dropna=False):
        if not isinstance(key, tuple):
            key = (key,)
        yield dict(zip(by, key)), sub


def _finite(values) -> np.ndarray:
    arr = pd.to_numeric(pd.Series(np.asarray(values, dtype=object).ravel()), errors="coerce").to_numpy(dtype=float)
    return arr[np.isfinite(arr)]


def _t_interval(x: np.ndarray, level: float) -> tuple[float, float, float, int]:
    n = int(x.size)
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    mean = float(x.mean())
    if n == 1:
        return mean, math.nan, math.nan, 1
    sd = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.5 + level / 2.0, df=n - 1)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half, n


# ------------------------------------------------------------------------------------ mean and CIs


def mean_ci(values, level: float = 0.95) -> tuple[float, float, float, int]:
    """``(mean, lo, hi, n)`` with the Student-t confidence interval of the mean.

    NaN/inf and non-numeric entries (failed runs) are dropped first; ``n`` counts what remains.
    ``n == 0`` gives ``(nan, nan, nan, 0)``; ``n == 1`` gives ``(value, nan, nan, 1)`` because one
    value says nothing about the spread. Identical values give ``lo == hi == mean``.
    """
    level = _check_level(level)
    return _t_interval(_finite(values), level)


def summarize(runs_df: pd.DataFrame, by, metrics: Sequence[str], level: float = 0.95) -> pd.DataFrame:
    """Mean and t-interval per group and metric, one row per (group x metric).

    Columns: the ``by`` columns, ``metric``, ``mean``, ``ci_lo``, ``ci_hi``, ``n`` (number of finite
    values; rows with NaN in a metric, e.g. failed runs, do not count for that metric). Groups keep
    their first-appearance order, metrics the given order. ``by=None`` or ``[]`` summarises all rows.
    Filter the frame (e.g. ``status == "done"``) before calling if needed.
    """
    df = _check_frame(runs_df)
    by = _as_list(by, "by")
    metrics = _as_list(metrics, "metrics")
    if not metrics:
        raise ValueError(f"metrics must name at least one column; valid columns are {list(df.columns)}")
    _check_columns(df, by, "by columns")
    _check_columns(df, metrics, "metrics")
    clash = [c for c in by if c in _SUMMARY_COLS]
    if clash:
        raise ValueError(f"by columns {clash} clash with output columns {list(_SUMMARY_COLS)}; rename them first")
    level = _check_level(level)
    rows = []
    for key, sub in _groups(df, by):
        for m in metrics:
            mean, lo, hi, n = _t_interval(_finite(sub[m].to_numpy()), level)
            rows.append({**key, "metric": m, "mean": mean, "ci_lo": lo, "ci_hi": hi, "n": n})
    out = pd.DataFrame(rows, columns=[*by, *_SUMMARY_COLS])
    out["n"] = out["n"].astype(int)
    return out


def _fmt(mean: float, lo: float, hi: float, n: int, digits: int) -> str:
    return format_ci(mean, lo, hi, n, digits=digits)


def wide(summary: pd.DataFrame, by=None, digits: int = 2) -> pd.DataFrame:
    """Display form of :func:`summarize` output: one row per group, one column per metric, cells
    ``"mean ± half-width"`` (``"mean (n=1)"`` without an interval, ``"n/a"`` without data).

    ``by`` defaults to every column that is not a summary column.
    """
    s = _check_frame(summary, "summary")
    _check_columns(s, _SUMMARY_COLS, "summary columns")
    if isinstance(digits, bool) or not isinstance(digits, numbers.Integral) or digits < 0:
        raise ValueError(f"digits must be an integer >= 0, got {digits!r}")
    by = [c for c in s.columns if c not in _SUMMARY_COLS] if by is None else _as_list(by, "by")
    _check_columns(s, by, "by columns")
    cells = s.assign(
        cell=[_fmt(r.mean, r.ci_lo, r.ci_hi, int(r.n), digits) for r in s.itertuples(index=False)]
    )
    metric_order = list(dict.fromkeys(s["metric"]))
    rows = []
    for key, sub in _groups(cells, by):
        row = dict(key)
        for m in metric_order:
            hit = sub.loc[sub["metric"] == m, "cell"]
            row[m] = hit.iloc[0] if len(hit) else "n/a"
        rows.append(row)
    return pd.DataFrame(rows, columns=[*by, *metric_order])


# --------------------------------------------------------------------------------- paired comparison


def paired_diff(
    runs_df: pd.DataFrame,
    by,
    compare_col: str,
    a,
    b,
    pair_on="seed",
    metrics: Sequence[str] | None = None,
    level: float = 0.95,
) -> pd.DataFrame:
    """Paired difference ``b - a`` per group and metric.

    Within each group of ``by`` (which must not contain ``compare_col`` or ``pair_on``), rows with
    ``compare_col == a`` are matched to rows with ``compare_col == b`` on the ``pair_on`` column(s)
    (usually the seed). Rows whose pair is missing are dropped and counted in ``n_unpaired``; a pair
    with NaN in a metric is left out of that metric.

    Test: the paired t-test (``scipy.stats.ttest_rel(b, a)``, two-sided) on the differences, and a
    Student-t CI of their mean. With fewer than 2 pairs ``ci_lo``, ``ci_hi`` and ``p_value`` are NaN.
    When all differences are identical (zero sample spread) the spread is not estimable from so few
    seeds: ``ci_lo``, ``ci_hi`` and ``p_value`` are NaN, so a verdict can reach "partly" at most.

    Returns one row per (group x metric): the ``by`` columns, ``metric``, ``mean_a``, ``mean_b``
    (over the paired seeds), ``diff``, ``ci_lo``, ``ci_hi``, ``p_value``, ``n_pairs``, ``n_unpaired``.
    Raises ValueError if a (group, compare value, pair key) appears twice (ambiguous pairing).
    """
    df = _check_frame(runs_df)
    by = _as_list(by, "by")
    pair_on = _as_list(pair_on, "pair_on")
    if not pair_on:
        raise ValueError("pair_on must name at least one column (e.g. 'seed')")
    if metrics is None:
        metrics = [m for m in DEFAULT_METRICS if m in df.columns]
        if not metrics:
            raise ValueError(f"no default metric column {list(DEFAULT_METRICS)} in the frame; pass metrics=")
    metrics = _as_list(metrics, "metrics")
    if not metrics:
        raise ValueError(f"metrics must name at least one column; valid columns are {list(df.columns)}")
    if not isinstance(compare_col, str):
        raise ValueError(f"compare_col must be one column name, got {compare_col!r}")
    _check_columns(df, [compare_col], "compare_col")
    _check_columns(df, by, "by columns")
    _check_columns(df, pair_on, "pair_on columns")
    _check_columns(df, metrics, "metrics")
    overlap = [c for c in by if c == compare_col or c in pair_on]
    if overlap:
        raise ValueError(f"by must not contain compare_col or pair_on columns, got {overlap}")
    level = _check_level(level)
    present = set(df[compare_col].dropna().unique().tolist())
    for name, val in (("a", a), ("b", b)):
        if val not in present:
            raise ValueError(f"{name}={val!r} does not occur in column {compare_col!r}; valid values are {sorted(map(str, present))}")
    if a == b:
        raise ValueError(f"a and b must differ, both are {a!r}")

    rows = []
    sub_all = df[df[compare_col].isin([a, b])]
    for key, sub in _groups(sub_all, by):
        side_a = sub[sub[compare_col] == a]
        side_b = sub[sub[compare_col] == b]
        for side, val in ((side_a, a), (side_b, b)):
            dup = side.duplicated(subset=pair_on, keep=False)
            if dup.any():
                raise ValueError(
                    f"group {key or '(all)'} has several rows with {compare_col}={val!r} for the same "
                    f"{pair_on} values; pairing is ambiguous (add the distinguishing column to by)"
                )
        merged = side_a[pair_on + metrics].merge(
            side_b[pair_on + metrics], on=pair_on, how="outer", suffixes=("__a", "__b"), indicator=True
        )
        n_unpaired = int((merged["_merge"] != "both").sum())
        both = merged[merged["_merge"] == "both"]
        for m in metrics:
            xa = pd.to_numeric(both[f"{m}__a"], errors="coerce").to_numpy(dtype=float)
            xb = pd.to_numeric(both[f"{m}__b"], errors="coerce").to_numpy(dtype=float)
            ok = np.isfinite(xa) & np.isfinite(xb)
            xa, xb = xa[ok], xb[ok]
            d = xb - xa
            mean, lo, hi, n = _t_interval(d, level)
            if n < 2:
                p = math.nan
            elif float(np.ptp(d)) == 0.0:      # zero spread: no interval, no test (see docstring)
                lo = hi = p = math.nan
            else:
                p = float(stats.ttest_rel(xb, xa).pvalue)
            rows.append(
                {
                    **key,
                    "metric": m,
                    "mean_a": float(xa.mean()) if n else math.nan,
                    "mean_b": float(xb.mean()) if n else math.nan,
                    "diff": mean,
                    "ci_lo": lo,
                    "ci_hi": hi,
                    "p_value": p,
                    "n_pairs": n,
                    "n_unpaired": n_unpaired,
                }
            )
    cols = [*by, "metric", "mean_a", "mean_b", "diff", "ci_lo", "ci_hi", "p_value", "n_pairs", "n_unpaired"]
    return pd.DataFrame(rows, columns=cols)


# -------------------------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class VerdictRules:
    """Thresholds behind :func:`verdict`. A claim states an expected direction ``s`` (+1: the
    quantity should go up, -1: down, 0: no change) for an estimate ``d`` with CI ``[lo, hi]``
    (at ``level``), in the units of the metric (percentage points for the retrieval metrics).

    Directional claims (s = +1 or -1), written for ``s*d`` and the CI mapped by ``s``:

    * **reproduced**: the CI lies entirely on the expected side of 0 (``s*lo > 0`` / ``s*hi < 0``)
      and ``|d| >= min_effect``;
    * **partly**: the point estimate is on the expected side (``s*d > 0``) but the CI includes 0,
      the CI is unknown (a single run), or the effect is smaller than ``min_effect``;
    * **not reproduced**: the point estimate is 0 or on the wrong side (including a CI entirely on
      the wrong side).

    No-change claims (s = 0), an equivalence test with margin ``min_effect`` (which must be > 0):
    **reproduced** if the CI lies inside ``[-min_effect, min_effect]``; **partly** if the CI includes
    0 but reaches past the margin (or is unknown while ``|d| < min_effect``); **not reproduced** if
    the CI excludes 0 (or is unknown while ``|d| >= min_effect``).

    **not testable offline**: no evidence -- the estimate is NaN/None or ``n == 0``.
    """

    level: float = 0.95  # CI level the rules assume (the default of summarize / paired_diff)
    min_effect: float = 0.0
    equivalence_margin: float = 0.5
    single_run_max: str = "partly"  # best verdict possible without a CI


#: The thresholds used by the book (see :class:`VerdictRules`).
VERDICT_RULES = VerdictRules()


def _is_missing(x) -> bool:
    if x is None:
        return True
    try:
        return not np.isfinite(float(x))
    except (TypeError, ValueError):
        return True


def verdict(
    diff_mean,
    ci_lo,
    ci_hi,
    expected_sign: int = +1,
    min_effect: float | None = None,
    n: int | None = None,
) -> str:
    """One of :data:`VERDICTS`, by the rules of :class:`VerdictRules` (see there).

    ``min_effect`` defaults to ``VERDICT_RULES.min_effect`` for directional claims and to
    ``VERDICT_RULES.equivalence_margin`` for ``expected_sign=0``. ``n`` (number of runs or pairs),
    when given, overrides: ``n == 0`` -> "not testable offline"; a CI is only used when both bounds
    are finite (``n == 1`` gives NaN bounds, see :func:`mean_ci`).
    """
    if isinstance(expected_sign, bool) or expected_sign not in (-1, 0, 1):
        raise ValueError(f"expected_sign must be +1 (increase), -1 (decrease) or 0 (no change), got {expected_sign!r}")
    if min_effect is None:
        min_effect = VERDICT_RULES.equivalence_margin if expected_sign == 0 else VERDICT_RULES.min_effect
    if _is_missing(min_effect) or float(min_effect) < 0:
        raise ValueError(f"min_effect must be a finite number >= 0, got {min_effect!r}")
    min_effect = float(min_effect)
    if expected_sign == 0 and min_effect <= 0:
        raise ValueError("a no-change claim (expected_sign=0) needs an equivalence margin min_effect > 0")
    if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Real) or (np.isfinite(n) and n < 0)):
        raise ValueError(f"n must be None or a count >= 0, got {n!r}")

    if _is_missing(diff_mean) or (n is not None and (not np.isfinite(n) or int(n) == 0)):
        return "not testable offline"
    d = float(diff_mean)
    has_ci = not (_is_missing(ci_lo) or _is_missing(ci_hi))
    if has_ci:
        lo, hi = float(ci_lo), float(ci_hi)
        if lo > hi:
            raise ValueError(f"ci_lo ({lo}) must not exceed ci_hi ({hi})")
        tol = 1e-9 * max(1.0, abs(d))
        if not (lo - tol <= d <= hi + tol):
            raise ValueError(f"diff_mean ({d}) must lie inside [ci_lo, ci_hi] = [{lo}, {hi}]")

    if expected_sign == 0:
        if not has_ci:
            return VERDICT_RULES.single_run_max if abs(d) < min_effect else "not reproduced"
        if lo > 0 or hi < 0:
            return "not reproduced"
        if -min_effect <= lo and hi <= min_effect:
            return "reproduced"
        return "partly"

    s = float(expected_sign)
    sd = s * d
    if sd <= 0:
        return "not reproduced"
    if not has_ci:
        return VERDICT_RULES.single_run_max
    s_lo = min(s * lo, s * hi)
    if s_lo > 0 and abs(d) >= min_effect:
        return "reproduced"
    return "partly"


_CLAIM_REQUIRED = ("claim", "text", "estimate", "ci_lo", "ci_hi")
_CLAIM_OPTIONAL = ("n", "paper", "link", "expected_sign", "min_effect")


def verdict_table(rows: Sequence[dict]) -> pd.DataFrame:
    """Claims table with a computed ``verdict`` column (never typed by hand).

    Each row is a dict with the required keys ``claim`` (id), ``text``, ``estimate`` (our number,
    e.g. a paired difference), ``ci_lo``, ``ci_hi``, and optional ``n``, ``paper`` (the paper's
    number or None), ``link`` (where the evidence is in the book), ``expected_sign`` (default +1),
    ``min_effect`` (default from :data:`VERDICT_RULES`). Other keys are kept as extra columns.
    Output columns: claim, text, estimate, ci_lo, ci_hi, n, paper, link, expected_sign, verdict,
    then the extras, one row per claim in the given order.
    """
    if isinstance(rows, (dict, str)) or not hasattr(rows, "__iter__"):
        raise ValueError("rows must be a list of claim dicts")
    rows = list(rows)
    out = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise ValueError(f"rows[{i}] must be a dict, got {type(r).__name__}")
        missing = [k for k in _CLAIM_REQUIRED if k not in r]
        if missing:
            raise ValueError(
                f"rows[{i}] lacks keys {missing}; required keys are {list(_CLAIM_REQUIRED)}, "
                f"optional {list(_CLAIM_OPTIONAL)}"
            )
        if "verdict" in r:
            raise ValueError(f"rows[{i}] has a 'verdict' key; verdicts are computed, never given")
        rec = dict(r)
        rec.setdefault("n", None)
        rec.setdefault("paper", None)
        rec.setdefault("link", None)
        rec.setdefault("expected_sign", 1)
        me = rec.pop("min_effect", None)
        try:
            rec["verdict"] = verdict(
                rec["estimate"], rec["ci_lo"], rec["ci_hi"], expected_sign=rec["expected_sign"], min_effect=me, n=rec["n"]
            )
        except ValueError as err:
            raise ValueError(f"claim {rec['claim']!r}: {err}") from err
        out.append(rec)
    base = ["claim", "text", "estimate", "ci_lo", "ci_hi", "n", "paper", "link", "expected_sign", "verdict"]
    extras = list(dict.fromkeys(k for rec in out for k in rec if k not in base))
    return pd.DataFrame(out, columns=base + extras)


# =================================================================================================
# Formatting: the one "mean ± half-width" / "mean [lo, hi]" formatter of the book
# =================================================================================================


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


# =================================================================================================
# The one log-log fit (per-batch gradient slopes in training, the figures, the theory chapter)
# =================================================================================================


class LogLogFit(NamedTuple):
    slope: float
    intercept: float          # of ln y on ln x
    r2: float


def loglog_fit(x, y, min_points: int = 3) -> LogLogFit:
    """Least-squares line of ``ln y`` on ``ln x`` over the pairs where both are positive and finite.

    Returns ``(slope, intercept, r2)``, all NaN with fewer than ``min_points`` usable pairs or no
    spread in ``x``; ``r2`` is 1 when ``y`` has no spread (the flat line fits every point). Accepts
    arrays, lists, Series or CPU tensors of the same length.
    """
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same length; got {x.size} and {y.size}")
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    lx, ly = np.log(x[ok]), np.log(y[ok])
    if lx.size < max(2, int(min_points)) or np.ptp(lx) == 0:
        return LogLogFit(math.nan, math.nan, math.nan)
    cx, cy = lx - lx.mean(), ly - ly.mean()
    slope = float((cx * cy).sum() / (cx * cx).sum())
    icpt = float(ly.mean() - slope * lx.mean())
    sst = float((cy * cy).sum())
    r2 = 1.0 - float(((cy - slope * cx) ** 2).sum()) / sst if sst > 0 else 1.0
    return LogLogFit(slope, icpt, r2)


def loglog_fits(df: pd.DataFrame, x: str, y: str, by: Sequence[str], min_points: int = 2) -> pd.DataFrame:
    """One :func:`loglog_fit` of ``df[y]`` on ``df[x]`` per group of ``by`` (sorted): columns
    ``*by, slope, r2``."""
    _check_columns(_check_frame(df, "df"), [x, y, *by], "columns")
    rows = []
    for key, g in df.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        fit = loglog_fit(g[x], g[y], min_points=min_points)
        rows.append({**dict(zip(by, key)), "slope": fit.slope, "r2": fit.r2})
    return pd.DataFrame(rows, columns=[*by, "slope", "r2"])


# =================================================================================================
# Per-seed estimates and display tables (used by every chapter)
# =================================================================================================


def fmt_cell(mean, lo, hi, n, digits: int = 2) -> str:
    """'mean ± half-width' with ``digits`` decimals, or 3 significant digits for values below 0.01 or
    above 10^4 in magnitude (norm variances); 'mean (n=1)' without an interval, 'n/a' without data."""
    small = mean is not None and np.isfinite(mean) and mean != 0 and (abs(mean) < 0.01 or abs(mean) >= 1e4)
    return format_ci(mean, lo, hi, n, digits=digits, number=(lambda v: f"{v:.3g}") if small else None)


def summary_table(runs: pd.DataFrame, by: Sequence[str], metrics: Sequence[str], digits: int = 2) -> pd.DataFrame:
    """Display table: one row per group (first-appearance order), cells "mean ± CI half-width"
    (Student t, 95%, :func:`summarize`; see :func:`fmt_cell`), plus the number of runs
    and of failed (diverged) runs per group. Failed runs have no metrics and are not averaged."""
    by = list(by)
    _check_columns(_check_frame(runs, "runs"), [*by, *metrics], "runs columns")
    s = summarize(runs, by, list(metrics))
    out = []
    for key, sub in s.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key))
        for m in metrics:
            hit = sub[sub["metric"] == m]
            row[m] = (fmt_cell(hit["mean"].iloc[0], hit["ci_lo"].iloc[0], hit["ci_hi"].iloc[0], hit["n"].iloc[0], digits)
                      if len(hit) else "n/a")
        out.append(row)
    w = pd.DataFrame(out, columns=[*by, *metrics])
    status = runs["status"] if "status" in runs.columns else pd.Series("done", index=runs.index)
    counts = (runs.assign(_failed=(status != "done").astype(int))
              .groupby(by, sort=False, dropna=False)
              .agg(runs=("_failed", "size"), failed=("_failed", "sum")).reset_index())
    return w.merge(counts, on=by, how="left")


def values_ci(values, level: float = 0.95) -> dict:
    """Mean, t-CI and the one-sample t-test against 0 of some per-seed (or per-run) values."""
    x = pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce").to_numpy(float)
    x = x[np.isfinite(x)]
    mean, lo, hi, n = mean_ci(x, level=level)
    p = math.nan
    if n >= 2:
        if np.ptp(x) > 1e-12 * max(1.0, abs(mean)):
            p = float(stats.ttest_1samp(x, 0.0).pvalue)
        else:                                   # no spread: like report.paired_diff
            p = 0.0 if mean != 0 else math.nan
    return {"estimate": mean, "ci_lo": lo, "ci_hi": hi, "n": n, "p_value": p}


def pooled_diff(runs: pd.DataFrame, compare_col: str, a, b, metric: str, pool: Sequence[str] = ("loss",),
                pair_on: str = "seed", transform: Callable | None = None, level: float = 0.95) -> dict:
    """Difference ``b - a`` of ``metric``, paired on ``pair_on`` within each ``pool`` group, averaged
    over the pool groups per seed, then mean ± t-CI over seeds with a one-sample t-test against 0.

    ``transform`` (e.g. ``np.log10``) is applied to the metric before differencing. Returns a dict
    ``estimate, ci_lo, ci_hi, n`` (seeds), ``p_value``, ``n_groups`` (pool groups with a pair).
    """
    pool = list(pool)
    _check_columns(_check_frame(runs, "runs"), [compare_col, metric, pair_on, *pool], "runs columns")
    sub = runs[runs[compare_col].isin([a, b])]
    vals = pd.to_numeric(sub[metric], errors="coerce").astype(float)
    if transform is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            vals = pd.Series(transform(vals.to_numpy()), index=sub.index)
    sub = sub.assign(_v=vals)
    key = [pair_on, *pool]
    if sub.duplicated([*key, compare_col]).any():
        raise ValueError(f"several runs share {key + [compare_col]}; add the distinguishing column to pool")
    wide_ = sub.pivot_table(index=key, columns=compare_col, values="_v", aggfunc="first", dropna=False)
    if a not in wide_.columns or b not in wide_.columns:
        return {"estimate": math.nan, "ci_lo": math.nan, "ci_hi": math.nan, "n": 0, "p_value": math.nan, "n_groups": 0}
    d = (wide_[b] - wide_[a]).replace([np.inf, -np.inf], np.nan).dropna()
    per_seed = d.groupby(level=0).mean()
    out = values_ci(per_seed.to_numpy(), level)
    out["n_groups"] = int(d.reset_index()[pool].drop_duplicates().shape[0]) if pool else int(len(d) > 0)
    return out


def fmt_estimate(d: dict, digits: int = 2, unit: str = "") -> str:
    """'+1.23 [0.45, 2.01] (n=3)' for an estimate dict; 'no evidence' when there is none."""
    return format_ci(d.get("estimate"), d.get("ci_lo"), d.get("ci_hi"), d.get("n"), digits=digits, style="interval",
                     number=lambda v: f"{v:+.{digits}f}", unit=unit, missing="no evidence")
