"""The numbers behind the theory chapter: gradient facts of l2-normalized losses, measured with autograd.

Follows Sec. 3 of Zhang, Li & Zhang, "Deep Metric Learning with Spherical Embedding" (NeurIPS 2020,
arXiv 2011.02785). For any loss that sees ``f`` only through ``f_hat = f / ||f||``::

    dL/df = (1/||f||) (I - f_hat f_hat^T) dL/df_hat                        (chain rule)

which gives the four facts this module measures on the library's own losses (``sec_lib.losses``):

1. ``<dL/df, f> = 0``: the gradient is perpendicular to ``f`` (the paper's Proposition 1);
2. ``||dL/df|| ∝ 1/||f||`` at a fixed direction (Proposition 2; Eq. (1) for a single cosine:
   ``d<f_hat_i, f_hat_j>/df_i = (1/||f_i||)(f_hat_j - cos θ_ij f_hat_i)``);
3. a plain SGD step on ``f`` only grows the norm: ``||f'||^2 = ||f||^2 + α^2 ||dL/df||^2``;
4. the angle of one step obeys ``tan Δθ = α ||dL/df|| / ||f|| ∝ 1/||f||^2``.

Every gradient here comes from ``torch.autograd`` on ``get_loss(name)(f, labels)``. The only
hand-written gradient is Eq. (1) in :func:`eq1_check`, whose point is to compare it with autograd.

"Free embeddings": in :func:`sgd_norm_growth`, :func:`angle_change` and :func:`simulate_2d` the
embeddings themselves are the parameters, updated by ``f <- f - lr * dL/df``. That isolates the
geometry from any network.

Plot functions return :class:`matplotlib.figure.Figure` objects built without pyplot (nothing is
shown or kept open as a side effect); :func:`toy_animation` wraps precomputed frames in a
kernel-free slider (:mod:`sec_lib.widgets`).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from .threads import torch_threads
from .params import Choice, Number

__all__ = [
    "THEORY_LOSSES", "PROFILES", "PARAMS", "profile_sizes",
    "make_batch", "gradient_facts", "active_steps", "loglog_slope", "fixed_direction_slopes", "slope_summary", "slope_spread",
    "eq1_check", "sgd_norm_growth", "angle_change", "Toy2D", "simulate_2d", "toy_2d", "frame_steps",
    "plot_perpendicularity", "plot_grad_vs_norm", "plot_slope_spread", "plot_norm_growth", "plot_angle_change",
    "plot_toy", "toy_frames", "toy_animation", "summary", "verdict_lines",
]

#: Losses the theory chapter can use: pair/triplet losses that work on a small P x K batch of free
#: embeddings without learnable parameters of their own.
THEORY_LOSSES = ("triplet", "semihard", "npair", "ms", "tml", "contrastive", "ntxent")

#: Sizes per profile. ``smoke`` runs the whole notebook in seconds.
PROFILES: dict[str, dict] = {
    "smoke": dict(n_classes=3, dim=8, scales=(0.5, 1.0, 2.0, 4.0), n_seeds=4, frames=4, toy_classes=3, dpi=60),
    "cpu": dict(n_classes=6, dim=32, scales=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0), n_seeds=30, frames=12,
                toy_classes=3, dpi=72),
    "gpu": dict(n_classes=8, dim=64, scales=(0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0), n_seeds=100,
                frames=24, toy_classes=4, dpi=72),
}

#: The theory notebook's parameters (validated with ``sec_lib.params.notebook_params``).
PARAMS = {
    "profile": Choice(tuple(PROFILES)),
    "loss": Choice(THEORY_LOSSES),
    "seed": Number(lo=0, hi=2**31 - 1, integer=True),
    "steps": Number(lo=1, hi=100_000, integer=True),
    "lr": Number(lo=1e-12, hi=1e6),
    "eta": Number(lo=0.0, hi=1e6),
    "device": Choice(("cpu", "cuda")),
}


def profile_sizes(profile: str) -> dict:
    """The sizes of ``profile`` (a copy of ``PROFILES[profile]``)."""
    if profile not in PROFILES:
        raise ValueError(f"profile {profile!r} is not valid; valid profiles: {', '.join(map(repr, PROFILES))}")
    return dict(PROFILES[profile])


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------

def split_gradients(loss_fn, sec, f: torch.Tensor, labels: torch.Tensor):
    """(metric loss, its gradient, SEC's gradient) at free embeddings ``f``, all from autograd.

    A loss with nothing to push (no active pair) gives a zero gradient; ``sec=None`` gives a zero
    SEC gradient.
    """
    x = f.detach().clone().requires_grad_(True)
    lm = loss_fn(x, labels)
    gm = (torch.autograd.grad(lm, x, retain_graph=sec is not None, allow_unused=True)[0]
          if lm.requires_grad else None)
    gm = torch.zeros_like(x) if gm is None else gm
    gs = torch.autograd.grad(sec(x), x)[0] if sec is not None else torch.zeros_like(x)
    return lm, gm, gs


def _small_work(fn):
    """Decorator: run ``fn`` under :func:`_torch_threads` (1 thread)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with torch_threads(1):
            return fn(*args, **kwargs)
    return wrapper


def _check_loss_name(loss_name: str) -> None:
    if loss_name not in THEORY_LOSSES:
        raise ValueError(f"loss_name {loss_name!r} is not valid; valid losses: {', '.join(map(repr, THEORY_LOSSES))}")


def _check_int(name: str, value, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ValueError(f"{name} = {value!r} is not valid; expected an integer >= {lo}")
    return int(value)


def _check_pos(name: str, value, allow_zero: bool = False) -> float:
    ok = isinstance(value, (int, float, np.floating)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} = {value!r} is not valid; expected a finite number {'>=' if allow_zero else '>'} 0")
    return float(value)


def _check_range(name: str, rng) -> tuple[float, float]:
    try:
        lo, hi = (float(rng[0]), float(rng[1]))
    except (TypeError, ValueError, IndexError):
        raise ValueError(f"{name} = {rng!r} is not valid; expected (low, high) with 0 < low <= high") from None
    if not (0 < lo <= hi and math.isfinite(hi)):
        raise ValueError(f"{name} = {rng!r} is not valid; expected (low, high) with 0 < low <= high")
    return lo, hi


def _check_scales(scales) -> tuple[float, ...]:
    scales = tuple(float(s) for s in scales)
    if len(scales) < 2 or any(not (s > 0 and math.isfinite(s)) for s in scales) or len(set(scales)) != len(scales):
        raise ValueError(f"scales = {scales!r} is not valid; expected at least two distinct positive numbers")
    return scales


def _default_per_class(loss_name: str) -> int:
    """K of the paper's P x K batch for this loss (``LOSS_SPECS[name]['k']``), at least 2."""
    from .losses import LOSS_SPECS

    spec = LOSS_SPECS.get(loss_name) if isinstance(LOSS_SPECS, Mapping) else None
    k = spec.get("k") if isinstance(spec, Mapping) else getattr(spec, "k", None)
    return max(int(k), 2) if isinstance(k, (int, np.integer)) and k else 3


def _make_loss(loss_name: str, loss_kwargs: Mapping | None = None):
    from .losses import get_loss

    _check_loss_name(loss_name)
    return get_loss(loss_name, **dict(loss_kwargs or {}))


def _grad(loss_fn, f: torch.Tensor, labels: torch.Tensor) -> tuple[float, torch.Tensor]:
    """(loss value, dL/df) by autograd; a loss with no active term gives a zero gradient."""
    x = f.detach().clone().requires_grad_(True)
    loss = loss_fn(x, labels)
    if not loss.requires_grad:
        return float(loss), torch.zeros_like(x)
    (g,) = torch.autograd.grad(loss, x, allow_unused=True)
    return float(loss.detach()), (torch.zeros_like(x) if g is None else g.detach())


def make_batch(n_classes: int = 4, per_class: int = 3, dim: int = 16, seed: int = 0,
               norm_range: tuple[float, float] = (0.25, 4.0), device: str = "cpu",
               dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """A P x K batch of free embeddings: uniformly random directions, log-uniform norms in ``norm_range``.

    Labels are ``[0]*K + [1]*K + ...`` (the layout of a PK-sampled batch). Returns ``(f, labels)``.
    """
    n_classes = _check_int("n_classes", n_classes, 2)
    per_class = _check_int("per_class", per_class, 1)
    dim = _check_int("dim", dim, 2)
    lo, hi = _check_range("norm_range", norm_range)
    gen = torch.Generator().manual_seed(int(seed))
    n = n_classes * per_class
    u = torch.randn(n, dim, generator=gen, dtype=torch.float64)
    u = u / u.norm(dim=1, keepdim=True)
    r = torch.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * torch.rand(n, generator=gen, dtype=torch.float64))
    f = (u * r[:, None]).to(device=device, dtype=dtype)
    labels = torch.arange(n_classes).repeat_interleave(per_class).to(device)
    return f, labels


# ----------------------------------------------------------------------------------------------
# facts 1 and 2: perpendicular gradient, magnitude ∝ 1/||f||
# ----------------------------------------------------------------------------------------------

@_small_work
def gradient_facts(loss_name: str = "triplet", n_classes: int = 4, per_class: int | None = None, dim: int = 16,
                   seed: int = 0, scales: Sequence[float] = (0.25, 0.5, 1.0, 2.0, 4.0),
                   norm_range: tuple[float, float] = (0.25, 4.0), device: str = "cpu",
                   dtype: torch.dtype = torch.float64, loss_kwargs: Mapping | None = None) -> pd.DataFrame:
    """Per-sample gradient facts of ``get_loss(loss_name)`` on a random batch, by autograd.

    The batch (:func:`make_batch`: random directions, random norms) is evaluated as is
    (``scale == 1``) and with every embedding multiplied by each ``c`` in ``scales`` (same
    directions, norms times ``c``). One row per (scale, sample) with columns

    - ``norm`` ``||f||``, ``grad_norm`` ``||dL/df||``, ``grad_dot_f`` ``<dL/df, f>``;
    - ``cos_grad_f`` = ``<g, f>/(||g|| ||f||)`` (Prop. 1: 0) and ``angle_deg`` (90);
    - ``grad_norm_unit``: ``||dL/df||`` of the same batch projected on the unit sphere;
    - ``prop2_ratio`` = ``grad_norm * norm / grad_norm_unit`` (Prop. 2: exactly 1);
    - ``prop2_rel_err`` = ``||g(f) - g(f_hat)/||f|| || / ||g(f)||`` (the vector form of Prop. 2);
    - ``scale_ratio`` = ``c * grad_norm(c f) / grad_norm(f)`` (1: the gradient scales as 1/c);
    - ``loss_value``, ``loss``, ``seed``, ``scale``, ``sample``, ``label``.

    Samples whose gradient is exactly zero (no active pair/triplet) get NaN ratios and cosines.
    """
    per_class = _default_per_class(loss_name) if per_class is None else per_class
    scales = _check_scales(scales)
    loss_fn = _make_loss(loss_name, loss_kwargs)
    f0, labels = make_batch(n_classes, per_class, dim, seed, norm_range, device, dtype)
    unit = f0 / f0.norm(dim=1, keepdim=True)
    _, g_unit = _grad(loss_fn, unit, labels)
    _, g_1 = _grad(loss_fn, f0, labels)
    all_scales = sorted(set(scales) | {1.0})
    rows = []
    with torch.no_grad():
        gu_norm = g_unit.norm(dim=1)
        g1_norm = g_1.norm(dim=1)
    for c in all_scales:
        f = f0 * c
        val, g = _grad(loss_fn, f, labels)
        with torch.no_grad():
            norm = f.norm(dim=1)
            gn = g.norm(dim=1)
            dot = (g * f).sum(dim=1)
            nz = gn > 0
            cos = torch.where(nz, dot / (gn * norm).clamp_min(1e-300), torch.full_like(gn, float("nan")))
            ratio = torch.where(gu_norm > 0, gn * norm / gu_norm.clamp_min(1e-300), torch.full_like(gn, float("nan")))
            err = (g - g_unit / norm[:, None]).norm(dim=1) / gn.clamp_min(1e-300)
            err = torch.where(nz, err, torch.full_like(gn, float("nan")))
            sratio = torch.where(g1_norm > 0, c * gn / g1_norm.clamp_min(1e-300), torch.full_like(gn, float("nan")))
        for i in range(f.shape[0]):
            rows.append(dict(loss=loss_name, seed=int(seed), scale=c, sample=i, label=int(labels[i]),
                             norm=float(norm[i]), grad_norm=float(gn[i]), grad_dot_f=float(dot[i]),
                             cos_grad_f=float(cos[i]),
                             angle_deg=float(np.degrees(np.arccos(np.clip(float(cos[i]), -1, 1)))),
                             grad_norm_unit=float(gu_norm[i]), prop2_ratio=float(ratio[i]),
                             prop2_rel_err=float(err[i]), scale_ratio=float(sratio[i]), loss_value=val))
    return pd.DataFrame(rows)


def loglog_slope(x, y) -> tuple[float, float]:
    """Least-squares slope of ``log y`` on ``log x`` and its R^2 (points with x, y <= 0 are dropped).

    Returns ``(nan, nan)`` with fewer than two usable points or no spread in ``x``.
    """
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same length; got {x.size} and {y.size}")
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    lx, ly = np.log(x[ok]), np.log(y[ok])
    if lx.size < 2 or np.ptp(lx) == 0:
        return float("nan"), float("nan")
    slope, icpt = np.polyfit(lx, ly, 1)
    resid = ly - (slope * lx + icpt)
    sst = float(((ly - ly.mean()) ** 2).sum())
    r2 = 1.0 - float((resid ** 2).sum()) / sst if sst > 0 else 1.0
    return float(slope), float(r2)


def fixed_direction_slopes(df: pd.DataFrame, y: str = "grad_norm") -> pd.DataFrame:
    """Per-sample log-log slope of ``y`` against ``norm`` across the scales (fixed direction).

    Works on the frames of :func:`gradient_facts` (``y="grad_norm"``, theory: -1) and
    :func:`angle_change` (``y="tan_dtheta"``, theory: -2).
    """
    out = []
    for (seed, sample), g in df.groupby(["seed", "sample"], sort=True):
        s, r2 = loglog_slope(g["norm"], g[y])
        out.append(dict(seed=seed, sample=sample, label=int(g["label"].iloc[0]), slope=s, r2=r2))
    return pd.DataFrame(out)


def slope_summary(df: pd.DataFrame, y: str = "grad_norm") -> dict:
    """The two honest slopes of a gradient-facts (or angle-change) frame.

    - ``random_slope``/``random_r2``: one fit across the samples of the unscaled batch (``scale == 1``):
      different directions, different norms, so the points scatter around the line;
    - ``fixed_slope_mean``/``fixed_slope_maxdev``: per-sample fits across scales (same direction),
      their mean and the largest deviation from that mean;
    - ``max_abs_cos``: the largest ``|cos(grad, f)|`` (when the frame has it).
    """
    base = df[df["scale"] == 1.0]
    rs, rr2 = loglog_slope(base["norm"], base[y])
    fs = fixed_direction_slopes(df, y)["slope"].dropna()
    out = dict(random_slope=rs, random_r2=rr2, n_random=int((base[y] > 0).sum()),
               fixed_slope_mean=float(fs.mean()) if len(fs) else float("nan"),
               fixed_slope_min=float(fs.min()) if len(fs) else float("nan"),
               fixed_slope_max=float(fs.max()) if len(fs) else float("nan"), n_fixed=int(len(fs)))
    if "cos_grad_f" in df:
        out["max_abs_cos"] = float(df["cos_grad_f"].abs().max())
    return out


def slope_spread(loss_name: str = "triplet", seeds: Sequence[int] = range(10), **kw) -> pd.DataFrame:
    """:func:`slope_summary` of :func:`gradient_facts` for several seeds (one row per seed).

    Shows how noisy the across-sample slope is compared with the fixed-direction slope.
    """
    rows = []
    for s in seeds:
        d = slope_summary(gradient_facts(loss_name, seed=int(s), **kw))
        rows.append(dict(loss=loss_name, seed=int(s), **d))
    return pd.DataFrame(rows)


@_small_work
def eq1_check(dim: int = 8, n_pairs: int = 50, seed: int = 0, dtype: torch.dtype = torch.float64) -> pd.DataFrame:
    """Eq. (1) of the paper against autograd, for random pairs ``(f_i, f_j)``.

    Eq. (1): ``d cos θ_ij / d f_i = (1/||f_i||) (f_hat_j - cos θ_ij f_hat_i)``. Returns one row per
    pair with ``norm_i``, ``cos``, ``max_abs_diff`` (formula vs autograd) and ``grad_norm``.
    """
    dim = _check_int("dim", dim, 2)
    n_pairs = _check_int("n_pairs", n_pairs, 1)
    gen = torch.Generator().manual_seed(int(seed))
    fi = torch.randn(n_pairs, dim, generator=gen, dtype=dtype) * torch.exp(torch.randn(n_pairs, 1, generator=gen,
                                                                                        dtype=dtype))
    fj = torch.randn(n_pairs, dim, generator=gen, dtype=dtype)
    x = fi.clone().requires_grad_(True)
    cos = torch.nn.functional.cosine_similarity(x, fj, dim=1, eps=0.0)
    (g,) = torch.autograd.grad(cos.sum(), x)
    with torch.no_grad():
        ni = fi.norm(dim=1, keepdim=True)
        hi, hj = fi / ni, fj / fj.norm(dim=1, keepdim=True)
        formula = (hj - cos.detach()[:, None] * hi) / ni
        diff = (formula - g).abs().max(dim=1).values
    return pd.DataFrame(dict(pair=np.arange(n_pairs), norm_i=ni.squeeze(1).numpy(), cos=cos.detach().numpy(),
                             max_abs_diff=diff.numpy(), grad_norm=g.norm(dim=1).numpy()))


# ----------------------------------------------------------------------------------------------
# facts 3 and 4: plain SGD on free embeddings
# ----------------------------------------------------------------------------------------------

@_small_work
def sgd_norm_growth(loss_name: str = "triplet", steps: int = 100, lr: float = 1.0, n_classes: int = 4,
                    per_class: int | None = None, dim: int = 16, seed: int = 0, etas: Sequence[float] = (0.0, 1.0),
                    mu: str | float = "batch", norm_range: tuple[float, float] = (0.25, 4.0), device: str = "cpu",
                    dtype: torch.dtype = torch.float64, loss_kwargs: Mapping | None = None) -> pd.DataFrame:
    """Plain SGD on free embeddings, ``f <- f - lr * d(L + eta * L_sec)/df``, for each ``eta`` in ``etas``.

    All runs start from the same batch (:func:`make_batch`). ``eta = 0`` is the metric loss alone;
    ``eta > 0`` adds ``SphericalEmbeddingConstraint(eta, mu)``. One row per (eta, step, sample) with
    ``norm`` (state after ``step`` updates), ``grad_norm`` (``||dL_metric/df||`` at that state),
    ``loss_value``, ``mu`` (SEC's target, NaN without SEC) and, for ``eta = 0``,
    ``identity_rel_err`` = ``| ||f'||^2 - ||f||^2 - lr^2 ||g||^2 | / ||f'||^2`` (fact 3: 0 up to
    rounding; NaN on the last step and with SEC, whose radial gradient breaks the identity).
    """
    from .sec import SphericalEmbeddingConstraint

    steps = _check_int("steps", steps, 1)
    lr = _check_pos("lr", lr)
    etas = list(dict.fromkeys(_check_pos("eta", e, allow_zero=True) for e in etas))
    if not etas:
        raise ValueError("etas must list at least one value (0 = no SEC)")
    per_class = _default_per_class(loss_name) if per_class is None else per_class
    loss_fn = _make_loss(loss_name, loss_kwargs)
    f0, labels = make_batch(n_classes, per_class, dim, seed, norm_range, device, dtype)
    frames = []
    for eta in etas:
        sec = SphericalEmbeddingConstraint(eta=eta, mu=mu) if eta > 0 else None
        f = f0.clone()
        norms, gnorms, losses, mus, errs = [], [], [], [], []
        for t in range(steps + 1):
            lm, gm, gs = split_gradients(loss_fn, sec, f, labels)
            total = gm + gs
            mus.append(sec.last_mu if sec is not None else float("nan"))
            with torch.no_grad():
                n_now = f.norm(dim=1)
                norms.append(n_now.cpu().numpy())
                gnorms.append(gm.norm(dim=1).cpu().numpy())
                losses.append(float(lm.detach()))
                if t < steps:
                    f = f - lr * total
                    if sec is None:
                        lhs = f.norm(dim=1) ** 2
                        rhs = n_now ** 2 + lr ** 2 * gm.norm(dim=1) ** 2
                        errs.append(((lhs - rhs).abs() / lhs).cpu().numpy())
                    else:
                        errs.append(np.full(f.shape[0], np.nan))
                else:
                    errs.append(np.full(f.shape[0], np.nan))
        n = f0.shape[0]
        frames.append(pd.DataFrame(dict(
            loss=loss_name, variant="sec" if eta > 0 else "none", eta=eta,
            step=np.repeat(np.arange(steps + 1), n), sample=np.tile(np.arange(n), steps + 1),
            label=np.tile(labels.cpu().numpy(), steps + 1), norm=np.concatenate(norms),
            grad_norm=np.concatenate(gnorms), loss_value=np.repeat(losses, n), mu=np.repeat(mus, n),
            identity_rel_err=np.concatenate(errs))))
    return pd.concat(frames, ignore_index=True)


@_small_work
def angle_change(loss_name: str = "triplet", lr: float = 1.0, n_classes: int = 4, per_class: int | None = None,
                 dim: int = 16, seed: int = 0, scales: Sequence[float] = (0.25, 0.5, 1.0, 2.0, 4.0),
                 norm_range: tuple[float, float] = (0.25, 4.0), device: str = "cpu",
                 dtype: torch.dtype = torch.float64, loss_kwargs: Mapping | None = None) -> pd.DataFrame:
    """The angle each sample turns in one plain SGD step, against its norm.

    The batch of :func:`make_batch` (random directions and norms) takes one step ``f' = f - lr g``
    as is (``scale == 1``) and after scaling all embeddings by each ``c`` in ``scales`` (same
    directions, hence the same gradient direction). The angle is *measured* from ``f`` and ``f'``
    (``atan2`` of the components of ``f'`` across and along ``f``), not from the formula. Columns:
    ``norm``, ``grad_norm``, ``dtheta`` (radians), ``tan_dtheta``, ``pred_tan`` = ``lr ||g|| / ||f||``
    (fact 4), ``norm_after``, plus ``loss``, ``seed``, ``scale``, ``sample``, ``label``.
    At fixed direction ``tan Δθ ∝ 1/||f||^2``: slope -2 on log-log (:func:`fixed_direction_slopes`
    with ``y="tan_dtheta"``).
    """
    lr = _check_pos("lr", lr)
    per_class = _default_per_class(loss_name) if per_class is None else per_class
    scales = _check_scales(scales)
    loss_fn = _make_loss(loss_name, loss_kwargs)
    f0, labels = make_batch(n_classes, per_class, dim, seed, norm_range, device, dtype)
    rows = []
    for c in sorted(set(scales) | {1.0}):
        f = f0 * c
        _, g = _grad(loss_fn, f, labels)
        with torch.no_grad():
            f2 = f - lr * g
            norm = f.norm(dim=1)
            fhat = f / norm[:, None]
            along = (f2 * fhat).sum(dim=1)
            across = (f2 - along[:, None] * fhat).norm(dim=1)
            dth = torch.atan2(across, along)
            gn = g.norm(dim=1)
        for i in range(f.shape[0]):
            rows.append(dict(loss=loss_name, seed=int(seed), scale=c, sample=i, label=int(labels[i]),
                             norm=float(norm[i]), grad_norm=float(gn[i]), dtheta=float(dth[i]),
                             tan_dtheta=float(torch.tan(dth[i])), pred_tan=float(lr * gn[i] / norm[i]),
                             norm_after=float(f2[i].norm())))
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------
# the 2-D toy
# ----------------------------------------------------------------------------------------------

@dataclass
class Toy2D:
    """A recorded run of :func:`simulate_2d`.

    ``positions``, ``metric_grads``, ``sec_grads``: arrays (steps + 1, N, dim) -- the state after
    each number of updates and the gradients at that state (``sec_grads`` is zero without SEC);
    ``labels`` (N,); ``loss_values`` and ``mu`` (steps + 1,).
    """
    loss: str
    sec: bool
    eta: float
    lr: float
    seed: int
    labels: np.ndarray
    positions: np.ndarray
    metric_grads: np.ndarray
    sec_grads: np.ndarray
    loss_values: np.ndarray
    mu: np.ndarray
    meta: dict = field(default_factory=dict)

    @property
    def steps(self) -> int:
        return self.positions.shape[0] - 1

    @property
    def name(self) -> str:
        return f"with SEC (η={self.eta:g})" if self.sec else "no SEC"

    def norms(self) -> np.ndarray:
        """(steps + 1, N) norms."""
        return np.linalg.norm(self.positions, axis=2)

    def norm_var(self) -> np.ndarray:
        """(steps + 1,) variance of the norms at each step (the paper's statistic)."""
        return self.norms().var(axis=1)

    def turn_angles(self) -> np.ndarray:
        """(steps, N) angle each point turned in each step (radians)."""
        a, b = self.positions[:-1], self.positions[1:]
        cos = (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
        return np.arccos(np.clip(cos, -1.0, 1.0))

    def frame(self) -> pd.DataFrame:
        """Tidy per (step, sample): coordinates, norm, metric-gradient and SEC-gradient norms."""
        t, n, d = self.positions.shape
        out = dict(variant="sec" if self.sec else "none", step=np.repeat(np.arange(t), n),
                   sample=np.tile(np.arange(n), t), label=np.tile(self.labels, t))
        for k in range(d):
            out["xyz"[k] if d <= 3 else f"x{k}"] = self.positions[:, :, k].ravel()
        out["norm"] = self.norms().ravel()
        out["metric_grad_norm"] = np.linalg.norm(self.metric_grads, axis=2).ravel()
        out["sec_grad_norm"] = np.linalg.norm(self.sec_grads, axis=2).ravel()
        out["mu"] = np.repeat(self.mu, n)
        return pd.DataFrame(out)


@_small_work
def simulate_2d(sec: bool = False, eta: float = 1.0, steps: int = 100, lr: float = 1.0, seed: int = 0,
                loss_name: str = "triplet", n_classes: int = 3, per_class: int | None = None, dim: int = 2,
                norm_range: tuple[float, float] = (0.3, 3.0), mu: str | float = "batch", device: str = "cpu",
                dtype: torch.dtype = torch.float64, loss_kwargs: Mapping | None = None) -> Toy2D:
    """Train a few 2-D (or 3-D) points directly with a normalized loss, with or without SEC.

    Points start at random angles with unequal, log-uniform norms in ``norm_range`` (same start for
    the same ``seed`` whatever ``sec`` is) and follow plain SGD on ``L_metric (+ eta * L_sec)``.
    Records positions and both gradients at every step (see :class:`Toy2D`). ``per_class`` defaults
    to the loss's K (``LOSS_SPECS[loss_name].k``; e.g. N-pair uses only two samples per class).

    With SEC the radial step of a point is ``lr * eta * (2/N) * (||f|| - mu)``; it overshoots ``mu``
    when ``lr * eta * 2/N > 1`` and diverges beyond 2 (a warning is issued).
    """
    import warnings

    from .sec import SphericalEmbeddingConstraint

    per_class = _default_per_class(loss_name) if per_class is None else per_class

    steps = _check_int("steps", steps, 1)
    lr = _check_pos("lr", lr)
    eta = _check_pos("eta", eta, allow_zero=True)
    if dim not in (2, 3):
        raise ValueError(f"dim = {dim!r} is not valid; valid values: 2, 3")
    loss_fn = _make_loss(loss_name, loss_kwargs)
    f, labels = make_batch(n_classes, per_class, dim, seed, norm_range, device, dtype)
    constraint = SphericalEmbeddingConstraint(eta=eta, mu=mu) if (sec and eta > 0) else None
    if constraint is not None and lr * eta * 2.0 / f.shape[0] > 1.0:
        warnings.warn(f"simulate_2d: lr * eta * 2/N = {lr * eta * 2.0 / f.shape[0]:.3g} > 1, so SEC's radial step "
                      "overshoots mu (and diverges beyond 2); lower lr or eta", RuntimeWarning, stacklevel=2)
    pos, gms, gss, vals, mus = [], [], [], [], []
    for t in range(steps + 1):
        lm, gm, gs = split_gradients(loss_fn, constraint, f, labels)
        mus.append(constraint.last_mu if constraint is not None else float(f.norm(dim=1).mean()))
        pos.append(f.detach().cpu().numpy().copy())
        gms.append(gm.cpu().numpy())
        gss.append(gs.cpu().numpy())
        vals.append(float(lm.detach()))
        if t < steps:
            with torch.no_grad():
                f = f - lr * (gm + gs)
    return Toy2D(loss=loss_name, sec=bool(sec and eta > 0), eta=eta if sec else 0.0, lr=lr, seed=int(seed),
                 labels=labels.cpu().numpy(), positions=np.stack(pos), metric_grads=np.stack(gms),
                 sec_grads=np.stack(gss), loss_values=np.array(vals), mu=np.array(mus),
                 meta=dict(n_classes=n_classes, per_class=per_class, dim=dim, norm_range=tuple(norm_range), mu=mu))


def toy_2d(eta: float = 1.0, steps: int = 100, lr: float = 1.0, seed: int = 0, **kw) -> dict[str, Toy2D]:
    """The same 2-D toy trained without and with SEC: ``{"none": Toy2D, "sec": Toy2D}``."""
    return {"none": simulate_2d(False, eta, steps, lr, seed, **kw),
            "sec": simulate_2d(True, eta, steps, lr, seed, **kw)}


def active_steps(toys: Mapping[str, Toy2D] | Sequence[Toy2D], frac: float = 0.01) -> int:
    """The last step at which some point of some toy still moves by more than ``frac`` of the largest
    single-step move (after it the pictures hardly change); at least 1."""
    toys = list(toys.values()) if isinstance(toys, Mapping) else list(toys)
    last = 1
    for t in toys:
        moves = np.linalg.norm(np.diff(t.positions, axis=0), axis=2).max(axis=1)  # (steps,)
        if moves.size and moves.max() > 0:
            idx = np.nonzero(moves > frac * moves.max())[0]
            last = max(last, int(idx[-1]) + 1)
    return last


def frame_steps(steps: int, n_frames: int, active: int | None = None) -> list[int]:
    """``n_frames`` distinct step indices from 0 to ``steps``.

    With ``active`` (e.g. :func:`active_steps`), all but the last frame fall in ``0..active`` (where
    the motion is) and the last frame is ``steps``; steps are denser at the start either way.
    """
    steps = _check_int("steps", steps, 1)
    n_frames = _check_int("n_frames", n_frames, 2)
    if active is None or active >= steps:
        raw = np.round(steps * (np.linspace(0, 1, n_frames) ** 1.5)).astype(int)
    else:
        active = _check_int("active", active, 1)
        head = np.round(active * (np.linspace(0, 1, n_frames - 1) ** 1.5)).astype(int)
        raw = np.append(head, steps)
    return [int(s) for s in np.unique(raw)]


# ----------------------------------------------------------------------------------------------
# figures (matplotlib Figures built without pyplot)
# ----------------------------------------------------------------------------------------------

def _figure(w: float, h: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), layout="constrained")


def _class_colors(labels) -> list:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return [cmap(int(c) % 10) for c in labels]


def plot_perpendicularity(df: pd.DataFrame):
    """Left: angle between ``dL/df`` and ``f`` per sample (90°). Right: ``|cos|`` on a log axis vs machine eps."""
    d = df.dropna(subset=["cos_grad_f"])
    fig = _figure(9, 3.4)
    a1, a2 = fig.subplots(1, 2)
    a1.scatter(d["norm"], d["angle_deg"], s=14, c=_class_colors(d["label"]))
    a1.set_xscale("log")
    a1.set_ylim(0, 180)
    a1.axhline(90, color="k", lw=0.8, ls="--")
    a1.set_yticks([0, 45, 90, 135, 180])
    a1.set_xlabel("‖f‖")
    a1.set_ylabel("angle(∂L/∂f, f)  [degrees]")
    a1.set_title("gradient ⊥ embedding (Prop. 1)")
    eps = np.finfo(np.float64).eps
    y = d["cos_grad_f"].abs().clip(lower=eps / 100)
    a2.scatter(d["norm"], y, s=14, c=_class_colors(d["label"]))
    a2.axhline(eps, color="k", lw=0.8, ls="--", label="float64 eps")
    a2.set_xscale("log")
    a2.set_yscale("log")
    a2.set_ylim(eps / 200, 1)
    a2.set_xlabel("‖f‖")
    a2.set_ylabel("|cos(∂L/∂f, f)|")
    a2.set_title(f"max |cos| = {d['cos_grad_f'].abs().max():.1e}")
    a2.legend(loc="upper right", fontsize=8)
    fig.suptitle(f"{df['loss'].iloc[0]} loss, {d['sample'].nunique()} samples × {d['scale'].nunique()} scales",
                 fontsize=10)
    return fig


def plot_grad_vs_norm(df: pd.DataFrame, max_lines: int = 8):
    """Log-log ‖∂L/∂f‖ against ‖f‖: the random batch (one fit across samples) and fixed-direction lines."""
    fig = _figure(6.4, 4.4)
    ax = fig.subplots()
    base = df[(df["scale"] == 1.0) & (df["grad_norm"] > 0)]
    rs, rr2 = loglog_slope(base["norm"], base["grad_norm"])
    fixed = fixed_direction_slopes(df)
    shown = list(base["sample"].unique()[:max_lines])
    for i, s in enumerate(shown):
        g = df[(df["sample"] == s) & (df["grad_norm"] > 0)].sort_values("norm")
        ax.plot(g["norm"], g["grad_norm"], "-", color="0.6", lw=1, alpha=0.8,
                label=(f"same direction, rescaled: slope {fixed['slope'].mean():.4f} "
                       f"(range {fixed['slope'].min():.4f}…{fixed['slope'].max():.4f})") if i == 0 else None)
    ax.scatter(base["norm"], base["grad_norm"], s=22, c=_class_colors(base["label"]), zorder=3,
               label=f"random directions, one batch: slope {rs:.2f}, R² {rr2:.2f}")
    if np.isfinite(rs):
        xs = np.geomspace(base["norm"].min(), base["norm"].max(), 20)
        icpt = np.mean(np.log(base["grad_norm"]) - rs * np.log(base["norm"]))
        ax.plot(xs, np.exp(icpt) * xs ** rs, "k--", lw=1, label="fit across samples")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("‖f‖")
    ax.set_ylabel("‖∂L/∂f‖")
    ax.set_title(f"{df['loss'].iloc[0]}: gradient magnitude ∝ 1/‖f‖ (Prop. 2)", fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    return fig


def plot_slope_spread(spread: pd.DataFrame):
    """Distribution over seeds of the across-sample slope (noisy) vs the fixed-direction slope (-1)."""
    fig = _figure(8.0, 3.2)
    ax = fig.subplots()
    ax.hist(spread["random_slope"].dropna(), bins=max(5, min(30, len(spread) // 2)), color="tab:blue", alpha=0.7,
            label=f"across samples (random directions), {len(spread)} batches")
    ax.axvline(spread["fixed_slope_mean"].mean(), color="k", lw=2,
               label=f"fixed direction: {spread['fixed_slope_mean'].mean():.4f}")
    ax.axvline(-1, color="tab:red", ls="--", lw=1, label="theory −1")
    ax.set_xlabel("log-log slope of ‖∂L/∂f‖ on ‖f‖")
    ax.set_ylabel("batches")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def plot_norm_growth(growth: pd.DataFrame):
    """Per-sample norms over plain SGD steps, one panel per variant (no SEC, SEC), coloured by initial norm."""
    import matplotlib
    from matplotlib.colors import LogNorm

    variants = list(dict.fromkeys(growth["variant"]))
    fig = _figure(4.2 * len(variants) + 1.2, 3.7)
    axes = np.atleast_1d(fig.subplots(1, len(variants), sharey=True))
    first_all = growth[growth["step"] == 0]["norm"]
    cnorm = LogNorm(first_all.min(), first_all.max())
    cmap = matplotlib.colormaps["viridis"]
    for ax, v in zip(axes, variants):
        g = growth[growth["variant"] == v]
        for s, gs in g.groupby("sample"):
            ax.plot(gs["step"], gs["norm"], lw=1, color=cmap(cnorm(gs["norm"].iloc[0])), alpha=0.9)
        last = g[g["step"] == g["step"].max()]["norm"]
        first = g[g["step"] == 0]["norm"]
        eta = g["eta"].iloc[0]
        if v == "sec":
            mu = g.groupby("step")["mu"].first()
            ax.plot(mu.index, mu.values, "k--", lw=1.2, label="μ (batch mean norm)")
            ax.legend(fontsize=8, loc="upper right")
        ax.set_yscale("log")
        ax.set_title(f"{'no SEC' if v == 'none' else f'SEC η={eta:g}'}: var(‖f‖) {first.var(ddof=0):.3f} → "
                     f"{last.var(ddof=0):.3f}", fontsize=9)
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(0, g["step"].max())
        ax.set_xlabel("SGD step on the embeddings (symlog)")
    axes[0].set_ylabel("‖f_i‖")
    sm = matplotlib.cm.ScalarMappable(norm=cnorm, cmap=cmap)
    fig.colorbar(sm, ax=list(axes), label="initial ‖f_i‖", shrink=0.9)
    fig.suptitle(f"{growth['loss'].iloc[0]} loss, plain SGD on free embeddings", fontsize=10)
    return fig


def plot_angle_change(df: pd.DataFrame, max_lines: int = 8):
    """Log-log tan Δθ of one SGD step against ‖f‖, fixed-direction lines (slope −2) and the random batch."""
    fig = _figure(6.4, 4.4)
    ax = fig.subplots()
    d = df[df["tan_dtheta"] > 0]
    base = d[d["scale"] == 1.0]
    rs, rr2 = loglog_slope(base["norm"], base["tan_dtheta"])
    fixed = fixed_direction_slopes(d, "tan_dtheta")
    for i, s in enumerate(base["sample"].unique()[:max_lines]):
        g = d[d["sample"] == s].sort_values("norm")
        ax.plot(g["norm"], g["tan_dtheta"], "-", color="0.6", lw=1,
                label=(f"same direction, rescaled: slope {fixed['slope'].mean():.4f}") if i == 0 else None)
    ax.scatter(base["norm"], base["tan_dtheta"], s=22, c=_class_colors(base["label"]), zorder=3,
               label=f"random directions, one batch: slope {rs:.2f}, R² {rr2:.2f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("‖f‖")
    ax.set_ylabel("tan Δθ of one SGD step")
    ax.set_title(f"{df['loss'].iloc[0]}: small norms turn fast, tan Δθ ∝ 1/‖f‖²", fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    return fig


def _toy_limits(toys: Sequence[Toy2D]) -> float:
    return 1.08 * max(float(np.abs(t.positions).max()) for t in toys)


def _arrow_scale(toys: Sequence[Toy2D], lim: float) -> float:
    """One multiplier for all arrows so that the median step-0 arrow is ~20% of the axis half-width."""
    g = np.concatenate([np.linalg.norm(t.lr * t.metric_grads[0], axis=1) for t in toys])
    g = g[g > 0]
    return float(0.2 * lim / np.median(g)) if g.size else 1.0


def _draw_toy(ax, toy: Toy2D, step: int, lim: float, arrow_k: float, trail: int | None = None):
    pos = toy.positions[: step + 1]
    cols = _class_colors(toy.labels)
    th = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.cos(th), np.sin(th), color="0.75", lw=0.8, ls=":")
    r = toy.norms()[step].mean() if not toy.sec else toy.mu[step]
    ax.plot(r * np.cos(th), r * np.sin(th), color="0.35", lw=1, ls="--")
    start = 0 if trail is None else max(0, step - trail)
    for i in range(pos.shape[1]):
        ax.plot(pos[start:, i, 0], pos[start:, i, 1], "-", color=cols[i], lw=1, alpha=0.6)
    p = pos[-1]
    ax.scatter(p[:, 0], p[:, 1], s=30, c=cols, edgecolors="k", linewidths=0.5, zorder=4)
    gm = -toy.lr * toy.metric_grads[step] * arrow_k
    ax.quiver(p[:, 0], p[:, 1], gm[:, 0], gm[:, 1], angles="xy", scale_units="xy", scale=1, color="k",
              width=0.006, zorder=5)
    if toy.sec:
        gs = -toy.lr * toy.sec_grads[step] * arrow_k
        ax.quiver(p[:, 0], p[:, 1], gs[:, 0], gs[:, 1], angles="xy", scale_units="xy", scale=1, color="tab:red",
                  width=0.006, zorder=5)
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.tick_params(labelsize=7)
    n = toy.norms()[step]
    turn = np.degrees(toy.turn_angles()[min(step, toy.steps - 1)])
    small, big = int(np.argmin(n)), int(np.argmax(n))
    ax.set_title(f"{toy.name}, step {step}\nnorms {n.min():.2f}…{n.max():.2f}, var {n.var():.3f}\n"
                 f"next turn: smallest ‖f‖ {turn[small]:.2g}°, largest ‖f‖ {turn[big]:.2g}°", fontsize=8)


def plot_toy(toys: Mapping[str, Toy2D] | Sequence[Toy2D]):
    """The 2-D toy side by side (no SEC | SEC): full trajectories, plus norm variance and loss per step."""
    toys = list(toys.values()) if isinstance(toys, Mapping) else list(toys)
    fig = _figure(3.9 * len(toys) + 3.6, 4.2)
    gs = fig.add_gridspec(2, len(toys) + 1, width_ratios=[1] * len(toys) + [0.9])
    lim = _toy_limits(toys)
    k = _arrow_scale(toys, lim)
    for j, t in enumerate(toys):
        _draw_toy(fig.add_subplot(gs[:, j]), t, t.steps, lim, k)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:purple"]
    av = fig.add_subplot(gs[0, -1])
    al = fig.add_subplot(gs[1, -1], sharex=av)
    for t, c in zip(toys, colors):
        av.plot(np.arange(t.steps + 1), t.norm_var(), color=c, label=t.name)
        al.plot(np.arange(t.steps + 1), t.loss_values, color=c, label=t.name)
    av.set_yscale("symlog", linthresh=1e-3)
    av.set_ylabel("var(‖f‖)", fontsize=8)
    al.set_ylabel("metric loss", fontsize=8)
    al.set_xlabel("step")
    av.legend(fontsize=7)
    for a in (av, al):
        a.tick_params(labelsize=7)
    fig.suptitle(f"{toys[0].loss} loss on free 2-D points (arrows: −lr·∂L/∂f ×{k:.3g}; red: SEC's radial pull; "
                 "dotted: unit circle; dashed: mean norm / μ)", fontsize=9)
    return fig


def toy_frames(toys: Mapping[str, Toy2D] | Sequence[Toy2D], steps: Sequence[int], trail: int | None = None) -> list:
    """One Figure per selected step, the toys side by side: points, their recent path, the unit circle
    (dotted), the mean-norm / μ circle (dashed), and arrows for the negative metric gradient (black,
    tangential) and SEC's pull (red, radial), all with one common arrow scale."""
    toys = list(toys.values()) if isinstance(toys, Mapping) else list(toys)
    steps = [int(s) for s in steps]
    for s in steps:
        if not all(0 <= s <= t.steps for t in toys):
            raise ValueError(f"steps: {s} is not valid; valid steps are 0..{min(t.steps for t in toys)}")
    lim = _toy_limits(toys)
    k = _arrow_scale(toys, lim)
    figs = []
    for s in steps:
        fig = _figure(3.6 * len(toys), 4.1)
        axes = np.atleast_1d(fig.subplots(1, len(toys)))
        for ax, t in zip(axes, toys):
            _draw_toy(ax, t, s, lim, k, trail=trail)
        fig.suptitle(f"arrows: −lr·∂L/∂f × {k:.3g} (black), SEC pull (red)", fontsize=8)
        figs.append(fig)
    return figs


def toy_animation(toys: Mapping[str, Toy2D] | Sequence[Toy2D], n_frames: int = 12, dpi: int = 72,
                  trail: int | None = None):
    """A kernel-free slider over training steps (:func:`sec_lib.widgets.slider_stack` of :func:`toy_frames`)."""
    from . import widgets

    toys_l = list(toys.values()) if isinstance(toys, Mapping) else list(toys)
    steps = frame_steps(min(t.steps for t in toys_l), n_frames, active=active_steps(toys_l))
    figs = toy_frames(toys_l, steps, trail=trail)
    return widgets.slider_stack(figs, [f"step {s}" for s in steps], description="training step", dpi=dpi)


# ----------------------------------------------------------------------------------------------
# numbers for the verdict
# ----------------------------------------------------------------------------------------------

def summary(facts: pd.DataFrame, growth: pd.DataFrame, angles: pd.DataFrame,
            toys: Mapping[str, Toy2D]) -> dict:
    """The measured numbers the chapter's closing verdict states (all computed, none typed)."""
    gs = slope_summary(facts)
    an = slope_summary(angles, "tan_dtheta")
    none = growth[growth["variant"] == "none"].sort_values(["sample", "step"])
    dn = none.groupby("sample")["norm"].diff().dropna()
    out = dict(
        max_abs_cos=gs["max_abs_cos"],
        grad_slope_fixed=gs["fixed_slope_mean"], grad_slope_fixed_min=gs["fixed_slope_min"],
        grad_slope_fixed_max=gs["fixed_slope_max"],
        grad_slope_random=gs["random_slope"], grad_r2_random=gs["random_r2"],
        prop2_ratio_maxdev=float((facts["prop2_ratio"] - 1).abs().max()),
        sgd_min_norm_increment=float(dn.min()) if len(dn) else float("nan"),
        sgd_identity_max_rel_err=float(none["identity_rel_err"].max()),
        dtheta_slope_fixed=an["fixed_slope_mean"], dtheta_slope_random=an["random_slope"],
        dtheta_r2_random=an["random_r2"],
    )
    for v in ("none", "sec"):
        g = growth[growth["variant"] == v]
        if len(g):
            last = g[g["step"] == g["step"].max()]["norm"]
            out[f"sgd_norm_var_end_{v}"] = float(last.var(ddof=0))
            out[f"sgd_norm_mean_end_{v}"] = float(last.mean())
    out["sgd_norm_var_start"] = float(growth[growth["step"] == 0]["norm"].var(ddof=0)
                                      if "none" not in set(growth["variant"])
                                      else none[none["step"] == 0]["norm"].var(ddof=0))
    for key, t in toys.items():
        out[f"toy_norm_var_start_{key}"] = float(t.norm_var()[0])
        out[f"toy_norm_var_end_{key}"] = float(t.norm_var()[-1])
        out[f"toy_norm_var_mean_{key}"] = float(t.norm_var().mean())
        out[f"toy_loss_end_{key}"] = float(t.loss_values[-1])
        out[f"toy_steps_{key}"] = int(t.steps)
    return out


def verdict_lines(s: Mapping, tol: float = 1e-3, cos_tol: float = 1e-5) -> list[tuple[bool, str]]:
    """Sentences stating the measured numbers of :func:`summary` and whether each fact held.

    Returns ``[(held, sentence), ...]``; every number in a sentence comes from ``s``.
    ``tol`` bounds the deviation of the fixed-direction slopes from -1 and -2; ``cos_tol`` bounds
    ``|cos(grad, f)|``.
    """
    out = []
    ok = s["max_abs_cos"] < cos_tol
    out.append((ok, f"Perpendicular gradient (Prop. 1): max |cos(∂L/∂f, f)| = {s['max_abs_cos']:.1e}, "
                    f"{'below' if ok else 'NOT below'} {cos_tol:g}."))
    dev = abs(s["grad_slope_fixed"] + 1)
    ok = dev < tol
    out.append((ok, f"‖∂L/∂f‖ ∝ 1/‖f‖ (Prop. 2): at fixed directions the log-log slope is "
                    f"{s['grad_slope_fixed']:.6f}, {'within' if ok else 'NOT within'} {tol:g} of −1; across "
                    f"samples with random directions it is {s['grad_slope_random']:.2f} (R² "
                    f"{s['grad_r2_random']:.2f}), because the gradient on the unit sphere differs from sample "
                    f"to sample."))
    inc, err = s["sgd_min_norm_increment"], s["sgd_identity_max_rel_err"]
    ok = inc >= -1e-12 and err < 1e-9
    out.append((ok, f"Plain SGD on the embeddings: the smallest per-step change of a norm is {inc:.2e} "
                    f"({'never negative' if inc >= -1e-12 else 'NEGATIVE: a norm shrank'}), and "
                    f"‖f′‖² = ‖f‖² + α²‖g‖² holds to a relative error of {err:.1e}."))
    dev = abs(s["dtheta_slope_fixed"] + 2)
    ok = dev < tol
    out.append((ok, f"Angle per step: at fixed directions tan Δθ has log-log slope {s['dtheta_slope_fixed']:.6f} "
                    f"against ‖f‖, {'within' if ok else 'NOT within'} {tol:g} of −2 (random batch: "
                    f"{s['dtheta_slope_random']:.2f}, R² {s['dtheta_r2_random']:.2f})."))
    if "toy_norm_var_end_none" in s and "toy_norm_var_end_sec" in s:
        vn, vs = s["toy_norm_var_end_none"], s["toy_norm_var_end_sec"]
        ok = vs < vn
        out.append((ok, f"2-D toy after {s['toy_steps_none']} steps: norm variance {vn:.3g} without SEC vs "
                        f"{vs:.3g} with SEC ({'lower' if ok else 'NOT lower'} with SEC); final metric loss "
                        f"{s['toy_loss_end_none']:.3g} without vs {s['toy_loss_end_sec']:.3g} with SEC."))
    return out
