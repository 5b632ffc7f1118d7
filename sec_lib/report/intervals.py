"""Means with Student-t intervals, paired differences and per-seed estimates (see :mod:`sec_lib.report`)."""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from ._common import (SUMMARY_COLS, as_list, check_columns, check_frame, check_level, finite_values, iter_groups,
                      t_interval, zero_spread)

#: Metric columns of the runs frame (see the contract); the default for :func:`paired_diff`.
DEFAULT_METRICS = ("R@1", "R@2", "R@4", "R@8", "NMI", "F1", "MAP@R")
#: The columns of :func:`paired_diff` after its ``by`` columns: one row schema with :func:`pooled_diff` and
#: :func:`sec_lib.report.verdict_row` (``estimate``, ``ci_lo``, ``ci_hi``, ``p_value``, ``n``).
PAIRED_COLUMNS = ("metric", "mean_a", "mean_b", "estimate", "ci_lo", "ci_hi", "p_value", "n", "n_unpaired")


# ------------------------------------------------------------------------------------ mean and CIs


def mean_ci(values, level: float = 0.95) -> tuple[float, float, float, int]:
    """``(mean, lo, hi, n)`` with the Student-t confidence interval of the mean.

    NaN/inf and non-numeric entries (failed runs) are dropped first; ``n`` counts what remains.
    ``n == 0`` gives ``(nan, nan, nan, 0)``; ``n == 1`` gives ``(value, nan, nan, 1)`` because one
    value says nothing about the spread. Identical values give ``lo == hi == mean``.
    """
    level = check_level(level)
    return t_interval(finite_values(values), level)


def summarize(runs_df: pd.DataFrame, by, metrics: Sequence[str], level: float = 0.95) -> pd.DataFrame:
    """Mean and t-interval per group and metric, one row per (group x metric).

    Columns: the ``by`` columns, ``metric``, ``mean``, ``ci_lo``, ``ci_hi``, ``n`` (number of finite
    values; rows with NaN in a metric, e.g. failed runs, do not count for that metric). Groups keep
    their first-appearance order, metrics the given order. ``by=None`` or ``[]`` summarises all rows.
    Filter the frame (e.g. ``status == "done"``) before calling if needed.
    """
    df = check_frame(runs_df)
    by = as_list(by, "by")
    metrics = as_list(metrics, "metrics")
    if not metrics:
        raise ValueError(f"metrics must name at least one column; valid columns are {list(df.columns)}")
    check_columns(df, by, "by columns")
    check_columns(df, metrics, "metrics")
    clash = [c for c in by if c in SUMMARY_COLS]
    if clash:
        raise ValueError(f"by columns {clash} clash with output columns {list(SUMMARY_COLS)}; rename them first")
    level = check_level(level)
    rows = []
    for key, sub in iter_groups(df, by):
        for m in metrics:
            mean, lo, hi, n = t_interval(finite_values(sub[m].to_numpy()), level)
            rows.append({**key, "metric": m, "mean": mean, "ci_lo": lo, "ci_hi": hi, "n": n})
    out = pd.DataFrame(rows, columns=[*by, *SUMMARY_COLS])
    out["n"] = out["n"].astype(int)
    return out


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
    When all differences are identical (zero sample spread, up to float rounding) the spread is not estimable from so few
    seeds: ``ci_lo``, ``ci_hi`` and ``p_value`` are NaN, so the verdict is at most "inconclusive".

    Returns one row per (group x metric): the ``by`` columns, ``metric``, ``mean_a``, ``mean_b``
    (over the paired seeds), ``estimate`` (the mean difference), ``ci_lo``, ``ci_hi``, ``p_value``, ``n``
    (the pairs), ``n_unpaired``: :data:`PAIRED_COLUMNS`, the names :func:`pooled_diff`, :func:`values_ci`,
    :func:`verdict_row` and :func:`one_family` use for the estimate, its interval, its test and its n.
    Raises ValueError if a (group, compare value, pair key) appears twice (ambiguous pairing).
    """
    df = check_frame(runs_df)
    by = as_list(by, "by")
    pair_on = as_list(pair_on, "pair_on")
    if not pair_on:
        raise ValueError("pair_on must name at least one column (e.g. 'seed')")
    if metrics is None:
        metrics = [m for m in DEFAULT_METRICS if m in df.columns]
        if not metrics:
            raise ValueError(f"no default metric column {list(DEFAULT_METRICS)} in the frame; pass metrics=")
    metrics = as_list(metrics, "metrics")
    if not metrics:
        raise ValueError(f"metrics must name at least one column; valid columns are {list(df.columns)}")
    if not isinstance(compare_col, str):
        raise ValueError(f"compare_col must be one column name, got {compare_col!r}")
    check_columns(df, [compare_col], "compare_col")
    check_columns(df, by, "by columns")
    check_columns(df, pair_on, "pair_on columns")
    check_columns(df, metrics, "metrics")
    overlap = [c for c in by if c == compare_col or c in pair_on]
    if overlap:
        raise ValueError(f"by must not contain compare_col or pair_on columns, got {overlap}")
    level = check_level(level)
    present = set(df[compare_col].dropna().unique().tolist())
    for name, val in (("a", a), ("b", b)):
        if val not in present:
            raise ValueError(f"{name}={val!r} does not occur in column {compare_col!r}; valid values are {sorted(map(str, present))}")
    if a == b:
        raise ValueError(f"a and b must differ, both are {a!r}")

    rows = []
    sub_all = df[df[compare_col].isin([a, b])]
    for key, sub in iter_groups(sub_all, by):
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
            mean, lo, hi, n = t_interval(d, level)
            if n < 2:
                p = math.nan
            elif zero_spread(d):              # zero spread: no interval, no test (see docstring)
                lo = hi = p = math.nan
            else:
                p = float(stats.ttest_rel(xb, xa).pvalue)
            rows.append(
                {
                    **key,
                    "metric": m,
                    "mean_a": float(xa.mean()) if n else math.nan,
                    "mean_b": float(xb.mean()) if n else math.nan,
                    "estimate": mean,
                    "ci_lo": lo,
                    "ci_hi": hi,
                    "p_value": p,
                    "n": n,
                    "n_unpaired": n_unpaired,
                }
            )
    return pd.DataFrame(rows, columns=[*by, *PAIRED_COLUMNS])


# ------------------------------------------------------------------------------ per-seed estimates


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
    ``estimate, ci_lo, ci_hi, n`` (seeds), ``p_value``, ``n_groups`` (pool groups with a pair) and ``excluded``
    (the pool groups left out, as labels).

    A failed run (a ``status`` column other than 'done') leaves its whole pool group out, both arms and every
    seed, and the group is named in ``excluded``: averaging that group over its surviving seeds only would make
    each seed's mean cover a different set of groups (and the survivors of a diverging arm are a selected sample).
    """
    pool = list(pool)
    check_columns(check_frame(runs, "runs"), [compare_col, metric, pair_on, *pool], "runs columns")
    sub = runs[runs[compare_col].isin([a, b])]
    excluded: list = []
    if "status" in sub.columns and pool:
        bad = sub.loc[sub["status"].astype(str) != "done", pool].drop_duplicates()
        if len(bad):
            hit = sub[pool].apply(tuple, axis=1).isin(set(bad.apply(tuple, axis=1)))
            excluded = [k[0] if len(pool) == 1 else k for k in bad.apply(tuple, axis=1)]
            sub = sub[~hit]
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
        return {"estimate": math.nan, "ci_lo": math.nan, "ci_hi": math.nan, "n": 0, "p_value": math.nan, "n_groups": 0,
                "excluded": excluded}
    d = (wide_[b] - wide_[a]).replace([np.inf, -np.inf], np.nan).dropna()
    per_seed = d.groupby(level=0).mean()
    out = values_ci(per_seed.to_numpy(), level)
    out["n_groups"] = int(d.reset_index()[pool].drop_duplicates().shape[0]) if pool else int(len(d) > 0)
    out["excluded"] = excluded
    if len(pool) == 1:
        out.update(groups_differ(d.rename("diff").reset_index().rename(columns={pool[0]: "group"}), pair_on))
    return out


