"""Metric-learning losses on l2-normalized embeddings, as the SEC paper ran them.

Every loss takes RAW embeddings ``f`` (B, D) and integer labels (B,) and returns a scalar. All but two
l2-normalize inside, so they depend on ``f`` only through ``f / ||f||`` (the setting of the paper's
Prop. 1-2). The exceptions are the inner-product N-pair losses ``npair_ip`` and ``npair_ip_l2`` (Sohn's
original form, for the N-pair dispute of the review record): their value depends on the norms, and
``LOSS_SPECS[name].normalized`` is False for them (:data:`NORMALIZED_LOSSES` lists the others).
Build one with :func:`get_loss`; :data:`LOSS_SPECS` holds the paper's defaults and the number ``k`` of
instances per class to draw in a P x K batch.

Sources (see each class): the SEC authors' ``loss.py`` (Dyfine/SphericalEmbedding) for triplet,
semihard, normalized N-pair and MS; Sohn (NeurIPS 2016) and TensorFlow's ``npairs_loss`` for the
inner-product N-pair; Yu & Tao (ICCV 2019) for the tuplet margin loss; SimCLR for NT-Xent; Khosla et al.
(NeurIPS 2020) for supervised contrastive; NormFace / CosFace / ArcFace for the cosine-softmax losses; Hadsell et al. (2006) for the
contrastive loss. Where pytorch-metric-learning (PML 2.9.0) computes the same thing at a reasonable cost
it is used (contrastive); elsewhere the loss is written out (the reason is in the class docstring) and the
tests compare it with PML where PML has it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from pytorch_metric_learning import distances as pml_distances
from pytorch_metric_learning import losses as pml_losses
from torch import nn

__all__ = [
    "LOSS_NAMES",
    "LOSS_SPECS",
    "NORMALIZED_LOSSES",
    "LossSpec",
    "get_loss",
    "triplet_violations",
    "TripletLoss",
    "SemihardTripletLoss",
    "NormalizedNPairLoss",
    "InnerProductNPairLoss",
    "MultiSimilarityLoss",
    "TupletMarginLoss",
    "NTXentLoss",
    "SupConLoss",
    "NormFaceLoss",
    "CosFaceLoss",
    "ArcFaceLoss",
    "ContrastiveLoss",
]

# cosines are clamped to this open interval before acos (d acos/dc is infinite at +-1)
_ACOS_EPS = 1e-7


def _check_inputs(embeddings, labels) -> None:
    if not isinstance(embeddings, torch.Tensor) or embeddings.ndim != 2 or embeddings.shape[0] < 1:
        shape = tuple(embeddings.shape) if isinstance(embeddings, torch.Tensor) else type(embeddings).__name__
        raise ValueError(f"embeddings must be a 2-D tensor (B, D) with B >= 1; got {shape}")
    if not embeddings.is_floating_point():
        raise ValueError(f"embeddings must be floating point; got dtype {embeddings.dtype}")
    if not isinstance(labels, torch.Tensor) or labels.ndim != 1 or labels.shape[0] != embeddings.shape[0]:
        shape = tuple(labels.shape) if isinstance(labels, torch.Tensor) else type(labels).__name__
        raise ValueError(f"labels must be a 1-D tensor with one label per embedding ({embeddings.shape[0]}); got {shape}")
    if labels.is_floating_point() or labels.is_complex():
        raise ValueError(f"labels must be an integer tensor; got dtype {labels.dtype}")


def _zero(embeddings: torch.Tensor) -> torch.Tensor:
    """A zero loss that stays attached to the graph (so ``.backward()`` works)."""
    return embeddings.sum() * 0.0


def _squared_distances(embeddings: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean distances of the l2-normalized embeddings, 2 - 2 cos (B x B)."""
    x = F.normalize(embeddings, dim=1)
    return (2.0 - 2.0 * x @ x.T).clamp_min(0.0)


def _pair_masks(labels: torch.Tensor):
    """(positive, negative) boolean B x B masks; positives exclude the diagonal."""
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    return same & ~eye, ~same


class _MetricLoss(nn.Module):
    """Base: validates ``(embeddings, labels)`` and calls :meth:`compute`."""

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        _check_inputs(embeddings, labels)
        return self.compute(embeddings, labels.to(embeddings.device))

    def compute(self, embeddings, labels):  # pragma: no cover - abstract
        raise NotImplementedError

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={getattr(self, k)!r}" for k in self._hp_names)

    _hp_names: tuple = ()


