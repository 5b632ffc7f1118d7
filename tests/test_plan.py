"""The decisive tier's seed plan: its arithmetic against statsmodels' power solver and plain formulas."""
import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.power import TTestPower

from sec_lib.runs import plan


@pytest.mark.parametrize("sd", [0.3, 0.45, 0.6])
def test_planned_seeds_is_the_smallest_count_with_80_percent_power_at_half_a_point(sd):
    n, mde = plan.planned_seeds(sd)
    need = TTestPower().solve_power(effect_size=0.5 / sd, alpha=0.05, power=0.8, alternative="two-sided")
    assert n == max(plan.FLOOR, math.ceil(need)) and mde <= 0.5
    if n > plan.FLOOR:
        assert TTestPower().power(effect_size=0.5 / sd, nobs=n - 1, alpha=0.05) < 0.8


def test_the_cap_is_kept_and_its_detectable_effect_reported():
    n, mde = plan.planned_seeds(2.0)
    assert n == plan.CAP and mde > 0.5
    with pytest.raises(ValueError, match="sd = 0 is not valid"):
        plan.planned_seeds(0)


def test_seed_mean_sd_takes_the_larger_of_the_direct_and_the_per_loss_estimate():
    rng = np.random.default_rng(0)
    d = pd.DataFrame([{"loss": l, "seed": s, "diff": rng.normal(0, 1)} for l in "abcd" for s in range(3)])
    out = plan.seed_mean_sd(d)
    direct = d.groupby("seed")["diff"].mean().std(ddof=1)
    from_losses = math.sqrt(d.groupby("loss")["diff"].var(ddof=1).mean() / 4)
    assert out["direct"] == pytest.approx(direct) and out["from_losses"] == pytest.approx(from_losses)
    assert out["sd"] == max(direct, from_losses) and out["seeds"] == 3 and out["losses"] == 4
