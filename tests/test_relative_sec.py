"""The scale-free SEC (``relative=True``) and the center-invariant comparison penalty.

Checked against autograd (``gradcheck`` in float64), the closed-form gradient derived in ``sec_lib/sec.py``,
the scaling laws (degree 0 for relative SEC, 2 for plain SEC, 4 for CIR) and pytorch-metric-learning's own
``CenterInvariantRegularizer``.
"""
import pytest
import torch
from pytorch_metric_learning import distances as pml_distances
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import reducers as pml_reducers
from pytorch_metric_learning.regularizers import CenterInvariantRegularizer

from sec_lib.sec import CenterInvariantPenalty, SECRegularizer, SphericalEmbeddingConstraint, center_invariant_penalty

SCALES = (1e-3, 0.37, 1.0, 2.5, 1e3)


def emb(n=16, d=6, seed=0, spread=1.0):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(n, d, generator=g, dtype=torch.float64)
    r = torch.exp(spread * torch.randn(n, generator=g, dtype=torch.float64))
    return u / u.norm(dim=1, keepdim=True) * r[:, None]


def closed_form_grad(f, eta):
    """dL_rel/df_i = (2 eta / (N mu^2)) (n_i - M2 / mu) f_i / n_i, M2 = mean n^2 (= mu (1 + CV^2) after / mu)."""
    n = f.norm(dim=1, keepdim=True)
    mu, m2 = n.mean(), (n ** 2).mean()
    return 2 * eta / (len(f) * mu ** 2) * (n - m2 / mu) * f / n


def scale_derivative(penalty, f, s=1.0):
    """d/ds penalty(s f) by autograd (detached parts of the penalty stay detached)."""
    s = torch.tensor(float(s), dtype=f.dtype, requires_grad=True)
    (g,) = torch.autograd.grad(penalty(s * f), s)
    return g.item()


# ------------------------------------------------------------------------------------ value and gradient
def test_value_is_squared_coefficient_of_variation():
    f = emb(seed=1)
    n = f.norm(dim=1)
    cv2 = n.var(unbiased=False) / n.mean() ** 2
    sec = SphericalEmbeddingConstraint(eta=0.7, relative=True)
    assert sec(f).item() == pytest.approx(0.7 * cv2.item(), rel=1e-12)
    assert sec.last_mu == pytest.approx(n.mean().item(), rel=1e-14)
    # per-sample terms average to it (what PML's MeanReducer sees)
    torch.testing.assert_close(sec.per_sample(f), 0.7 * (n / n.mean() - 1) ** 2)


@pytest.mark.parametrize("cls", [SphericalEmbeddingConstraint, SECRegularizer])
def test_gradcheck_float64(cls):
    pen = cls(eta=0.9, relative=True)
    for seed in (2, 3):
        f = emb(n=7, d=4, seed=seed).requires_grad_()
        assert torch.autograd.gradcheck(pen, (f,), eps=1e-6, atol=1e-8, rtol=1e-6)


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_gradient_matches_closed_form_and_is_radial(seed):
    eta = 1.3
    f = emb(n=12, seed=seed).requires_grad_()
    (g,) = torch.autograd.grad(SphericalEmbeddingConstraint(eta=eta, relative=True)(f), f)
    torch.testing.assert_close(g, closed_form_grad(f.detach(), eta), rtol=1e-11, atol=1e-15)
    # the same with the (1 + CV^2) target written out
    n = f.detach().norm(dim=1, keepdim=True)
    mu, cv2 = n.mean(), n.var(unbiased=False) / n.mean() ** 2
    torch.testing.assert_close(g, 2 * eta / (len(f) * mu ** 2) * (n - mu * (1 + cv2)) * f.detach() / n,
                               rtol=1e-11, atol=1e-15)
    # Euler: no component along a rescaling of the batch
    assert abs((g * f.detach()).sum().item()) < 1e-13 * g.norm().item() * f.detach().norm().item()


