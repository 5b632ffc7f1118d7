"""The three registered follow-ups to the headline (data/followups/{longer-runs,weight-decay,regime-seeds}/): the
weight-decay form, the one-sided seed plan, each registration's configs and each verdict rule on hand-made frames."""
import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch

from sec_lib.report import min_detectable_effect
from sec_lib.runs import decisive, longruns, regimeseeds, selection, tier, weightdecay
from sec_lib.runs.plan import planned_seeds
from sec_lib.runs.store import run_key
from sec_lib.runs.train import TrainConfig, batchnorm_parameters, decay_groups, make_loss, make_optimizer
from sec_lib.models import build_model
from sec_lib.data import get_dataset

statsmodels_power = pytest.importorskip("statsmodels.stats.power")


def committed_keys(stage):
    return set(pd.read_parquet(tier.tier_dir("decisive") / stage / "runs.parquet", columns=["key"])["key"])


# -- the weight-decay form ----------------------------------------------------------------------------------------

def _model_and_loss(loss="cosface"):
    cfg = TrainConfig(loss=loss, weight_decay=0.1, iterations=1).validate()
    ds = get_dataset("glyphs", split="train", image_size=cfg.image_size)
    model = build_model(cfg.model, head=cfg.head, embed_dim=cfg.embed_dim, in_channels=1, image_size=cfg.image_size,
                        width=cfg.width)
    return cfg, model, make_loss(cfg, ds)


def test_weight_decay_spares_every_batchnorm_parameter_and_decays_every_other():
    cfg, model, loss_fn = _model_and_loss()
    opt, _ = make_optimizer(cfg, model, loss_fn)
    assert type(opt) is torch.optim.Adam                   # coupled, as the authors' Adam
    bn = batchnorm_parameters(model, loss_fn)
    bn_modules = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._NormBase)]
    assert bn_modules and len(bn) == sum(len(list(m.parameters(recurse=False))) for m in bn_modules)
    for g in opt.param_groups:
        ids = {id(p) for p in g["params"]}
        assert g["weight_decay"] == (0.0 if ids <= bn else 0.1)
        assert not ids & bn or ids <= bn
    everything = {id(p) for p in [*model.parameters(), *loss_fn.parameters()] if p.requires_grad}
    assert {id(p) for g in opt.param_groups for p in g["params"]} == everything
    assert any(id(p) in everything - bn for p in loss_fn.parameters())   # CosFace's class weights are decayed


def test_a_step_with_zero_gradients_moves_only_the_decayed_parameters():
    cfg, model, loss_fn = _model_and_loss()
    opt, _ = make_optimizer(cfg, model, loss_fn)
    params = [p for g in opt.param_groups for p in g["params"]]
    before = [p.detach().clone() for p in params]
    for p in params:
        p.grad = torch.zeros_like(p)
    opt.step()
    bn = batchnorm_parameters(model, loss_fn)
    for p, b in zip(params, before):
        moved = not torch.equal(p.detach(), b)
        assert moved == (id(p) not in bn and bool(b.abs().sum() > 0))


def test_without_weight_decay_the_optimizer_is_built_as_before():
    groups = [{"params": [torch.nn.Parameter(torch.ones(2))], "lr": 1.0}]
    assert decay_groups(groups, set(), 0.0) is groups
    cfg, model, loss_fn = _model_and_loss("semihard")
    opt, _ = make_optimizer(dataclasses.replace(cfg, weight_decay=0.0), model, loss_fn)
    assert [len(g["params"]) for g in opt.param_groups] == [len([p for p in model.parameters()
                                                                 if id(p) not in {id(q) for q in model.head.parameters()}]),
                                                            len(list(model.head.parameters()))]
    assert all(g["weight_decay"] == 0.0 for g in opt.param_groups)


def test_no_committed_run_has_weight_decay_so_no_key_changed():
    for stage in ("main", "selection", "pretrained"):
        runs = pd.read_parquet(tier.tier_dir("decisive") / stage / "runs.parquet", columns=["key", "config"])
        for key, c in zip(runs["key"], runs["config"]):
            cfg = TrainConfig(**json.loads(c))
            assert cfg.weight_decay == 0.0 and run_key(cfg) == key