# --------------------------------------------------------------------------------------- triplet
class TripletLoss(_MetricLoss):
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
        d = _squared_distances(embeddings)
        pos, neg = _pair_masks(labels)
        a, p = pos.nonzero(as_tuple=True)
        neg_of_anchor = neg[a]  # (P, B): the negatives of each positive pair's anchor
        count = neg_of_anchor.sum()
        if int(count) == 0:
            return _zero(embeddings)
        terms = F.relu(self.margin + d[a, p][:, None] - d[a])  # (P, B): every negative n of the pair
        return (terms * neg_of_anchor).sum() / count


# -------------------------------------------------------------------------------------- semihard
class SemihardTripletLoss(_MetricLoss):
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
        d = _squared_distances(embeddings)
        pos, neg = _pair_masks(labels)
        n_neg = neg.sum(dim=1)
        valid = pos & (n_neg > 0)[:, None]
        if not bool(valid.any()):
            return _zero(embeddings)
        # per anchor: its negative distances sorted ascending, non-negatives pushed to the end (+inf)
        sorted_neg, _ = d.masked_fill(~neg, math.inf).sort(dim=1)
        # for each (a, p): position of the first negative with d_an > d_ap (strictly)
        first = torch.searchsorted(sorted_neg.detach().contiguous(), d.detach().contiguous(), right=True)
        has_semihard = first < n_neg[:, None]
        semihard = sorted_neg.gather(1, first.clamp(max=len(labels) - 1))
        hardest = d.masked_fill(~neg, 0.0).max(dim=1).values  # largest d_an (d >= 0)
        d_an = torch.where(has_semihard, semihard, hardest[:, None].expand_as(d))
        return F.relu(self.margin + d - d_an)[valid].mean()


# ----------------------------------------------------------------------------------------- npair
class NormalizedNPairLoss(_MetricLoss):
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
        a, p = _first_two_per_class(labels)
        if len(a) == 0:
            return _zero(embeddings)
        x = F.normalize(embeddings, dim=1)
        logits = self.scale * x[a] @ x[p].T
        return F.cross_entropy(logits, torch.arange(len(a), device=logits.device))


def _first_two_per_class(labels: torch.Tensor):
    """(anchor, positive) indices: the first two samples in batch order of every class with >= 2 samples,
    classes in ascending label order (the pair choice of the SEC authors' ``NpairLoss`` and of PML's
    ``NPairsLoss``)."""
    sorted_labels, order = torch.sort(labels, stable=True)
    _, counts = torch.unique_consecutive(sorted_labels, return_counts=True)
    starts = torch.cumsum(counts, 0) - counts
    starts = starts[counts >= 2]
    return order[starts], order[starts + 1]


class InnerProductNPairLoss(_MetricLoss):
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
            return _zero(embeddings)
        fa, fp = embeddings[a], embeddings[p]
        loss = F.cross_entropy(fa @ fp.T, torch.arange(len(a), device=embeddings.device))
        if self.l2_reg:
            loss = loss + 0.25 * self.l2_reg * (fa.pow(2).sum(1).mean() + fp.pow(2).sum(1).mean())
        return loss


# -------------------------------------------------------------------------------------------- ms
class MultiSimilarityLoss(_MetricLoss):
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
        if not bool(keep.any()):
            return _zero(embeddings)
        pos_term = _log1p_sum_exp(-self.alpha * (sim - self.base), hard_pos) / self.alpha
        neg_term = _log1p_sum_exp(self.beta * (sim - self.base), hard_neg) / self.beta
        return ((pos_term + neg_term) * keep).sum() / len(labels)


