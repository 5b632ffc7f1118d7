"""The spherical embedding constraint (SEC).

Follows Zhang, Li & Zhang, "Deep Metric Learning with Spherical Embedding", NeurIPS 2020
(arXiv 2011.02785), Sec. 3, and the training loop of the authors' code (Dyfine/SphericalEmbedding,
``learner.py``)::

    L_sec = (1/N) sum_i (||f_i|| - mu)^2,      total loss = L_metric + eta * L_sec

where ``f_i`` is the raw (un-normalized) embedding and ``mu`` is a detached estimate of the
typical norm. Because ``mu`` is detached,

    dL_sec/df_i = (2/N) (||f_i|| - mu) * f_i / ||f_i||,

a purely radial force that pulls every norm toward ``mu`` and never turns a direction.

Two entry points share one computation (:meth:`SphericalEmbeddingConstraint.per_sample`):

* :class:`SphericalEmbeddingConstraint` -- a plain ``nn.Module``: ``sec(f) -> scalar``.
* :class:`SECRegularizer` -- the same constraint as a pytorch-metric-learning embedding
  regularizer, e.g. ``TripletMarginLoss(embedding_regularizer=SECRegularizer(eta=1.0))``.

**Two mechanisms in one penalty.** Multiply every embedding by ``s > 0`` (for a network: scale its
last linear layer). With ``mu`` the detached batch mean of the current norms ``n_i = ||s f_i||``, the
derivative of SEC along that direction is ::

    sum_i <dL_sec/df_i, f_i> = (2 eta / N) sum_i (n_i - mu) n_i / s = 2 eta Var(n) / s  > 0,

(``Var`` the population variance of the current norms), so gradient descent shrinks the scale as well as
equalizing the norms: it lowers ``sum_i (n_i - mu)^2`` most cheaply by scaling everything down, like the
L2 baseline ``mu = 0``. ``relative=True`` keeps only the first mechanism: it penalizes the squared coefficient
of variation of the norms, ::

    L_rel = Var(n) / mean(n)^2 = (1/N) sum_i (n_i / mu - 1)^2,     mu = mean_j n_j  NOT detached,

which is homogeneous of degree 0 in ``f``; by Euler's theorem its gradient has no component along a rescaling
(``sum_i <dL_rel/df_i, f_i> = 0``). Its gradient is still radial::

    dL_rel/df_i = (2 / (N mu^2)) (n_i - mu (1 + CV^2)) f_i / n_i,       CV^2 = Var(n) / mu^2,

i.e. plain SEC with weight ``1/mu^2`` and a target ``(1 + CV^2) mu`` just above the mean, which is exactly
what cancels the contraction. With ``mu`` detached the same expression would still contract the scale, at
``2 eta CV^2 / s``.

:func:`center_invariant_penalty` is pytorch-metric-learning's ``CenterInvariantRegularizer`` (2.9.0) as a
function, for comparison: it penalizes the spread of the *squared* norms and equals ``mu^2`` times SEC to
leading order (exactly ``mu^2 Var + mu m3 + (m4 - Var^2)/4`` with ``m3``, ``m4`` the central moments of the
norms).
"""
from __future__ import annotations

import math

import torch
from pytorch_metric_learning.regularizers import BaseRegularizer
from pytorch_metric_learning.utils import common_functions as c_f
from torch import nn

from .losses.base import sync_free

__all__ = ["SphericalEmbeddingConstraint", "SECRegularizer", "MU_MODES", "center_invariant_penalty",
           "CenterInvariantPenalty"]

