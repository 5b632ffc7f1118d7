"""SEC and the scale: the lab behind sections 6 and 7 of the theory page.

Multiply every embedding by ``s`` (for a network: scale its last linear layer). This module measures what each
penalty does along that direction, by autograd and by the derived closed forms (:data:`SCALE_FORMULAS`):

* :func:`scale_derivatives` -- ``d/ds P(s f)`` on random batches for SEC (``2 eta Var/s``), L2-reg, relative SEC
  (``0``), relative SEC with ``mu`` detached (``2 eta CV^2/s``) and PML's CenterInvariantRegularizer (``4 CIR/s``);
* :func:`linear_scale_runs` -- a linear last layer under plain SGD, where ``||W||^2`` changes by exactly
  ``-2 lr <W, g> + lr^2 ||g||^2`` and ``<W, g>`` is the derivative above;
* :func:`cir_relation` -- the CenterInvariantRegularizer against ``mu^2`` times SEC.

Like :mod:`sec_lib.toylab` it knows nothing of pages or profiles; :mod:`sec_lib.chapters.theory` runs it.
"""
from __future__ import annotations

import math
from typing import Sequence

import pandas as pd
import torch

from .params import Choice, Number, PositiveSet
from .sec import SphericalEmbeddingConstraint, center_invariant_penalty
from .toylab import make_toy_loss, small_work, make_batch

__all__ = ["SCALE_PENALTIES", "SCALE_FORMULAS", "LINEAR_VARIANTS", "scale_penalty", "scale_derivative_closed_form",
           "scale_derivative_autograd", "scale_derivatives", "scale_derivative_table", "linear_scale_runs",
           "linear_scale_summary", "cir_relation", "cir_table"]


#: The penalties whose derivative along a rescaling ``f -> s f`` the lab measures, with their labels.
SCALE_PENALTIES = {
    "sec": "SEC (μ = batch mean, detached)",
    "l2": "L2-reg (μ = 0)",
    "relative": "relative SEC (μ = batch mean, in the graph)",
    "relative_detached": "relative SEC with μ detached",
    "cir": "CenterInvariantRegularizer (PML)",
}
#: The closed form of each derivative at scale ``s``, in terms of the current norms ``n_i = ||s f_i||``
#: (Var, CV: population variance and coefficient of variation of ``n``).
SCALE_FORMULAS = {
    "sec": "2η·Var(n)/s",
    "l2": "2η·mean(n²)/s",
    "relative": "0",
    "relative_detached": "2η·CV²/s",
    "cir": "4η·CIR(sf)/s",
}


def _relative_detached(eta: float):
    def pen(f: torch.Tensor) -> torch.Tensor:
        n = f.norm(dim=1)
        return eta * ((n / n.mean().detach() - 1.0) ** 2).mean()
    return pen


def scale_penalty(name: str, eta: float = 1.0):
    """The penalty ``name`` of :data:`SCALE_PENALTIES` as a callable ``f -> scalar`` with weight ``eta``.

    ``sec``, ``l2`` and ``relative`` are :class:`~sec_lib.sec.SphericalEmbeddingConstraint` with
    ``mu="batch"``, ``mu="zero"`` and ``relative=True``; ``cir`` is ``eta`` times
    :func:`~sec_lib.sec.center_invariant_penalty`; ``relative_detached`` is the relative penalty with the batch
    mean detached (not offered by the library: it is the variant that would still contract the scale).
    """
    Choice(tuple(SCALE_PENALTIES)).check("penalty", name)
    eta = Number(0).check("eta", eta)
    if name == "sec":
        return SphericalEmbeddingConstraint(eta=eta)
    if name == "l2":
        return SphericalEmbeddingConstraint(eta=eta, mu="zero")
    if name == "relative":
        return SphericalEmbeddingConstraint(eta=eta, relative=True)
    if name == "relative_detached":
        return _relative_detached(eta)
    return lambda f: eta * center_invariant_penalty(f)


