"""The N-pair readings: the normalized N-pair loss of the SEC paper (Eq. 3, fixed scale) and Sohn's N-pair-mc on
unnormalized inner products, with or without the l2 penalty (the N-pair dispute of the review record)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import MetricLoss, sync_free, zero_loss


# ----------------------------------------------------------------------------------------- npair
class NormalizedNPairLoss(MetricLoss):
    """Normalized N-pair loss (Sohn, NeurIPS 2016, on normalized embeddings), as ``NpairLoss(...,
    normalized=True)`` in the SEC authors' ``loss.py``.

    The first two samples (in batch order) of every class form (anchor_c, positive_c); the loss is the
    cross-entropy of the C x C logits ``s * cos(anchor_i, positive_j)`` with identity targets, averaged
    over classes. The authors scale both vectors by 5, i.e. ``s = 25``. Classes with a single sample
    in the batch are skipped (the authors' code would fail on them). Not in PML (its ``NPairsLoss`` has
    no scale), so written here.
    """

    _hp_names = ("scale",)

    def __init__(self, scale: float = 25.0):
        super().__init__()
        self.scale = scale

    def compute(self, embeddings, labels):
        if sync_free(embeddings):
            return _npair_masked(F.normalize(embeddings, dim=1), labels, self.scale)
        a, p = _first_two_per_class(labels)
        if len(a) == 0:
            return zero_loss(embeddings)
        x = F.normalize(embeddings, dim=1)
        logits = self.scale * x[a] @ x[p].T
        return F.cross_entropy(logits, torch.arange(len(a), device=logits.device))


def _npair_masked(x: torch.Tensor, labels: torch.Tensor, scale: float) -> torch.Tensor:
    """The normalized N-pair loss with fixed shapes (no host read): the same pairs as :func:`_first_two_per_class`,
    found as flags over the label-sorted batch (position i opens a class that has a second sample at i + 1), and
    the C x C cross-entropy computed as a B x B one whose rows and columns that are not pairs are masked out.
    0 when no class has two samples."""
    sorted_labels, order = torch.sort(labels, stable=True)
    opens = torch.ones_like(sorted_labels, dtype=torch.bool)
    opens[1:] = sorted_labels[1:] != sorted_labels[:-1]
    pair = torch.zeros_like(opens)
    pair[:-1] = opens[:-1] & (sorted_labels[1:] == sorted_labels[:-1])
    nxt = torch.cat([order[1:], order[-1:]])                  # the sample after each position (last: itself, unused)
    logits = scale * x[order] @ x[nxt].T                      # row i: anchor at position i; column j: positive of j
    logits = logits.masked_fill(~pair[None, :], torch.finfo(logits.dtype).min)
    per_row = torch.logsumexp(logits, dim=1) - logits.diagonal()
    return (per_row * pair).sum() / pair.sum().clamp(min=1)


def _first_two_per_class(labels: torch.Tensor):
    """(anchor, positive) indices: the first two samples in batch order of every class with >= 2 samples,
    classes in ascending label order (the pair choice of the SEC authors' ``NpairLoss`` and of PML's
    ``NPairsLoss``)."""
    sorted_labels, order = torch.sort(labels, stable=True)
    _, counts = torch.unique_consecutive(sorted_labels, return_counts=True)
    starts = torch.cumsum(counts, 0) - counts
    starts = starts[counts >= 2]
    return order[starts], order[starts + 1]


class InnerProductNPairLoss(MetricLoss):
    """Multi-class N-pair loss on UNNORMALIZED inner products (Sohn, "Improved Deep Metric Learning with
    Multi-class N-pair Loss Objective", NeurIPS 2016: the multi-class "N-pair-mc" loss with the l2 penalty
    of its Sec. 3.2.2), the N-pair loss as the SEC rebuttal describes the original. Its value depends on
    the norms: Prop. 1-2 do not apply.

    Pairs as in :class:`NormalizedNPairLoss` (first two samples of every class); with anchors ``f_i`` and
    positives ``f_i^+`` (raw embeddings, no normalization):

        L = 1/N sum_i -log softmax_i(f_i . f_1^+, ..., f_i . f_N^+)  +  lambda/4 (mean_i ||f_i||^2 + mean_i ||f_i^+||^2)

    The penalty is TensorFlow's reference ``tf.contrib.losses.metric_learning.npairs_loss`` form (its
    docstring cites Sohn's paper and says the embeddings "should not be l2 normalized"), with its default
    ``l2_reg = lambda = 0.002``; for K = 2 it equals ``lambda/2 * mean over the batch of ||f||^2``, i.e. PML
    ``NPairsLoss(distance=DotProductSimilarity(normalize_embeddings=False),
    embedding_regularizer=LpRegularizer(power=2), embedding_reg_weight=lambda/2)`` (the tests compare).

    Which reading of Sohn's paper: the rebuttal's. As the rebuttal reads Sec. 3.2.2, Sohn weighs
    l2-normalizing the embeddings (which bounds every logit to [-1, 1]) and instead keeps the inner product
    and penalizes the embedding norms; the reviewer reads the same section as normalizing. ``l2_reg > 0``
    (``"npair_ip_l2"``) is that method; ``l2_reg = 0`` (``"npair_ip"``) is the bare N-pair-mc loss without the
    penalty; the normalized reading (the reviewer's) with a fixed scale is :class:`NormalizedNPairLoss`
    (``"npair"``, the SEC paper's Eq. 3, s = 25). The SEC authors' ``NpairLoss(normalized=False)`` is this
    loss with ``l2_reg = 0``.
    """

    _hp_names = ("l2_reg",)

    def __init__(self, l2_reg: float = 0.002):
        super().__init__()
        self.l2_reg = l2_reg

    def compute(self, embeddings, labels):
        a, p = _first_two_per_class(labels)
        if len(a) == 0:
            return zero_loss(embeddings)
        fa, fp = embeddings[a], embeddings[p]
        loss = F.cross_entropy(fa @ fp.T, torch.arange(len(a), device=embeddings.device))
        if self.l2_reg:
            loss = loss + 0.25 * self.l2_reg * (fa.pow(2).sum(1).mean() + fp.pow(2).sum(1).mean())
        return loss
