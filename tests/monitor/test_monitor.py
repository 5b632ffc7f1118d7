"""sec_lib.monitor: the norm-health monitor measures what it says (slope, CV, Δθ against direct formulas
and autograd), attaches three ways without changing a training run by one bit, removes its hooks cleanly, keeps
a regularizer's gradient out of the slope, and the training loop's tables through it are the golden ones."""
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from pytorch_metric_learning import losses as pml_losses
from torch import nn

from sec_lib.monitor import COLUMNS, MonitorConfig, NormMonitor, diagnose
from sec_lib.params import ParameterError
from sec_lib.sec import SECRegularizer

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"
PML_LOSSES = {"supcon": pml_losses.SupConLoss, "triplet": lambda: pml_losses.TripletMarginLoss(margin=0.2),
              "contrastive": pml_losses.ContrastiveLoss, "ms": pml_losses.MultiSimilarityLoss}


def symmetric_batch(classes=5, dim=16, delta=0.3, dtype=torch.float64, seed=0):
    """Directions every sample of which the loss sees alike: two per class at angles 2πp/P ± δ in a random plane
    (a dihedral group maps any sample to any other, so every permutation- and rotation-invariant loss gives each
    the same gradient at unit norm), rescaled by random norms over two decades."""
    g = torch.Generator().manual_seed(seed)
    ang = torch.tensor([2 * math.pi * p / classes + s * delta for p in range(classes) for s in (-1, 1)], dtype=dtype)
    plane = torch.stack([ang.cos(), ang.sin()], 1)
    q, _ = torch.linalg.qr(torch.randn(dim, dim, generator=g, dtype=dtype))
    d = torch.cat([plane, torch.zeros(len(ang), dim - 2, dtype=dtype)], 1) @ q.T
    scale = torch.empty(len(ang), dtype=dtype).uniform_(math.log(0.1), math.log(10), generator=g).exp()
    return d, scale, torch.arange(classes).repeat_interleave(2)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", sorted(PML_LOSSES))
def test_slope_is_minus_one_at_fixed_directions_under_a_normalized_loss(name, dtype):
    d, scale, y = symmetric_batch(dtype=dtype)
    f = (d * scale[:, None]).requires_grad_()
    loss_fn = PML_LOSSES[name]()
    mon = NormMonitor(every=1)
    mon.observe(f, loss=loss_fn(f, y), labels=y)
    row = mon.frame().iloc[0]
    assert abs(row["grad_slope"] + 1) < 1e-5 and row["grad_r2"] > 1 - 1e-6
    # the interval holds -1 up to rounding (on an Intel Xeon with torch 2.11 its float64 upper end was one ulp below)
    assert row["grad_slope_lo"] <= -1 + 1e-9 and -1 - 1e-9 <= row["grad_slope_hi"]
    assert row["grad_slope_hi"] - row["grad_slope_lo"] < 1e-5
    # the monitor's gradient is autograd's, and autograd's obeys the law sample by sample
    direct = torch.autograd.grad(loss_fn(f, y), f)[0].norm(dim=1).double()
    np.testing.assert_allclose(mon.samples()["grad_norm"], direct.numpy(), rtol=1e-12)
    unit = direct * scale.double()
    assert float(unit.std() / unit.mean()) < 1e-5


def test_norm_statistics_and_pairs_match_direct_formulas():
    torch.manual_seed(1)
    raw = torch.randn(24, 8, dtype=torch.float64) * torch.linspace(0.5, 3, 24, dtype=torch.float64)[:, None]
    y = torch.arange(6).repeat_interleave(4)
    mon = NormMonitor(every=1)
    mon.observe(raw, labels=y)
    row = mon.frame().iloc[0]
    n = np.linalg.norm(raw.numpy(), axis=1)
    assert row["norm_mean"] == pytest.approx(n.mean(), rel=1e-12)
    assert row["norm_var"] == pytest.approx(n.var(), rel=1e-12)
    assert row["norm_cv"] == pytest.approx(n.std() / n.mean(), rel=1e-12)
    u = raw.numpy() / n[:, None]
    cos, same = u @ u.T, (y[:, None] == y[None, :]).numpy()
    assert row["pos_cos"] == pytest.approx(cos[same & ~np.eye(24, dtype=bool)].mean(), rel=1e-12)
    assert row["neg_cos"] == pytest.approx(cos[~same].mean(), rel=1e-12)
    triplets = [(a, p, q) for a in range(24) for p in range(24) for q in range(24) if a != p and same[a, p] and not same[a, q]]
    assert row["violations"] == pytest.approx(np.mean([cos[a, q] >= cos[a, p] for a, p, q in triplets]))
    assert math.isnan(row["grad_slope"]) and math.isnan(row["dtheta_mean"])     # not measured: no loss, no after_step