def scale_derivative_closed_form(name: str, f: torch.Tensor, s: float, eta: float = 1.0) -> float:
    """The derived ``d/ds penalty(s f)`` at scale ``s`` (:data:`SCALE_FORMULAS`); ``f`` is the unscaled batch."""
    Choice(tuple(SCALE_PENALTIES)).check("penalty", name)
    with torch.no_grad():
        n = (s * f).norm(dim=1)
        var, mu = n.var(unbiased=False), n.mean()
        value = {"sec": 2 * eta * var / s, "l2": 2 * eta * (n ** 2).mean() / s, "relative": 0.0 * var,
                 "relative_detached": 2 * eta * var / mu ** 2 / s,
                 "cir": 4 * eta * center_invariant_penalty(s * f) / s}[name]
    return float(value)


def scale_derivative_autograd(penalty, f: torch.Tensor, s: float) -> float:
    """``d/ds penalty(s f)`` at ``s`` by autograd on the scalar ``s``: the pull along a rescaling that
    gradient descent feels (a detached ``mu`` stays detached, as in training)."""
    s = torch.tensor(float(s), dtype=f.dtype, device=f.device, requires_grad=True)
    (g,) = torch.autograd.grad(penalty(s * f.detach()), s)
    return float(g)


@small_work
def scale_derivatives(seeds: Sequence[int] = range(5), scales: Sequence[float] = (0.25, 1.0, 4.0), eta: float = 1.0,
                      n_classes: int = 8, per_class: int = 4, dim: int = 16,
                      norm_range: tuple[float, float] = (0.25, 4.0), penalties: Sequence[str] = tuple(SCALE_PENALTIES),
                      device: str = "cpu") -> pd.DataFrame:
    """The derivative of each penalty along ``f -> s f``, by autograd and by its closed form, on random batches.

    One row per (seed, scale, penalty): ``value`` (the penalty at ``s f``), ``autograd``, ``closed_form``,
    ``abs_diff``, ``rel_diff`` (to ``||grad P(s f)|| ||f||``, the largest the derivative can be), ``cos_grad_f``
    (``autograd`` over that bound: the cosine between the whole batch's gradient and the rescaling direction), ``pull`` = ``s * autograd / value``
    (the pull along the scale as a multiple of the value: 2 for SEC and L2, 0 for relative SEC, 2 for the detached
    relative SEC, 4 for CIR), ``mean_norm``, ``cv`` of the scaled batch. Batches: :func:`make_batch` in float64.
    """
    scales = PositiveSet(1).check("scales", scales)
    eta = Number(0, open_lo=True).check("eta", eta)
    for p in penalties:
        Choice(tuple(SCALE_PENALTIES)).check("penalty", p)
    rows = []
    for seed in seeds:
        f, _ = make_batch(n_classes, per_class, dim, int(seed), norm_range, device)
        for s in scales:
            n = (s * f).norm(dim=1)
            for name in penalties:
                pen = scale_penalty(name, eta)
                with torch.no_grad():
                    value = float(pen(s * f))
                ag = scale_derivative_autograd(pen, f, s)
                cf = scale_derivative_closed_form(name, f, s, eta)
                x = (s * f).requires_grad_(True)
                (gf,) = torch.autograd.grad(pen(x), x)
                bound = float(gf.norm() * f.norm())  # |d/ds P(s f)| = |<grad P(s f), f>| <= this
                rows.append(dict(seed=int(seed), scale=s, penalty=name, label=SCALE_PENALTIES[name],
                                 formula=SCALE_FORMULAS[name], value=value, autograd=ag, closed_form=cf,
                                 abs_diff=abs(ag - cf), rel_diff=abs(ag - cf) / bound if bound > 0 else 0.0,
                                 cos_grad_f=ag / bound if bound > 0 else 0.0,
                                 pull=s * ag / value if value > 0 else float("nan"),
                                 mean_norm=float(n.mean()), cv=float(n.std(unbiased=False) / n.mean())))
    return pd.DataFrame(rows)


