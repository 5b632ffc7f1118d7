"""The seed plan of the decisive tier: how many seeds the primary test needs to detect 0.5 R@1 points.

The primary test (pre-registered) is SEC at the η chosen on held-out classes
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
                  floor: int = FLOOR, cap: int = CAP, sides: int = 2) -> tuple[int, float]:
    """(seeds, detectable effect at that count): the smallest ``n`` in [floor, cap] whose paired t-test on ``n``
    per-seed values of spread ``sd`` detects ``target`` (``sides`` 2: two-sided; 1: one-sided in the expected
    direction, for a confirmation registered in the direction observed); ``cap`` and its detectable effect when
    none does."""
    if not sd > 0:
        raise ValueError(f"sd = {sd!r} is not valid; expected a positive number")
    if not target > 0:
        raise ValueError(f"target = {target!r} is not valid; expected a positive effect size")
    for n in range(max(2, floor), cap + 1):
        mde = min_detectable_effect(sd, n, alpha, power, sides)
        if mde <= target:
            return n, mde
    return cap, min_detectable_effect(sd, cap, alpha, power, sides)


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


#: The decisive tier's stages in training order (tml and CosFace, then the scale and fine-tuning chapters, right
#: after the main comparison): (stage, runs, iterations per run). ``n_main`` is the planned seed count of the
#: primary arms; held-out selections use 3 seeds per grid point and may extend each grid by up to two points per
#: side (budgeted as one extension per loss here).
def stages(n_main: int, length: int, eta_grid=(0.005, 0.05, 0.1, 0.5, 1.0), l2_grid=(0.01, 0.005, 0.001),
           pilot_runs: int = 24) -> list:
    main, extra, sel_seeds, other = 4, 2, 3, 5
    eta_pts = len(eta_grid) + 1                         # η = 0 is a grid point (it may win)
    return [
        ("schedule pilot (held-out)", pilot_runs, None),
        ("η and L2 selection, 4 main losses (held-out, 3 seeds; the SD pilot)",
         main * sel_seeds * (eta_pts + len(l2_grid) + 1), length),
        (f"main comparison: 4 losses x {{none, SEC}} x {n_main} seeds", main * 2 * n_main, length),
        ("main comparison: L2 and paper-η arms, 5 seeds", main * 2 * other, length),
        ("tml and cosface: selection (held-out, 3 seeds) and 4 arms x 5 seeds",
         extra * sel_seeds * (eta_pts + len(l2_grid)) + extra * 4 * other, length),
        ("scale: relative SEC's held-out η (3 η x 3 seeds) and 2 arms x 5 seeds", main * 3 * sel_seeds + main * 2 * other,
         length),
        ("fine-tuning: trunk x head rates (held-out, 5 x 4 pairs x 3 seeds) and 4 arms x 5 seeds",
         5 * 4 * sel_seeds + main * 4 * other, length),
        ("η sweep on the test classes: 4 losses x 5 η x 3 seeds", main * len(eta_grid) * 3, length),
        ("μ: 2 losses x 9 settings x 5 seeds", 2 * 9 * other, length),
        ("BN/WN: 4 heads x {none, SEC} x 5 seeds", 4 * 2 * other, length),
        ("SGD's rates (held-out, 3 seeds): 5 rates x {none, SEC}", 5 * 2 * sel_seeds, length),
        ("normalize layer and Adam vs SGD: 2 + 8 arms x 5 seeds", 10 * other, length),
        ("convergence: dense early prefixes, 4 losses x 2 x 5 seeds (2,000 iterations)", main * 2 * other, 2000),
        ("ssl, npair and face: review losses' selection and arms", 5 * sel_seeds * 4 + 8 * 2 * other, length),
    ]


def cost_plan(n_main: int, length: int, seconds_per_kiter: float, pilot_seconds: float,
              pilot_runs: int = 24) -> pd.DataFrame:
    """The stages of :func:`stages` with their runs, core-hours (one core per run, ``seconds_per_kiter`` per
    1,000 iterations, measured; the pilot's ``pilot_runs`` runs cost ``pilot_seconds`` core-seconds) and wall
    hours on 2 cores, cumulated in training order."""
    rows = []
    for stage, runs, iters in stages(n_main, length, pilot_runs=pilot_runs):
        sec = pilot_seconds if iters is None else runs * seconds_per_kiter * iters / 1000
        rows.append({"stage": stage, "runs": runs, "core_hours": sec / 3600})
    df = pd.DataFrame(rows)
    df["wall_hours_2_cores"] = df["core_hours"] / 2
    df["cumulative_wall_hours"] = df["wall_hours_2_cores"].cumsum()
    return df
