"""The free-embedding lab behind the theory chapter: gradient facts of l2-normalized losses, measured with
autograd, and the 2-D toy (:class:`Toy2D`, :func:`simulate_2d`).

"Free embeddings": the embeddings themselves are the parameters, updated by ``f <- f - lr * dL/df``, which
isolates the geometry from any network. The theory page (:mod:`sec_lib.chapters.theory`) runs these and
states the facts; this module knows nothing of pages or profiles.
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from .losses import LOSS_SPECS, get_loss
from .params import Choice, Number, PositiveRange, PositiveSet
from .report import loglog_fit, loglog_fits
from .sec import SphericalEmbeddingConstraint
from .threads import torch_threads

#: Losses the lab can use: pair/triplet losses that work on a small P x K batch of free
#: embeddings without learnable parameters of their own.
THEORY_LOSSES = ("triplet", "semihard", "npair", "ms", "tml", "contrastive", "ntxent")

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


def small_work(fn):
    """Decorator: run ``fn`` under :func:`_torch_threads` (1 thread)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with torch_threads(1):
            return fn(*args, **kwargs)
    return wrapper


def _default_per_class(loss_name: str) -> int:
    """K of the paper's P x K batch for this loss (``LOSS_SPECS[name]['k']``), at least 2."""
    spec = LOSS_SPECS.get(loss_name) if isinstance(LOSS_SPECS, Mapping) else None
    k = spec.get("k") if isinstance(spec, Mapping) else getattr(spec, "k", None)
    return max(int(k), 2) if isinstance(k, (int, np.integer)) and k else 3


def make_toy_loss(loss_name: str, loss_kwargs: Mapping | None = None):
    Choice(THEORY_LOSSES).check("loss_name", loss_name)
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
    n_classes = Number(2, integer=True).check("n_classes", n_classes)
    per_class = Number(1, integer=True).check("per_class", per_class)
    dim = Number(2, integer=True).check("dim", dim)
    lo, hi = PositiveRange().check("norm_range", norm_range)
    gen = torch.Generator().manual_seed(int(seed))
    n = n_classes * per_class
    u = torch.randn(n, dim, generator=gen, dtype=torch.float64)
    u = u / u.norm(dim=1, keepdim=True)
    r = torch.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * torch.rand(n, generator=gen, dtype=torch.float64))
    f = (u * r[:, None]).to(device=device, dtype=dtype)
    labels = torch.arange(n_classes).repeat_interleave(per_class).to(device)
    return f, labels


@small_work
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
    scales = PositiveSet(2).check("scales", scales)
    loss_fn = make_toy_loss(loss_name, loss_kwargs)
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


def fixed_direction_slopes(df: pd.DataFrame, y: str = "grad_norm") -> pd.DataFrame:
    """Per-sample log-log slope of ``y`` against ``norm`` across the scales (fixed direction).

    Works on the frames of :func:`gradient_facts` (``y="grad_norm"``, theory: -1) and
    :func:`angle_change` (``y="tan_dtheta"``, theory: -2).
    """
    fits = loglog_fits(df, "norm", y, ["seed", "sample"], min_points=2)
    labels = df.groupby(["seed", "sample"], sort=True)["label"].first().astype(int).rename("label").reset_index()
    return fits.merge(labels, on=["seed", "sample"], how="left")[["seed", "sample", "label", "slope", "r2"]]


def slope_summary(df: pd.DataFrame, y: str = "grad_norm") -> dict:
    """The two honest slopes of a gradient-facts (or angle-change) frame.

    - ``random_slope``/``random_r2``: one fit across the samples of the unscaled batch (``scale == 1``):
      different directions, different norms, so the points scatter around the line;
    - ``fixed_slope_mean``/``fixed_slope_maxdev``: per-sample fits across scales (same direction),
      their mean and the largest deviation from that mean;
    - ``max_abs_cos``: the largest ``|cos(grad, f)|`` (when the frame has it).
    """
    base = df[df["scale"] == 1.0]
    rs, _, rr2 = loglog_fit(base["norm"], base[y], min_points=2)
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


@small_work
def eq1_check(dim: int = 8, n_pairs: int = 50, seed: int = 0, dtype: torch.dtype = torch.float64) -> pd.DataFrame:
    """Eq. (1) of the paper against autograd, for random pairs ``(f_i, f_j)``.

    Eq. (1): ``d cos θ_ij / d f_i = (1/||f_i||) (f_hat_j - cos θ_ij f_hat_i)``. Returns one row per
    pair with ``norm_i``, ``cos``, ``max_abs_diff`` (formula vs autograd) and ``grad_norm``.
    """
    dim = Number(2, integer=True).check("dim", dim)
    n_pairs = Number(1, integer=True).check("n_pairs", n_pairs)
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


@small_work
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
    steps = Number(1, integer=True).check("steps", steps)
    lr = Number(0, open_lo=True).check("lr", lr)
    etas = list(dict.fromkeys(Number(0).check("eta", e) for e in etas))
    if not etas:
        raise ValueError("etas must list at least one value (0 = no SEC)")
    per_class = _default_per_class(loss_name) if per_class is None else per_class
    loss_fn = make_toy_loss(loss_name, loss_kwargs)
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


@small_work
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
    lr = Number(0, open_lo=True).check("lr", lr)
    per_class = _default_per_class(loss_name) if per_class is None else per_class
    scales = PositiveSet(2).check("scales", scales)
    loss_fn = make_toy_loss(loss_name, loss_kwargs)
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


@small_work
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
    per_class = _default_per_class(loss_name) if per_class is None else per_class

    steps = Number(1, integer=True).check("steps", steps)
    lr = Number(0, open_lo=True).check("lr", lr)
    eta = Number(0).check("eta", eta)
    if dim not in (2, 3):
        raise ValueError(f"dim = {dim!r} is not valid; valid values: 2, 3")
    loss_fn = make_toy_loss(loss_name, loss_kwargs)
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
