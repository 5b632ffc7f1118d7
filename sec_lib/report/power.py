"""The smallest effect a paired design of n seeds could detect (see :mod:`sec_lib.report`)."""
from __future__ import annotations

import functools
import math
import numbers

import numpy as np
from scipy import optimize, stats

from ._common import is_missing


#: The tests a detectable effect can be asked of: two-sided, or one-sided in the expected direction.
SIDES = (2, 1)


def _t_power(delta: float, df: int, t_crit: float, sides: int = 2) -> float:
    """Power of the one-sample t-test at noncentrality ``delta >= 0``: two-sided (``sides`` 2, ``t_crit`` the
    ``1 - alpha/2`` quantile) or one-sided in the direction of ``delta`` (``sides`` 1, the ``1 - alpha`` quantile).

    The two-sided test's lower tail ``P(T < -t_crit)`` is below ``alpha / 2`` and falls with ``delta``; far out,
    where scipy's ``nct.cdf`` underflows to NaN (``delta`` around 8), it is 0 to double precision."""
    upper = float(stats.nct.sf(t_crit, df, delta))
    if sides == 1:
        return upper
    lower = float(stats.nct.cdf(-t_crit, df, delta))
    return upper + (0.0 if math.isnan(lower) else lower)


def min_detectable_effect(sd, n, alpha: float = 0.05, power: float = 0.8, sides: int = 2) -> float:
    """The smallest true mean difference that a two-sided paired t-test on ``n`` pairs with spread
    ``sd`` detects at level ``alpha`` with probability ``power``; in the units of ``sd``. ``sides`` 1: the
    one-sided test in the expected direction (critical value the ``1 - alpha`` quantile; statsmodels'
    ``TTestPower`` with ``alternative='larger'``).

    The paired test is a one-sample t-test on the ``n`` differences, so ``T = mean / (sd / sqrt(n))``
    has ``n - 1`` degrees of freedom. Under a true difference ``delta_x`` it follows the noncentral t
    distribution with noncentrality ``lambda = delta_x * sqrt(n) / sd``, and the power is
    ``P(T > t_c) + P(T < -t_c)`` with ``t_c`` the ``1 - alpha/2`` quantile of the central t
    (``scipy.stats.nct``). The effect is the root ``lambda`` of ``power(lambda) = power`` (Brent's
    method), returned as ``lambda * sd / sqrt(n)``.

    Read it as "this experiment could detect effects of at least this size": with 5 seeds the
    answer is about 1.7 standard deviations of the per-seed differences, with 3 seeds about 3.3.
    ``sd`` is usually the sample SD of the differences, so the answer is itself an estimate.

    Returns NaN when no test is possible: ``n < 2``, or ``sd`` NaN or 0 (zero spread).
    Raises ValueError for a negative ``sd``, ``alpha`` outside (0, 1) or ``power`` outside (alpha, 1).
    """
    for name, val in (("alpha", alpha), ("power", power)):
        if isinstance(val, bool) or not isinstance(val, numbers.Real) or not (0.0 < float(val) < 1.0):
            raise ValueError(f"{name} must be a number strictly between 0 and 1, got {val!r}")
    if power <= alpha:
        raise ValueError(f"power ({power}) must exceed alpha ({alpha}): a test has power alpha at zero effect")
    if isinstance(n, bool) or not isinstance(n, numbers.Real) or (np.isfinite(n) and (n < 0 or n != int(n))):
        raise ValueError(f"n must be a whole count >= 0, got {n!r}")
    if sides not in SIDES:
        raise ValueError(f"sides must be one of {SIDES} (two-sided or one-sided), got {sides!r}")
    if not is_missing(sd) and float(sd) < 0:
        raise ValueError(f"sd must be >= 0, got {sd!r}")
    if is_missing(sd) or float(sd) == 0.0 or not np.isfinite(n) or n < 2:
        return math.nan
    n = int(n)
    return _noncentrality(n, float(alpha), float(power), int(sides)) * float(sd) / math.sqrt(n)


@functools.lru_cache(maxsize=256)
def _noncentrality(n: int, alpha: float, power: float, sides: int = 2) -> float:
    """The noncentrality at which the t-test on ``n`` values (``sides``-sided) has the given power."""
    df = n - 1
    t_crit = float(stats.t.ppf(1.0 - alpha / sides, df))
    hi = max(1.0, 2.0 * t_crit)
    while _t_power(hi, df, t_crit, sides) < power:   # bracket the root; power rises with lambda
        hi *= 2.0
    return float(optimize.brentq(lambda x: _t_power(x, df, t_crit, sides) - power, 0.0, hi, xtol=1e-12,
                                 rtol=1e-12))