# -- the one-sided seed plan ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [3, 5, 9, 10, 20])
@pytest.mark.parametrize("alpha,power", [(0.05, 0.8), (0.01, 0.9)])
def test_the_one_sided_detectable_effect_matches_statsmodels(n, alpha, power):
    tp = statsmodels_power.TTestPower()
    want = tp.solve_power(nobs=n, alpha=alpha, power=power, alternative="larger")
    one = min_detectable_effect(0.7, n, alpha, power, sides=1)
    assert one == pytest.approx(want * 0.7, rel=1e-5)               # statsmodels' own root-finder's tolerance
    assert tp.power(effect_size=one / 0.7, nobs=n, alpha=alpha, alternative="larger") == pytest.approx(power, abs=1e-9)
    two = min_detectable_effect(0.7, n, alpha, power)
    if alpha == 0.05:                    # statsmodels' two-sided solver misses its root at α = 0.01 with few seeds
        assert two == pytest.approx(0.7 * tp.solve_power(nobs=n, alpha=alpha, power=power, alternative="two-sided"), rel=1e-5)
    assert one < two


@pytest.mark.parametrize("sd,target", [(0.22, 0.20), (0.2204, 0.1998), (0.5, 0.3), (0.1, 0.5)])
def test_the_one_sided_plan_is_the_smallest_count_statsmodels_powers(sd, target):
    n, mde = planned_seeds(sd, target=target, floor=5, cap=30, sides=1)
    power = lambda k: statsmodels_power.TTestPower().power(effect_size=target / sd, nobs=k, alpha=0.05,
                                                           alternative="larger")
    assert power(n) >= 0.8 - 1e-9
    assert n == 5 or power(n - 1) < 0.8
    assert mde <= target


def test_the_plan_refuses_a_bad_side():
    with pytest.raises(ValueError, match="sides"):
        min_detectable_effect(1.0, 5, sides=3)


# -- C4L: the longer runs ------------------------------------------------------------------------------------------

def test_c4l_lengthens_exactly_the_main_comparisons_none_sec_and_l2_runs():
    twins, tests = longruns.twin_configs(), longruns.test_configs()
    assert len(tests) == 60 and len({run_key(c) for c in tests}) == 60
    assert {run_key(c) for c in twins} <= committed_keys("main")
    for t, c in zip(tests, twins):
        assert (t.iterations, t.schedule, t.schedule_iterations, t.eval_every) == (20250, "cosine", 0, 2531)
        assert dataclasses.replace(t, iterations=c.iterations, eval_every=c.eval_every) == c
    assert {longruns.arm_of(dataclasses.asdict(c)) for c in tests} == set(longruns.ARMS)
    with pytest.raises(ValueError, match="cosine"):
        longruns.longer(dataclasses.replace(twins[0], schedule="constant"))


def test_c4l_registered_enough_seeds_by_its_power_line():
    runs = pd.read_parquet(tier.tier_dir("decisive") / "main" / "runs.parquet", columns=["key", "config", "seed"])
    cfg = [json.loads(c) for c in runs["config"]]
    plan = decisive.read_plan()
    runs = runs.assign(loss=[c["loss"] for c in cfg],
                       arm=[longruns.arm_of(c) if not c["eta"] or c["mu"] == "zero" or c["eta"] == plan.eta[c["loss"]]
                            else "paper" for c in cfg])
    evals = pd.read_parquet(tier.tier_dir("decisive") / "main" / "evals.parquet", columns=["key", "step", "R@1"])
    ch = longruns.last_quarter_changes(runs[runs["arm"].isin(["none", "sec"])], evals)
    assert ch.mean() == pytest.approx(0.146, abs=0.001)         # the README's +0.15
    line = longruns.power_line(ch)
    assert line["sd"] == pytest.approx(0.065, abs=0.001) and line["stable_below"] == pytest.approx(0.19, abs=0.005)
    assert line["enough"] and line["seeds"] == len(longruns.SEEDS) == 5


@pytest.mark.parametrize("lo,hi,est,want", [
    (-0.29, 0.29, 0.0, "stable"), (0.05, 0.25, 0.15, "stable"), (-0.3, 0.1, -0.1, "undecided"),
    (0.2, 0.6, 0.4, "still moving"), (-0.9, -0.35, -0.6, "still moving"), (0.1, 0.5, 0.3, "undecided"),
    (-0.1, 0.8, 0.35, "undecided"), (0.01, 0.61, 0.31, "still moving")])
