"""The scale chapter's runs: relative SEC as a TrainConfig field that leaves every existing store key
unchanged, its own η selection on held-out classes, the fixed-scale control's radius, and the chapter's arms."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sec_lib.params import ParameterError
from sec_lib.runs import experiments as ex
from sec_lib.runs import scalearms
from sec_lib.runs.store import run_key
from sec_lib.runs.train import RunResult, TrainConfig

REPO = Path(__file__).resolve().parents[2]


class Store:
    """Every run is done; R@1 peaks at η 0.5 for plain SEC and at relative η 1 (interior choices); the held-out
    norms of every run are 10.2, 11.7, 12.34 and 40 (median 12.02)."""
    root = "(hand-made)"

    def __init__(self, missing=()):
        self.missing = set(missing)
        self.asked = []

    def get(self, cfg, tables=()):
        self.asked.append((cfg, tuple(tables)))
        if run_key(cfg) in self.missing:
            return None
        target = 1.0 if cfg.relative else 0.5
        score = -abs(math.log(cfg.lr / 1e-3)) - abs(math.log((cfg.eta + 1e-6) / target))
        e = pd.DataFrame()
        norms = pd.DataFrame({"label": [0, 1, 2, 3], "norm": [10.2, 11.7, 12.34, 40.0], "hit@1": [1, 0, 1, 1]})
        return RunResult(cfg, "done", {"R@1": score}, e, e, e, norms, e, e)


def test_relative_is_left_out_of_the_key_at_its_default():
    c = TrainConfig(eta=1.0)
    assert "relative" not in c.to_dict() and "relative" not in c.canonical()
    assert TrainConfig.from_dict(c.to_dict()) == c
    r = c.replace(relative=True)
    assert r.to_dict()["relative"] is True and run_key(r) != run_key(c)
    assert TrainConfig.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    assert (c.variant, r.variant) == ("sec", "sec-relative")


@pytest.mark.parametrize("changes, match", [(dict(eta=0.0), "eta > 0"), (dict(eta=1.0, mu="zero"), "mu = 'batch'"),
                                            (dict(eta=1.0, mu=4.0), "mu = 'batch'"),
                                            (dict(eta=1.0, relative=1), "True or False")])
def test_relative_needs_sec_toward_the_batch_mean(changes, match):
    with pytest.raises(ParameterError, match=match):
        TrainConfig(**{"relative": True, **changes}).validate()


def test_without_sec_the_relative_switch_is_reset():
    p = ex.get_profile("smoke")
    assert ex.config(p, "ms", "sec", 0, eta=0.0, relative=True) == ex.config(p, "ms", "none", 0)


def test_the_cir_penalty_is_left_out_of_the_key_at_its_default_and_validated():
    c = TrainConfig(eta=0.01)
    assert "penalty" not in c.to_dict() and "penalty" not in c.canonical()
    r = c.replace(penalty="cir")
    assert r.to_dict()["penalty"] == "cir" and run_key(r) != run_key(c) and r.variant == "cir"
    assert TrainConfig.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    with pytest.raises(ParameterError, match="'penalty' = 'pml' is not valid.*'sec', 'cir'"):
        TrainConfig(eta=0.01, penalty="pml").validate()
    for bad in (dict(eta=0.0), dict(mu="zero"), dict(mu=4.0), dict(relative=True)):
        with pytest.raises(ParameterError, match="'penalty' = 'cir' needs eta > 0, mu = 'batch'"):
            TrainConfig(**{"eta": 0.01, "penalty": "cir", **bad}).validate()
    p = ex.get_profile("smoke")                     # without a regularizer the switch is reset: one store key
    assert ex.config(p, "ms", "sec", 0, eta=0.0, penalty="cir") == ex.config(p, "ms", "none", 0)


def test_a_cir_run_trains_the_cir_penalty(tmp_path):
    """A short CIR run logs eta * CIR of its batch as loss_sec (checked against PML on the same embeddings by the
    module's own test) and its mean norm as mu, and differs from the same run with SEC."""
    from sec_lib.runs.train import train
    base = TrainConfig(dataset="toy", model="mlp", width=32, embed_dim=8, batch_size=24, iterations=4, eval_every=0,
                       data_kwargs={"noise": 0.15}, eval_clustering="final", kmeans_n_init=1, loss="semihard", eta=0.05)
    cir, sec = train(base.replace(penalty="cir")), train(base)
    assert cir.status == sec.status == "done"
    s, t = cir.steps, sec.steps
    assert (s["loss_sec"] > 0).all() and (s["mu"] > 0).all()
    assert s["loss_metric"].iloc[0] == t["loss_metric"].iloc[0]          # the same first batch and weights
    assert s["loss_sec"].iloc[0] != t["loss_sec"].iloc[0]


def test_relative_selection_is_its_own_and_the_plain_selection_never_waits_for_it():
    q = ex.tuned(ex.get_profile("cpu"), "adam", Store())
    rel = ex.relative_selection(q)
    assert len(rel) == len(ex.MAIN_LOSSES) * len(q.relative_eta_grid) == 12
    assert all(c.relative and c.holdout_classes == q.holdout_classes and c.seed == q.pilot_seed for c in rel)
    assert {run_key(c) for c in rel} <= {run_key(c) for c in ex.eta_selection(q)}
    # the plain selection (every page that chooses η) asks nothing of the relative runs
    store = Store(missing={run_key(c) for c in rel})
    assert not any(r.config.relative for r in ex.stored_selection(q, store))
    assert ex.sweep_configs("tuned", "cpu", store)
    with pytest.raises(KeyError, match="relative SEC's η selection"):
        ex.sweep_configs("scale", "cpu", store)
    runs = scalearms.relative_selection_runs(q, Store())
    assert {r.config.eta for r in runs} == {0.0, *q.relative_eta_grid}
    assert scalearms.chosen_relative_eta(q, "ms", runs) == 1.0
    with pytest.raises(ValueError, match="no relative-SEC selection runs for loss 'tml'"):
        scalearms.chosen_relative_eta(q, "tml", runs)


def test_the_fixed_scale_radius_is_the_median_held_out_norm_without_a_regularizer():
    q = ex.tuned(ex.get_profile("cpu"), "adam", Store())
    store = Store()
    assert scalearms.fixed_scale_mu(q, "semihard", store) == 12.0          # median 12.02, 3 significant digits
    cfg, tables = store.asked[-1]
    assert cfg.eta == 0 and cfg.holdout_classes == q.holdout_classes and cfg.seed == q.pilot_seed
    assert tables == ("test_norms",)
    with pytest.raises(KeyError, match="--only scale"):
        scalearms.fixed_scale_mu(q, "semihard", Store(missing={run_key(cfg)}))


def test_the_fixed_scale_radius_refuses_a_run_without_norms():
    class Failed(Store):
        def get(self, cfg, tables=()):
            e = pd.DataFrame()
            return RunResult(cfg, "failed", {}, e, e, e, e, e, e)
    q = ex.tuned(ex.get_profile("cpu"), "adam", Store())
    with pytest.raises(ex.SelectionError, match="no positive median norm"):
        scalearms.fixed_scale_mu(q, "ms", Failed())


def test_the_scale_chapter_has_six_arms_per_loss_and_seed():
    configs = ex.sweep_configs("scale", "cpu", Store())
    q = ex.tuned(ex.get_profile("cpu"), "adam", Store())
    assert len(configs) == len(ex.MAIN_LOSSES) * len(scalearms.SCALE_ARMS) * len(q.seeds) == 72
    by = {}
    for c in configs:
        by.setdefault((c.loss, c.variant), []).append(c)
    assert {v for _, v in by} == set(scalearms.SCALE_ARMS)
    assert all(len(v) == len(q.seeds) and not any(c.holdout_classes for c in v) for v in by.values())
    for loss in ex.MAIN_LOSSES:
        sec, rel, fixed = by[(loss, "sec")][0], by[(loss, "sec-relative")][0], by[(loss, "sec-fixed")][0]
        assert sec.eta == 0.5 and rel.eta == 1.0 and rel.relative and fixed.eta == sec.eta and fixed.mu == 12.0
        cir = by[(loss, "cir")][0]        # PML's CIR at the weight whose value is SEC's at the radius
        assert cir.penalty == "cir" and cir.mu == "batch" and not cir.relative
        assert cir.eta == pytest.approx(sec.eta / 12.0 ** 2, rel=1e-3)
    # none, L2-reg and plain SEC are the main table's and the tuned chapter's runs: 36 new runs only
    old = {run_key(c) for ch in ("compare", "tuned") for c in ex.sweep_configs(ch, "cpu", Store())}
    assert sum(run_key(c) not in old for c in configs) == 36


def test_the_cir_weight_matches_sec_at_the_radius_and_refuses_nonsense():
    assert scalearms.cir_eta(0.05, 11.0) == float(f"{0.05 / 121:.3g}")
    for bad in ((0.0, 11.0), (0.05, 0.0), (0.05, float("nan"))):
        with pytest.raises(ValueError, match="CIR arm needs"):
            scalearms.cir_eta(*bad)


def test_only_the_quick_profiles_train_the_cir_arm():
    """The decisive tier registered its scale stage with five arms: adding the CIR arm to the quick tier must not
    add a run to it (its stage's store keys are pinned by test_decisive_stages)."""
    from sec_lib.runs import decisive
    assert ex.get_profile("cpu").cir_arm and ex.get_profile("smoke").cir_arm
    assert not ex.get_profile("reference").cir_arm and not decisive.profile().cir_arm


def test_a_profile_without_a_relative_grid_trains_no_scale_chapter():
    assert not ex.get_profile("reference").relative_eta_grid
    assert scalearms.scale(ex.get_profile("reference"), Store()) == []
    assert not ex.relative_selection(ex.get_profile("reference"))
    assert ex.check_sweeps("reference", ["scale"]) > 0         # the stand-in store checks without a radius


def test_existing_store_keys_are_unchanged():
    """bench/key_check.py: every key each chapter named before relative SEC existed is still named (committed
    snapshot of the smoke and cpu keys, written by `python bench/key_check.py` before the change)."""
    before = REPO / "tests" / "fixtures" / "keys_before_scale.json"
    out = subprocess.run([sys.executable, str(REPO / "bench" / "key_check.py"), "--compare", str(before)],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "keys unchanged" in out.stdout
    assert "cpu/selection: all 57 keys kept (12 new)" in out.stdout
