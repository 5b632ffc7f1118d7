"""Margins, verdict rules and verdict rows: the book's verdict words (see :mod:`sec_lib.report`)."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from ._common import finite_values, is_missing, t_interval, zero_spread
from .intervals import DEFAULT_METRICS
from .power import min_detectable_effect

#: All possible verdicts (see :func:`verdict`): whether there is a signal, and how its size compares with the
#: paper's (after LeBel, Vanpaemel, Cheung and Campbell, *A Brief Guide to Evaluate Replications*, 2019).
VERDICTS = ("reproduced", "larger than claimed", "smaller than claimed", "negligible", "not reproduced",
            "inconclusive", "not testable offline")
#: The words that mean "the claimed direction holds" (a signal on the claimed side), whatever its size.
SIGNAL_WORDS = ("reproduced", "larger than claimed", "smaller than claimed", "negligible")


# -------------------------------------------------------------------------------------------- verdicts
#
# The book's verdict words (see DESIGN.md) and the statistics behind them:
#
# * MARGINS / PRIMARY_METRIC: the practical equivalence margin of each metric and which metric is primary;
# * verdict(): the rules that turn an estimate and its interval (and the Holm-adjusted p) into a word;
# * min_detectable_effect() (in .power): the smallest effect a design of n seeds could detect;
# * holm() (in .multiplicity): Holm's step-down adjustment within one family of comparisons;
# * verdict_row() here / one_family() (in .multiplicity, on adjust_family()): one row per comparison from the
#   paired differences, then a family.

#: The declared primary metric: the paper's headline number. Every other metric is secondary.
PRIMARY_METRIC = "R@1"

#: Practical equivalence margins, in the metric's own units (percentage points for all of
#: :data:`DEFAULT_METRICS`). An effect whose whole interval lies inside ``±margin`` is negligible:
#: a directional claim is then *not reproduced* and a no-change claim *reproduced*. The margins are
#: declared in advance, not estimated from the runs: 0.5 points of R@k is one query in 200 answered
#: differently, well below the gains the paper reports for SEC (1.7 to 7.5 points of R@1, Table 1); the
#: same 0.5 points is used for the secondary metrics. Give a new metric its margin here.
MARGINS = {"R@1": 0.5, "R@2": 0.5, "R@4": 0.5, "R@8": 0.5, "NMI": 0.5, "F1": 0.5, "MAP@R": 0.5}

#: The metrics that are not primary, in the order of :data:`DEFAULT_METRICS`.
SECONDARY_METRICS = tuple(m for m in DEFAULT_METRICS if m != PRIMARY_METRIC)

#: What the ``n`` of a verdict row may count.
N_COUNTS = ("seeds", "runs pooled across losses")


def metric_role(metric: str) -> str:
    """``"primary"`` for :data:`PRIMARY_METRIC` (R@1), ``"secondary"`` for every other metric."""
    if not isinstance(metric, str):
        raise ValueError(f"metric must be a metric name such as {PRIMARY_METRIC!r}, got {metric!r}")
    return "primary" if metric == PRIMARY_METRIC else "secondary"


def margin_for(metric: str) -> float:
    """The practical equivalence margin of ``metric`` from :data:`MARGINS` (in the metric's units)."""
    if metric not in MARGINS:
        raise ValueError(f"no equivalence margin declared for metric {metric!r}; declared: {list(MARGINS)}")
    return float(MARGINS[metric])


def margin_table() -> pd.DataFrame:
    """The declared margins as a table for the claims page: ``metric``, ``margin``, ``unit``,
    ``role`` (primary / secondary), one row per metric of :data:`MARGINS`, primary first."""
    order = sorted(MARGINS, key=lambda m: metric_role(m) != "primary")   # stable: primary first
    return pd.DataFrame(
        [{"metric": m, "margin": float(MARGINS[m]), "unit": "percentage points", "role": metric_role(m)} for m in order],
        columns=["metric", "margin", "unit", "role"],
    )


@dataclass(frozen=True)
class VerdictRules:
    """The fixed settings behind :func:`verdict` and :func:`verdict_row`.

    * ``level``: level of the Student-t intervals the rules read (95%);
    * ``alpha``: a directional *reproduced* needs the Holm-adjusted p below it (0.05);
    * ``power``: the power at which :func:`min_detectable_effect` is reported (80%);
    * ``min_effect``: the default margin of a directional claim, 0, i.e. no negligible-effect rule
      unless a margin is given (kept under this name for old callers);
    * ``equivalence_margin``: the default margin of a no-change claim, that of the primary metric;
    * ``single_run_max``: the best verdict without a usable interval (one run, or zero spread).
    """

    level: float = 0.95
    alpha: float = 0.05
    power: float = 0.8
    min_effect: float = 0.0
    equivalence_margin: float = MARGINS[PRIMARY_METRIC]
    single_run_max: str = "inconclusive"


#: The settings used by the book (see :class:`VerdictRules`).
VERDICT_RULES = VerdictRules()



def _check_sign(expected_sign) -> int:
    if isinstance(expected_sign, bool) or expected_sign not in (-1, 0, 1):
        raise ValueError(f"expected_sign must be +1 (increase), -1 (decrease) or 0 (no change), got {expected_sign!r}")
    return int(expected_sign)


def claim_margin(margin, expected_sign: int) -> float:
    """The margin a claim is judged with: ``margin``, or where it is None/NaN the default of its kind
    (:data:`VERDICT_RULES`: the primary metric's equivalence margin for a no-change claim, ``min_effect``
    for a directional one). ValueError for a negative margin, or a no-change claim without one."""
    if margin is None or (isinstance(margin, float) and math.isnan(margin)):
        margin = VERDICT_RULES.equivalence_margin if expected_sign == 0 else VERDICT_RULES.min_effect
    if isinstance(margin, bool) or is_missing(margin) or float(margin) < 0:
        raise ValueError(f"margin must be a finite number >= 0 (or None for the default), got {margin!r}")
    if expected_sign == 0 and float(margin) <= 0:
        raise ValueError(f"a no-change claim (expected_sign=0) needs an equivalence margin > 0, got {margin!r}")
    return float(margin)


def equivalence_p(estimate, ci_lo, ci_hi, n, margin, level: float | None = None) -> float:
    """The p-value of the two one-sided tests (TOST) that the effect lies inside ``±margin``.

    The larger of the one-sided Student-t p-values of H0: effect <= -margin and H0: effect >= +margin,
    with the standard error recovered from the ``level`` (default: :data:`VERDICT_RULES`' 95%)
    Student-t interval ``[ci_lo, ci_hi]`` of ``n`` values (its half-width is ``t_crit * se``), n - 1
    degrees of freedom. A small p says the effect is shown to be negligible. NaN without a test:
    ``margin <= 0`` (none declared), ``n < 2``, a missing bound or a zero-width interval.
    For a sample ``x`` this is statsmodels' ``DescrStatsW(x).ttost_mean(-margin, margin)[0]``.
    """
    level = VERDICT_RULES.level if level is None else level
    vals = (estimate, ci_lo, ci_hi, n, margin)
    if any(is_missing(v) for v in vals):
        return math.nan
    d, lo, hi, n, margin = (float(v) for v in vals)
    if margin <= 0 or n < 2 or not hi > lo:
        return math.nan
    df = n - 1
    se = (hi - lo) / 2.0 / float(stats.t.ppf(0.5 + level / 2.0, df))
    p_low = float(stats.t.sf((d + margin) / se, df))      # H0: effect <= -margin
    p_high = float(stats.t.cdf((d - margin) / se, df))    # H0: effect >= +margin
    return max(p_low, p_high)


def usable_interval(lo, hi, n=None) -> bool:
    """Whether ``[lo, hi]`` is an interval a verdict can use: both bounds finite, a spread wider than
    float rounding (1e-9 of the bounds' size) and, when ``n`` is given, at least 2 values behind it.
    The one statement of this rule (:func:`verdict`, the claims' records and the pages use it)."""
    if is_missing(lo) or is_missing(hi):
        return False
    lo, hi = float(lo), float(hi)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return False
    if n is not None and not is_missing(n) and float(n) < 2:
        return False
    return (hi - lo) > 1e-9 * max(abs(lo), abs(hi))


def mde_from_ci(lo, hi, n, alpha: float | None = None) -> float:
    """:func:`sec_lib.report.min_detectable_effect` of a Student-t interval ``[lo, hi]`` of ``n`` values
    (at the rules' level): the half-width is ``t_crit · sd / sqrt(n)``, so the SD is recovered exactly.
    ``alpha``: the test's level (default the rules' α; pass the level the verdict uses, e.g. α/m)."""
    if n is None or is_missing(n) or not np.isfinite(n) or n < 2 or not usable_interval(lo, hi, n):
        return math.nan
    n = int(n)
    sd = (hi - lo) / 2.0 * math.sqrt(n) / float(stats.t.ppf(0.5 + VERDICT_RULES.level / 2.0, n - 1))
    return min_detectable_effect(sd, n, VERDICT_RULES.alpha if alpha is None else alpha, VERDICT_RULES.power)


def _passes(p) -> bool:
    """A decisive word's multiplicity gate: no adjusted p given (None/NaN), or one below alpha."""
    return is_missing(p) or float(p) < VERDICT_RULES.alpha


def paper_range_of(paper) -> tuple[float, float] | None:
    """``(smallest, largest)`` of the paper's reported values for a claim (a number, a sequence of numbers, or None),
    or None when the paper gives no size. ValueError for a value that is not a finite number."""
    if paper is None:
        return None
    vals = [paper] if isinstance(paper, numbers.Real) and not isinstance(paper, bool) else list(paper)
    if not vals:
        return None
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
            raise ValueError(f"the paper's values must be finite numbers, got {v!r}")
    return float(min(vals)), float(max(vals))


def size_word(ci_lo, ci_hi, expected_sign: int, paper) -> str:
    """How a signal's size compares with the paper's values ``paper`` (:func:`paper_range_of`), in the claimed
    direction: 'smaller than claimed' (the whole interval lies below the paper's smallest value), 'larger than
    claimed' (above its largest) or 'reproduced' (the interval reaches the paper's range). 'reproduced' without a
    paper size or for a no-change claim."""
    rng = paper_range_of(paper)
    sign = _check_sign(expected_sign)
    if rng is None or sign == 0:
        return "reproduced"
    lo, hi = sorted((sign * float(ci_lo), sign * float(ci_hi)))       # the claimed direction counts as positive
    p_lo, p_hi = sorted((sign * rng[0], sign * rng[1]))
    if hi < p_lo:
        return "smaller than claimed"
    if lo > p_hi:
        return "larger than claimed"
    return "reproduced"


def refine(word: str, ci_lo, ci_hi, expected_sign: int, paper) -> str:
    """A verdict decided without the paper's size (a page's own family table) with it: a 'reproduced' becomes
    :func:`size_word`'s word; every other word stays."""
    if word != "reproduced" or is_missing(ci_lo) or is_missing(ci_hi):
        return word
    return size_word(ci_lo, ci_hi, expected_sign, paper)


def verdict(estimate, ci_lo, ci_hi, expected_sign: int = +1, margin=None, n=None, p_adj=None,
            p_eq_adj=None, paper=None) -> str:
    """The verdict word for one claim: one of :data:`VERDICTS`. It answers two questions: is there a signal, and
    how does its size compare with the paper's values ``paper`` (a number or a sequence: the paper's reported gains
    for the claim; None: the paper gives no size)?

    Arguments: the ``estimate`` (e.g. the mean paired difference SEC − baseline), its confidence
    interval ``[ci_lo, ci_hi]`` (95%), the direction the claim predicts (``expected_sign``: +1 the
    quantity goes up, -1 it goes down, 0 it does not change), the practical equivalence ``margin``
    (same units as the estimate; see :data:`MARGINS`), the number ``n`` of seeds or runs behind the
    estimate, the Holm-adjusted p-value ``p_adj`` of the test of "no difference" (see :func:`holm`),
    and the Holm-adjusted p-value ``p_eq_adj`` of the equivalence test (:func:`equivalence_p`, "the
    effect lies inside ±margin") over the same family.

    Both decisive words answer to the family's multiplicity adjustment in the same way: each needs
    its interval condition AND, when the adjusted p of its test is given, that p below 0.05.

    **Directional claim** (``expected_sign`` ±1):

    * *not reproduced* if the interval lies entirely on the wrong side of 0 and ``p_adj < 0.05`` (opposite);
      or if it lies entirely inside ``±margin``, contains 0 and ``p_eq_adj < 0.05`` (no effect);
    * *negligible* if it lies entirely inside ``±margin`` on the predicted side of 0 and ``p_eq_adj < 0.05``
      (a signal too small to matter, whatever the paper's size);
    * with the interval entirely on the predicted side of 0 (and beyond the margin) and ``p_adj < 0.05``, a
      signal, sized against the paper's values (:func:`size_word`): *smaller than claimed* if the whole
      interval lies below the paper's smallest value, *larger than claimed* if above its largest, *reproduced*
      if it reaches the paper's range, or where the paper gives no size;
    * *inconclusive* in every other case (the interval contains 0, or the adjusted p is too large).

    **No-change claim** (``expected_sign`` 0), an equivalence test:

    * *reproduced* if the interval lies inside ``[-margin, +margin]`` and ``p_eq_adj < 0.05``;
    * *not reproduced* if it lies entirely outside (above ``+margin`` or below ``-margin``) and
      ``p_adj < 0.05``;
    * *inconclusive* otherwise.

    **Without a usable interval** -- ``n < 2``, a missing bound, or zero spread (``ci_lo == ci_hi``
    up to float rounding: a width below 1e-9 of the bounds' size) -- the data cannot tell: the
    verdict is *inconclusive*.

    **not testable offline**: no evidence at all (``estimate`` missing or ``n == 0``).

    Defaults: ``margin=None`` means no negligible-effect rule for a directional claim and the primary
    metric's margin (0.5 points of R@1) for a no-change claim. ``p_adj=None`` / ``p_eq_adj=None`` (or
    NaN) mean no multiplicity information, and the interval alone decides; pass them whenever the
    claim belongs to a family (:func:`adjust_family` does). Boundaries count as inside: an interval
    ending exactly at 0 is not on either side of 0, one ending exactly at ``margin`` is inside the margin.
    """
    expected_sign = _check_sign(expected_sign)
    margin = claim_margin(margin, expected_sign)
    if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Real) or (np.isfinite(n) and n < 0)):
        raise ValueError(f"n must be None or a count >= 0, got {n!r}")
    for name, p in (("p_adj", p_adj), ("p_eq_adj", p_eq_adj)):
        if not is_missing(p) and not (0.0 <= float(p) <= 1.0):
            raise ValueError(f"{name} must be a p-value in [0, 1] (or None), got {p!r}")

    if is_missing(estimate) or (n is not None and (not np.isfinite(n) or int(n) == 0)):
        return "not testable offline"
    d = float(estimate)
    has_ci = not (is_missing(ci_lo) or is_missing(ci_hi))
    if has_ci:
        lo, hi = float(ci_lo), float(ci_hi)
        if lo > hi:
            raise ValueError(f"ci_lo ({lo}) must not exceed ci_hi ({hi})")
        tol = 1e-9 * max(1.0, abs(d))
        if not (lo - tol <= d <= hi + tol):
            raise ValueError(f"estimate ({d}) must lie inside [ci_lo, ci_hi] = [{lo}, {hi}]")
    usable = has_ci and usable_interval(lo, hi, n)
    if not usable:
        return VERDICT_RULES.single_run_max

    inside_margin = -margin <= lo and hi <= margin
    if expected_sign == 0:
        if inside_margin:
            return "reproduced" if _passes(p_eq_adj) else "inconclusive"
        if (lo > margin or hi < -margin) and _passes(p_adj):
            return "not reproduced"
        return "inconclusive"

    s_lo, s_hi = sorted((expected_sign * lo, expected_sign * hi))   # the interval with "predicted" = positive
    if s_hi < 0 and _passes(p_adj) and not inside_margin:
        return "not reproduced"
    if inside_margin:
        if not _passes(p_eq_adj):
            return "inconclusive"
        return "negligible" if s_lo > 0 else "not reproduced"
    if s_lo > 0 and _passes(p_adj):
        return size_word(lo, hi, expected_sign, paper)
    return "inconclusive"