@pytest.mark.parametrize("c", SCALES)
def test_value_and_scale_derivative_invariant_under_rescaling(c):
    f = emb(seed=7)
    sec = SphericalEmbeddingConstraint(eta=0.5, relative=True)
    assert sec(c * f).item() == pytest.approx(sec(f).item(), rel=1e-11)
    # d/ds at s = 1 and at s = c: zero (relative to the size of the gradient)
    fc = (c * f).requires_grad_()
    (g,) = torch.autograd.grad(sec(fc), fc)
    for s in (1.0, c):
        assert abs(scale_derivative(sec, f, s)) < 1e-12 * g.norm().item() * f.norm().item() * c / s + 1e-300
    # the gradient itself scales as 1/c
    f1 = f.clone().requires_grad_()
    (g1,) = torch.autograd.grad(sec(f1), f1)
    torch.testing.assert_close(g * c, g1, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("s", (0.3, 1.0, 4.0))
def test_plain_and_detached_relative_contract_at_the_derived_rate(s):
    eta = 0.8
    f = emb(seed=8)
    n = (s * f).norm(dim=1)
    var, mu = n.var(unbiased=False).item(), n.mean().item()
    plain = SphericalEmbeddingConstraint(eta=eta)
    assert scale_derivative(plain, f, s) == pytest.approx(2 * eta * var / s, rel=1e-11)

    def rel_detached(x):
        nn = x.norm(dim=1)
        return eta * ((nn / nn.mean().detach() - 1) ** 2).mean()

    assert scale_derivative(rel_detached, f, s) == pytest.approx(2 * eta * var / mu ** 2 / s, rel=1e-11)
    assert scale_derivative(SphericalEmbeddingConstraint(eta=eta, relative=True), f, s) == pytest.approx(
        0.0, abs=1e-12 * 2 * eta * var / mu ** 2 / s)


def test_default_is_unchanged():
    f = emb(seed=9).requires_grad_()
    for mu in ("batch", "zero", 1.7):
        a, b = SphericalEmbeddingConstraint(eta=0.4, mu=mu), SphericalEmbeddingConstraint(eta=0.4, mu=mu,
                                                                                           relative=False)
        assert not a.relative and repr(a) == repr(b) and "relative" not in repr(a)
        n = f.norm(dim=1)
        m = {"batch": n.detach().mean(), "zero": 0.0, 1.7: 1.7}[mu]
        assert torch.equal(a(f), (0.4 * (n - m) ** 2).mean())  # the pre-issue-23 expression, bit for bit
    assert "relative=True" in repr(SphericalEmbeddingConstraint(relative=True))


# ------------------------------------------------------------------------------------ PML adapter and errors
def test_regularizer_relative_inside_pml_loss():
    f = emb(n=12, seed=10)
    y = torch.arange(4).repeat_interleave(3)

    def triplet(**kw):
        return pml_losses.TripletMarginLoss(margin=1.0, distance=pml_distances.LpDistance(power=2),
                                            reducer=pml_reducers.MeanReducer(), **kw)

    reg = SECRegularizer(eta=0.6, relative=True)
    assert reg.relative and reg.mu_mode == "batch"
    fa, fb = f.clone().requires_grad_(), f.clone().requires_grad_()
    va = triplet(embedding_regularizer=reg)(fa, y)
    vb = triplet()(fb, y) + SphericalEmbeddingConstraint(eta=0.6, relative=True)(fb)
    va.backward()
    vb.backward()
    assert va.item() == pytest.approx(vb.item(), rel=1e-12)
    torch.testing.assert_close(fa.grad, fb.grad, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("kwargs", [dict(mu="ema", momentum=0.5), dict(mu="ema"), dict(mu="zero"), dict(mu=2.0)])
def test_relative_refuses_other_mu_naming_the_valid_choice(kwargs):
    for cls in (SphericalEmbeddingConstraint, SECRegularizer):
        with pytest.raises(ValueError, match="relative=True needs mu='batch'"):
            cls(relative=True, **kwargs)
    with pytest.raises(ValueError, match="relative must be True or False"):
        SphericalEmbeddingConstraint(relative=1)


def test_relative_all_zero_batch_raises_single_sample_is_zero():
    with pytest.raises(ValueError, match="mean norm is > 0"):
        SphericalEmbeddingConstraint(relative=True)(torch.zeros(4, 3))
    f = emb(n=1, seed=11).requires_grad_()
    v = SphericalEmbeddingConstraint(relative=True)(f)
    (g,) = torch.autograd.grad(v, f)
    assert v.item() == 0.0 and torch.all(g == 0)


# ------------------------------------------------------------------------------------ center-invariant
def test_center_invariant_matches_pml():
    for seed in (12, 13):
        f = emb(seed=seed)
        fa, fb = f.clone().requires_grad_(), f.clone().requires_grad_()
        va, vb = center_invariant_penalty(fa), CenterInvariantRegularizer()(fb)
        va.backward()
        vb.backward()
        assert va.item() == pytest.approx(vb.item(), rel=1e-12)
        torch.testing.assert_close(fa.grad, fb.grad, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("c", SCALES)
def test_center_invariant_scales_as_fourth_power(c):
    f = emb(seed=14)
    assert center_invariant_penalty(c * f).item() == pytest.approx(c ** 4 * center_invariant_penalty(f).item(),
                                                                    rel=1e-11)
    assert scale_derivative(center_invariant_penalty, f, c) == pytest.approx(
        4 * center_invariant_penalty(c * f).item() / c, rel=1e-10)


@pytest.mark.parametrize("spread", [1.0, 0.1, 1e-2, 1e-3])
def test_center_invariant_is_mu_squared_sec_exactly_up_to_moments(spread):
    f = emb(n=64, seed=15, spread=spread)
    n = f.norm(dim=1)
    mu, d = n.mean(), n - n.mean()
    var, m3, m4 = (d ** 2).mean(), (d ** 3).mean(), (d ** 4).mean()
    cir = center_invariant_penalty(f).item()
    sec = SphericalEmbeddingConstraint(eta=1.0)(f).item()
    assert sec == pytest.approx(var.item(), rel=1e-12)
    assert cir == pytest.approx((mu ** 2 * var + mu * m3 + (m4 - var ** 2) / 4).item(), rel=1e-9)
    rel_err = abs(cir - mu.item() ** 2 * sec) / cir
    cv = (var.sqrt() / mu).item()
    assert rel_err <= 3 * cv  # skew * CV + (kurt - 1) CV^2 / 4, |skew| small for these norms
    if spread <= 1e-2:
        assert rel_err < 0.05
    if spread <= 1e-3:
        assert rel_err < 5e-3
    # scale direction: CIR's derivative is twice mu^2 times SEC's (the weight mu^2 grows with the scale)
    ratio = scale_derivative(center_invariant_penalty, f) / (mu.item() ** 2 * scale_derivative(
        SphericalEmbeddingConstraint(eta=1.0), f))
    assert ratio == pytest.approx(2 * cir / (mu.item() ** 2 * sec), rel=1e-9)
    if spread <= 1e-3:
        assert ratio == pytest.approx(2.0, rel=1e-2)


# ------------------------------------------------------------------------------------ CIR as a training penalty
def test_center_invariant_penalty_module_is_eta_times_pml_with_its_gradient():
    """The scale chapter's CIR arm (sec.CenterInvariantPenalty): eta times PML's CenterInvariantRegularizer in value
    and gradient, nothing detached, and the batch's mean norm recorded for the step table."""
    f = emb(seed=21)
    fa, fb = f.clone().requires_grad_(), f.clone().requires_grad_()
    pen = CenterInvariantPenalty(0.03)
    va, vb = pen(fa), 0.03 * CenterInvariantRegularizer()(fb)
    va.backward()
    vb.backward()
    assert va.item() == pytest.approx(vb.item(), rel=1e-12)
    torch.testing.assert_close(fa.grad, fb.grad, rtol=1e-10, atol=1e-14)
    assert pen.last_mu == pytest.approx(f.norm(dim=1).mean().item(), rel=1e-12)
    assert torch.autograd.gradcheck(CenterInvariantPenalty(0.7), (emb(n=6, d=3, seed=22).requires_grad_(),))


@pytest.mark.parametrize("eta", [0, -1.0, float("nan"), float("inf"), True, "1"])
def test_center_invariant_penalty_refuses_a_bad_weight(eta):
    with pytest.raises(ValueError, match="eta must be a finite number > 0"):
        CenterInvariantPenalty(eta)
