"""Argument checks and the Student-t interval shared by the modules of :mod:`sec_lib.report` (public names,
imported by its sibling modules; the package itself does not re-export them)."""
from __future__ import annotations

import math
import numbers
from typing import Iterable

import numpy as np
import pandas as pd
from scipy import stats

SUMMARY_COLS = ("metric", "mean", "ci_lo", "ci_hi", "n")


def check_level(level) -> float:
    if isinstance(level, bool) or not isinstance(level, numbers.Real) or not (0.0 < float(level) < 1.0):
        raise ValueError(f"level must be a number strictly between 0 and 1 (e.g. 0.95), got {level!r}")
    return float(level)


def as_list(by, name: str) -> list:
    if by is None:
        return []
    if isinstance(by, str):
        return [by]
    try:
        return list(by)
    except TypeError as err:
        raise ValueError(f"{name} must be a column name or a list of column names, got {by!r}") from err


def check_frame(df, name: str = "runs_df") -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame, got {type(df).__name__}")
    return df


def check_columns(df: pd.DataFrame, cols: Iterable, what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what} {missing} not in the frame; valid columns are {list(df.columns)}")


def iter_groups(df: pd.DataFrame, by: list):
    """Iterate (key_dict, sub_frame) in first-appearance order; NaN keys are kept as groups."""
    if not by:
        yield {}, df
        return
    for key, sub in df.groupby(by, sort=False, dropna=False):
        if not isinstance(key, tuple):
            key = (key,)
        yield dict(zip(by, key)), sub


def finite_values(values) -> np.ndarray:
    arr = pd.to_numeric(pd.Series(np.asarray(values, dtype=object).ravel()), errors="coerce").to_numpy(dtype=float)
    return arr[np.isfinite(arr)]


def zero_spread(x: np.ndarray) -> bool:
    """True when the values are all equal up to float rounding (spread <= 1e-12 of their size)."""
    return float(np.ptp(x)) <= 1e-12 * float(np.max(np.abs(x)))


def t_interval(x: np.ndarray, level: float) -> tuple[float, float, float, int]:
    n = int(x.size)
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    mean = float(x.mean())
    if n == 1:
        return mean, math.nan, math.nan, 1
    sd = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.5 + level / 2.0, df=n - 1)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half, n


def is_missing(x) -> bool:
    if x is None:
        return True
    try:
        return not np.isfinite(float(x))
    except (TypeError, ValueError):
        return True