#: Columns of :func:`verdict_row` / :func:`adjust_family`, in order.
ROW_COLUMNS = ("estimate", "ci_lo", "ci_hi", "p_value", "p_adj", "p_eq", "p_eq_adj", "m", "n", "n_counts",
               "sd", "mde", "expected_sign", "margin", "verdict")


def verdict_row(values, expected_sign: int = +1, margin=None, n_counts: str = "seeds") -> dict:
    """One verdict row from a sample, usually the per-seed paired differences (b − a).

    ``values`` is a 1-D sample (NaN entries, e.g. failed runs, are dropped); ``expected_sign`` and
    ``margin`` are those of :func:`verdict` (``margin=None``: see there); ``n_counts`` says what one
    value is, one of :data:`N_COUNTS` ("seeds", or "runs pooled across losses").

    Returns a dict with the keys of :data:`ROW_COLUMNS`:

    * ``estimate``: the mean; ``ci_lo``, ``ci_hi``: its 95% Student-t interval;
    * ``p_value``: the raw two-sided one-sample t-test of mean 0 (for paired differences this is the
      paired t-test, ``scipy.stats.ttest_rel``);
    * ``n``, ``n_counts``; ``sd``: the sample SD (ddof=1) of the values;
    * ``mde``: :func:`min_detectable_effect` of ``sd`` and ``n`` (5% two-sided, 80% power);
    * ``p_eq``: the equivalence test's p (:func:`equivalence_p`; NaN without a margin);
    * ``p_adj``, ``p_eq_adj``, ``m`` and ``verdict``: the row taken as a family of one (``m == 1``,
      ``p_adj == p_value``, ``p_eq_adj == p_eq``). A row that belongs to a family must go through
      :func:`one_family` (:func:`adjust_family`), which replaces these four.

    Zero spread (all values equal, up to float rounding) or fewer than 2 values: no interval, no p, no ``mde`` (NaN) and
    the verdict is at most *inconclusive*; no values: *not testable offline*.
    """
    expected_sign = _check_sign(expected_sign)
    margin = claim_margin(margin, expected_sign)
    if not isinstance(n_counts, str) or n_counts not in N_COUNTS:
        raise ValueError(f"n_counts must say what n counts, one of {list(N_COUNTS)}; got {n_counts!r}")
    if isinstance(values, (str, bytes, dict)) or np.ndim(values) > 1:
        raise ValueError(f"values must be a 1-D sample, got {type(values).__name__}")
    x = finite_values(values)
    mean, lo, hi, n = t_interval(x, VERDICT_RULES.level)
    sd = float(x.std(ddof=1)) if n >= 2 else math.nan
    if n >= 2 and not zero_spread(x):
        p = float(stats.ttest_1samp(x, 0.0).pvalue)
    else:                                   # one value or zero spread: nothing to test
        lo = hi = p = math.nan
    p_eq = equivalence_p(mean, lo, hi, n, margin)
    row = {"estimate": mean, "ci_lo": lo, "ci_hi": hi, "p_value": p, "p_adj": p, "p_eq": p_eq, "p_eq_adj": p_eq,
           "m": int(not math.isnan(p)), "n": n, "n_counts": n_counts, "sd": sd,
           "mde": min_detectable_effect(sd, n, VERDICT_RULES.alpha, VERDICT_RULES.power),
           "expected_sign": expected_sign, "margin": margin}
    row["verdict"] = verdict(mean, lo, hi, expected_sign, margin, n=n, p_adj=p, p_eq_adj=p_eq)
    return row


