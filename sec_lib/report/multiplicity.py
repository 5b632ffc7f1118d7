"""Holm's adjustment and the verdicts of a family of comparisons (see :mod:`sec_lib.report`)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ._common import _check_columns, _is_missing
from .power import min_detectable_effect
from .verdicts import VERDICT_RULES, ROW_COLUMNS, claim_margin, equivalence_p, mde_from_ci, verdict


def holm(pvalues):
    """Holm's step-down adjusted p-values, in the input order.

    With the ``m`` p-values sorted ascending, ``p_(1) <= ... <= p_(m)``, the adjusted value of the
    ``i``-th is ``min(1, max_{j <= i} (m - j + 1) * p_(j))``: monotone in the raw p, never below it,
    capped at 1. Rejecting where the adjusted p < alpha controls the family-wise error rate at alpha
    for any dependence between the tests (Holm 1979).

    NaN / None entries (comparisons without a test) are left out of the family: they do not count
    in ``m`` and come back as NaN. Returns a float array, or a Series with the same index when given
    a Series. Raises ValueError for values outside [0, 1].
    """
    index = pvalues.index if isinstance(pvalues, pd.Series) else None
    if isinstance(pvalues, (str, bytes, dict)) or np.ndim(pvalues) > 1:
        raise ValueError(f"pvalues must be a 1-D sequence of p-values, got {type(pvalues).__name__}")
    p = pd.to_numeric(pd.Series(np.asarray(pvalues, dtype=object).ravel()), errors="coerce").to_numpy(dtype=float)
    ok = ~np.isnan(p)
    bad = p[ok & ((p < 0) | (p > 1))]
    if bad.size:
        raise ValueError(f"p-values must lie in [0, 1], got {bad.tolist()}")
    out = np.full(p.shape, math.nan)
    idx = np.flatnonzero(ok)
    m = idx.size
    if m:
        order = idx[np.argsort(p[idx], kind="stable")]
        scaled = (m - np.arange(m)) * p[order]
        out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return pd.Series(out, index=index, name=getattr(pvalues, "name", None)) if index is not None else out


def adjust_family(rows, family: str | None = None) -> pd.DataFrame:
    """Holm-adjust one family of verdict rows and recompute their verdicts.

    ``rows``: a DataFrame or a list of dicts, e.g. from :func:`verdict_row`, with at least the
    columns ``estimate``, ``ci_lo``, ``ci_hi``, ``p_value``, ``expected_sign``; ``n`` and ``margin``
    are used when present (``margin`` NaN/None: the default of :func:`verdict`). A family is the set
    of comparisons shown and read together: the main comparison across losses, one review chapter,
    the claims page; adjust each family on its own.

    Returns a copy, rows in the given order, with ``p_adj`` = :func:`holm` of ``p_value`` over the
    family (rows without a p-value do not count and keep NaN), ``m`` = the number of p-values in
    the family, ``p_eq`` = the equivalence test's p of each row with a margin (:func:`equivalence_p`,
    from its interval and ``n``) and ``p_eq_adj`` = :func:`holm` of those over the family, ``verdict``
    recomputed with both adjusted p-values (so *reproduced* and both readings of *not reproduced*
    answer to the same family), ``mde`` = the smallest effect each row could detect at the level its
    verdict uses, the strictest step of Holm's procedure over this family, α/m (from the row's ``sd`` and
    ``n`` where it has them, else from its Student-t interval and ``n``: :func:`mde_from_ci`; NaN without
    ``n``), and a ``family`` column when ``family`` is given. Every row's p-value enters, no-change claims
    included (conservative for the others). This is the one place a detectable effect beside a verdict is
    computed: every page's family passes through here.
    """
    if isinstance(rows, pd.DataFrame):
        df = rows.copy()
    elif isinstance(rows, (str, bytes, dict)) or not hasattr(rows, "__iter__"):
        raise ValueError(f"rows must be a DataFrame or a list of row dicts, got {type(rows).__name__}")
    else:
        rows = list(rows)
        bad = [i for i, r in enumerate(rows) if not isinstance(r, dict)]
        if bad:
            raise ValueError(f"rows must be dicts (e.g. from verdict_row); rows {bad} are not")
        df = pd.DataFrame(rows)
    if df.empty and not len(df.columns):   # an empty family
        df = pd.DataFrame(columns=list(ROW_COLUMNS))
    required = ("estimate", "ci_lo", "ci_hi", "p_value", "expected_sign")
    _check_columns(df, required, "required columns")
    if "verdict" in df.columns:
        df = df.drop(columns="verdict")
    p_adj = holm(df["p_value"].to_numpy()) if len(df) else np.array([], dtype=float)
    df["p_adj"] = p_adj
    df["m"] = int(np.isfinite(p_adj).sum())
    recs = df.to_dict("records")
    p_eq = []
    for i, r in enumerate(recs):
        try:
            margin = claim_margin(r.get("margin"), int(r["expected_sign"]))
        except ValueError as err:
            raise ValueError(f"row {i}: {err}") from err
        p_eq.append(equivalence_p(r["estimate"], r["ci_lo"], r["ci_hi"], r.get("n"), margin))
    df["p_eq"] = np.asarray(p_eq, dtype=float)
    df["p_eq_adj"] = holm(df["p_eq"].to_numpy()) if len(df) else np.array([], dtype=float)
    verdicts = []
    for i, (r, pe) in enumerate(zip(recs, df["p_eq_adj"].to_numpy())):
        n = r.get("n")
        try:
            verdicts.append(verdict(r["estimate"], r["ci_lo"], r["ci_hi"], r["expected_sign"], r.get("margin"),
                                    n=None if _is_missing(n) else n, p_adj=r["p_adj"], p_eq_adj=pe))
        except ValueError as err:
            raise ValueError(f"row {i}: {err}") from err
    df["verdict"] = verdicts
    alpha = VERDICT_RULES.alpha / max(int(df["m"].iloc[0]) if len(df) else 0, 1)
    df["mde"] = [_mde(r, alpha) for r in recs]
    if family is not None:
        df["family"] = family
    return df.reset_index(drop=True)


def _mde(r: dict, alpha: float) -> float:
    """A row's detectable effect at level ``alpha`` (see :func:`adjust_family`)."""
    n = r.get("n")
    if _is_missing(n):
        return math.nan
    sd = r.get("sd")
    if not _is_missing(sd) and np.isfinite(float(sd)):
        return min_detectable_effect(float(sd), int(n), alpha, VERDICT_RULES.power) if float(n) >= 2 else math.nan
    return mde_from_ci(r["ci_lo"], r["ci_hi"], float(n), alpha)
