"""The loss registry: :data:`LOSS_SPECS` (each loss's class, paper defaults, hyperparameter rules and the K of its
P x K batch) and :func:`get_loss`, which builds a loss by name and validates its hyperparameters.
A new loss is a class in the family module it belongs to plus one :class:`LossSpec` entry here."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from torch import nn

from .contrastive import ContrastiveLoss, NTXentLoss, SupConLoss
from .npair import InnerProductNPairLoss, NormalizedNPairLoss
from .pair import MultiSimilarityLoss, SemihardTripletLoss, TripletLoss, TupletMarginLoss
from .proxy import ArcFaceLoss, CosFaceLoss, NormFaceLoss


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
