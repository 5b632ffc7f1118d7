"""The training loop: learning happens, runs are deterministic, divergence is recorded, bad configs fail early."""
import math

import numpy as np
import pytest
import torch

from sec_lib.params import ParameterError
from sec_lib.runs.train import TrainConfig, batch_stats, train


def toy(**kw):
    base = dict(dataset="toy", model="mlp", width=32, embed_dim=8, iterations=40, batch_size=30, eval_every=20,
                track_every=5, track_samples=6, dtheta_every=5, lr=3e-3, loss="semihard", num_threads=1,
                data_kwargs={"noise": 0.1})
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(scope="module")
def toy_run():
    return train(toy(eta=0.5))


def test_short_toy_run_improves_recall_over_init(toy_run):
    ev = toy_run.evals.set_index("step")
    assert toy_run.status == "done"
    assert 0 in ev.index, "the loop evaluates at initialisation"
    # Margin measured, not guessed: over seeds 0-29 of this config the 40-step gain was 10.3 +- 3.35 R@1 (min
    # 4.75). Another CPU kind gives a fresh draw from that spread (the reproducibility contract, Level 2), so the
    # old "> +5" failed on Intel (4.95); a gain below 0 is 3.1 SDs away (p ~ 0.001).
    assert ev.loc[40, "R@1"] > ev.loc[0, "R@1"], ev["R@1"].to_dict()


def test_step_log_has_every_instrument(toy_run):
    s = toy_run.steps
    assert len(s) == 40
    for col in ["loss_metric", "loss_sec", "norm_mean", "norm_var", "mu", "pos_cos", "neg_cos", "violations",
                "grad_slope", "grad_r2", "grad_norm_cv", "step_time"]:
        assert s[col].notna().all(), col
    d = s.dropna(subset=["dtheta_mean"])
    assert list(d["step"]) == [5, 10, 15, 20, 25, 30, 35, 40]
    assert (d["dtheta_mean"] > 0).all()
    # the SEC target is the batch mean norm of that step
    assert np.allclose(s["mu"], s["norm_mean"], rtol=1e-5)
    assert set(toy_run.tracked["sample"].unique()).__len__() == 6
    assert set(toy_run.grad_scatter["step"]) == {1, 20, 40}
    assert set(toy_run.cosines["kind"]) == {"pos", "neg"}
    assert toy_run.metrics["test_norm_var"] >= 0


def test_same_config_and_seed_give_identical_results():
    a, b = train(toy(iterations=15, eval_every=0)), train(toy(iterations=15, eval_every=0))
    assert a.metrics.keys() == b.metrics.keys()
    for k in a.metrics:
        if k != "mean_step_time":
            assert a.metrics[k] == b.metrics[k], k
    cols = [c for c in a.steps.columns if c != "step_time"]
    assert a.steps[cols].equals(b.steps[cols])
    c = train(toy(iterations=15, eval_every=0, seed=1))
    assert c.metrics["R@1"] != a.metrics["R@1"] or c.metrics["NMI"] != a.metrics["NMI"]