def groups_differ(diffs: pd.DataFrame, pair_on: str = "seed", alpha: float = 0.05) -> dict:
    """The group × arm test of a pooled row: do its groups' (the losses') paired differences differ? ``diffs``:
    columns ``pair_on``, group, diff (one paired difference per seed and group). A one-way repeated-measures ANOVA,
    the seeds as subjects and the groups as the within factor, on the seeds that have every group (statsmodels'
    ``AnovaRM`` gives the same F and p). Returns ``groups_p`` (NaN without a test: fewer than 2 groups or 2 complete
    seeds, or no residual spread), ``groups_differ`` (p < ``alpha``), ``group_means`` ({group: mean difference})
    and ``apart``: where the test rejects, the group whose mean lies farthest from the mean of the others, and the
    sentence naming it ('ms stands apart: −0.01 against +0.61 to +0.72 for the others'); '' otherwise."""
    w = diffs.pivot_table(index=pair_on, columns="group", values="diff", aggfunc="first").dropna()
    means = {str(g): float(v) for g, v in diffs.groupby("group")["diff"].mean().items()}
    out = {"groups_p": math.nan, "groups_differ": False, "group_means": means, "apart": ""}
    n, k = w.shape
    if k < 2 or n < 2:
        return out
    x = w.to_numpy(float)
    grand = x.mean()
    ss_groups = n * ((x.mean(axis=0) - grand) ** 2).sum()
    ss_subjects = k * ((x.mean(axis=1) - grand) ** 2).sum()
    ss_error = ((x - grand) ** 2).sum() - ss_groups - ss_subjects
    df1, df2 = k - 1, (k - 1) * (n - 1)
    if not ss_error > 1e-12 * max(1.0, ((x - grand) ** 2).sum()):
        return out
    f = (ss_groups / df1) / (ss_error / df2)
    p = float(stats.f.sf(f, df1, df2))
    out.update(groups_p=p, groups_differ=bool(p < alpha))
    if p < alpha:
        col = {g: float(v) for g, v in w.mean().items()}
        far = max(col, key=lambda g: abs(col[g] - np.mean([v for h, v in col.items() if h != g])))
        others = [v for h, v in col.items() if h != far]
        rng = f"{min(others):+.2f}" if len(others) == 1 else f"{min(others):+.2f} to {max(others):+.2f}"
        out["apart"] = f"{far} stands apart: {col[far]:+.2f} against {rng} for the others"
    return out


def cv_from_var(var, mean):
    """The coefficient of variation ``sqrt(var) / mean``: the one formula behind every norm CV of the book
    (scalars, arrays or Series). ``var`` is the population variance of the norms, as the runs table stores
    it (``train_norm_var``, ``test_norm_var``: ``torch.var(unbiased=False)``)."""
    return np.sqrt(var) / mean
