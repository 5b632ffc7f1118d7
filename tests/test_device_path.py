"""The device path of the training loop (a GPU's): reads every k steps, sync-free losses, runs trained together.

On a CPU: the tables of a run are the same whatever ``read_every`` is (and a diverged run fails at the same step with
the same message), runs trained together by ``train_many`` equal runs trained alone to the bit (tolerance 0), and the
branch-free forms of the losses and measures that a GPU takes equal the CPU forms (values and gradients). On a GPU:
the steps between two reads make no host sync (CUDA's sync debug mode 'error'); skipped on a CPU with the reason.
"""
import math

import pandas as pd
import pytest
import torch

import sec_lib.data.augment as augment_mod
import sec_lib.losses.contrastive as contrastive_mod
import sec_lib.losses.npair as npair_mod
import sec_lib.losses.pair as pair_mod
import sec_lib.monitor.measures as measures_mod
import sec_lib.sec as sec_mod
from sec_lib.losses import get_loss, violation_rate
from sec_lib.params import ParameterError
from sec_lib.runs.many import train_many
from sec_lib.runs.pool import run_all
from sec_lib.runs.store import ResultStore, run_key
from sec_lib.runs.train import TrainConfig, train, training_steps

TABLES = ("steps", "tracked", "evals", "test_norms", "cosines", "grad_scatter")


def toy(**kw):
    base = dict(dataset="toy", model="mlp", width=16, embed_dim=8, iterations=24, batch_size=24, eval_every=12,
                track_every=4, track_samples=4, dtheta_every=3, stats_every=2, loss="semihard", eta=0.5,
                data_kwargs={"noise": 0.1, "num_classes": 60})
    base.update(kw)
    return TrainConfig(**base)


def same_run(a, b):
    """Every table and metric equal to the bit, but the measured step times."""
    assert a.status == b.status and a.error == b.error and a.failed_step == b.failed_step
    for t in TABLES:
        x, y = getattr(a, t), getattr(b, t)
        if t == "steps":
            x, y = x.drop(columns="step_time"), y.drop(columns="step_time")
        pd.testing.assert_frame_equal(x.reset_index(drop=True), y.reset_index(drop=True), check_exact=True)
    drop = ("mean_step_time",)
    assert {k: v for k, v in a.metrics.items() if k not in drop} == {k: v for k, v in b.metrics.items() if k not in drop}


@pytest.fixture(scope="module")
def plain():
    return train(toy())


@pytest.mark.parametrize("k", [5, 24])
def test_reading_every_k_steps_gives_the_same_tables_and_key(plain, k):
    cfg = toy(read_every=k)
    same_run(plain, train(cfg))
    assert run_key(cfg) == run_key(toy()) and "read_every" not in cfg.canonical()


def test_kmeans_restarts_at_once_give_the_same_run_and_key(plain):
    cfg = toy(kmeans_workers=3)           # NMI/F1 at every evaluation, 10 restarts on 3 threads
    assert "NMI" in plain.metrics
    same_run(plain, train(cfg))
    assert run_key(cfg) == run_key(toy()) and "kmeans_workers" not in cfg.canonical()
    assert "kmeans_workers" not in toy().to_dict() and cfg.to_dict()["kmeans_workers"] == 3


def test_a_diverged_run_fails_at_the_same_step_with_the_same_message_whatever_k():
    diverges = dict(optimizer="sgd", lr=100.0, eta=1e4, mu=100.0, iterations=30)
    alone = train(toy(**diverges))
    assert alone.status == "failed" and 1 < alone.failed_step <= 30 and alone.error.startswith("non-finite loss at step")
    late = train(toy(read_every=8, **diverges))
    same_run(alone, late)


def test_runs_trained_together_equal_runs_trained_alone_to_the_bit():
    cfgs = [toy(seed=1), toy(seed=2, eta=0.0, loss="ms", batch_size=30), toy(seed=3, loss="npair", read_every=6, iterations=18)]
    done = []
    together = train_many(cfgs, on_done=lambda i, r: done.append(i))
    assert sorted(done) == [0, 1, 2]
    for cfg, r in zip(cfgs, together):
        same_run(train(cfg), r)


def test_run_all_trains_groups_together_and_records_it(tmp_path):
    cfgs = [toy(seed=s, iterations=12, eval_every=6) for s in (4, 5, 6)]
    results = run_all(cfgs, root=tmp_path, together=2)
    for cfg, r in zip(cfgs, results):
        same_run(train(cfg), r)
    prov = [ResultStore(tmp_path).meta(run_key(c))["provenance"] for c in cfgs]
    assert [p.get("runs_together") for p in prov] == [2, 2, None]
    with pytest.raises(ParameterError, match="together"):
        run_all(cfgs, root=tmp_path, together=0)


def test_worker_processes_get_at_most_together_runs_and_every_process_one_first():
    from sec_lib.runs.many import process_groups
    sizes = lambda n, jobs, together: [len(g) for g in process_groups(list(range(n)), jobs, together)]
    assert sizes(16, 4, 4) == [4, 4, 4, 4] and sizes(4, 4, 4) == [1, 1, 1, 1] and sizes(6, 4, 4) == [2, 2, 2]
    assert sizes(40, 4, 4) == [4] * 10 and sizes(5, 2, 1) == [1] * 5 and sizes(0, 4, 4) == []
    assert [x for g in process_groups(list(range(7)), 2, 3) for x in g] == list(range(7))