def test_nan_loss_stops_and_is_recorded_as_failed(monkeypatch):
    import sec_lib.runs.train as T
    real = T.make_loss

    def poisoned(cfg, ds):
        loss = real(cfg, ds)

        class Poison(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner, self.calls = loss, 0

            def forward(self, emb, labels):
                self.calls += 1
                out = self.inner(emb, labels)
                return out * float("nan") if self.calls == 3 else out
        return Poison()

    monkeypatch.setattr(T, "make_loss", poisoned)
    r = train(toy(iterations=10))
    assert r.status == "failed"
    assert "non-finite loss at step 3" in r.error
    assert len(r.steps) == 2


@pytest.mark.parametrize("field,value,fragment", [
    ("loss", "nope", "valid values"), ("eta", -1.0, "'eta'"), ("optimizer", "lbfgs", "'sgd'"),
    ("mu", "median", "'batch'"), ("head", "bn", "weightnorm"), ("dataset", "mnist", "glyphs"),
    ("device", "tpu", "cuda"), ("batch_size", 3, "batch_size"), ("iterations", 0, "iterations"),
])
def test_bad_config_raises_a_clear_error(field, value, fragment):
    with pytest.raises(ParameterError) as e:
        toy(**{field: value}).validate()
    assert field in str(e.value) and fragment in str(e.value)


def test_batch_stats_uses_autograd_gradients_of_a_normalized_loss():
    """Gradient of an angular loss shrinks as 1/‖f‖: scaling a batch's norms changes the slope to −1."""
    torch.manual_seed(0)
    from sec_lib.losses import get_loss
    y = torch.arange(8).repeat_interleave(3)
    direction = torch.nn.functional.normalize(torch.randn(24, 16), dim=1)
    scale = torch.linspace(1, 10, 24)[:, None]
    f = (direction * scale).requires_grad_()
    g = torch.autograd.grad(get_loss("npair")(f, y), f)[0]
    stats = batch_stats(f.detach(), y, g)
    assert stats["grad_slope"] < -0.5          # bigger norm, smaller gradient
    assert 0 <= stats["violations"] <= 1
    assert math.isfinite(stats["grad_norm_cv"])


def test_holdout_classes_evaluate_on_held_out_training_classes():
    from sec_lib.runs.train import load_data
    cfg = toy(holdout_classes=20)
    tr, ev = load_data(cfg)
    full, test = load_data(toy())
    assert tr.num_classes == full.num_classes - 20 and ev.num_classes == 20
    assert len(tr) + len(ev) == len(full)
    assert torch.equal(ev.x, full.x[full.labels >= full.num_classes - 20])    # training classes, not test ones
    assert int(ev.labels.min()) == 0 and int(tr.labels.max()) == tr.num_classes - 1
    x, y = ev[0]
    assert torch.equal(x, ev.x[0]) and int(y) == int(ev.labels[0])
    r = train(toy(holdout_classes=20, iterations=5, eval_every=0))
    assert r.status == "done" and len(r.test_norms) == len(ev)
    with pytest.raises(ParameterError, match="holdout_classes"):
        train(toy(holdout_classes=10_000))


def test_query_gallery_evaluation_retrieves_from_the_gallery_only():
    """In-Shop style: each query against the gallery, matching sec_lib.metrics on the same embeddings."""
    from sec_lib import metrics
    from sec_lib.models import build_model
    from sec_lib.runs.train import QueryGallery, embed, evaluate_model

    class Split:
        def __init__(self, x, labels):
            self.x, self.labels = x, labels

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            return self.x[i], self.labels[i]

    g = torch.Generator().manual_seed(0)
    centres = torch.randn(5, 12, generator=g)
    q_lab, g_lab = torch.arange(5).repeat(3), torch.arange(5).repeat(4)
    query = Split(centres[q_lab] + 0.3 * torch.randn(15, 12, generator=g), q_lab)
    gallery = Split(centres[g_lab] + 0.3 * torch.randn(20, 12, generator=g), g_lab)
    model = build_model("mlp", embed_dim=6, in_dim=12, width=16)
    cfg = toy(eval_ks=(1, 2, 4))
    scores, emb, labels = evaluate_model(model, QueryGallery(query, gallery), cfg, "cpu", final=True)
    qe, _ = embed(model, query, "cpu")
    ge, _ = embed(model, gallery, "cpu")
    expected = metrics.recall_at_k(qe, q_lab, ge, g_lab, ks=(1, 2, 4))
    assert scores == {f"R@{k}": v for k, v in expected.items()}
    assert emb.shape == (35, 6) and torch.equal(labels, torch.cat([q_lab, g_lab]))


def test_a_shorter_run_with_denser_evaluation_retraces_the_longer_one():
    """The convergence chapter's dense-early prefixes (experiments.early_twin) rely on this: under a
    constant learning rate, evaluating more often and stopping earlier changes nothing before the stop."""
    from dataclasses import replace
    from sec_lib.runs import experiments as ex
    p = ex.get_profile("smoke")
    full = ex.config(p, "semihard", "sec", 0, iterations=12, eval_every=4)
    pre = ex.early_twin(replace(p, early_iterations=8, early_eval_every=1), full)
    assert (pre.iterations, pre.eval_every) == (8, 1) and replace(pre, iterations=12, eval_every=4) == full
    a, b = train(full), train(pre)
    ra = dict(zip(a.evals["step"], a.evals["R@1"]))
    rb = dict(zip(b.evals["step"], b.evals["R@1"]))
    assert sorted(rb) == list(range(9)) and sorted(ra) == [0, 4, 8, 12]
    assert all(ra[t] == rb[t] for t in (0, 4, 8))
    cols = [c for c in a.steps.columns if c != "step_time"]
    assert a.steps[a.steps["step"] <= 8][cols].reset_index(drop=True).equals(b.steps[cols].reset_index(drop=True))


def test_a_step_run_whose_first_milestone_follows_the_prefix_is_retraced_by_its_early_twin():
    """The decisive tier's step schedule decays after the convergence chapter's early window, so its early
    curve is still a prefix of the full run; a step whose milestone falls inside the prefix is not."""
    from dataclasses import replace
    from sec_lib.runs import experiments as ex
    p = replace(ex.get_profile("smoke"), early_iterations=8, early_eval_every=1)
    full = ex.config(p, "semihard", "sec", 0, iterations=12, eval_every=4, schedule="step", lr_milestones=(10,),
                     lr_decay=0.1)
    pre = ex.early_twin(p, full)
    a, b = train(full), train(pre)
    ra, rb = dict(zip(a.evals["step"], a.evals["R@1"])), dict(zip(b.evals["step"], b.evals["R@1"]))
    assert all(ra[t] == rb[t] for t in (0, 4, 8))
    cols = [c for c in a.steps.columns if c != "step_time"]
    assert a.steps[a.steps["step"] <= 8][cols].reset_index(drop=True).equals(b.steps[cols].reset_index(drop=True))
    assert not a.steps[a.steps["step"] > 10]["loss_metric"].equals(
        train(replace(full, schedule="constant", lr_milestones=())).steps.query("step > 10")["loss_metric"])


def test_a_cosine_run_is_retraced_by_its_early_twin_on_the_full_runs_horizon():
    """The decisive tier's cosine schedule: the twin keeps the full run's horizon (schedule_iterations), so it
    follows the same rates and retraces the run bit for bit; a cosine run of the prefix's own length does not."""
    from dataclasses import replace
    from sec_lib.runs import experiments as ex
    p = replace(ex.get_profile("smoke"), early_iterations=8, early_eval_every=1)
    full = ex.config(p, "semihard", "sec", 0, iterations=12, eval_every=4, schedule="cosine")
    pre = ex.early_twin(p, full)
    assert (pre.iterations, pre.schedule_iterations, pre.eval_every) == (8, 12, 1)
    a, b = train(full), train(pre)
    ra, rb = dict(zip(a.evals["step"], a.evals["R@1"])), dict(zip(b.evals["step"], b.evals["R@1"]))
    assert all(ra[t] == rb[t] for t in (0, 4, 8))
    cols = [c for c in a.steps.columns if c != "step_time"]
    assert a.steps[a.steps["step"] <= 8][cols].reset_index(drop=True).equals(b.steps[cols].reset_index(drop=True))
    own = train(replace(pre, schedule_iterations=0))           # cosine over 8 iterations: another run
    assert not own.steps["loss_metric"].equals(b.steps["loss_metric"])
    assert "schedule_iterations" not in full.to_dict()            # omitted at its default: no key changes
    for bad in (dict(schedule_iterations=4), dict(schedule="constant", schedule_iterations=12)):
        with pytest.raises(ParameterError, match="schedule_iterations"):
            replace(pre, **bad).validate()


def test_early_twin_refuses_a_length_dependent_schedule_or_a_prefix_not_shorter():
    from dataclasses import replace
    from sec_lib.runs import experiments as ex
    p = replace(ex.get_profile("smoke"), early_iterations=8, early_eval_every=1)
    cfg = ex.config(p, "semihard", "none", 0, iterations=12)
    with pytest.raises(ValueError, match="first lr milestone after the prefix: 6 <= early_iterations = 8"):
        ex.early_twin(p, replace(cfg, schedule="step", lr_milestones=(6,)))
    with pytest.raises(ValueError, match=r"early_iterations = 8 must be in \(0, 8\)"):
        ex.early_twin(p, replace(cfg, iterations=8))


def test_stats_every_thins_the_batch_statistics_without_changing_the_run():
    """The decisive tier's cheap win (bench/run_cost.py: the per-step statistics and their extra gradient are
    about a third of a reference run): computing them every k steps leaves the trajectory bit-identical and the
    store key of the default (every step) unchanged."""
    from sec_lib.runs.store import run_key
    base = toy(eta=0.5, iterations=12, eval_every=6, dtheta_every=4)
    thin = base.replace(stats_every=5)
    assert "stats_every" not in base.canonical() and run_key(base) != run_key(thin)
    a, b = train(base), train(thin)
    timing = {"mean_step_time"}
    assert a.steps["loss_metric"].equals(b.steps["loss_metric"])
    assert {k: v for k, v in a.metrics.items() if k not in timing} == {k: v for k, v in b.metrics.items() if k not in timing}
    have = b.steps.dropna(subset=["norm_var"])["step"].tolist()
    assert have == [1, 5, 6, 10, 12]                 # every 5th, the first, the last, and the scatter's middle
    assert b.steps["dtheta_mean"].notna().sum() == a.steps["dtheta_mean"].notna().sum() == 3
    with pytest.raises(ParameterError, match="stats_every"):
        toy(stats_every=0).validate()
