"""Holm's adjustment and the verdicts of a family of comparisons (see :mod:`sec_lib.report`).

:func:`one_family` is the entry point every page uses: tables of paired differences (:func:`paired_diff`
rows) or other estimates (:func:`verdict_row`, :func:`pooled_diff` rows; one row schema: ``estimate``,
``ci_lo``, ``ci_hi``, ``p_value``, ``n``) taken as ONE declared Holm family get ``p_adj``, ``p_eq_adj``,
``m``, ``mde`` (at α/m) and ``verdict``; :func:`with_verdict` declares each row's expected sign and margin
first. :func:`adjust_family` is the arithmetic behind both."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ._common import check_columns, is_missing
from .power import min_detectable_effect
from .verdicts import MARGINS, VERDICT_RULES, ROW_COLUMNS, claim_margin, equivalence_p, mde_from_ci, verdict


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
    computed: every page's family passes through here, by way of :func:`one_family`.
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
    check_columns(df, required, "required columns")
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
                                    n=None if is_missing(n) else n, p_adj=r["p_adj"], p_eq_adj=pe))
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
    if is_missing(n):
        return math.nan
    sd = r.get("sd")
    if not is_missing(sd) and np.isfinite(float(sd)):
        return min_detectable_effect(float(sd), int(n), alpha, VERDICT_RULES.power) if float(n) >= 2 else math.nan
    return mde_from_ci(r["ci_lo"], r["ci_hi"], float(n), alpha)


#: Columns every table given to :func:`one_family` needs (``margin`` and ``sd`` are used when present).
FAMILY_COLUMNS = ("estimate", "ci_lo", "ci_hi", "p_value", "expected_sign", "n")


def one_family(*tables: pd.DataFrame, family: str | None = None) -> tuple[pd.DataFrame, ...]:
    """Several verdict tables taken as ONE declared Holm family (each page's comparisons are one
    family, with one entry point for every page): Holm over the p-values of all their rows
    (:func:`adjust_family`), and each table comes back, rows and columns in place, with ``p_adj``,
    ``p_eq_adj`` (the equivalence test's, see :func:`equivalence_p`), ``m`` (the family's size), ``mde``
    (at the family's level α/m), ``verdict`` (and ``p_eq`` where the table has it) replaced, and ``family``
    when given.

    Each table holds :data:`FAMILY_COLUMNS` (``estimate``, ``ci_lo``, ``ci_hi``, ``p_value``,
    ``expected_sign``, ``n``), e.g. from :func:`with_verdict`, rows of :func:`verdict_row` or
    :func:`paired_diff` rows with their signs; ``margin`` and ``sd`` are used when present. The same rows
    give the same numbers as :func:`adjust_family`. Rows without a p-value do not count in ``m``."""
    views = []
    for i, t in enumerate(tables):
        if not isinstance(t, pd.DataFrame):
            raise ValueError(f"table {i} must be a DataFrame, got {type(t).__name__}")
        missing = [c for c in FAMILY_COLUMNS if c not in t.columns]
        if missing:
            raise ValueError(f"table {i} lacks columns {missing}; a family needs {list(FAMILY_COLUMNS)}; "
                             f"it has {list(t.columns)}")
        absent = pd.Series([np.nan] * len(t), index=t.index)
        views.append(pd.DataFrame({
            "estimate": t["estimate"].astype(float).to_numpy(),
            "ci_lo": t["ci_lo"].astype(float).to_numpy(),
            "ci_hi": t["ci_hi"].astype(float).to_numpy(),
            "p_value": pd.to_numeric(t["p_value"], errors="coerce").astype(float).to_numpy(),
            "expected_sign": t["expected_sign"].astype(int).to_numpy(),
            "n": pd.to_numeric(t["n"], errors="coerce").to_numpy(float),
            "margin": pd.to_numeric(t.get("margin", absent), errors="coerce").astype(float).to_numpy(),
            "sd": pd.to_numeric(t.get("sd", absent), errors="coerce").astype(float).to_numpy()}))
    allrows = (pd.concat(views, ignore_index=True) if views
               else pd.DataFrame(columns=[*FAMILY_COLUMNS, "margin", "sd"]))
    fam = adjust_family(allrows, family)
    out, start = [], 0
    for t in tables:
        part = fam.iloc[start:start + len(t)]
        start += len(t)
        extra = {"p_eq": part["p_eq"].to_numpy()} if "p_eq" in t.columns else {}
        if family is not None:
            extra["family"] = part["family"].to_numpy()
        out.append(t.assign(p_adj=part["p_adj"].to_numpy(), p_eq_adj=part["p_eq_adj"].to_numpy(),
                            m=part["m"].to_numpy(), mde=part["mde"].to_numpy(), verdict=part["verdict"].to_numpy(),
                            **extra))
    return tuple(out)


def with_verdict(diffs: pd.DataFrame, expected_sign, margin: float | None = None, n_counts: str = "seeds",
                 family: str | None = None) -> pd.DataFrame:
    """Verdicts for ONE table of paired differences (:func:`paired_diff` rows: ``estimate``, ``ci_lo``,
    ``ci_hi``, ``p_value``, ``n``) taken as one family: each row's expected sign and margin declared here,
    then :func:`one_family`. ``expected_sign``: one sign for every row, or a column name holding each row's
    sign. ``margin``: the practical equivalence margin of every row; None: each row's metric's declared
    margin (:data:`MARGINS`; none for a metric without one). The output keeps each row's ``expected_sign``
    and ``margin`` (so tables can be re-adjusted together by :func:`one_family`) and adds ``p_adj``,
    ``p_eq_adj``, ``m``, ``mde`` (at the family's level α/m), ``n_counts`` (what n counts), ``verdict`` and,
    when given, ``family``. A page with several tables adjusts them together: concatenate first, or pass
    them to :func:`one_family`."""
    if isinstance(expected_sign, str):
        signs = diffs[expected_sign].astype(int).to_numpy()
    else:
        signs = np.full(len(diffs), int(expected_sign))
    if margin is None and "metric" in diffs.columns:
        margins = [MARGINS.get(m) for m in diffs["metric"]]
    else:
        margins = [margin] * len(diffs)
    out = diffs.drop(columns=[c for c in ("verdict", "p_adj", "p_eq_adj", "m", "mde", "n_counts", "expected_sign",
                                          "margin") if c in diffs.columns])
    out = out.assign(expected_sign=signs, margin=[np.nan if v is None else float(v) for v in margins])
    (out,) = one_family(out, family=family)
    out.insert(out.columns.get_loc("verdict"), "n_counts", n_counts)
    return out