#: String choices for ``mu``; a positive float is also accepted (a fixed target radius).
MU_MODES = ("batch", "ema", "zero")
_MU_CHOICES = "'batch', 'ema', 'zero' or a positive finite float (fixed radius)"
_RELATIVE_CHOICES = ("relative=True needs mu='batch' (the live batch mean norm, the scale it is relative to); "
                     "for mu='ema', 'zero' or a fixed radius use relative=False")


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _validate(eta, mu, momentum, relative=False) -> str:
    """Check the constructor arguments; return the mu mode ('batch'|'ema'|'zero'|'fixed')."""
    if not isinstance(relative, bool):
        raise ValueError(f"relative must be True or False; got relative={relative!r}")
    if not _is_number(eta) or not math.isfinite(eta) or eta < 0:
        raise ValueError(f"eta must be a finite number >= 0 (0 switches SEC off); got eta={eta!r}")
    if not _is_number(momentum) or not (0 < momentum <= 1):
        raise ValueError(f"momentum must be a number in (0, 1] (1 = plain batch mean); got momentum={momentum!r}")
    if isinstance(mu, str):
        if mu not in MU_MODES:
            raise ValueError(f"mu must be one of {_MU_CHOICES}; got mu={mu!r}")
        mode = mu
    elif _is_number(mu) and math.isfinite(mu) and mu > 0:
        mode = "fixed"
    else:
        raise ValueError(f"mu must be one of {_MU_CHOICES}; got mu={mu!r}")
    if mode != "ema" and momentum != 1:
        raise ValueError(
            f"momentum={momentum!r} only applies to mu='ema' (a running mean of the batch mean norm); "
            f"with mu={mu!r} momentum must be 1.0. Valid mu choices: {_MU_CHOICES}"
        )
    if relative and mode != "batch":
        # 'zero' divides by 0; a fixed radius c gives (n - c)^2 / c^2, plain SEC with eta / c^2 (not scale-free);
        # 'ema' lags the current batch, so the penalty is no longer homogeneous of degree 0.
        raise ValueError(f"{_RELATIVE_CHOICES}; got relative=True with mu={mu!r}")
    return mode


def _check_embeddings(f) -> None:
    if not isinstance(f, torch.Tensor):
        raise ValueError(f"embeddings must be a torch.Tensor of shape (B, D); got {type(f).__name__}")
    if f.ndim != 2 or f.shape[0] < 1 or f.shape[1] < 1:
        raise ValueError(f"embeddings must be a 2-D tensor (B, D) with B >= 1 and D >= 1; got shape {tuple(f.shape)}")
    if not f.is_floating_point():
        raise ValueError(f"embeddings must be a floating-point tensor; got dtype {f.dtype}")