def test_angle_change_and_its_balance_match_direct_formulas():
    torch.manual_seed(2)
    before = torch.randn(16, 5, dtype=torch.float64) * torch.linspace(0.2, 4, 16, dtype=torch.float64)[:, None]
    after = before + 0.3 * torch.randn(16, 5, dtype=torch.float64)
    mon = NormMonitor(every=1, tail=0.25)
    mon.observe(before)
    mon.after_step(nn.Identity(), after)               # "re-embedding" returns the moved batch
    row = mon.frame().iloc[0]
    b, a = before.numpy(), after.numpy()
    theta = np.arccos(np.clip((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1), -1, 1))
    assert row["dtheta_mean"] == pytest.approx(theta.mean(), rel=1e-10)
    assert row["dtheta_std"] == pytest.approx(theta.std(), rel=1e-10)
    assert row["dtheta_cv"] == pytest.approx(theta.std() / theta.mean(), rel=1e-10)
    order = np.argsort(np.linalg.norm(b, axis=1))
    assert row["dtheta_high_low"] == pytest.approx(theta[order[-4:]].mean() / theta[order[:4]].mean(), rel=1e-10)
    np.testing.assert_allclose(mon.samples()["dtheta"], theta, rtol=1e-10)


# -- a small training loop, with and without the monitor ----------------------------------------------------------

def _setup(seed=0, sec=False):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 6))
    loss_fn = pml_losses.TripletMarginLoss(margin=0.1, embedding_regularizer=SECRegularizer(eta=0.5) if sec else None)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(seed + 100)
    batches = [(torch.randn(12, 8, generator=g), torch.arange(4).repeat_interleave(3)) for _ in range(7)]
    return model, loss_fn, opt, batches


