"""The one log-log fit (per-batch gradient slopes in training, the figures, the theory chapter)."""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np
import pandas as pd

from ._common import check_columns, check_frame


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
    check_columns(check_frame(df, "df"), [x, y, *by], "columns")
    rows = []
    for key, g in df.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        fit = loglog_fit(g[x], g[y], min_points=min_points)
        rows.append({**dict(zip(by, key)), "slope": fit.slope, "r2": fit.r2})
    return pd.DataFrame(rows, columns=[*by, "slope", "r2"])