class SphericalEmbeddingConstraint(nn.Module):
    """``eta * mean_i (||f_i|| - mu)^2`` on raw embeddings ``f`` of shape (B, D).

    Args:
        eta: weight of the constraint (>= 0).
        mu: the target norm, always detached from the graph:

            * ``"batch"`` (paper default): the mean norm of the current mini-batch.
            * ``"ema"``: a running mean ``mu_t = (1 - rho) mu_{t-1} + rho * mean_i ||f_i||``,
              initialised with the first batch mean (as in the authors' ``learner.py``). The current
              batch is folded in *before* the loss is computed. The running value lives in the
              registered buffers ``running_mu`` and ``initialized``, so it is saved in
              ``state_dict``. It is updated only in training mode (``module.train()``); in eval mode
              the stored value is used unchanged (or, before any training batch was seen, the batch
              mean). This keeps evaluation/monitoring passes from moving the target.
            * ``"zero"``: ``mu = 0``, i.e. ``eta * mean ||f_i||^2`` -- the paper's "L2-reg" baseline,
              which shrinks every norm.
            * a positive float: a fixed target radius.
        momentum: ``rho`` in (0, 1] for ``mu="ema"``; must be 1.0 for the other modes.
        relative: ``False`` (default, the paper's SEC) or ``True``: the scale-free variant
            ``eta * mean_i (||f_i|| / mu - 1)^2 = eta * Var(||f||) / mean(||f||)^2`` (the squared coefficient
            of variation of the batch's norms) with ``mu`` the batch mean norm, **not** detached. It equalizes
            the norms without pulling the scale down (module docstring: the plain penalty's derivative along
            ``f -> s f`` is ``2 eta Var/s``, this one's is 0; with ``mu`` detached it would be
            ``2 eta CV^2/s``). Only ``mu="batch"`` is allowed: with ``"zero"`` the ratio is undefined, with a
            fixed radius ``c`` it is plain SEC with weight ``eta / c^2``, and a running mean (``"ema"``) does
            not follow the current scale; any of them raises ``ValueError``. A batch of all-zero embeddings
            (``mu = 0``) raises ``ValueError``; NaN embeddings give NaN, as in plain SEC.

    Attributes:
        last_mu: python float, the ``mu`` used by the last call (``nan`` before the first call); reading it reads
            the value to the host. ``last_mu_tensor`` is the same value as a detached tensor on the embeddings'
            device, for a loop that must not wait for the device (a GPU step records it and reads it later).
        mu_mode: ``"batch" | "ema" | "zero" | "fixed"``.
        relative: bool, the scale-free variant.
    """

    def __init__(self, eta: float = 1.0, mu: str | float = "batch", momentum: float = 1.0, relative: bool = False):
        super().__init__()
        self.mu_mode = _validate(eta, mu, momentum, relative)
        self.relative = relative
        self.eta = float(eta)
        self.mu = mu if isinstance(mu, str) else float(mu)
        self.momentum = float(momentum)
        self.register_buffer("running_mu", torch.zeros(()))
        self.register_buffer("initialized", torch.zeros((), dtype=torch.bool))
        self.last_mu_tensor = torch.tensor(math.nan)

    @property
    def last_mu(self) -> float:
        return float(self.last_mu_tensor)

    def target_norm(self, norms: torch.Tensor) -> torch.Tensor:
        """The detached ``mu`` for this batch of norms (updates the EMA buffer in training mode)."""
        batch_mean = norms.detach().mean()
        if self.mu_mode == "batch":
            return batch_mean
        if self.mu_mode == "zero":
            return torch.zeros((), dtype=norms.dtype, device=norms.device)
        if self.mu_mode == "fixed":
            return torch.tensor(self.mu, dtype=norms.dtype, device=norms.device)
        # "ema"
        if self.training:
            with torch.no_grad():
                if sync_free(norms):         # the same update as below, without reading `initialized` to the host
                    moved = self.running_mu * (1.0 - self.momentum) + self.momentum * batch_mean.to(self.running_mu)
                    self.running_mu.copy_(torch.where(self.initialized, moved, batch_mean.to(self.running_mu)))
                    self.initialized.fill_(True)
                elif bool(self.initialized):
                    self.running_mu.mul_(1.0 - self.momentum).add_(self.momentum * batch_mean.to(self.running_mu))
                else:
                    self.running_mu.copy_(batch_mean)
                    self.initialized.fill_(True)
        elif sync_free(norms):
            return torch.where(self.initialized, self.running_mu.to(norms.dtype), batch_mean)
        elif not bool(self.initialized):
            return batch_mean
        return self.running_mu.detach().clone().to(norms.dtype)

    def per_sample(self, f: torch.Tensor) -> torch.Tensor:
        """Per-sample terms ``eta * (||f_i|| - mu)^2`` (shape (B,)); their mean is the constraint.

        With ``relative=True``: ``eta * (||f_i|| / mu - 1)^2`` with the batch mean ``mu`` kept in the graph.
        """
        _check_embeddings(f)
        norms = f.norm(dim=1)
        if self.relative:
            return self._relative_terms(norms)
        mu = self.target_norm(norms)
        self.last_mu_tensor = mu.detach()
        return self.eta * (norms - mu) ** 2

    def _relative_terms(self, norms: torch.Tensor) -> torch.Tensor:
        mu = norms.mean()  # in the graph: this is what makes the penalty scale-free
        self.last_mu_tensor = mu.detach()
        if not sync_free(norms) and self.last_mu == 0.0:   # off the CPU: NaN, which the training loop reports
            raise ValueError("relative SEC needs a batch whose mean norm is > 0 (it divides by it); "
                             "got a batch of all-zero embeddings")
        return self.eta * (norms / mu - 1.0) ** 2

    def forward(self, f: torch.Tensor) -> torch.Tensor:
        return self.per_sample(f).mean()

    def extra_repr(self) -> str:
        rel = ", relative=True" if self.relative else ""
        return f"eta={self.eta}, mu={self.mu!r}, momentum={self.momentum}{rel}"


