"""Embedding networks: a backbone that yields a pooled feature vector, and a head that maps it to the embedding.

``build_model(arch, head=...)`` returns an :class:`EmbeddingNet`. Its ``forward(x)`` returns the raw embedding f
(NOT l2-normalized, except for the ``"normalize"`` head); ``forward_with_prenorm(x)`` also returns the tensor the
Spherical Embedding Constraint should act on (the same tensor as the embedding for every head but ``"normalize"``).

Heads (all start from the pooled backbone feature):

==================  ==========================================================================================
``paper``           BN1d(feat) -> Linear(feat, D). The head of the SEC paper (Zhang et al., NeurIPS 2020:
                    pool -> BN(1024) -> FC(512) on BN-Inception).
``nobn``            Linear(feat, D).
``bn_before_norm``  BN1d -> Linear -> BN1d(D): BatchNorm directly before the loss's l2-normalization
                    (the setting of the SEC rebuttal's Table 5).
``weightnorm``      BN1d -> weight-normed Linear (Salimans & Kingma 2016, ``torch.nn.utils.parametrizations``).
``normalize``       BN1d -> Linear -> l2-normalize inside the network (Reviewer 4's "normalize layer" baseline).
                    ``forward`` gives unit vectors; the pre-normalization Linear output is the ``prenorm``.
==================  ==========================================================================================

Backbones:

* ``smallcnn`` - a 4-conv network for 32-px grayscale glyphs, sized to train on 2 CPU cores (any image >= 16 px).
* ``resnet18s`` - ResNet-18 (He et al. 2016) with the CIFAR-style 3x3 stem and no max-pool, for small images.
* ``mlp`` - two hidden layers, for the low-dimensional toy data.
* ``resnet50`` - ResNet-50 (v1.5, stride on the 3x3 conv) with torchvision's module names, so that torchvision's
  ImageNet ``state_dict`` files load with ``pretrained=path`` (``fc.*`` is ignored).
* ``bninception`` - BN-Inception (Ioffe & Szegedy, ICML 2015), the paper's backbone, with the module names of
  Cadene's ``pretrainedmodels.bninception`` (``conv1_7x7_s2``, ``inception_3a_1x1_bn`` ...), so that those
  ImageNet weights load (``last_linear.*`` is ignored). It expects BGR input in [0, 255] minus the mean
  ``[104, 117, 128]`` (see :data:`PRETRAINED_INPUT`).

``freeze_bn=True`` keeps every BatchNorm of the *backbone* in eval mode with frozen affine parameters (the paper's
frozen BN); the head's BatchNorm layers still train.

Modules: :mod:`.layers` (the shared pieces), one per backbone (:mod:`.smallcnn`, :mod:`.resnet`,
:mod:`.bninception`, :mod:`.mlp`), :mod:`.net` (the head and :class:`EmbeddingNet`), :mod:`.weights` (pretrained
files) and :mod:`.build` (``build_model`` and its argument checks, which name every (arch, head) choice).
"""
from __future__ import annotations

from .bninception import BNInception
from .build import ARCHS, MIN_IMAGE_SIZE, POOLS, SMALLCNN_LAYOUTS, build_model, count_parameters
from .mlp import MLPBackbone
from .net import HEADS, EmbeddingHead, EmbeddingNet
from .resnet import ResNet18S, ResNet50
from .smallcnn import SmallCNN
from .weights import PRETRAINED_INPUT, load_backbone_weights

__all__ = [
    "ARCHS",
    "HEADS",
    "POOLS",
    "SMALLCNN_LAYOUTS",
    "MIN_IMAGE_SIZE",
    "PRETRAINED_INPUT",
    "EmbeddingNet",
    "EmbeddingHead",
    "SmallCNN",
    "ResNet18S",
    "MLPBackbone",
    "ResNet50",
    "BNInception",
    "build_model",
    "load_backbone_weights",
    "count_parameters",
]
