"""The paper's gradient facts (Sec. 3, Prop. 1-2 and Eq. 1), checked with autograd on every loss."""

import pytest
import torch

from sec_lib.losses import LOSS_SPECS, NORMALIZED_LOSSES, get_loss
from sec_lib.sec import SphericalEmbeddingConstraint

SOFTMAX = ("normface", "cosface", "arcface")
D = 8


def batch(name, p=4, seed=0):
    k = LOSS_SPECS[name].k
    g = torch.Generator().manual_seed(seed)
    f = torch.randn(p * k, D, generator=g, dtype=torch.float64)
    f = f * torch.empty(p * k, 1, dtype=torch.float64).uniform_(0.2, 6.0, generator=g)  # very unequal norms
    return f, torch.arange(p).repeat_interleave(k)


def loss_fn(name):
    torch.manual_seed(0)
    hp = {"num_classes": 4, "embedding_size": D} if name in SOFTMAX else {}
    return get_loss(name, **hp).double()


def grad(loss, f, y):
    f = f.clone().requires_grad_()
    value = loss(f, y)
    (g,) = torch.autograd.grad(value, f)
    return value, g


@pytest.mark.parametrize("name", NORMALIZED_LOSSES)
def test_gradient_is_orthogonal_to_embedding(name):
    """Prop. 1: <dL/df_i, f_i> = 0 for every sample when L depends on f only through f/||f||."""
    f, y = batch(name)
    value, g = grad(loss_fn(name), f, y)
    assert value.item() > 0 and g.norm() > 1e-6, "degenerate batch: the check would be vacuous"
    cosines = (g * f).sum(1) / (g.norm(dim=1) * f.norm(dim=1)).clamp_min(1e-300)
    assert cosines.abs().max().item() < 1e-9


@pytest.mark.parametrize("name", NORMALIZED_LOSSES)
def test_gradient_scales_inversely_with_norm(name):
    """Prop. 2: scaling f by c leaves the loss and scales the gradient by 1/c."""
    f, y = batch(name, seed=1)
    loss = loss_fn(name)
    v1, g1 = grad(loss, f, y)
    for c in (0.25, 3.7):
        vc, gc = grad(loss, c * f, y)
        assert vc.item() == pytest.approx(v1.item(), rel=1e-10)
        torch.testing.assert_close(gc, g1 / c, rtol=1e-8, atol=1e-14)


@pytest.mark.parametrize("name", NORMALIZED_LOSSES)
def test_sgd_step_grows_every_norm(name):
    """Fact 3: f' = f - a g with g perpendicular to f gives ||f'||^2 = ||f||^2 + a^2 ||g||^2;
    fact 4: the angle turned satisfies tan(dtheta) = a ||g|| / ||f||."""
    f, y = batch(name, seed=2)
    _, g = grad(loss_fn(name), f, y)
    a = 0.7
    f_new = f - a * g
    torch.testing.assert_close(f_new.pow(2).sum(1), f.pow(2).sum(1) + a**2 * g.pow(2).sum(1), rtol=1e-10, atol=1e-12)
    moved = g.norm(dim=1) > 1e-12
    assert moved.any()
    assert torch.all(f_new.norm(dim=1)[moved] > f.norm(dim=1)[moved])
    cos_turn = (f_new * f).sum(1) / (f_new.norm(dim=1) * f.norm(dim=1))
    dtheta = torch.acos(cos_turn.clamp(-1, 1))
    torch.testing.assert_close(torch.tan(dtheta)[moved], (a * g.norm(dim=1) / f.norm(dim=1))[moved], rtol=1e-6, atol=1e-9)


def test_eq1_cosine_gradient():
    """Eq. (1): d<f_i^, f_j^>/df_i = (1/||f_i||)(f_j^ - cos(theta_ij) f_i^)."""
    g = torch.Generator().manual_seed(3)
    fi = (torch.randn(D, generator=g, dtype=torch.float64) * 4).requires_grad_()
    fj = torch.randn(D, generator=g, dtype=torch.float64)
    cos = torch.dot(fi / fi.norm(), fj / fj.norm())
    (gi,) = torch.autograd.grad(cos, fi)
    hat_i, hat_j = fi.detach() / fi.norm().detach(), fj / fj.norm()
    torch.testing.assert_close(gi, (hat_j - cos.detach() * hat_i) / fi.norm().detach())


@pytest.mark.parametrize("mu", ["batch", "zero", 2.5, "ema"])
def test_sec_gradient_is_radial(mu):
    """dL_sec/df_i = (2/N)(||f_i|| - mu) f_i^ (mu detached), for every mu mode."""
    f, _ = batch("triplet", seed=4)
    sec = SphericalEmbeddingConstraint(eta=1.0, mu=mu, momentum=0.5 if mu == "ema" else 1.0).double()
    if mu == "ema":
        sec(torch.randn(5, D, dtype=torch.float64) * 10)  # running mu now differs from this batch's mean
    fr = f.clone().requires_grad_()
    (g,) = torch.autograd.grad(sec(fr), fr)
    norms = f.norm(dim=1, keepdim=True)
    expected = 2.0 / len(f) * (norms - sec.last_mu) * f / norms
    torch.testing.assert_close(g, expected, rtol=1e-10, atol=1e-14)
    if mu == "zero":
        torch.testing.assert_close(g, 2.0 / len(f) * f)  # the L2-reg baseline shrinks every norm