class SECRegularizer(BaseRegularizer):
    """SEC as a pytorch-metric-learning embedding regularizer.

    PML (2.9.0) passes the *raw* embeddings of a loss to its ``embedding_regularizer``, reduces the
    per-sample terms returned by :meth:`compute_loss` with the regularizer's reducer (``MeanReducer``)
    and multiplies by the loss's ``embedding_reg_weight`` (default 1). The per-sample terms come from
    the wrapped :class:`SphericalEmbeddingConstraint` (``self.constraint``), so with the default weight
    the amount added to the loss is exactly ``eta * mean_i (||f_i|| - mu)^2`` and the ``mu`` logic
    (including the EMA buffers, saved under ``...embedding_regularizer.constraint``) is shared.

    The reducer is fixed to ``MeanReducer`` on purpose: another reducer would change the value.
    ``relative=True`` is the scale-free variant (see :class:`SphericalEmbeddingConstraint`); its per-sample
    terms ``eta * (||f_i|| / mu - 1)^2`` also average to the constraint.
    """

    def __init__(self, eta: float = 1.0, mu: str | float = "batch", momentum: float = 1.0, relative: bool = False):
        super().__init__()
        self.constraint = SphericalEmbeddingConstraint(eta=eta, mu=mu, momentum=momentum, relative=relative)

    def compute_loss(self, embeddings):
        return {
            "loss": {
                "losses": self.constraint.per_sample(embeddings),
                "indices": c_f.torch_arange_from_size(embeddings),
                "reduction_type": "element",
            }
        }

    @property
    def last_mu(self) -> float:
        return self.constraint.last_mu

    @property
    def mu_mode(self) -> str:
        return self.constraint.mu_mode

    @property
    def eta(self) -> float:
        return self.constraint.eta

    @property
    def relative(self) -> bool:
        return self.constraint.relative


def center_invariant_penalty(f: torch.Tensor) -> torch.Tensor:
    """pytorch-metric-learning's ``CenterInvariantRegularizer`` (2.9.0) with its default ``MeanReducer``::

        CIR(f) = (1/N) sum_i (||f_i||^2 - mean_j ||f_j||^2)^2 / 4

    (nothing detached). It is homogeneous of degree 4: ``CIR(c f) = c^4 CIR(f)``, so its derivative along
    ``f -> s f`` is ``4 CIR / s``. Writing ``n_i = ||f_i||``, ``mu = mean n``, ``d_i = n_i - mu``, and
    ``||f_i||^2 - mean ||f||^2 = 2 mu d_i + d_i^2 - Var`` gives exactly::

        CIR = mu^2 Var + mu m3 + (m4 - Var^2) / 4,      Var, m3, m4 the central moments of the norms,

    i.e. ``mu^2`` times plain SEC (``eta = 1``) up to a relative error ``skew * CV + (kurt - 1) CV^2 / 4``,
    which vanishes as the norms concentrate: SEC with a weight that grows as the square of the scale.
    """
    _check_embeddings(f)
    sq = f.norm(dim=1) ** 2
    return ((sq - sq.mean()) ** 2 / 4).mean()


class CenterInvariantPenalty(nn.Module):
    """``eta`` times :func:`center_invariant_penalty`: pytorch-metric-learning's ``CenterInvariantRegularizer`` as a
    training penalty with the interface of :class:`SphericalEmbeddingConstraint` (``forward(f)`` -> a scalar;
    ``last_mu`` / ``last_mu_tensor``, the batch's mean norm, recorded for the step table), so that a run can train
    it as an arm beside SEC (what a PML user gets who reaches for it instead of SEC). Nothing is
    detached. ``eta`` must be a finite number > 0."""

    def __init__(self, eta: float = 1.0):
        super().__init__()
        if isinstance(eta, bool) or not _is_number(eta) or not math.isfinite(eta) or eta <= 0:
            raise ValueError(f"eta must be a finite number > 0 for the CenterInvariantRegularizer penalty, got {eta!r}")
        self.eta = float(eta)
        self.last_mu_tensor = torch.tensor(math.nan)

    @property
    def last_mu(self) -> float:
        return float(self.last_mu_tensor)

    def forward(self, f: torch.Tensor) -> torch.Tensor:
        _check_embeddings(f)
        self.last_mu_tensor = f.detach().norm(dim=1).mean()
        return self.eta * center_invariant_penalty(f)
