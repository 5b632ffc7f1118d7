"""Contrastive losses: SimCLR's NT-Xent, supervised contrastive (SupCon, ``L_out``) and the Hadsell et al.
contrastive loss (through PML)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from pytorch_metric_learning import distances as pml_distances
from pytorch_metric_learning import losses as pml_losses

from .portable import portable_cdist, portable_logsumexp, portable_softplus, routed
from .base import MetricLoss, pair_masks, sync_free, zero_loss


# ---------------------------------------------------------------------------------------- ntxent
class NTXentLoss(MetricLoss):
    """NT-Xent (SimCLR, Chen et al., ICML 2020) with temperature T: for each positive pair (a, p),
    ``-log(exp(cos_ap / T) / (exp(cos_ap / T) + sum_{n not in class(a)} exp(cos_an / T)))``, averaged over
    positive pairs. With K = 2 views per label this is SimCLR exactly (the denominator runs over all
    k != a); with K > 2 each positive is scored against the anchor's negatives only (PML's
    generalisation). Same value as PML ``NTXentLoss(temperature)`` (the tests compare), written out because
    PML builds a (#positive pairs x #negative pairs) matrix, O(B^3): 37x slower at B = 120 and 200x at
    B = 256 on CPU. Here it is ``softplus(logsumexp_n(cos_an / T) - cos_ap / T)``, O(B^2).
    T = 0.5 as in the rebuttal's SimCLR run.
    """

    _hp_names = ("temperature",)

    def __init__(self, temperature: float = 0.5):
        super().__init__()
        self.temperature = temperature

    def compute(self, embeddings, labels):
        x = F.normalize(embeddings, dim=1)
        logits = x @ x.T / self.temperature
        pos, neg = pair_masks(labels)
        free = sync_free(embeddings)
        if not free and (not bool(pos.any()) or not bool(neg.any())):
            return zero_loss(embeddings)
        lse_neg = portable_logsumexp(logits.masked_fill(~neg, torch.finfo(logits.dtype).min), dim=1)
        # anchors without any negative give softplus(-huge) = 0, as in PML
        if free:                          # the masked mean (0 without a positive pair), no boolean indexing
            return (portable_softplus(lse_neg[:, None] - logits) * pos).sum() / pos.sum().clamp(min=1)
        return portable_softplus(lse_neg[:, None] - logits)[pos].mean()


# ---------------------------------------------------------------------------------------- supcon
class SupConLoss(MetricLoss):
    """Supervised contrastive loss, the ``L_out`` form (Khosla et al., "Supervised Contrastive Learning",
    NeurIPS 2020, Eq. 2), on cosine similarities with temperature T:

        L = mean over anchors i with >= 1 positive of  -1/|P(i)| sum_{p in P(i)} log( exp(z_i.z_p / T) / sum_{a != i} exp(z_i.z_a / T) )

    The denominator runs over ALL other samples, positives included; that is where it differs from
    :class:`NTXentLoss` with K > 2 (which puts only the anchor's negatives and the one positive there), so
    the two agree only for K = 2. Anchors without a positive are left out of the mean. T = 0.1, the value
    Khosla et al. use for their main results and PML's default. Same value as PML ``SupConLoss(temperature)``
    when the batch has a negative pair (PML returns 0 otherwise; here the formula is applied as written);
    the tests compare with PML and with a loop. O(B^2). On glyphs it is trained on P x K batches with
    K = 4 (our choice, as for the tuplet margin loss; Khosla et al. use two augmented views per image).
    """

    _hp_names = ("temperature",)

    def __init__(self, temperature: float = 0.1):
        super().__init__()
        self.temperature = temperature

    def compute(self, embeddings, labels):
        x = F.normalize(embeddings, dim=1)
        logits = x @ x.T / self.temperature
        pos, _ = pair_masks(labels)
        n_pos = pos.sum(dim=1)
        keep = n_pos > 0
        if not bool(keep.any()):
            return zero_loss(embeddings)
        eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
        log_denominator = portable_logsumexp(logits.masked_fill(eye, torch.finfo(logits.dtype).min), dim=1)
        log_prob = logits - log_denominator[:, None]
        per_anchor = -(log_prob * pos).sum(dim=1) / n_pos.clamp_min(1)
        return per_anchor[keep].mean()


# ----------------------------------------------------------------------------------- contrastive
class _RoutedLpDistance(pml_distances.LpDistance):
    """PML's ``LpDistance`` whose distance matrix (``torch.cdist``: an elementwise ``sqrt``) is routed through
    float64 under the portable kernel pin (:func:`.portable.portable_cdist`); under any other pin PML's own
    computation."""

    def compute_mat(self, query_emb, ref_emb):
        if not routed(query_emb):
            return super().compute_mat(query_emb, ref_emb)
        ref_emb = query_emb if ref_emb is None else ref_emb
        return portable_cdist(query_emb, ref_emb, p=self.p)


class ContrastiveLoss(MetricLoss):
    """Contrastive loss (Hadsell, Chopra & LeCun, CVPR 2006) in PML's form: Euclidean distance ``d`` of
    normalized embeddings, positive pairs ``[d - pos_margin]_+``, negative pairs ``[neg_margin - d]_+``,
    each averaged over its non-zero terms and summed (PML ``ContrastiveLoss`` with its default
    ``AvgNonZeroReducer``, which is used). Defaults pos_margin 0, neg_margin 1.0 (PML's defaults; d = 1
    is cos = 0.5). Not in the SEC paper; an extra loss for the book."""

    _hp_names = ("pos_margin", "neg_margin")

    def __init__(self, pos_margin: float = 0.0, neg_margin: float = 1.0):
        super().__init__()
        self.pos_margin, self.neg_margin = pos_margin, neg_margin
        self.pml = pml_losses.ContrastiveLoss(
            pos_margin=pos_margin,
            neg_margin=neg_margin,
            distance=_RoutedLpDistance(normalize_embeddings=True, p=2, power=1),
        )

    def compute(self, embeddings, labels):
        return self.pml(embeddings, labels)