def test_autocast_and_channels_last_enter_the_key_only_when_on():
    base = toy(model="smallcnn", dataset="glyphs")
    assert "autocast" not in base.canonical() and "channels_last" not in base.canonical()
    keys = {run_key(base), run_key(base.replace(autocast="bf16")), run_key(base.replace(channels_last=True))}
    assert len(keys) == 3
    with pytest.raises(ParameterError, match="'autocast'.*bf16"):
        base.replace(autocast="fp16").validate()
    with pytest.raises(ParameterError, match="channels_last.*mlp"):
        toy(channels_last=True).validate()


# ----------------------------------------------------------------------------- branch-free forms
def _batches():
    g = torch.Generator().manual_seed(0)
    yield torch.randn(24, 8, generator=g, dtype=torch.float64), torch.arange(8).repeat_interleave(3)   # P x K
    yield torch.randn(12, 5, generator=g, dtype=torch.float64), torch.tensor([0, 0, 1, 1, 1, 2, 3, 3, 4, 5, 5, 5])
    yield torch.randn(6, 4, generator=g, dtype=torch.float64), torch.zeros(6, dtype=torch.long)          # no negative
    yield torch.randn(5, 4, generator=g, dtype=torch.float64), torch.arange(5)                           # no positive


def _value_and_grad(fn, x, labels):
    x = x.clone().requires_grad_(True)
    v = fn(x, labels)
    (g,) = torch.autograd.grad(v, x, allow_unused=True)
    return v.detach(), (torch.zeros_like(x) if g is None else g)


@pytest.mark.parametrize("loss", ["triplet", "semihard", "ms", "npair", "ntxent"])
def test_the_branch_free_loss_a_gpu_takes_equals_the_cpu_form(monkeypatch, loss):
    fn = get_loss(loss)
    for x, labels in _batches():
        want = _value_and_grad(fn, x, labels)
        with monkeypatch.context() as m:
            for mod in (pair_mod, npair_mod, contrastive_mod):
                m.setattr(mod, "sync_free", lambda t: True)
            got = _value_and_grad(fn, x, labels)
        assert torch.isfinite(got[0]) and torch.isfinite(got[1]).all()
        torch.testing.assert_close(got[0], want[0], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(got[1], want[1], rtol=1e-10, atol=1e-12)


def test_the_branch_free_measures_equal_the_cpu_forms(monkeypatch):
    for x, labels in _batches():
        want = measures_mod.pair_summary(x, labels)
        with monkeypatch.context() as m:
            m.setattr(measures_mod, "sync_free", lambda t: True)
            got = measures_mod.pair_summary(x, labels)
        for k in want:
            a, b = float(got[k]), float(want[k])
            assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12, abs=1e-15), k
    x, labels = next(_batches())
    assert float(violation_rate(x, labels)) == pair_mod.triplet_violations(x, labels)


def test_the_branch_free_ema_target_equals_the_cpu_form(monkeypatch):
    x = [torch.randn(10, 4, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    def mus(free):
        sec = sec_mod.SphericalEmbeddingConstraint(eta=1.0, mu="ema", momentum=0.3)
        with monkeypatch.context() as m:
            if free:
                m.setattr(sec_mod, "sync_free", lambda t: True)
            out = []
            for f in x:
                sec(f)
                out.append(sec.last_mu)
            sec.eval()
            out.append(float(sec.target_norm(x[0].norm(dim=1))))
        return out
    assert mus(True) == pytest.approx(mus(False), rel=1e-6)


@pytest.mark.parametrize("settings", [{}, {"blur_p": 1.0, "elastic_p": 1.0}, {"blur_p": 0.0, "elastic_p": 0.0}],
                         ids=["defaults", "every-image", "none"])
def test_the_branch_free_views_a_gpu_takes_equal_the_cpu_form(monkeypatch, settings):
    """The SimCLR views off the CPU: elastic field and blur computed for every image and masked, inv_ex, a blur
    radius from the settings' upper end (the same radius as the batch's largest sigma gives, at these settings)."""
    x = torch.rand(12, 1, 32, 32, generator=torch.Generator().manual_seed(0))
    aug = augment_mod.ViewAugment(**settings)
    want = aug(x.clone(), torch.Generator().manual_seed(5))
    with monkeypatch.context() as m:
        m.setattr(augment_mod, "sync_free", lambda t: True)
        got = aug(x.clone(), torch.Generator().manual_seed(5))
    assert torch.equal(got, want)


# ----------------------------------------------------------------------------- a GPU
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: the CPU path has no device to wait for")
@pytest.mark.parametrize("settings", [{}, {"autocast": "bf16", "channels_last": True}], ids=["fp32", "bf16-cl"])
@pytest.mark.parametrize("loss", ["triplet", "semihard", "ms", "npair", "ntxent"])
def test_no_host_sync_between_two_reads_on_a_gpu(loss, settings):
    k = 8
    views = {"views": 2} if loss == "ntxent" else {}         # SimCLR: the views augmented on the device
    cfg = TrainConfig(dataset="glyphs", model="smallcnn", image_size=32, iterations=3 * k, batch_size=60, loss=loss,
                      eta=0.5, device="cuda", read_every=k, eval_every=0, track_every=2, track_samples=8,
                      dtheta_every=2, stats_every=1, train_classes=40, test_classes=20, **views, **settings)
    cfg.validate()
    steps = training_steps(cfg)
    for _ in range(k):                          # up to and including the first read
        next(steps)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(k - 1):                  # the steps between two reads
            next(steps)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for _ in steps:
        pass
