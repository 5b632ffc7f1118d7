"""The measures of a batch, one function per quantity, as plain formulas on tensors.

Every function takes the *raw* embeddings ``f`` (B, D) of one batch, before any l2-normalisation, or quantities
derived from them, and returns tensors on the batch's device (no host sync) unless it says otherwise. The formulas:

* norms ``n_i = ||f_i||``; mean, variance ``(1/B) sum (n_i - mean)^2`` and coefficient of variation
  ``CV = sd / mean`` (population sd, ddof 0): :func:`norm_summary`, :func:`cv`;
* the gradient law of a loss on normalized embeddings (Proposition 2 of the SEC paper): the least-squares slope of
  ``ln ||dL/df_i||`` on ``ln ||f_i||`` over the batch, with its Student-t interval (:func:`slope_interval`, on the
  host, in float64); at fixed directions the law gives exactly -1;
* the angle each sample's embedding turned in one update, ``dtheta_i = arccos cos(f_i, f_i')`` with ``f_i'`` the
  same sample re-embedded after the step (:func:`angle_change`), and its balance across norms: mean, sd, CV and
  the ratio of the mean angle of the high-norm samples to that of the low-norm ones (:func:`angle_balance`);
* with labels, the mean cosine of positive and of negative pairs and the fraction of violated triplets
  (:func:`pair_summary`).

These are the computations of the training loop's step table (``sec_lib.runs.train``), in the same torch
operations and order, so its columns keep their values to the bit.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats

from ..losses import violation_rate
from ..losses.base import sync_free
from ..report import loglog_fit

__all__ = ["cv", "norm_summary", "pair_summary", "slope_interval", "angle_change", "angle_balance"]


def cv(v: torch.Tensor) -> torch.Tensor:
    """Coefficient of variation ``sd / mean`` of ``v`` (population sd), NaN when the mean is not positive."""
    m = v.mean()
    return torch.where(m > 0, v.std(unbiased=False) / m, torch.full_like(m, math.nan))


def norm_summary(norms: torch.Tensor) -> dict[str, torch.Tensor]:
    """``norm_mean``, ``norm_var`` (ddof 0) and ``norm_cv`` of the per-sample norms ``||f_i||``."""
    return {"norm_mean": norms.mean(), "norm_var": norms.var(unbiased=False), "norm_cv": cv(norms)}


def pair_summary(raw: torch.Tensor, labels: torch.Tensor) -> dict:
    """``pos_cos`` and ``neg_cos``, the mean cosine of same-label (i != j) and of different-label pairs, and
    ``violations``, the fraction of triplets (a, p, n) with ``cos_an >= cos_ap`` (float64): tensors, no host read.
    Off the CPU the means are masked sums (a boolean index would read its count to the host); on the CPU the
    boolean index is kept, so the CPU columns keep their values to the bit."""
    fhat = F.normalize(raw, dim=1)
    cos = fhat @ fhat.T
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    pos, neg = same & ~eye, ~same
    if sync_free(cos):
        pos_cos, neg_cos = (cos * pos).sum() / pos.sum(), (cos * neg).sum() / neg.sum()
    else:
        pos_cos, neg_cos = cos[pos].mean(), cos[neg].mean()
    return {"pos_cos": pos_cos, "neg_cos": neg_cos, "violations": violation_rate(raw, labels)}


def slope_interval(norms, grad_norms, level: float = 0.95) -> dict[str, float]:
    """Least-squares slope of ``ln grad_norms`` on ``ln norms`` with its ``level`` Student-t interval, and R².

    The fit is :func:`sec_lib.report.loglog_fit` (pairs with both values positive and finite, at least 3);
    the interval is ``slope +- t_{(1+level)/2, n-2} * se`` with ``se = sqrt(SSR / (n - 2) / Sxx)``, the usual
    standard error of a regression slope. NaN where the fit is undefined. Host arrays or CPU tensors, float64.
    """
    x = np.asarray(norms, dtype=float).ravel()
    y = np.asarray(grad_norms, dtype=float).ravel()
    fit = loglog_fit(x, y)
    out = {"grad_slope": fit.slope, "grad_slope_lo": math.nan, "grad_slope_hi": math.nan, "grad_r2": fit.r2}
    if math.isnan(fit.slope):
        return out
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    lx, ly = np.log(x[ok]), np.log(y[ok])
    n = lx.size
    if n > 2:
        cx = lx - lx.mean()
        resid = ly - fit.intercept - fit.slope * lx
        se = math.sqrt(float((resid ** 2).sum()) / (n - 2) / float((cx ** 2).sum()))
        half = float(stats.t.ppf((1 + level) / 2, n - 2)) * se
        out.update(grad_slope_lo=fit.slope - half, grad_slope_hi=fit.slope + half)
    return out


def angle_change(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """Per-sample angle (radians) between each row of ``before`` and the same row of ``after``."""
    cos = F.cosine_similarity(before, after, dim=1).clamp(-1, 1)
    return torch.arccos(cos)


def angle_balance(theta: torch.Tensor, norms: torch.Tensor, tail: float = 0.25) -> dict[str, torch.Tensor]:
    """Spread of the per-sample angle changes ``theta`` and their balance across the norms ``norms`` (before the step).

    ``dtheta_mean``, ``dtheta_std`` (ddof 0), ``dtheta_cv``, and ``dtheta_high_low``: the mean angle of the
    ``ceil(tail * B)`` samples of largest norm divided by that of the same number of smallest norm (below 1: the
    high-norm samples turned less). NaN when the low-norm samples did not turn at all.
    """
    k = max(1, math.ceil(tail * len(norms)))
    order = torch.argsort(norms)
    low, high = theta[order[:k]].mean(), theta[order[-k:]].mean()
    ratio = torch.where(low > 0, high / low, torch.full_like(low, math.nan))
    return {"dtheta_mean": theta.mean(), "dtheta_std": theta.std(unbiased=False), "dtheta_cv": cv(theta),
            "dtheta_high_low": ratio}
