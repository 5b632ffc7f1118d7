"""sec_lib.sec: SphericalEmbeddingConstraint and its PML adapter SECRegularizer."""
import math

import pytest
import torch
from pytorch_metric_learning import distances as pml_distances
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import reducers as pml_reducers

from sec_lib.sec import SECRegularizer, SphericalEmbeddingConstraint


def emb(n=10, d=5, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    f = torch.randn(n, d, generator=g, dtype=torch.float64)
    return f * torch.empty(n, 1, dtype=torch.float64).uniform_(0.5, scale, generator=g)


def hand(f, mu, eta=1.0):
    norms = [math.sqrt(sum(v * v for v in row)) for row in f.tolist()]
    return eta * sum((n - mu) ** 2 for n in norms) / len(norms)


def mean_norm(f):
    return sum(math.sqrt(sum(v * v for v in row)) for row in f.tolist()) / len(f)


# ------------------------------------------------------------------------------------ mu modes
def test_batch_mode():
    f = emb()
    sec = SphericalEmbeddingConstraint(eta=0.7)
    assert sec(f).item() == pytest.approx(hand(f, mean_norm(f), 0.7), rel=1e-12)
    assert isinstance(sec.last_mu, float) and sec.last_mu == pytest.approx(mean_norm(f), rel=1e-12)
    assert sec.mu_mode == "batch"


def test_zero_mode_is_l2_of_embeddings():
    f = emb(seed=1)
    sec = SphericalEmbeddingConstraint(eta=1e-4, mu="zero")
    assert sec(f).item() == pytest.approx(1e-4 * f.pow(2).sum(1).mean().item(), rel=1e-12)
    assert sec.last_mu == 0.0 and sec.mu_mode == "zero"


def test_fixed_mode():
    f = emb(seed=2)
    sec = SphericalEmbeddingConstraint(eta=2.0, mu=2.5)
    assert sec(f).item() == pytest.approx(hand(f, 2.5, 2.0), rel=1e-12)
    assert sec.last_mu == 2.5 and sec.mu_mode == "fixed"


def test_eta_zero_switches_off():
    assert SphericalEmbeddingConstraint(eta=0.0)(emb()).item() == 0.0


def test_ema_init_update_and_value():
    rho = 0.3
    sec = SphericalEmbeddingConstraint(mu="ema", momentum=rho)
    assert not bool(sec.initialized) and math.isnan(sec.last_mu)
    f1, f2, f3 = emb(seed=3), emb(seed=4, scale=8.0), emb(seed=5)
    v1 = sec(f1).item()
    mu1 = mean_norm(f1)  # initialised from the first batch
    assert bool(sec.initialized) and sec.running_mu.item() == pytest.approx(mu1, rel=1e-6)
    assert v1 == pytest.approx(hand(f1, mu1), rel=1e-6)
    v2 = sec(f2).item()
    mu2 = (1 - rho) * mu1 + rho * mean_norm(f2)  # current batch folded in before the loss
    assert sec.last_mu == pytest.approx(mu2, rel=1e-6)
    assert v2 == pytest.approx(hand(f2, mu2), rel=1e-6)
    sec(f3)
    assert sec.last_mu == pytest.approx((1 - rho) * mu2 + rho * mean_norm(f3), rel=1e-6)


def test_ema_no_update_in_eval_mode():
    sec = SphericalEmbeddingConstraint(mu="ema", momentum=0.5)
    sec.eval()
    f = emb(seed=6)
    assert sec(f).item() == pytest.approx(hand(f, mean_norm(f)), rel=1e-9)  # before init: batch mean
    assert not bool(sec.initialized)
    sec.train()
    sec(emb(seed=7))
    stored = sec.running_mu.item()
    sec.eval()
    g = emb(seed=8, scale=10.0)
    assert sec(g).item() == pytest.approx(hand(g, stored), rel=1e-6)
    assert sec.running_mu.item() == stored and sec.last_mu == pytest.approx(stored)


def test_ema_state_dict_round_trip():
    a = SphericalEmbeddingConstraint(mu="ema", momentum=0.2)
    a(emb(seed=9))
    a(emb(seed=10))
    state = a.state_dict()
    assert set(state) == {"running_mu", "initialized"}
    b = SphericalEmbeddingConstraint(mu="ema", momentum=0.2)
    b.load_state_dict(state)
    assert bool(b.initialized) and b.running_mu.item() == a.running_mu.item()
    f = emb(seed=11)
    assert b(f).item() == a(f).item() and b.last_mu == a.last_mu


def test_ema_momentum_one_is_batch_mean():
    sec = SphericalEmbeddingConstraint(mu="ema", momentum=1.0)
    sec(emb(seed=12))
    f = emb(seed=13)
    assert sec(f).item() == pytest.approx(SphericalEmbeddingConstraint()(f).item(), rel=1e-6)


def test_repr():
    r = repr(SphericalEmbeddingConstraint(eta=0.5, mu="ema", momentum=0.9))
    assert "eta=0.5" in r and "mu='ema'" in r and "momentum=0.9" in r


# ------------------------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    "kwargs,word",
    [
        ({"eta": -1.0}, "eta"),
        ({"eta": float("nan")}, "eta"),
        ({"eta": float("inf")}, "eta"),
        ({"eta": "1"}, "eta"),
        ({"momentum": 0.0}, "momentum"),
        ({"momentum": 1.5}, "momentum"),
        ({"mu": "ema", "momentum": -0.1}, "momentum"),
        ({"mu": "mean"}, "mu"),
        ({"mu": -1.0}, "mu"),
        ({"mu": 0.0}, "mu"),
        ({"mu": float("nan")}, "mu"),
        ({"mu": True}, "mu"),
        ({"mu": None}, "mu"),
        ({"mu": "batch", "momentum": 0.5}, "momentum"),
    ],
)
def test_invalid_arguments(kwargs, word):
    for cls in (SphericalEmbeddingConstraint, SECRegularizer):
        with pytest.raises(ValueError, match=word) as err:
            cls(**kwargs)
        msg = str(err.value)
        if word == "mu" or "mu=" in msg:
            assert "'batch', 'ema', 'zero'" in msg