def test_c4l_verdict_rule_at_its_boundaries(lo, hi, est, want):
    assert longruns.verdict(lo, hi, est) == want


def _c4l_frame(growth, noise=0.0, seeds=5):
    rng = np.random.default_rng(0)
    rows = []
    for s in range(seeds):
        for loss in ("triplet", "semihard", "npair", "ms"):
            for length in (13500, 20250):
                base = 70 + rng.normal(0, 1)
                for arm, gap in (("none", 0.0), ("l2reg", 0.4), ("sec", 0.5)):
                    extra = growth if (arm == "sec" and length == 20250) else 0.0
                    rows.append({"seed": s, "loss": loss, "length": length, "arm": arm,
                                 "R@1": base + gap + extra + rng.normal(0, noise)})
    return pd.DataFrame(rows)


def test_c4l_family_reads_a_gap_that_kept_growing_and_one_that_did_not():
    moving = longruns.family(_c4l_frame(0.8, noise=0.05)).set_index("comparison")
    assert moving.loc["SEC − none", "delta"] == pytest.approx(0.8, abs=0.05)
    assert moving.loc["SEC − none", "verdict"] == "still moving"
    assert moving.loc["SEC − L2-reg", "verdict"] == "still moving"
    flat = longruns.family(_c4l_frame(0.0, noise=0.05)).set_index("comparison")
    assert flat["verdict"].eq("stable").all()
    assert flat.loc["SEC − none", "gap_13500"] == pytest.approx(0.5, abs=0.05)


# -- C4W: weight decay ---------------------------------------------------------------------------------------------

def test_c4w_point_zero_is_the_tiers_own_held_out_runs_and_the_grids_are_registered():
    plan = decisive.read_plan()
    have = committed_keys("selection")
    for loss in weightdecay.LOSSES:
        zero = weightdecay.wd_configs(loss, (0.0,), plan)
        assert len(zero) == 3 and {run_key(c) for c in zero} <= have
        grid = weightdecay.wd_configs(loss, weightdecay.WD_GRID, plan)
        assert sorted({c.weight_decay for c in grid}) == [2.5e-4, 2.5e-3, 2.5e-2]
        assert all(c.holdout_classes > 0 and c.eta == 0 and c.seed in selection.SEEDS for c in grid)
        assert not {run_key(c) for c in grid} & have
        # selection 2's point 0 is selection 1's chosen run
        assert weightdecay.eta_configs(loss, (0.0,), 2.5e-3, plan) == weightdecay.wd_configs(loss, (2.5e-3,), plan)
    assert weightdecay.eta_grid(0.05) == (0.005, 0.05, 0.5) and weightdecay.eta_grid(1.0) == (0.1, 1.0, 10.0)
    with pytest.raises(ValueError, match="valid values"):
        weightdecay.wd_configs("arcface", (0.0,), plan)


def test_c4w_test_runs_are_the_main_comparisons_with_the_chosen_weights():
    choices = {l: {"weight_decay_tested": 2.5e-3, "eta_tested": 0.5} for l in weightdecay.LOSSES}
    tests = weightdecay.test_configs(choices)
    assert len(tests) == 40
    main = committed_keys("main")
    for c in tests:
        assert c.weight_decay == 2.5e-3 and c.eta in (0.0, 0.5) and c.holdout_classes == 0
        back = dataclasses.replace(c, weight_decay=0.0, eta=decisive.read_plan().eta[c.loss] if c.eta else 0.0)
        assert run_key(back) in main


class _Store:
    """Every run 'done', held-out R@1 peaking at weight decay 2.5e-3 and at η = 10 × the tier's."""
    root = "(fake)"

    def __init__(self, peak_eta):
        self.peak_eta = peak_eta

    def has(self, cfg):
        return True

    def get(self, cfg, tables=()):
        from sec_lib.runs.train import RunResult
        score = -abs(np.log10((cfg.weight_decay + 1e-9) / 2.5e-3)) - abs(np.log10((cfg.eta + 1e-9) / self.peak_eta))
        e = pd.DataFrame()
        return RunResult(cfg, "done", {"R@1": float(score)}, e, e, e, e, e, e)


