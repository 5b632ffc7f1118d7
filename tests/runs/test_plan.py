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


def test_the_cost_plan_adds_up_in_training_order():
    df = plan.cost_plan(n_main=9, length=4000, seconds_per_kiter=36.0, pilot_seconds=7200.0)
    assert df["stage"].iloc[0].startswith("schedule pilot") and df["core_hours"].iloc[0] == pytest.approx(2.0)
    main = df[df["stage"].str.startswith("main comparison: 4 losses")].iloc[0]
    assert main["runs"] == 4 * 2 * 9 and main["core_hours"] == pytest.approx(72 * 36.0 * 4 / 3600)
    assert df["cumulative_wall_hours"].iloc[-1] == pytest.approx(df["core_hours"].sum() / 2)
    assert 600 <= df["runs"].sum() <= 1100      # the 700-850, plus the SGD, scale and fine-tuning stages
