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

The package follows pytorch-metric-learning's layout, one module per family: :mod:`.pair` (triplet, semihard,
multi-similarity, tuplet margin, and ``triplet_violations``), :mod:`.npair` (the N-pair readings),
:mod:`.contrastive` (NT-Xent, SupCon, contrastive), :mod:`.proxy` (NormFace, CosFace, ArcFace with class
weights), :mod:`.base` (input checks and the base class), :mod:`.registry` (``LOSS_SPECS``, ``get_loss``) and
:mod:`.portable` (the transcendental ops the ``SEC_KERNELS=portable`` pin computes in float64; under any other pin
torch's own). Every public name is importable from ``sec_lib.losses``.
"""
from __future__ import annotations

from .contrastive import ContrastiveLoss, NTXentLoss, SupConLoss
from .npair import InnerProductNPairLoss, NormalizedNPairLoss
from .pair import MultiSimilarityLoss, SemihardTripletLoss, TripletLoss, TupletMarginLoss, triplet_violations, violation_rate
from .proxy import ArcFaceLoss, CosFaceLoss, NormFaceLoss
from .registry import LOSS_NAMES, LOSS_SPECS, NORMALIZED_LOSSES, LossSpec, get_loss

__all__ = [
    "LOSS_NAMES",
    "LOSS_SPECS",
    "NORMALIZED_LOSSES",
    "LossSpec",
    "get_loss",
    "triplet_violations",
    "violation_rate",
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
