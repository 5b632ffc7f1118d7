"""Proxy (cosine-softmax) losses with learnable class weights: NormFace, CosFace and ArcFace."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .portable import portable_acos, portable_cos
from .base import ACOS_EPS, MetricLoss


# ------------------------------------------------------------------------------ cosine-softmax
class _CosineSoftmaxLoss(MetricLoss):
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
        theta = portable_acos(cos_target.clamp(-1 + ACOS_EPS, 1 - ACOS_EPS))     # float64 under the portable pin
        return torch.where(
            theta <= math.pi - self.margin,
            portable_cos(theta + self.margin),
            cos_target - self.margin * math.sin(self.margin),
        )