_CLAIM_REQUIRED = ("claim", "text", "estimate", "ci_lo", "ci_hi")
_CLAIM_OPTIONAL = ("n", "paper", "link", "expected_sign", "margin", "p_adj")


def verdict_table(rows: Sequence[dict]) -> pd.DataFrame:
    """Claims table with a computed ``verdict`` column (never typed by hand).

    Each row is a dict with the required keys ``claim`` (id), ``text``, ``estimate`` (our number,
    e.g. a paired difference), ``ci_lo``, ``ci_hi``, and optional ``n``, ``paper`` (the paper's
    number or None), ``link`` (where the evidence is in the book), ``expected_sign`` (default +1),
    ``margin`` (the practical equivalence margin; default: see :func:`verdict`; a key
    ``min_effect`` is read as the margin), ``p_adj`` (the Holm-adjusted p, when the claims were
    adjusted as a family with :func:`holm`). Other keys are kept as extra columns.
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
        legacy = rec.pop("min_effect", None)
        margin = rec.get("margin", legacy)
        try:
            rec["verdict"] = verdict(
                rec["estimate"], rec["ci_lo"], rec["ci_hi"], expected_sign=rec["expected_sign"], margin=margin,
                n=rec["n"], p_adj=rec.get("p_adj"),
            )
        except ValueError as err:
            raise ValueError(f"claim {rec['claim']!r}: {err}") from err
        out.append(rec)
    base = ["claim", "text", "estimate", "ci_lo", "ci_hi", "n", "paper", "link", "expected_sign", "verdict"]
    extras = list(dict.fromkeys(k for rec in out for k in rec if k not in base))
    return pd.DataFrame(out, columns=base + extras)


def _getter(r):
    """``get(key, default=None)`` of a verdict row: a mapping, or a record (a claim's) whose fields are attributes."""
    return r.get if isinstance(r, dict) else (lambda k, d=None: getattr(r, k, d))


def equivalence_words(r) -> str:
    """': no effect larger than 0.5 points' where the verdict 'not reproduced' of ``r`` (a verdict row: a mapping or a
    record with ``verdict``, ``margin``, ``expected_sign``, ``ci_lo``, ``ci_hi``) comes from its equivalence test (the
    interval inside ±margin: the declared margin), not from an effect of the wrong sign; for a no-change
    claim (expected sign 0), ': within ±0.5 points' where its 'reproduced' is that equivalence; else ''."""
    get = _getter(r)
    m, lo, hi, sign = get("margin"), get("ci_lo", math.nan), get("ci_hi", math.nan), get("expected_sign", 1)
    if m is None or not np.isfinite(m) or not m or not (np.isfinite(lo) and np.isfinite(hi)):
        return ""
    if not (-m <= lo and hi <= m):                   # decided by the interval's side, not by equivalence
        return ""
    if sign == 0:                                    # a no-change claim: 'reproduced' is the equivalence
        return f": within ±{m:g} points" if get("verdict") == "reproduced" else ""
    if get("verdict") == "negligible":
        return f": a change smaller than {m:g} points"
    return f": no effect larger than {m:g} points" if get("verdict") == "not reproduced" else ""


def equivalence_p_words(r) -> str:
    """' (equivalence: 0.012)', the equivalence test's adjusted p (``p_eq_adj``) of ``r`` (a verdict row or a claim
    record), where that test gave its verdict (:func:`equivalence_words`), else '': what the book shows beside the
    difference test's adjusted p, which alone would not explain a 'not reproduced'."""
    get = _getter(r)
    q = get("p_eq_adj", math.nan)
    return f" (equivalence: {q:.2g})" if equivalence_words(r) and q is not None and np.isfinite(q) else ""


def inconclusive_words(r) -> str:
    """Why ``r`` (a verdict row: a mapping, or a record with ``verdict``, ``ci_lo``, ``ci_hi``, ``expected_sign``,
    ``margin``, ``p_adj``, ``p_eq_adj``, ``m``) is *inconclusive* although its 95% interval lies on one side of 0: a
    reader who sees '-0.40 [-0.67, -0.13] inconclusive' is owed the reason, which is one of :func:`verdict`'s gates.

    * a directional claim whose interval misses 0 (and the margin): '; its interval excludes 0, but not after Holm
      over the 5 rows of its family (adjusted p = 0.077)';
    * a directional claim inside ±margin whose equivalence test fails after Holm: '; within ±0.5 points, but not
      after Holm over the 5 rows of its family (equivalence: adjusted p = 0.12)';
    * a no-change claim whose interval crosses +margin or −margin: '; its interval crosses the ±0.5-point margin, so
      it neither shows a change nor rules one out'; one wholly outside (or inside) it whose adjusted p fails: the Holm
      words as above.

    '' for the other verdicts, for an interval that contains 0 (the usual inconclusive, which needs no reason), and
    where the row lacks what the reason needs."""
    get = _getter(r)
    if get("verdict") != "inconclusive":
        return ""
    lo, hi, sign = get("ci_lo", math.nan), get("ci_hi", math.nan), get("expected_sign", 1)
    if is_missing(lo) or is_missing(hi) or not usable_interval(lo, hi, get("n")):
        return ""
    lo, hi = float(lo), float(hi)
    try:
        margin = claim_margin(get("margin"), _check_sign(sign))
    except ValueError:
        return ""
    m = get("m")
    family = f" over the {int(m)} rows of its family" if not is_missing(m) and int(m) > 1 else ""

    def holm(p, what=""):
        return "" if is_missing(p) else f", but not after Holm{family} ({what}adjusted p = {float(p):.2g})"
    inside = -margin <= lo and hi <= margin
    if sign == 0:
        if inside:
            text = holm(get("p_eq_adj"), "equivalence: ")
            return f"; within ±{margin:g} points{text}" if text else ""
        if lo > margin or hi < -margin:
            text = holm(get("p_adj"))
            return f"; its interval lies beyond ±{margin:g} points{text}" if text else ""
        return (f"; its interval crosses the ±{margin:g}-point margin, so it neither shows a change nor rules one "
                f"out")
    if lo <= 0 <= hi:
        return ""
    if inside and margin:
        text = holm(get("p_eq_adj"), "equivalence: ")
        return f"; within ±{margin:g} points{text}" if text else ""
    text = holm(get("p_adj"))
    return f"; its interval excludes 0{text}" if text else ""