def _state(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def _train(way: str, sec: bool, every: int = 2):
    model, loss_fn, opt, batches = _setup(sec=sec)
    mon = None
    if way == "observe":
        mon = NormMonitor(every=every)
    elif way in ("attach", "attach+wrap"):
        mon = NormMonitor.attach(model, optimizer=opt, every=every)
    elif way == "wrap":
        mon = NormMonitor(every=every)
    if way in ("wrap", "attach+wrap"):
        loss_fn = mon.wrap(loss_fn)
    for x, y in batches:
        raw = model(x)
        loss = loss_fn(raw, y)
        if way == "observe":
            mon.observe(raw, loss=loss, labels=y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if way in ("observe", "wrap"):
            mon.after_step(model, x)
        with torch.no_grad():                          # an evaluation pass: not a step
            model.eval()
            model(x)
            model.train()
    return model, mon


@pytest.mark.parametrize("sec", [False, True])
def test_attaching_the_monitor_changes_no_bit_of_training(sec):
    plain, _ = _train("plain", sec)
    for way in ("observe", "attach", "wrap", "attach+wrap"):
        model, mon = _train(way, sec)
        for k, v in _state(plain).items():
            assert torch.equal(v, model.state_dict()[k]), (way, k)
        f = mon.frame()
        assert list(f["step"]) == [2, 4, 6] and f["dtheta_mean"].notna().all() and f["grad_slope"].notna().all(), way
        assert (f["pos_cos"].notna().all()) == (way != "attach"), way        # labels come with observe/wrap


def test_the_slope_uses_the_metric_loss_alone_with_a_regularizer():
    """With SEC as the PML loss's embedding_regularizer, wrap() and observe(loss=metric) measure the gradient of the
    metric part, attach() alone the gradient backward passes (SEC's included): the gradients differ exactly by SEC's."""
    model, loss_fn, opt, batches = _setup(sec=True)
    x, y = batches[0]
    raw = model(x)
    metric = pml_losses.TripletMarginLoss(margin=0.1)(raw, y)
    g_metric = torch.autograd.grad(metric, raw, retain_graph=True)[0].norm(dim=1).double().numpy()
    total = loss_fn(raw, y)
    g_total = torch.autograd.grad(total, raw)[0].norm(dim=1).double().numpy()
    assert not np.allclose(g_metric, g_total)
    got = {}
    for way in ("wrap", "attach+wrap", "attach"):
        model, loss_fn, opt, batches = _setup(sec=True)
        mon = NormMonitor.attach(model, every=1) if way.startswith("attach") else NormMonitor(every=1)
        fn = mon.wrap(loss_fn) if "wrap" in way else loss_fn
        x, y = batches[0]
        out = fn(model(x), y)
        assert out.item() == pytest.approx(total.item(), rel=1e-6)       # the wrapper returns the loss as it was
        out.backward()
        got[way] = mon.samples()["grad_norm"].to_numpy()
    np.testing.assert_allclose(got["wrap"], g_metric, rtol=1e-6)
    np.testing.assert_allclose(got["attach+wrap"], g_metric, rtol=1e-6)
    np.testing.assert_allclose(got["attach"], g_total, rtol=1e-6)


def test_hooks_are_removed_cleanly():
    model, loss_fn, opt, batches = _setup()
    counts = lambda: (len(model._forward_hooks), len(model._forward_pre_hooks), len(opt._optimizer_step_post_hooks))
    assert counts() == (0, 0, 0)
    with NormMonitor.attach(model, optimizer=opt, every=1) as mon:
        assert counts() == (1, 1, 1) and mon.attached
        for x, y in batches[:2]:
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert counts() == (0, 0, 0) and not mon.attached and mon.step == 2
    x, y = batches[2]
    loss_fn(model(x), y).backward()
    opt.step()
    assert mon.step == 2 and len(mon.frame()) == 2          # what it recorded stays, nothing more is recorded
    mon.detach()                                            # twice is harmless


def test_nothing_is_measured_between_recorded_steps(monkeypatch):
    """At unrecorded steps observe() only counts: no autograd.grad, no capture, no read to the host."""
    import sec_lib.monitor.monitor as m
    calls = []
    monkeypatch.setattr(m, "measure_on_device", lambda *a, **k: calls.append("measure") or (1, {}, {"norm": torch.ones(1)}))
    real_grad = torch.autograd.grad
    monkeypatch.setattr(torch.autograd, "grad", lambda *a, **k: calls.append("grad") or real_grad(*a, **k))
    mon = NormMonitor(every=5)
    f = torch.randn(6, 4, requires_grad=True)
    for _ in range(4):
        mon.observe(f, loss=(f ** 2).sum())
    assert calls == [] and mon._pending is None and mon.step == 4
    mon.observe(f, loss=(f ** 2).sum())                     # step 5: captured, not yet read
    assert calls == ["grad"]
    mon.frame()
    assert calls == ["grad", "measure"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_no_host_sync_between_recorded_steps_on_a_gpu():
    """The steps between recorded ones run under CUDA's sync debug mode 'error': the monitor adds no host sync
    there (checked only where the plain loop itself is free of syncs)."""
    def run(monitor_every):
        model, loss_fn, opt, batches = _setup()
        model.cuda()
        mon = NormMonitor.attach(model, optimizer=opt, every=monitor_every) if monitor_every else None
        for i, (x, y) in enumerate(batches):
            x = x.cuda()
            quiet = i >= 1 and (monitor_every is None or (i + 1) % monitor_every not in (0, 1))
            torch.cuda.set_sync_debug_mode("error" if quiet else "default")
            try:
                loss = (model(x) ** 2).mean()          # a loss with no host sync of its own
                opt.zero_grad()
                loss.backward()
                opt.step()
            finally:
                torch.cuda.set_sync_debug_mode("default")
        return mon
    try:
        run(None)
    except RuntimeError as err:
        pytest.skip(f"the plain loop syncs on this GPU and torch ({err}); nothing to compare with")
    assert list(run(4).frame()["step"]) == [4]


def test_a_loop_that_knows_nothing_of_sec_lib_needs_three_lines():
    loop = '''
import torch
from torch import nn
from pytorch_metric_learning.losses import TripletMarginLoss
from sec_lib.monitor import NormMonitor                              # + monitor
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 6))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = TripletMarginLoss(margin=0.1)
monitor = NormMonitor.attach(model, optimizer=opt, every=3)          # + monitor
g = torch.Generator().manual_seed(1)
for step in range(12):
    x, y = torch.randn(12, 8, generator=g), torch.arange(4).repeat_interleave(3)
    loss = loss_fn(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
frame, diagnosis = monitor.report()                                  # + monitor
'''
    added = [line for line in loop.splitlines() if "# + monitor" in line]
    assert len(added) == 3
    with_monitor, without = {}, {}
    exec(loop, with_monitor)                                            # noqa: S102 - our own source
    exec("\n".join(line for line in loop.splitlines() if line not in added), without)   # noqa: S102
    for k, v in without["model"].state_dict().items():
        assert torch.equal(v, with_monitor["model"].state_dict()[k]), k
    frame = with_monitor["frame"]
    assert list(frame.columns) == list(COLUMNS) and list(frame["step"]) == [3, 6, 9, 12]
    assert frame[["norm_cv", "grad_slope", "dtheta_high_low"]].notna().all().all()
    assert "−1" in with_monitor["diagnosis"] and f"{frame['norm_cv'].iloc[-1]:.3f}" in with_monitor["diagnosis"]


def test_the_diagnosis_is_computed_from_the_frame():
    steps = np.arange(10, 110, 10)
    base = dict(step=steps, n=60, norm_mean=2.0, grad_slope=-0.9, grad_slope_lo=-1.1, grad_slope_hi=-0.7,
                grad_r2=0.5, dtheta_high_low=0.5, dtheta_cv=0.4)
    import pandas as pd
    rising = pd.DataFrame({**base, "norm_cv": 0.1 + 0.002 * steps}, columns=list(COLUMNS))
    falling = rising.assign(norm_cv=0.4 - 0.002 * steps)
    flat = rising.assign(norm_cv=0.2 + 0.01 * np.array([1, -1] * 5))
    assert "CV rose by 0.18" in diagnose(rising) and "CV fell by 0.18" in diagnose(falling)
    assert "no trend distinguishable from zero" in diagnose(flat)
    text = diagnose(rising)
    assert "averaged -0.900 over 10 recorded" in text and "which excludes −1" in text   # all -0.9: no spread
    assert "which contains −1" in diagnose(rising.assign(grad_slope=-1 + 0.05 * np.array([1, -1] * 5)))
    assert "0.50× as far" in text and "2.00× slower" in text
    assert "do not say whether SEC" in text
    empty = diagnose(pd.DataFrame(columns=list(COLUMNS)))
    assert "No batch was recorded" in empty and "Δθ was not measured" in empty


def test_bad_settings_fail_clearly():
    with pytest.raises(ParameterError, match="'every'"):
        NormMonitor(every=0)
    with pytest.raises(ParameterError, match="'tail'"):
        MonitorConfig(tail=0.9)
    with pytest.raises(TypeError, match="either"):
        NormMonitor(MonitorConfig(), every=3)
    with pytest.raises(ValueError, match=r"\(B, D\)"):
        NormMonitor(every=1).observe(torch.randn(5))
    mon = NormMonitor.attach(nn.Linear(3, 2), every=1)
    with pytest.raises(ValueError, match="attached"):
        mon.observe(torch.randn(4, 2))


def test_the_training_loop_tables_are_the_golden_ones():
    """The training loop's step tables equal the golden ones (tests/golden/instrument_runs.py)."""
    sys.path.insert(0, str(GOLDEN_DIR))
    import instrument_runs
    from sec_lib import kernels
    from sec_lib.runs.train import train
    golden = json.loads(instrument_runs.GOLDEN.read_text())
    kind = kernels.this_kind()
    if kind not in golden:
        pytest.skip(f"no golden tables for this CPU kind {kind}; to add it: python tests/golden/instrument_runs.py --record")
    for name, cfg in instrument_runs.configs().items():
        got = instrument_runs.hashes(train(cfg))
        assert got == {t: golden[kind][name][t] for t in got}, name
