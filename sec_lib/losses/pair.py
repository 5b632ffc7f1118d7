"""Pair-based losses on the cosine / squared-Euclidean distance of normalized embeddings: the all-triplets margin
loss, the FaceNet semihard triplet loss, the multi-similarity loss and the tuplet margin loss; and the
``triplet_violations`` instrument the training loop logs."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .portable import portable_acos, portable_cos, portable_logsumexp, portable_softplus
from .base import ACOS_EPS, MetricLoss, check_inputs, pair_masks, squared_distances, sync_free, zero_loss


# --------------------------------------------------------------------------------------- triplet
class TripletLoss(MetricLoss):
    """All-triplets margin loss, as ``TripletLoss`` in the SEC authors' ``loss.py``.

    ``mean over ALL valid (a, p, n) of max(0, m + d_ap - d_an)`` with the squared Euclidean distance of
    normalized embeddings ``d = ||x_a - x_b||^2 = 2 - 2 cos``; zero terms count in the mean. PML
    ``TripletMarginLoss(margin, distance=LpDistance(power=2), reducer=MeanReducer())`` computes the same
    value (its default ``AvgNonZeroReducer`` would average only the violating triplets, a different loss),
    and the tests compare with it; it is written out here because PML enumerates a B^3 index set, 4-9x
    slower on CPU at B = 120-256. Memory O(#positive pairs x B).
    """

    _hp_names = ("margin",)

    def __init__(self, margin: float = 1.0):
        super().__init__()
        self.margin = margin

    def compute(self, embeddings, labels):
        d = squared_distances(embeddings)
        pos, neg = pair_masks(labels)
        if sync_free(embeddings):          # every (a, p, n) at once, masked: no data-dependent shape, no host read
            valid = pos[:, :, None] & neg[:, None, :]
            terms = F.relu(self.margin + d[:, :, None] - d[:, None, :])
            return (terms * valid).sum() / valid.sum().clamp(min=1)
        a, p = pos.nonzero(as_tuple=True)
        neg_of_anchor = neg[a]  # (P, B): the negatives of each positive pair's anchor
        count = neg_of_anchor.sum()
        if int(count) == 0:
            return zero_loss(embeddings)
        terms = F.relu(self.margin + d[a, p][:, None] - d[a])  # (P, B): every negative n of the pair
        return (terms * neg_of_anchor).sum() / count


# -------------------------------------------------------------------------------------- semihard
class SemihardTripletLoss(MetricLoss):
    """FaceNet semihard triplet loss, the TensorFlow rule (``tf.contrib.losses.metric_learning.
    triplet_semihard_loss`` / ``tfa.losses.TripletSemiHardLoss``) as re-implemented in the SEC authors'
    ``loss.py`` (``TripletSemihardLoss``: squared Euclidean distance of normalized embeddings, m = 0.2).

    For every positive pair (a, p), a != p, the negative is the one with the smallest ``d_an`` among
    those with ``d_an > d_ap``; if there is none, the negative with the largest ``d_an``. The loss is
    ``max(0, m + d_ap - d_an)`` averaged over all positive pairs (zeros included). Pairs whose anchor has
    no negative in the batch are left out. PML has no TF-style semihard loss, so it is written here,
    vectorized with a sort + ``searchsorted`` (O(B^2 log B) time, O(B^2) memory).
    """

    _hp_names = ("margin",)

    def __init__(self, margin: float = 0.2):
        super().__init__()
        self.margin = margin

    def compute(self, embeddings, labels):
        d = squared_distances(embeddings)
        pos, neg = pair_masks(labels)
        n_neg = neg.sum(dim=1)
        valid = pos & (n_neg > 0)[:, None]
        if not sync_free(embeddings) and not bool(valid.any()):
            return zero_loss(embeddings)
        # per anchor: its negative distances sorted ascending, non-negatives pushed to the end (+inf)
        sorted_neg, _ = d.masked_fill(~neg, math.inf).sort(dim=1)
        # for each (a, p): position of the first negative with d_an > d_ap (strictly)
        first = torch.searchsorted(sorted_neg.detach().contiguous(), d.detach().contiguous(), right=True)
        has_semihard = first < n_neg[:, None]
        semihard = sorted_neg.gather(1, first.clamp(max=len(labels) - 1))
        hardest = d.masked_fill(~neg, 0.0).max(dim=1).values  # largest d_an (d >= 0)
        d_an = torch.where(has_semihard, semihard, hardest[:, None].expand_as(d))
        if sync_free(embeddings):          # the masked mean (0 with no valid pair), no boolean indexing
            return (F.relu(self.margin + d - d_an) * valid).sum() / valid.sum().clamp(min=1)
        return F.relu(self.margin + d - d_an)[valid].mean()


# -------------------------------------------------------------------------------------------- ms
class MultiSimilarityLoss(MetricLoss):
    """Multi-similarity loss with its hard-pair mining (Wang et al., CVPR 2019), following the official
    code (MalongTech/research-ms-loss) and the SEC authors' ``MultiSimilarityLoss``.

    With cosine similarities ``S``, for each anchor i: positives P_i = same class with
    ``S_ij < 1 - 1e-5`` (drops the sample itself and exact duplicates, as the official code does),
    negatives N_i = other classes. Mining keeps negatives with ``S_in + eps > min_{P_i} S`` and positives
    with ``S_ip - eps < max_{N_i} S``. If either mined set is empty the anchor is skipped. Then

        L_i = 1/alpha log(1 + sum_p exp(-alpha (S_ip - base))) + 1/beta log(1 + sum_n exp(beta (S_in - base)))

    and the loss is ``sum_i L_i / B`` (skipped anchors count in B). Paper values alpha 2, beta 40,
    base (lambda) 0.5, eps 0.1. PML's ``MultiSimilarityLoss(2, 40, 0.5)`` + ``MultiSimilarityMiner(0.1)``
    computes the same value on generic batches but differs at the edges (it returns 0 when at most one
    positive and one negative pair are mined in the whole batch, and it excludes only the diagonal, not
    duplicates), so the loss is written here; the tests compare it with PML and with the official loop.
    """

    _hp_names = ("alpha", "beta", "base", "epsilon")

    def __init__(self, alpha: float = 2.0, beta: float = 40.0, base: float = 0.5, epsilon: float = 0.1):
        super().__init__()
        self.alpha, self.beta, self.base, self.epsilon = alpha, beta, base, epsilon

    def compute(self, embeddings, labels):
        x = F.normalize(embeddings, dim=1)
        sim = x @ x.T
        same = labels[:, None] == labels[None, :]
        eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
        pos = same & ~eye & (sim.detach() < 1 - 1e-5)
        neg = ~same
        s = sim.detach()
        min_pos = s.masked_fill(~pos, math.inf).min(dim=1, keepdim=True).values
        max_neg = s.masked_fill(~neg, -math.inf).max(dim=1, keepdim=True).values
        hard_neg = neg & (s + self.epsilon > min_pos)
        hard_pos = pos & (s - self.epsilon < max_neg)
        keep = hard_pos.any(dim=1) & hard_neg.any(dim=1)
        if not sync_free(embeddings) and not bool(keep.any()):   # off the CPU the sum below is that zero already
            return zero_loss(embeddings)
        pos_term = _log1p_sum_exp(-self.alpha * (sim - self.base), hard_pos) / self.alpha
        neg_term = _log1p_sum_exp(self.beta * (sim - self.base), hard_neg) / self.beta
        return ((pos_term + neg_term) * keep).sum() / len(labels)


def _log1p_sum_exp(z: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Row-wise ``log(1 + sum_{j in mask} exp(z_ij))``, stable; 0 for empty rows (finite gradients). Its
    ``logsumexp`` in float64 under the portable kernel pin (:mod:`.portable`)."""
    z = z.masked_fill(~mask, torch.finfo(z.dtype).min)
    zeros = torch.zeros_like(z[:, :1])
    return portable_logsumexp(torch.cat([zeros, z], dim=1), dim=1)


# ------------------------------------------------------------------------------------------- tml
class TupletMarginLoss(MetricLoss):
    """Tuplet margin loss + intra-pair variance loss (Yu & Tao, "Deep Metric Learning with Tuplet Margin
    Loss", ICCV 2019); the combination PML documents as ``MultipleLosses([TupletMarginLoss(),
    IntraPairVarianceLoss()], weights=[1, lambda])``.

    For every positive pair (a, p): ``log(1 + sum_{n not in class(a)} exp(s (cos θ_an - cos(θ_ap - β))))``,
    averaged over positive pairs (pairs whose anchor has no negative contribute 0), plus
    ``lambda * (E[(1-eps) mean_ap - cos θ_ap]_+^2 + E[cos θ_an - (1+eps) mean_an]_+^2)`` where the means
    run over all positive / negative pairs of the batch (not detached). β is in radians: 0.1 rad equals
    PML's ``margin=5.73`` degrees. ``s = 64`` is PML's default (the reference table gives none).
    Written here (same value as PML on generic batches) because PML 2.9.0 takes ``acos`` of unclamped
    cosines, which gives NaN for (near-)duplicate positives; here ``cos θ_ap`` is clamped to
    ``[-1 + 1e-7, 1 - 1e-7]`` inside ``acos``.
    """

    _hp_names = ("margin", "scale", "variance_weight", "epsilon")

    def __init__(self, margin: float = 0.1, scale: float = 64.0, variance_weight: float = 0.5, epsilon: float = 0.01):
        super().__init__()
        self.margin, self.scale, self.variance_weight, self.epsilon = margin, scale, variance_weight, epsilon

    def compute(self, embeddings, labels):
        x = F.normalize(embeddings, dim=1)
        cos = x @ x.T
        pos, neg = pair_masks(labels)
        if not bool(pos.any()) or not bool(neg.any()):
            return zero_loss(embeddings)
        theta = portable_acos(cos.clamp(-1 + ACOS_EPS, 1 - ACOS_EPS))     # portable_*: float64 under that pin
        cos_ap_margin = portable_cos(theta - self.margin)
        # log(1 + sum_n exp(s cos_an - s c)) = softplus(logsumexp_n(s cos_an) - s c): O(B^2), no B^3 tensor
        lse_neg = portable_logsumexp((self.scale * cos).masked_fill(~neg, torch.finfo(cos.dtype).min), dim=1)
        tuplet = portable_softplus(lse_neg[:, None] - self.scale * cos_ap_margin)
        tuplet = (tuplet * neg.any(dim=1, keepdim=True))[pos].mean()
        cos_pos, cos_neg = cos[pos], cos[neg]
        var_pos = F.relu((1 - self.epsilon) * cos_pos.mean() - cos_pos).pow(2).mean()
        var_neg = F.relu(cos_neg - (1 + self.epsilon) * cos_neg.mean()).pow(2).mean()
        return tuplet + self.variance_weight * (var_pos + var_neg)


# ----------------------------------------------------------------------------- instrumentation
@torch.no_grad()
def triplet_violations(embeddings: torch.Tensor, labels: torch.Tensor) -> float:
    """The fraction of violated triplets as a Python float (reads it to the host): see :func:`violation_rate`."""
    return float(violation_rate(embeddings, labels))


@torch.no_grad()
def violation_rate(embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Fraction of valid triplets (a, p, n) -- a != p same class, n another class -- with
    ``d_an <= d_ap`` for the Euclidean distance of l2-normalized embeddings (equivalently
    ``cos_an >= cos_ap``; ties count as violations), as a float64 tensor on the batch's device (no host read);
    ``nan`` if the batch has no valid triplet. The counts are exact integers, so the ratio is the float
    ``violating / total`` to the bit.

    Per anchor the negative cosines are sorted once and every positive is located with
    ``searchsorted``: O(B^2 log B) time and O(B^2) memory, no B^3 tensor.
    """
    check_inputs(embeddings, labels)
    labels = labels.to(embeddings.device)
    x = F.normalize(embeddings.detach().double(), dim=1)
    cos = x @ x.T
    pos, neg = pair_masks(labels)
    n_pos, n_neg = pos.sum(dim=1), neg.sum(dim=1)
    total = (n_pos * n_neg).sum()
    sorted_neg, _ = cos.masked_fill(~neg, -math.inf).sort(dim=1)  # non-negatives first (-inf)
    # number of negatives with cos_an >= cos_ap = B - (count of entries < cos_ap)
    below = torch.searchsorted(sorted_neg.contiguous(), cos.contiguous(), right=False)
    violating = ((len(labels) - below) * pos).sum()
    return torch.where(total > 0, violating.double() / total.double().clamp(min=1),
                       torch.full((), math.nan, dtype=torch.float64, device=cos.device))