def _log1p_sum_exp(z: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Row-wise ``log(1 + sum_{j in mask} exp(z_ij))``, stable; 0 for empty rows (finite gradients)."""
    z = z.masked_fill(~mask, torch.finfo(z.dtype).min)
    zeros = torch.zeros_like(z[:, :1])
    return torch.logsumexp(torch.cat([zeros, z], dim=1), dim=1)


# ------------------------------------------------------------------------------------------- tml
class TupletMarginLoss(_MetricLoss):
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
        pos, neg = _pair_masks(labels)
        if not bool(pos.any()) or not bool(neg.any()):
            return _zero(embeddings)
        theta = torch.acos(cos.clamp(-1 + _ACOS_EPS, 1 - _ACOS_EPS))
        cos_ap_margin = torch.cos(theta - self.margin)
        # log(1 + sum_n exp(s cos_an - s c)) = softplus(logsumexp_n(s cos_an) - s c): O(B^2), no B^3 tensor
        lse_neg = torch.logsumexp((self.scale * cos).masked_fill(~neg, torch.finfo(cos.dtype).min), dim=1)
        tuplet = F.softplus(lse_neg[:, None] - self.scale * cos_ap_margin)
        tuplet = (tuplet * neg.any(dim=1, keepdim=True))[pos].mean()
        cos_pos, cos_neg = cos[pos], cos[neg]
        var_pos = F.relu((1 - self.epsilon) * cos_pos.mean() - cos_pos).pow(2).mean()
        var_neg = F.relu(cos_neg - (1 + self.epsilon) * cos_neg.mean()).pow(2).mean()
        return tuplet + self.variance_weight * (var_pos + var_neg)


# ---------------------------------------------------------------------------------------- ntxent
class NTXentLoss(_MetricLoss):
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
        pos, neg = _pair_masks(labels)
        if not bool(pos.any()) or not bool(neg.any()):
            return _zero(embeddings)
        lse_neg = torch.logsumexp(logits.masked_fill(~neg, torch.finfo(logits.dtype).min), dim=1)
        # anchors without any negative give softplus(-huge) = 0, as in PML
        return F.softplus(lse_neg[:, None] - logits)[pos].mean()


# ---------------------------------------------------------------------------------------- supcon
class SupConLoss(_MetricLoss):
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
        pos, _ = _pair_masks(labels)
        n_pos = pos.sum(dim=1)
        keep = n_pos > 0
        if not bool(keep.any()):
            return _zero(embeddings)
        eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
        log_denominator = torch.logsumexp(logits.masked_fill(eye, torch.finfo(logits.dtype).min), dim=1)
        log_prob = logits - log_denominator[:, None]
        per_anchor = -(log_prob * pos).sum(dim=1) / n_pos.clamp_min(1)
        return per_anchor[keep].mean()


# ------------------------------------------------------------------------------ cosine-softmax
class _CosineSoftmaxLoss(_MetricLoss):
    """Softmax cross-entropy over ``s * cos(f_i, w_c)`` with learnable class weights ``W`` (C x D,
    initialised N(0, 1) like PML), a margin on the target logit given by :meth:`target_logit`."""

    _hp_names = ("num_classes", "embedding_size", "scale", "margin")

    def __init__(self, num_classes: int, embedding_size: int, scale: float, margin: float = 0.0):
        super().__init__()
        self.num_classes, self.embedding_size, self.scale, self.margin = num_classes, embedding_size, scale, margin
        self.W = nn.Parameter(torch.empty(num_classes, embedding_size))
        nn.init.normal_(self.W)

    def target_logit(self, cos_target: torch.Tensor) -> torch.Tensor:
        return cos_target

    def compute(self, embeddings, labels):
        if int(labels.min()) < 0 or int(labels.max()) >= self.num_classes:
            raise ValueError(
                f"labels must lie in [0, num_classes={self.num_classes}); got range "
                f"[{int(labels.min())}, {int(labels.max())}]"
            )
        cos = F.normalize(embeddings, dim=1) @ F.normalize(self.W.to(embeddings.dtype), dim=1).T
        idx = labels[:, None]
        logits = cos.scatter(1, idx, self.target_logit(cos.gather(1, idx)))
        return F.cross_entropy(self.scale * logits, labels)


class NormFaceLoss(_CosineSoftmaxLoss):
    """NormFace (Wang et al., ACM MM 2017): cross-entropy over ``s * cos(f, w_c)``, no margin. Same as PML
    ``NormalizedSoftmaxLoss(temperature=1/s)``. ``s = 16`` by default (our choice: the SEC paper's face
    code was never published; NormFace discusses s around 16 for moderate class counts)."""

    _hp_names = ("num_classes", "embedding_size", "scale")

    def __init__(self, num_classes: int, embedding_size: int, scale: float = 16.0):
        super().__init__(num_classes, embedding_size, scale, 0.0)


class CosFaceLoss(_CosineSoftmaxLoss):
    """CosFace / AM-softmax (Wang et al., CVPR 2018): target logit ``s (cos θ_y - m)``, m = 0.35 (the
    paper's value). Same as PML ``CosFaceLoss(margin=m, scale=s)``. ``s = 30`` by default (our choice,
    a common value for small class counts; the face papers use 64 for thousands of identities)."""

    def __init__(self, num_classes: int, embedding_size: int, scale: float = 30.0, margin: float = 0.35):
        super().__init__(num_classes, embedding_size, scale, margin)

    def target_logit(self, cos_target):
        return cos_target - self.margin


class ArcFaceLoss(_CosineSoftmaxLoss):
    """ArcFace (Deng et al., CVPR 2019): target logit ``s cos(θ_y + m)``, m = 0.5 rad; where
    ``θ_y + m > π`` it uses ``cos θ_y - m sin m`` to stay monotonic (insightface's rule, also PML's).
    Same as PML ``ArcFaceLoss(margin=degrees(m), scale=s)`` except that the cosine is clamped to
    ``[-1 + 1e-7, 1 - 1e-7]`` before ``acos`` (PML clamps to [-1, 1], infinite gradient at the ends).
    ``s = 30`` by default (our choice, see :class:`CosFaceLoss`)."""

    def __init__(self, num_classes: int, embedding_size: int, scale: float = 30.0, margin: float = 0.5):
        super().__init__(num_classes, embedding_size, scale, margin)

    def target_logit(self, cos_target):
        theta = torch.acos(cos_target.clamp(-1 + _ACOS_EPS, 1 - _ACOS_EPS))
        return torch.where(
            theta <= math.pi - self.margin,
            torch.cos(theta + self.margin),
            cos_target - self.margin * math.sin(self.margin),
        )


# ----------------------------------------------------------------------------------- contrastive
class ContrastiveLoss(_MetricLoss):
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
            distance=pml_distances.LpDistance(normalize_embeddings=True, p=2, power=1),
        )

    def compute(self, embeddings, labels):
        return self.pml(embeddings, labels)


# ---------------------------------------------------------------------------------------- specs
# hyperparameter rules: name -> (test, text shown in errors)
_RULES = {
    "> 0": (lambda v: v > 0, "a finite number > 0"),
    ">= 0": (lambda v: v >= 0, "a finite number >= 0"),
    "[-1, 1]": (lambda v: -1 <= v <= 1, "a finite number in [-1, 1]"),
    "[0, pi/2)": (lambda v: 0 <= v < math.pi / 2, "a finite number in [0, pi/2) (radians)"),
    "[0, pi)": (lambda v: 0 <= v < math.pi, "a finite number in [0, pi) (radians)"),
    "int >= 1": (lambda v: v >= 1, "an int >= 1"),
}


@dataclass(frozen=True)
class LossSpec:
    """What :func:`get_loss` knows about one loss.

    ``defaults`` are the paper's (or, where marked in the class docstring, our) hyperparameters;
    ``required`` names arguments without default (cosine-softmax losses: ``num_classes``,
    ``embedding_size``); ``k`` is the number of instances per class in a P x K batch; ``normalized`` is
    False for a loss whose value depends on the embedding norms (it is not scale-invariant: Prop. 1-2 do not
    hold, and the training loop gives it the raw embedding, the tensor SEC acts on).
    """

    name: str
    cls: type
    defaults: dict
    rules: dict
    k: int
    abbrev: str
    description: str
    source: str
    required: tuple = field(default=())
    normalized: bool = True   # False: the loss reads the norms (train() then passes it the raw embedding)

    @property
    def valid_keys(self) -> tuple:
        return tuple(self.required) + tuple(self.defaults)


_SOFTMAX_RULES = {"num_classes": "int >= 1", "embedding_size": "int >= 1", "scale": "> 0"}

LOSS_SPECS: dict[str, LossSpec] = {
    spec.name: spec
    for spec in [
        LossSpec("triplet", TripletLoss, {"margin": 1.0}, {"margin": ">= 0"}, 3, "T",
                 "all-triplets margin loss, squared Euclidean on the sphere, mean over all triplets",
                 "SEC authors' loss.py (TripletLoss); same value as PML TripletMarginLoss + MeanReducer"),
        LossSpec("semihard", SemihardTripletLoss, {"margin": 0.2}, {"margin": ">= 0"}, 3, "SHT",
                 "FaceNet/TensorFlow semihard triplet loss, mean over positive pairs",
                 "Schroff et al. CVPR 2015; TF triplet_semihard_loss; SEC authors' loss.py"),
        LossSpec("npair", NormalizedNPairLoss, {"scale": 25.0}, {"scale": "> 0"}, 2, "NNP",
                 "normalized N-pair loss: softmax over s*cos(anchor_i, positive_j)",
                 "Sohn NeurIPS 2016; SEC authors' loss.py (NpairLoss, normalized=True, 5x5 scale)"),
        LossSpec("npair_ip_l2", InnerProductNPairLoss, {"l2_reg": 0.002}, {"l2_reg": ">= 0"}, 2, "NP-IP+L2",
                 "Sohn's N-pair loss: softmax over unnormalized inner products + lambda/4 mean squared norms",
                 "Sohn NeurIPS 2016 Sec. 3.2.2; TF npairs_loss (reg_lambda 0.002); PML NPairsLoss + LpRegularizer",
                 normalized=False),
        LossSpec("npair_ip", InnerProductNPairLoss, {"l2_reg": 0.0}, {"l2_reg": ">= 0"}, 2, "NP-IP",
                 "N-pair loss on unnormalized inner products, no norm penalty",
                 "Sohn NeurIPS 2016 N-pair-mc without Sec. 3.2.2; PML NPairsLoss(DotProductSimilarity(False))",
                 normalized=False),
        LossSpec("ms", MultiSimilarityLoss, {"alpha": 2.0, "beta": 40.0, "base": 0.5, "epsilon": 0.1},
                 {"alpha": "> 0", "beta": "> 0", "base": "[-1, 1]", "epsilon": ">= 0"}, 5, "MS",
                 "multi-similarity loss with epsilon hard-pair mining, cosine similarity",
                 "Wang et al. CVPR 2019; official code and SEC authors' loss.py"),
        LossSpec("tml", TupletMarginLoss, {"margin": 0.1, "scale": 64.0, "variance_weight": 0.5, "epsilon": 0.01},
                 {"margin": "[0, pi/2)", "scale": "> 0", "variance_weight": ">= 0", "epsilon": ">= 0"}, 4, "TML",
                 "tuplet margin loss (angular margin beta) + lambda * intra-pair variance loss",
                 "Yu & Tao ICCV 2019; same value as PML TupletMarginLoss + 0.5 IntraPairVarianceLoss"),
        LossSpec("ntxent", NTXentLoss, {"temperature": 0.5}, {"temperature": "> 0"}, 2, "NT-Xent",
                 "SimCLR NT-Xent contrastive loss; labels mark the views of one image",
                 "Chen et al. ICML 2020; same value as PML NTXentLoss"),
        LossSpec("supcon", SupConLoss, {"temperature": 0.1}, {"temperature": "> 0"}, 4, "SupCon",
                 "supervised contrastive loss (L_out): every same-class sample is a positive",
                 "Khosla et al. NeurIPS 2020 Eq. 2; same value as PML SupConLoss"),
        LossSpec("normface", NormFaceLoss, {"scale": 16.0}, dict(_SOFTMAX_RULES), 2, "NormFace",
                 "cosine softmax with learnable class weights, no margin",
                 "Wang et al. ACM MM 2017; same value as PML NormalizedSoftmaxLoss(temperature=1/s)",
                 required=("num_classes", "embedding_size")),
        LossSpec("cosface", CosFaceLoss, {"scale": 30.0, "margin": 0.35}, {**_SOFTMAX_RULES, "margin": ">= 0"}, 2,
                 "CosFace", "cosine softmax with additive cosine margin s(cos - m)",
                 "Wang et al. CVPR 2018; same value as PML CosFaceLoss", required=("num_classes", "embedding_size")),
        LossSpec("arcface", ArcFaceLoss, {"scale": 30.0, "margin": 0.5}, {**_SOFTMAX_RULES, "margin": "[0, pi)"}, 2,
                 "ArcFace", "cosine softmax with additive angular margin s cos(theta + m)",
                 "Deng et al. CVPR 2019; same value as PML ArcFaceLoss (margin in degrees there)",
                 required=("num_classes", "embedding_size")),
        LossSpec("contrastive", ContrastiveLoss, {"pos_margin": 0.0, "neg_margin": 1.0},
                 {"pos_margin": ">= 0", "neg_margin": ">= 0"}, 4, "Contrastive",
                 "contrastive loss on the Euclidean distance of normalized embeddings",
                 "Hadsell et al. CVPR 2006; PML ContrastiveLoss (AvgNonZeroReducer)"),
    ]
}

#: Names accepted by :func:`get_loss`.
LOSS_NAMES: tuple = tuple(LOSS_SPECS)
#: The losses that depend on the embeddings only through their directions (all but the inner-product N-pair).
NORMALIZED_LOSSES: tuple = tuple(n for n, spec in LOSS_SPECS.items() if spec.normalized)


def _check_hp(name: str, key: str, value, rule: str, spec: LossSpec):
    test, text = _RULES[rule]
    if rule.startswith("int"):
        ok_type = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok_type = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok_type or not test(value):
        raise ValueError(
            f"loss {name!r}: hyperparameter {key}={value!r} is invalid; it must be {text}. "
            f"Valid keys: {', '.join(spec.valid_keys)}"
        )
    return value if rule.startswith("int") else float(value)


def get_loss(name: str, **hyperparameters) -> nn.Module:
    """Build the loss ``name`` (one of :data:`LOSS_NAMES`) with the paper's defaults, overridden by
    ``hyperparameters``. The result is called as ``loss(raw_embeddings, labels) -> scalar``.

    Raises ValueError for an unknown name, an unknown or missing hyperparameter, or an invalid value.
    """
    if name not in LOSS_SPECS:
        raise ValueError(f"unknown loss name {name!r}; valid names: {', '.join(LOSS_NAMES)}")
    spec = LOSS_SPECS[name]
    unknown = sorted(set(hyperparameters) - set(spec.valid_keys))
    if unknown:
        raise ValueError(
            f"loss {name!r}: unknown hyperparameter(s) {', '.join(unknown)}; valid keys: {', '.join(spec.valid_keys)}"
        )
    missing = [k for k in spec.required if k not in hyperparameters]
    if missing:
        raise ValueError(
            f"loss {name!r}: missing required hyperparameter(s) {', '.join(missing)}; "
            f"valid keys: {', '.join(spec.valid_keys)}"
        )
    kwargs = {**spec.defaults, **hyperparameters}
    kwargs = {k: _check_hp(name, k, v, spec.rules[k], spec) for k, v in kwargs.items()}
    if name == "contrastive" and kwargs["neg_margin"] <= kwargs["pos_margin"]:
        raise ValueError(
            f"loss 'contrastive': neg_margin={kwargs['neg_margin']} must exceed pos_margin={kwargs['pos_margin']}; "
            f"valid keys: {', '.join(spec.valid_keys)}"
        )
    return spec.cls(**kwargs)


# ----------------------------------------------------------------------------- instrumentation
@torch.no_grad()
def triplet_violations(embeddings: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of valid triplets (a, p, n) -- a != p same class, n another class -- with
    ``d_an <= d_ap`` for the Euclidean distance of l2-normalized embeddings (equivalently
    ``cos_an >= cos_ap``; ties count as violations). Returns ``nan`` if the batch has no valid triplet.

    Per anchor the negative cosines are sorted once and every positive is located with
    ``searchsorted``: O(B^2 log B) time and O(B^2) memory, no B^3 tensor.
    """
    _check_inputs(embeddings, labels)
    labels = labels.to(embeddings.device)
    x = F.normalize(embeddings.detach().double(), dim=1)
    cos = x @ x.T
    pos, neg = _pair_masks(labels)
    n_pos, n_neg = pos.sum(dim=1), neg.sum(dim=1)
    total = int((n_pos * n_neg).sum())
    if total == 0:
        return float("nan")
    sorted_neg, _ = cos.masked_fill(~neg, -math.inf).sort(dim=1)  # non-negatives first (-inf)
    # number of negatives with cos_an >= cos_ap = B - (count of entries < cos_ap)
    below = torch.searchsorted(sorted_neg.contiguous(), cos.contiguous(), right=False)
    violating = (len(labels) - below)[pos].sum()
    return float(violating) / total