def test_c4w_chooses_the_weight_decay_then_grows_etas_grid_at_its_edge():
    plan = decisive.read_plan()
    both, grid, todo = weightdecay.choose(_Store(peak_eta=50.0), "ms", plan)   # ms's tier η is 1: the peak is past 10
    assert not todo
    assert both["wd"].weight == 2.5e-3 and both["wd"].edge is None
    assert both["eta"].grid == pytest.approx((0.1, 1.0, 10.0, 100.0, 1000.0)) and both["eta"].weight == 100.0
    rec = weightdecay.choice_record("ms", both)
    assert rec["weight_decay_tested"] == 2.5e-3 and rec["eta_tested"] == 100.0 and not rec["flags"]
    far, _, _ = weightdecay.choose(_Store(peak_eta=1e6), "ms", plan)     # still at the edge after two extensions
    assert far["eta"].edge == "high" and weightdecay.choice_record("ms", far)["flags"]


def test_c4w_families_on_a_hand_made_frame():
    rng = np.random.default_rng(1)
    rows = [{"seed": s, "loss": l, "arm": a, "status": "done",
             "R@1": 70 + (gain if a == "sec" else 0) + rng.normal(0, 0.05)}
            for s in range(5) for l, gain in (("triplet", 1.0), ("semihard", 1.0), ("npair", 1.0), ("ms", 0.0))
            for a in ("none", "sec")]
    pooled, per = weightdecay.families(pd.DataFrame(rows))
    assert pooled["estimate"].iloc[0] == pytest.approx(0.75, abs=0.05) and pooled["m"].iloc[0] == 1
    assert pooled["verdict"].iloc[0] == "reproduced"
    per = per.set_index("loss")
    assert (per["m"] == 4).all() and per.loc["triplet", "verdict"] == "reproduced"
    assert per.loc["ms", "verdict"] == "not reproduced"      # inside ±0.5 by the equivalence test


# -- P1c: the regime hint on fresh seeds ---------------------------------------------------------------------------

def test_p1c_runs_are_the_committed_runs_on_new_seeds():
    tests = regimeseeds.test_configs()
    assert len(tests) == 4 * 2 * 2 * regimeseeds.N_SEEDS == 160
    assert {c.seed for c in tests} == set(range(5, 15))
    old = regimeseeds.test_configs(seeds=range(5))
    assert {run_key(c) for c in old} == {run_key(c) for c in old} & (committed_keys("pretrained") | committed_keys("main"))
    assert len({run_key(c) for c in old}) == 80
    assert not {run_key(c) for c in tests} & (committed_keys("pretrained") | committed_keys("main"))
    assert sum(c.pretrained is not None for c in tests) == 80


def test_p1c_seed_count_is_the_one_sided_plan_on_the_committed_interaction():
    plan = regimeseeds.seed_plan(regimeseeds.committed_interaction())
    assert plan["observed"] == pytest.approx(-0.40, abs=0.005) and plan["sd"] == pytest.approx(0.22, abs=0.005)
    assert plan["seeds"] == regimeseeds.N_SEEDS == 10


def _p1c_frame(interaction, seeds=range(5, 15), noise=0.1):
    rng = np.random.default_rng(2)
    return pd.DataFrame([{"seed": s, "loss": l, "arm": a, "regime": g,
                          "R@1": 70 + (0.5 + (interaction if g == "fine-tuned" else 0) if a == "sec" else 0)
                          + rng.normal(0, noise)}
                         for s in seeds for l in regimeseeds.LOSSES for a in regimeseeds.ARMS
                         for g in regimeseeds.REGIMES])


def test_p1c_confirms_a_negative_interaction_and_not_a_positive_or_null_one():
    neg = regimeseeds.test(_p1c_frame(-0.4))
    assert neg["verdict"] == "confirmed" and neg["P1"] == "not reproduced" and neg["estimate"] < 0
    assert neg["seeds"] == 10 and neg["lo"] < neg["estimate"] < neg["hi"]
    for effect in (0.0, 0.4):
        out = regimeseeds.test(_p1c_frame(effect))
        assert out["verdict"] == "not confirmed" and out["P1"] == "inconclusive"
    assert regimeseeds.verdict(0.049) == "confirmed" and regimeseeds.verdict(0.05) == "not confirmed"