def scale_derivative_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per penalty of :func:`scale_derivatives`: the closed form, how many checks, the largest
    ``|autograd - closed form|`` (absolute and relative), the range of the cosine between the gradient and the
    rescaling direction, and the range of the pull ``s * (dP/ds) / P``."""
    g = df.groupby("penalty", sort=False)
    return pd.DataFrame(dict(
        penalty=g["label"].first(), closed_form=g["formula"].first(), checks=g.size(),
        max_abs_diff=g["abs_diff"].max(), max_rel_diff=g["rel_diff"].max(),
        cos_min=g["cos_grad_f"].min(), cos_max=g["cos_grad_f"].max(),
        pull_min=g["pull"].min(), pull_max=g["pull"].max())).reset_index(drop=True)


#: Variants of :func:`linear_scale_runs`: the normalized loss alone, with SEC, with relative SEC.
LINEAR_VARIANTS = {"none": "loss alone", "sec": "loss + SEC", "relative": "loss + relative SEC"}


@small_work
def linear_scale_runs(loss_name: str = "triplet", variants: Sequence[str] = tuple(LINEAR_VARIANTS), steps: int = 300,
                      lr: float = 0.05, eta: float = 1.0, n_classes: int = 8, per_class: int = 4, d_in: int = 16,
                      d_out: int = 8, seed: int = 0, device: str = "cpu") -> pd.DataFrame:
    """Plain full-batch SGD on a linear last layer ``f = x W^T`` with a normalized metric loss (``get_loss(loss_name)``, P x K labels) plus, per variant, nothing, SEC or
    relative SEC with weight ``eta``. All variants start from the same ``W_0`` (``||W_0||_F = 1``). The inputs
    ``x`` (B x d_in, random, fixed) are whitened, ``x^T x / B = I``, so the root-mean-square norm of the
    embeddings is exactly the layer's scale: ``mean_i ||f_i||^2 = ||W||_F^2``.

    ``P(sW)`` along the scale of ``W`` is ``P(s f)``, and the loss does not change along it (degree 0), so with
    ``g`` the full gradient::

        <W, g> = d/ds P(sW) at s = 1     (2 eta Var(||f||) for SEC, 0 for relative SEC and for the loss alone)
        ||W - lr g||^2 = ||W||^2 - 2 lr <W, g> + lr^2 ||g||^2                      (exact)

    so SEC shrinks ``||W||^2`` by ``4 lr eta Var`` per step to first order, and the other two can only grow it,
    by the second-order ``lr^2 ||g||^2``. With ``B = n_classes * per_class > d_in`` no linear map makes all norms
    equal, so SEC's pull on the scale does not die out. One row per (variant, step) with ``w_norm2``,
    ``rms_norm`` (measured on ``f``; equal to ``||W||_F``), ``mean_norm``, ``var_norm``, ``cv``, ``loss_value``, ``penalty``, ``scale_grad`` (``<W, g>`` measured),
    ``scale_grad_pred`` (the closed form), ``grad_norm2``, ``first_order`` (``-2 lr scale_grad_pred``),
    ``second_order`` (``lr^2 ||g||^2``), ``delta_w_norm2`` (measured change to the next step) and
    ``identity_rel_err`` (``|measured - (-2 lr <W,g> + lr^2 ||g||^2)| / ||W'||^2``); the last step's change
    columns are NaN.
    """
    for v in variants:
        Choice(tuple(LINEAR_VARIANTS)).check("variant", v)
    steps = Number(1, integer=True).check("steps", steps)
    lr = Number(0, open_lo=True).check("lr", lr)
    eta = Number(0, open_lo=True).check("eta", eta)
    n_classes = Number(2, integer=True).check("n_classes", n_classes)
    per_class = Number(2, integer=True).check("per_class", per_class)
    d_in = Number(1, integer=True).check("d_in", d_in)
    d_out = Number(2, integer=True).check("d_out", d_out)
    loss_fn = make_toy_loss(loss_name)
    gen = torch.Generator().manual_seed(int(seed))
    b = n_classes * per_class
    if b < d_in:
        raise ValueError(f"linear_scale_runs needs a batch n_classes * per_class = {b} >= d_in = {d_in} (whitened inputs)")
    x = torch.linalg.qr(torch.randn(b, d_in, generator=gen, dtype=torch.float64))[0] * math.sqrt(b)  # x^T x / B = I
    x = x.to(device)
    w0 = torch.randn(d_out, d_in, generator=gen, dtype=torch.float64)
    w0 = (w0 / w0.norm()).to(device)
    labels = torch.arange(n_classes).repeat_interleave(per_class).to(device)
    frames = []
    for v in variants:
        pen = None if v == "none" else scale_penalty(v, eta)
        w = w0.clone()
        rows = []
        for t in range(steps + 1):
            wt = w.detach().clone().requires_grad_(True)
            f = x @ wt.T
            lm = loss_fn(f, labels)
            pv = pen(f) if pen is not None else torch.zeros((), dtype=f.dtype, device=f.device)
            total = lm + pv
            (g,) = torch.autograd.grad(total, wt, allow_unused=True)
            g = torch.zeros_like(wt) if g is None else g.detach()
            with torch.no_grad():
                n = f.detach().norm(dim=1)
                var, mu = float(n.var(unbiased=False)), float(n.mean())
                pred = 0.0 if v == "none" else scale_derivative_closed_form(v, f.detach(), 1.0, eta)
                wn2, gn2 = float((w ** 2).sum()), float((g ** 2).sum())
                row = dict(variant=v, label=LINEAR_VARIANTS[v], step=t, w_norm2=wn2,
                           rms_norm=float((n ** 2).mean().sqrt()), mean_norm=mu, var_norm=var,
                           cv=math.sqrt(var) / mu, loss_value=float(lm.detach()), penalty=float(pv.detach()),
                           scale_grad=float((w * g).sum()), scale_grad_pred=pred, grad_norm2=gn2,
                           first_order=-2 * lr * pred + 0.0, second_order=lr ** 2 * gn2,
                           delta_w_norm2=float("nan"), identity_rel_err=float("nan"))
                if t < steps:
                    w = w - lr * g
                    new = float((w ** 2).sum())
                    row["delta_w_norm2"] = new - wn2
                    row["identity_rel_err"] = abs(new - (wn2 - 2 * lr * row["scale_grad"] + lr ** 2 * gn2)) / new
            rows.append(row)
        frames.append(pd.DataFrame(rows))
    out = pd.concat(frames, ignore_index=True)
    out.insert(0, "loss", loss_name)
    out["eta"], out["lr"] = eta, lr
    return out


def linear_scale_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per variant of :func:`linear_scale_runs`: scale, mean norm and CV at the start and the end, the
    summed measured change of ``||W||^2`` beside its first-order prediction and the second-order term, the
    smallest single-step change, the largest per-step identity error and the largest ``|<W,g> measured - closed form|``."""
    out = []
    for v, g in runs.groupby("variant", sort=False):
        g = g.sort_values("step")
        a, z = g.iloc[0], g.iloc[-1]
        moved = g.iloc[:-1]
        out.append(dict(
            variant=a["label"], steps=int(z["step"]),
            w_norm_start=math.sqrt(a["w_norm2"]), w_norm_end=math.sqrt(z["w_norm2"]),
            rms_norm_start=a["rms_norm"], rms_norm_end=z["rms_norm"],
            scale_ratio=math.sqrt(z["w_norm2"] / a["w_norm2"]),
            mean_norm_start=a["mean_norm"], mean_norm_end=z["mean_norm"],
            cv_start=a["cv"], cv_end=z["cv"],
            sum_delta_w_norm2=float(moved["delta_w_norm2"].sum()), min_delta_w_norm2=float(moved["delta_w_norm2"].min()),
            sum_first_order=float(moved["first_order"].sum()), sum_second_order=float(moved["second_order"].sum()),
            max_identity_rel_err=float(moved["identity_rel_err"].max()),
            max_scale_grad_err=float((g["scale_grad"] - g["scale_grad_pred"]).abs().max())))
    return pd.DataFrame(out)


@small_work
def cir_relation(widths: Sequence[float] = (1.0, 0.3, 0.1, 0.03, 0.01), seeds: Sequence[int] = range(5),
                 n_classes: int = 8, per_class: int = 4, dim: int = 16, radius: float = 2.0,
                 scales: Sequence[float] = (0.5, 2.0, 10.0), device: str = "cpu") -> pd.DataFrame:
    """PML's CenterInvariantRegularizer (CIR) against ``mu^2`` times SEC on random batches whose norms are
    log-uniform in ``radius * [e^-w, e^w]`` for each width ``w``.

    One row per (width, seed): ``mean_norm``, ``cv``, ``skew``, ``kurt`` of the norms; ``cir``, ``sec`` (eta = 1),
    ``mu2_sec``; ``rel_err`` = ``(cir - mu^2 sec) / (mu^2 sec)`` and ``rel_err_pred`` = ``skew CV + (kurt - 1) CV^2/4``
    (the exact identity ``CIR = mu^2 Var + mu m3 + (m4 - Var^2)/4`` divided by ``mu^2 Var``), ``identity_dev`` =
    ``|rel_err - rel_err_pred|`` (rounding only); ``d_cir`` and ``d_sec``, the derivatives along ``f -> s f`` at
    ``s = 1`` by autograd,
    with ``d_ratio`` = ``d_cir / (mu^2 d_sec)`` (2 in the limit of equal norms: the weight ``mu^2`` grows with the
    scale) and ``d_ratio_pred`` = ``2 cir / (mu^2 sec)``; ``scaling_dev`` = the largest
    ``|CIR(c f) / (c^4 CIR(f)) - 1|`` over ``scales``.
    """
    widths = PositiveSet(1).check("widths", widths)
    radius = Number(0, open_lo=True).check("radius", radius)
    scales = PositiveSet(1).check("scales", scales)
    sec, cir_fn = SphericalEmbeddingConstraint(eta=1.0), center_invariant_penalty
    rows = []
    for w in widths:
        for seed in seeds:
            f, _ = make_batch(n_classes, per_class, dim, int(seed), (radius * math.exp(-w), radius * math.exp(w)),
                              device)
            n = f.norm(dim=1)
            mu = n.mean()
            d = n - mu
            var, m3, m4 = (d ** 2).mean(), (d ** 3).mean(), (d ** 4).mean()
            cv, skew, kurt = float(var.sqrt() / mu), float(m3 / var ** 1.5), float(m4 / var ** 2)
            cir, sv = float(cir_fn(f)), float(sec(f))
            d_cir, d_sec = scale_derivative_autograd(cir_fn, f, 1.0), scale_derivative_autograd(sec, f, 1.0)
            mu2 = float(mu) ** 2
            rows.append(dict(
                width=w, seed=int(seed), mean_norm=float(mu), cv=cv, skew=skew, kurt=kurt, cir=cir, sec=sv,
                mu2_sec=mu2 * sv, rel_err=(cir - mu2 * sv) / (mu2 * sv), rel_err_pred=skew * cv + (kurt - 1) * cv ** 2 / 4,
                identity_dev=abs((cir - mu2 * sv) / (mu2 * sv) - (skew * cv + (kurt - 1) * cv ** 2 / 4)),
                d_cir=d_cir, d_sec=d_sec, d_ratio=d_cir / (mu2 * d_sec), d_ratio_pred=2 * cir / (mu2 * sv),
                scaling_dev=max(abs(float(cir_fn(c * f)) / (c ** 4 * cir) - 1) for c in scales)))
    return pd.DataFrame(rows)


def cir_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per width of :func:`cir_relation`: the median CV, the largest relative gap ``|CIR/(mu^2 SEC) - 1|``
    and the largest ratio of that gap to CV (the gap is first order in CV), the range of the derivative ratio, and
    the worst residuals of the moment identity, of the predicted ratio and of the ``c^4`` law."""
    d = df.assign(abs_rel_err=df["rel_err"].abs(), err_per_cv=df["rel_err"].abs() / df["cv"],
                  d_dev=(df["d_ratio"] - df["d_ratio_pred"]).abs())
    g = d.groupby("width", sort=False)
    return pd.DataFrame(dict(
        width=g["width"].first(), batches=g.size(), cv_median=g["cv"].median(),
        rel_err_max=g["abs_rel_err"].max(), rel_err_per_cv_max=g["err_per_cv"].max(),
        d_ratio_min=g["d_ratio"].min(), d_ratio_max=g["d_ratio"].max(),
        identity_dev_max=g["identity_dev"].max(), d_ratio_pred_dev_max=g["d_dev"].max(),
        scaling_dev_max=g["scaling_dev"].max(),
    )).reset_index(drop=True)
