"""The seed plan of the decisive tier: how many seeds the primary test needs to detect 0.5 R@1 points.

The primary test (pre-registered; issue "evidence that decides") is SEC at the η chosen on held-out classes
minus no regularizer, in R@1, pooled over the four main losses: for each seed the four paired differences are
averaged, and the per-seed means are t-tested against 0 (:func:`sec_lib.report.pooled_diff`). It is a family
of its own (no multiplicity adjustment), at α = 0.05 two-sided with 80% power, with an equivalence margin of
±0.5 R@1 points declared with the plan.

Its detectable effect with ``n`` seeds is :func:`sec_lib.report.min_detectable_effect` of the SD of the per-seed
means. The plan estimates that SD on held-out classes from the selection runs (3 seeds per grid point, paired on
the seed): as the larger of (a) the per-seed means' own SD and (b) ``sqrt(mean of the per-loss paired
variances / L)``, which assumes the L losses' differences independent within a seed. The seed count is the
smallest ``n`` (at least :data:`FLOOR`) whose detectable effect is at most :data:`TARGET`, capped at :data:`CAP`.
"""
from __future__ import annotations

import math

import pandas as pd

from ..report import min_detectable_effect

TARGET = 0.5
MARGIN = 0.5
ALPHA = 0.05
POWER = 0.8
FLOOR = 5
CAP = 30


def planned_seeds(sd: float, target: float = TARGET, alpha: float = ALPHA, power: float = POWER,
                  floor: int = FLOOR, cap: int = CAP) -> tuple[int, float]:
    """(seeds, detectable effect at that count): the smallest ``n`` in [floor, cap] whose paired t-test on ``n``
    per-seed values of spread ``sd`` detects ``target``; ``cap`` and its detectable effect when none does."""
    if not sd > 0:
        raise ValueError(f"sd = {sd!r} is not valid; expected a positive number")
    for n in range(max(2, floor), cap + 1):
        mde = min_detectable_effect(sd, n, alpha, power)
        if mde <= target:
            return n, mde
    return cap, min_detectable_effect(sd, cap, alpha, power)


def seed_mean_sd(diffs: pd.DataFrame) -> dict:
    """The SD of the per-seed mean difference over losses, from paired differences ``diffs`` (columns loss,
    seed, diff): ``direct`` (the per-seed means' SD), ``from_losses`` (``sqrt(mean per-loss variance / L)``),
    and ``sd``, the larger of the two, which the plan uses."""
    L = diffs["loss"].nunique()
    per_seed = diffs.groupby("seed")["diff"].mean()
    direct = float(per_seed.std(ddof=1)) if len(per_seed) > 1 else math.nan
    var = diffs.groupby("loss")["diff"].var(ddof=1)
    from_losses = float(math.sqrt(var.mean() / L)) if len(var.dropna()) else math.nan
    both = [v for v in (direct, from_losses) if v == v]
    return {"direct": direct, "from_losses": from_losses, "losses": int(L), "seeds": int(len(per_seed)),
            "per_loss_sd": {k: float(math.sqrt(v)) for k, v in var.items()}, "sd": max(both) if both else math.nan}