@pytest.mark.parametrize(
    "bad", [torch.randn(5), torch.randn(2, 3, 4), torch.randn(0, 4), torch.ones(3, 4, dtype=torch.long), [[1.0, 2.0]]]
)
def test_invalid_inputs(bad):
    with pytest.raises(ValueError, match="embeddings"):
        SphericalEmbeddingConstraint()(bad)


# ------------------------------------------------------------------------------- gradient/detach
def test_batch_mu_gradient_formula_and_detach_irrelevant():
    f = emb(n=12, seed=14).requires_grad_()
    eta = 0.8
    (g,) = torch.autograd.grad(SphericalEmbeddingConstraint(eta=eta)(f), f)
    norms = f.detach().norm(dim=1, keepdim=True)
    expected = 2 * eta / len(f) * (norms - norms.mean()) * f.detach() / norms
    torch.testing.assert_close(g, expected, rtol=1e-12, atol=1e-15)
    # with mu = the current batch mean, not detaching gives the same gradient (the mu-terms sum to 0)
    n = f.norm(dim=1)
    (g_attached,) = torch.autograd.grad(eta * ((n - n.mean()) ** 2).mean(), f)
    torch.testing.assert_close(g, g_attached, rtol=1e-10, atol=1e-14)


def test_ema_mu_detached_matters():
    rho = 0.5
    sec = SphericalEmbeddingConstraint(mu="ema", momentum=rho).double()
    sec(emb(seed=15, scale=10.0))
    prev = sec.running_mu.item()
    f = emb(seed=16).requires_grad_()
    (g,) = torch.autograd.grad(sec(f), f)
    norms = f.detach().norm(dim=1, keepdim=True)
    torch.testing.assert_close(g, 2 / len(f) * (norms - sec.last_mu) * f.detach() / norms)
    # not detaching mu = (1 - rho) prev + rho * mean ||f|| would give a different gradient
    n = f.norm(dim=1)
    mu_attached = (1 - rho) * prev + rho * n.mean()
    assert mu_attached.item() == pytest.approx(sec.last_mu, rel=1e-12)
    (g_att,) = torch.autograd.grad(((n - mu_attached) ** 2).mean(), f)
    assert (g - g_att).abs().max() > 1e-6


# ------------------------------------------------------------------------------------ PML adapter
def test_regularizer_standalone_matches_module():
    f = emb(seed=17)
    for mu in ("batch", "zero", 1.7):
        sec, reg = SphericalEmbeddingConstraint(eta=0.3, mu=mu), SECRegularizer(eta=0.3, mu=mu)
        fa, fb = f.clone().requires_grad_(), f.clone().requires_grad_()
        va, vb = sec(fa), reg(fb)
        va.backward()
        vb.backward()
        assert vb.item() == pytest.approx(va.item(), rel=1e-12)
        torch.testing.assert_close(fa.grad, fb.grad)
        assert reg.last_mu == sec.last_mu and reg.mu_mode == sec.mu_mode and reg.eta == 0.3


def _triplet(**kw):
    return pml_losses.TripletMarginLoss(
        margin=1.0, distance=pml_distances.LpDistance(power=2), reducer=pml_reducers.MeanReducer(), **kw
    )


@pytest.mark.parametrize("mu", ["batch", "zero", 2.0])
def test_regularizer_inside_pml_loss(mu):
    f = emb(n=12, seed=18)
    y = torch.arange(4).repeat_interleave(3)
    eta = 0.4
    with_reg = _triplet(embedding_regularizer=SECRegularizer(eta=eta, mu=mu))
    fa, fb = f.clone().requires_grad_(), f.clone().requires_grad_()
    va = with_reg(fa, y)
    vb = _triplet()(fb, y) + SphericalEmbeddingConstraint(eta=eta, mu=mu)(fb)
    va.backward()
    vb.backward()
    assert va.item() == pytest.approx(vb.item(), rel=1e-12)
    torch.testing.assert_close(fa.grad, fb.grad, rtol=1e-10, atol=1e-14)
    assert va.item() > _triplet()(f, y).item()  # the regularizer really was added


def test_regularizer_ema_inside_pml_loss_shares_state():
    y = torch.arange(4).repeat_interleave(3)
    loss = _triplet(embedding_regularizer=SECRegularizer(eta=1.0, mu="ema", momentum=0.25))
    ref = SphericalEmbeddingConstraint(eta=1.0, mu="ema", momentum=0.25)
    for seed in (19, 20, 21):
        f = emb(n=12, seed=seed)
        assert loss(f, y).item() == pytest.approx(_triplet()(f, y).item() + ref(f).item(), rel=1e-6)
    assert "embedding_regularizer.constraint.running_mu" in loss.state_dict()
    assert loss.embedding_regularizer.last_mu == pytest.approx(ref.last_mu, rel=1e-6)
    loss.eval()  # eval propagates to the wrapped constraint: no update
    before = loss.embedding_regularizer.constraint.running_mu.item()
    loss(emb(n=12, seed=22), y)
    assert loss.embedding_regularizer.constraint.running_mu.item() == before
