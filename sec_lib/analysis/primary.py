"""The primary test, computed in this one place: SEC at the η chosen on held-out classes minus no regularizer, in
R@1, pooled over the four main losses (claim C4v of the compare page; the landing page states it and the
portability check recomputes it).
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from .. import report
from ..runs import experiments as ex


def pooled_gain(runs: pd.DataFrame, a: str = "none", b: str = "sec", losses: Sequence[str] = ex.MAIN_LOSSES) -> dict:
    """R@1 of variant ``b`` − ``a`` over ``losses``: per seed the paired differences of the losses are averaged,
    and the per-seed means are t-tested against 0 (:func:`sec_lib.report.pooled_diff`): ``estimate, ci_lo, ci_hi,
    n`` (seeds), ``p_value``, ``n_groups`` (losses)."""
    return report.pooled_diff(runs[runs["loss"].isin(losses)], "variant", a, b, "R@1")


def primary_estimate(runs: pd.DataFrame) -> dict:
    """The primary test on ``runs`` (a ``tuned`` chapter's runs frame): :func:`pooled_gain` of SEC − none over the
    four main losses."""
    return pooled_gain(runs)
