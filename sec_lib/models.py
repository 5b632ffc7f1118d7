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

One feature that reads top to bottom (the shared layers, each backbone, the head and :class:`EmbeddingNet`,
then ``build_model`` with its checks and ``load_backbone_weights``), hence longer than the book's other modules:
the backbones are reached only through ``build_model``, whose argument checks name every (arch, head) choice, so
the table above, the classes and the checks are kept in one file to be read together.
"""

from __future__ import annotations

import os
from typing import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

from .params import Choice

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

ARCHS = ("smallcnn", "resnet18s", "mlp", "resnet50", "bninception")
HEADS = ("paper", "nobn", "bn_before_norm", "weightnorm", "normalize")
POOLS = ("avg", "max", "avgmax")
SMALLCNN_LAYOUTS = ("maxpool", "poolfirst", "stride")

#: Smallest image side each convolutional backbone accepts (forward pass checked in tests/test_models.py).
MIN_IMAGE_SIZE = {"smallcnn": 16, "resnet18s": 8, "resnet50": 32, "bninception": 32}

#: Input convention of the public ImageNet weights of the two pretrained backbones (for the data pipeline).
PRETRAINED_INPUT = {
    # torchvision: RGB in [0, 1], then per-channel standardization.
    "resnet50": {"space": "RGB", "range": (0.0, 1.0), "mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)},
    # Cadene pretrainedmodels bninception (ported from Caffe): BGR in [0, 255], mean subtracted, std 1.
    "bninception": {"space": "BGR", "range": (0.0, 255.0), "mean": (104.0, 117.0, 128.0), "std": (1.0, 1.0, 1.0)},
}

# Keys of the classifier layer of the pretrained ImageNet files; they are dropped when loading a backbone.
_CLASSIFIER_PREFIXES = {"resnet50": ("fc.",), "bninception": ("last_linear.",)}


# ----------------------------------------------------------------------------------------------------- helpers
def _pool(x: torch.Tensor, pool: str) -> torch.Tensor:
    """Global pooling of a (B, C, H, W) map to (B, C)."""
    if pool == "avg":
        return x.mean(dim=(2, 3))
    if pool == "max":
        return x.amax(dim=(2, 3))
    return x.mean(dim=(2, 3)) + x.amax(dim=(2, 3))  # "avgmax", as used by several DML code bases


def _kaiming_init(module: nn.Module) -> None:
    """He-normal (fan_out) conv init and BN weight 1 / bias 0, as torchvision's ResNet."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def _conv_pool_bn_relu(cin: int, cout: int) -> nn.Sequential:
    """conv3x3 -> max-pool 2 -> BN -> ReLU: the conv runs at full resolution, BN/ReLU on the 4x smaller map."""
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False),
        nn.MaxPool2d(2),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


def _conv_bn_relu(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


# ----------------------------------------------------------------------------------------------------- backbones
class SmallCNN(nn.Module):
    """Four 3x3 convolutions and global pooling, for 32-px glyph images on a CPU (feature dim ``4 * width``).

    Default layout ``downsample="poolfirst"`` (w = ``width``; sizes for a 32-px input)::

        conv(in -> w, stride 2) -> BN -> ReLU              32 -> 16
        conv(w -> 2w)  -> max-pool 2 -> BN -> ReLU         16 -> 8
        conv(2w -> 4w) -> max-pool 2 -> BN -> ReLU          8 -> 4
        conv(4w -> 4w) -> BN -> ReLU                        4
        global pool -> feature 4w

    It has the same convolutions as the lead's reference layout ``downsample="maxpool"`` (conv -> BN -> ReLU ->
    max-pool), but BN and ReLU run on the pooled map, 4x fewer elements (max-pool commutes with ReLU and with a
    positive BN scale, so the function class is essentially the same). ``downsample="stride"`` replaces the first
    max-pool by a stride-2 second conv: fastest, but it lost ~5 points of Recall@1 in a proxy check.
    ``channels_last=True`` stores weights and activations NHWC, faster on CPU (oneDNN); it changes no values.

    Measured on the 2-core dev machine (width 16, 32x32x1, fwd + bwd + Adam, median ms/step at batch 60 / 120):

    ================  =============  =============
    layout            1 thread       2 threads
    ================  =============  =============
    maxpool NCHW      28.9 / 51.2    18.0 / 31.9
    maxpool NHWC      22.0 / 36.0    12.6 / 23.1
    poolfirst NHWC    18.0 / 31.5    11.0 / 18.6
    stride NHWC       15.2 / 24.7     9.8 / 15.6
    ================  =============  =============

    Proxy check of capacity (rendered font glyphs, 60 unseen classes, 600 MS-loss steps, 3 seeds, mean R@1):
    maxpool 89.1, poolfirst 89.6, stride 83.9.
    """

    def __init__(
        self,
        in_channels: int = 1,
        width: int = 16,
        pool: str = "avg",
        downsample: str = "poolfirst",
        channels_last: bool = True,
    ):
        super().__init__()
        w = width
        self.pool = pool
        self.downsample = downsample
        self.channels_last = channels_last
        if downsample == "stride":
            self.features = nn.Sequential(
                _conv_bn_relu(in_channels, w, stride=2),
                _conv_bn_relu(w, 2 * w, stride=2),
                _conv_bn_relu(2 * w, 4 * w),
                nn.MaxPool2d(2),
                _conv_bn_relu(4 * w, 4 * w),
            )
        elif downsample == "poolfirst":
            self.features = nn.Sequential(
                _conv_bn_relu(in_channels, w, stride=2),
                _conv_pool_bn_relu(w, 2 * w),
                _conv_pool_bn_relu(2 * w, 4 * w),
                _conv_bn_relu(4 * w, 4 * w),
            )
        else:  # "maxpool"
            self.features = nn.Sequential(
                _conv_bn_relu(in_channels, w, stride=2),
                _conv_bn_relu(w, 2 * w),
                nn.MaxPool2d(2),
                _conv_bn_relu(2 * w, 4 * w),
                nn.MaxPool2d(2),
                _conv_bn_relu(4 * w, 4 * w),
            )
        self.feature_dim = 4 * w
        _kaiming_init(self)
        if channels_last:
            self.to(memory_format=torch.channels_last)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return _pool(self.features(x), self.pool)


class BasicBlock(nn.Module):
    """ResNet basic block (two 3x3 convs), torchvision naming."""

    expansion = 1

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """ResNet bottleneck block, torchvision v1.5 (stride on the 3x3 conv) with torchvision's module names."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1):
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


def _make_layer(block, cin: int, planes: int, blocks: int, stride: int) -> tuple[nn.Sequential, int]:
    layers = [block(cin, planes, stride)]
    cin = planes * block.expansion
    layers += [block(cin, planes, 1) for _ in range(blocks - 1)]
    return nn.Sequential(*layers), cin


class ResNet18S(nn.Module):
    """ResNet-18 for small images: 3x3 stride-1 stem, no max-pool (the CIFAR variant of He et al. 2016).

    Stages of [2, 2, 2, 2] basic blocks with ``width``, 2, 4, 8 x ``width`` channels; feature dim ``8 * width``.
    """

    def __init__(self, in_channels: int = 3, width: int = 64, pool: str = "avg"):
        super().__init__()
        self.pool = pool
        self.conv1 = nn.Conv2d(in_channels, width, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        c = width
        self.layer1, c = _make_layer(BasicBlock, c, width, 2, 1)
        self.layer2, c = _make_layer(BasicBlock, c, 2 * width, 2, 2)
        self.layer3, c = _make_layer(BasicBlock, c, 4 * width, 2, 2)
        self.layer4, c = _make_layer(BasicBlock, c, 8 * width, 2, 2)
        self.feature_dim = c
        _kaiming_init(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return _pool(x, self.pool)


class ResNet50(nn.Module):
    """ResNet-50 (He et al. 2016; torchvision's v1.5) whose ``state_dict`` keys equal torchvision's ``resnet50``
    without ``fc.*``: conv1, bn1, layer{1..4}.{i}.conv{1,2,3}/bn{1,2,3}, layer{k}.0.downsample.{0,1}.

    Feature dim 2048 (``width`` = 64 base planes gives the standard network; other widths scale it and cannot
    load ImageNet weights).
    """

    def __init__(self, in_channels: int = 3, width: int = 64, pool: str = "avg"):
        super().__init__()
        self.pool = pool
        self.conv1 = nn.Conv2d(in_channels, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        c = width
        self.layer1, c = _make_layer(Bottleneck, c, width, 3, 1)
        self.layer2, c = _make_layer(Bottleneck, c, 2 * width, 4, 2)
        self.layer3, c = _make_layer(Bottleneck, c, 4 * width, 6, 2)
        self.layer4, c = _make_layer(Bottleneck, c, 8 * width, 3, 2)
        self.feature_dim = c
        _kaiming_init(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return _pool(x, self.pool)


# BN-Inception inception modules: (name, in_channels, 1x1, (3x3 reduce, 3x3), (double reduce, double 3x3),
# pool branch, stride). pool branch: ("avg", proj) / ("max", proj) with a 1x1 projection, or ("max", None)
# without one (the stride-2 "c"/"e" modules). Channel numbers follow Ioffe & Szegedy (2015), Fig. 5 / Table 1,
# as ported from Caffe in Cadene's pretrainedmodels; concatenation order: 1x1, 3x3, double 3x3, pool.
_BNI_MODULES = (
    ("3a", 192, 64, (64, 64), (64, 96), ("avg", 32), 1),
    ("3b", 256, 64, (64, 96), (64, 96), ("avg", 64), 1),
    ("3c", 320, 0, (128, 160), (64, 96), ("max", None), 2),
    ("4a", 576, 224, (64, 96), (96, 128), ("avg", 128), 1),
    ("4b", 576, 192, (96, 128), (96, 128), ("avg", 128), 1),
    ("4c", 576, 160, (128, 160), (128, 160), ("avg", 128), 1),
    ("4d", 608, 96, (128, 192), (160, 192), ("avg", 128), 1),
    ("4e", 608, 0, (128, 192), (192, 256), ("max", None), 2),
    ("5a", 1056, 352, (192, 320), (160, 224), ("avg", 128), 1),
    ("5b", 1024, 352, (192, 320), (192, 224), ("max", 128), 1),
)


class BNInception(nn.Module):
    """BN-Inception (Ioffe & Szegedy, "Batch Normalization", ICML 2015), the backbone of the SEC paper.

    Every conv has a bias and is followed by BatchNorm and ReLU. Modules are registered flat under the names of
    Cadene's ``pretrainedmodels`` port (``conv1_7x7_s2``, ``conv1_7x7_s2_bn``, ``conv2_3x3_reduce``, ...,
    ``inception_5b_pool_proj_bn``) so its ImageNet ``state_dict`` loads directly. Feature dim 1024.
    Stem max-pools and the stride-2 modules' pools use ``ceil_mode=True`` as in the Caffe original.
    """

    def __init__(self, in_channels: int = 3, pool: str = "avg"):
        super().__init__()
        self.pool = pool
        self._add_cbr("conv1_7x7_s2", in_channels, 64, 7, stride=2, padding=3)
        self.pool1_3x3_s2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self._add_cbr("conv2_3x3_reduce", 64, 64, 1)
        self._add_cbr("conv2_3x3", 64, 192, 3, padding=1)
        self.pool2_3x3_s2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self._blocks = []
        for name, cin, c1, (r3, c3), (rd, cd), (ptype, pproj), stride in _BNI_MODULES:
            p = f"inception_{name}_"
            if c1:
                self._add_cbr(p + "1x1", cin, c1, 1)
            self._add_cbr(p + "3x3_reduce", cin, r3, 1)
            self._add_cbr(p + "3x3", r3, c3, 3, stride=stride, padding=1)
            self._add_cbr(p + "double_3x3_reduce", cin, rd, 1)
            self._add_cbr(p + "double_3x3_1", rd, cd, 3, padding=1)
            self._add_cbr(p + "double_3x3_2", cd, cd, 3, stride=stride, padding=1)
            if stride == 2:
                pool_layer = nn.MaxPool2d(3, stride=2, ceil_mode=True)
            elif ptype == "avg":
                pool_layer = nn.AvgPool2d(3, stride=1, padding=1, ceil_mode=True, count_include_pad=True)
            else:
                pool_layer = nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True)
            setattr(self, p + "pool", pool_layer)
            if pproj:
                self._add_cbr(p + "pool_proj", cin, pproj, 1)
            self._blocks.append((p, bool(c1), bool(pproj)))
        self.feature_dim = 1024
        _kaiming_init(self)

    def _add_cbr(self, name: str, cin: int, cout: int, k: int, stride: int = 1, padding: int = 0) -> None:
        setattr(self, name, nn.Conv2d(cin, cout, k, stride=stride, padding=padding, bias=True))
        setattr(self, name + "_bn", nn.BatchNorm2d(cout))

    def _cbr(self, name: str, x: torch.Tensor) -> torch.Tensor:
        return F.relu(getattr(self, name + "_bn")(getattr(self, name)(x)), inplace=True)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool1_3x3_s2(self._cbr("conv1_7x7_s2", x))
        x = self._cbr("conv2_3x3", self._cbr("conv2_3x3_reduce", x))
        x = self.pool2_3x3_s2(x)
        for p, has_1x1, has_proj in self._blocks:
            outs = []
            if has_1x1:
                outs.append(self._cbr(p + "1x1", x))
            outs.append(self._cbr(p + "3x3", self._cbr(p + "3x3_reduce", x)))
            d = self._cbr(p + "double_3x3_reduce", x)
            outs.append(self._cbr(p + "double_3x3_2", self._cbr(p + "double_3x3_1", d)))
            pooled = getattr(self, p + "pool")(x)
            outs.append(self._cbr(p + "pool_proj", pooled) if has_proj else pooled)
            x = torch.cat(outs, 1)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _pool(self.forward_features(x), self.pool)


class MLPBackbone(nn.Module):
    """Two hidden layers Linear -> (BN) -> ReLU; the "feature" is the last hidden layer (dim ``width``).

    Inputs of any shape (B, ...) are flattened to (B, in_dim).
    """

    def __init__(self, in_dim: int, width: int = 64, batchnorm: bool = False):
        super().__init__()
        layers: list[nn.Module] = []
        d = in_dim
        for _ in range(2):
            layers.append(nn.Linear(d, width))
            if batchnorm:
                layers.append(nn.BatchNorm1d(width))
            layers.append(nn.ReLU(inplace=True))
            d = width
        self.net = nn.Sequential(*layers)
        self.in_dim = in_dim
        self.feature_dim = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.flatten(1))


# ----------------------------------------------------------------------------------------------------- head + net
class EmbeddingHead(nn.Module):
    """Maps the pooled feature to the embedding; ``kind`` is one of :data:`HEADS` (see the module docstring).

    ``forward(h) -> (emb, prenorm)``; ``prenorm is emb`` for every kind except ``"normalize"``.
    """

    def __init__(self, kind: str, feature_dim: int, embed_dim: int):
        super().__init__()
        if kind not in HEADS:
            raise ValueError(f"head={kind!r} is not valid; choose one of {HEADS}")
        _check_int("feature_dim", feature_dim, 1)
        _check_int("embed_dim", embed_dim, 1)
        self.kind = kind
        self.bn = nn.BatchNorm1d(feature_dim) if kind != "nobn" else None
        fc = nn.Linear(feature_dim, embed_dim)
        if kind == "weightnorm":
            fc = torch.nn.utils.parametrizations.weight_norm(fc, name="weight", dim=0)
        self.fc = fc
        self.out_bn = nn.BatchNorm1d(embed_dim) if kind == "bn_before_norm" else None

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.bn is not None:
            h = self.bn(h)
        z = self.fc(h)
        if self.out_bn is not None:
            z = self.out_bn(z)
        if self.kind == "normalize":
            return F.normalize(z, p=2, dim=1), z
        return z, z


class EmbeddingNet(nn.Module):
    """Backbone (pooled feature, dim ``feature_dim``) followed by an :class:`EmbeddingHead`.

    Attributes: ``arch``, ``head_name``, ``feature_dim``, ``embed_dim``, ``freeze_bn``, ``input_spec`` (the input
    convention of the public pretrained weights, or None).
    """

    def __init__(self, backbone: nn.Module, head: str, embed_dim: int, arch: str = "custom", freeze_bn: bool = False):
        super().__init__()
        self.backbone = backbone
        self.feature_dim = int(backbone.feature_dim)
        self.embed_dim = int(embed_dim)
        self.head = EmbeddingHead(head, self.feature_dim, self.embed_dim)
        self.head_name = head
        self.arch = arch
        self.freeze_bn = bool(freeze_bn)
        self.input_spec = PRETRAINED_INPUT.get(arch)
        if self.freeze_bn:
            for m in self._backbone_bns():
                for prm in m.parameters():
                    prm.requires_grad_(False)
            self.train(self.training)

    def _backbone_bns(self) -> Iterator[nn.Module]:
        return (m for m in self.backbone.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm))

    def train(self, mode: bool = True) -> "EmbeddingNet":
        """As ``nn.Module.train``, but with ``freeze_bn`` the backbone's BatchNorm layers stay in eval mode."""
        super().train(mode)
        if self.freeze_bn:
            for m in self._backbone_bns():
                m.eval()
        return self

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Pooled backbone feature, shape (B, feature_dim)."""
        return self.backbone(x)

    def forward_with_prenorm(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(emb, prenorm)``: the embedding and the tensor whose norms SEC should constrain."""
        return self.head(self.backbone(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_with_prenorm(x)[0]

    def backbone_parameters(self) -> list[nn.Parameter]:
        """Trainable backbone parameters (for a separate learning rate, as in the paper)."""
        return [p for p in self.backbone.parameters() if p.requires_grad]

    def head_parameters(self) -> list[nn.Parameter]:
        """Trainable head parameters."""
        return [p for p in self.head.parameters() if p.requires_grad]


# ----------------------------------------------------------------------------------------------------- builders
_ARCH_KWARGS = {
    "smallcnn": ("pool", "downsample", "channels_last"),
    "resnet18s": ("pool",),
    "mlp": ("in_dim", "batchnorm"),
    "resnet50": ("pool",),
    "bninception": ("pool",),
}
_COMMON_KWARGS = ("seed",)


def _check_int(name: str, value, minimum: int) -> None:
    # stricter than params.Number(integer=True), which accepts 2.0: a layer size must be an int
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")


def _validate(arch, head, embed_dim, in_channels, image_size, width, pretrained, freeze_bn, kw) -> None:
    Choice(ARCHS).check("arch", arch)
    Choice(HEADS).check("head", head)
    _check_int("embed_dim", embed_dim, 1)
    _check_int("in_channels", in_channels, 1)
    _check_int("width", width, 1)
    if arch != "mlp":
        _check_int("image_size", image_size, MIN_IMAGE_SIZE[arch])
    if not isinstance(freeze_bn, bool):
        raise ValueError(f"freeze_bn must be True or False; got {freeze_bn!r}")
    allowed = _ARCH_KWARGS[arch] + _COMMON_KWARGS
    unknown = sorted(set(kw) - set(allowed))
    if unknown:
        raise ValueError(f"unknown keyword(s) {unknown} for arch={arch!r}; valid extra keywords: {allowed}")
    if "pool" in kw:
        Choice(POOLS).check("pool", kw["pool"])
    if "downsample" in kw:
        Choice(SMALLCNN_LAYOUTS).check("downsample", kw["downsample"])
    if "in_dim" in kw:
        _check_int("in_dim", kw["in_dim"], 1)
    for flag in ("batchnorm", "channels_last"):
        if flag in kw and not isinstance(kw[flag], bool):
            raise ValueError(f"{flag} must be True or False; got {kw[flag]!r}")
    if kw.get("seed") is not None:
        _check_int("seed", kw["seed"], 0)
    if pretrained is not None:
        if not isinstance(pretrained, (str, os.PathLike)):
            raise ValueError(f"pretrained must be None or a path to a state_dict file; got {pretrained!r}")
        if not os.path.isfile(pretrained):
            raise FileNotFoundError(f"pretrained={str(pretrained)!r}: no such file")


def _build_backbone(arch, in_channels, width, kw) -> nn.Module:
    pool = kw.get("pool", "avg")
    if arch == "smallcnn":
        return SmallCNN(
            in_channels,
            width,
            pool=pool,
            downsample=kw.get("downsample", "poolfirst"),
            channels_last=kw.get("channels_last", True),
        )
    if arch == "resnet18s":
        return ResNet18S(in_channels, width, pool=pool)
    if arch == "mlp":
        return MLPBackbone(kw.get("in_dim", in_channels), width, batchnorm=kw.get("batchnorm", False))
    if arch == "resnet50":
        return ResNet50(in_channels, width, pool=pool)
    return BNInception(in_channels, pool=pool)


def load_backbone_weights(backbone: nn.Module, path, ignore_prefixes: tuple[str, ...] = ()) -> None:
    """Load a ``state_dict`` file into ``backbone`` with ``torch.load(path, map_location="cpu", weights_only=True)``.

    A leading ``"module."`` (DataParallel) or ``"backbone."`` prefix is stripped, keys starting with one of
    ``ignore_prefixes`` (the ImageNet classifier) are dropped, and BatchNorm ``num_batches_tracked`` buffers may be
    absent (files saved by PyTorch < 0.4). Anything else that does not fit raises ValueError listing the missing,
    unexpected and wrongly shaped keys.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"pretrained={str(path)!r}: no such file")
    state = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise ValueError(f"pretrained={str(path)!r} does not hold a state_dict (got {type(state).__name__})")
    cleaned = {}
    for k, v in state.items():
        for prefix in ("module.", "backbone."):
            if k.startswith(prefix):
                k = k[len(prefix):]
        if any(k.startswith(p) for p in ignore_prefixes):
            continue
        cleaned[k] = v
    own = backbone.state_dict()
    missing = sorted(k for k in own if k not in cleaned and not k.endswith("num_batches_tracked"))
    unexpected = sorted(k for k in cleaned if k not in own)
    wrong_shape = sorted(
        f"{k}: file {tuple(cleaned[k].shape)} vs model {tuple(own[k].shape)}"
        for k in cleaned
        if k in own and tuple(cleaned[k].shape) != tuple(own[k].shape)
    )
    if missing or unexpected or wrong_shape:
        raise ValueError(
            f"pretrained={str(path)!r} does not fit the {type(backbone).__name__} backbone: "
            f"missing keys {missing[:20]}{' ...' if len(missing) > 20 else ''} ({len(missing)}), "
            f"unexpected keys {unexpected[:20]}{' ...' if len(unexpected) > 20 else ''} ({len(unexpected)}), "
            f"shape mismatches {wrong_shape[:20]} ({len(wrong_shape)})"
        )
    backbone.load_state_dict(cleaned, strict=False)


def build_model(
    arch: str,
    head: str = "paper",
    embed_dim: int = 64,
    in_channels: int = 1,
    image_size: int = 32,
    width: int = 16,
    pretrained=None,
    freeze_bn: bool = False,
    **kw,
) -> EmbeddingNet:
    """Build an :class:`EmbeddingNet` (backbone ``arch`` + head ``head``).

    Args:
        arch: one of :data:`ARCHS`.
        head: one of :data:`HEADS`.
        embed_dim: embedding dimension D.
        in_channels: image channels (for ``mlp``: the input dim unless ``in_dim`` is given).
        image_size: image side; only checked against the smallest size the arch accepts (:data:`MIN_IMAGE_SIZE`).
        width: base channel width (smallcnn: w -> feature 4w; resnet18s: w -> feature 8w; resnet50: base planes,
            64 for ImageNet weights; mlp: hidden width). Ignored by ``bninception``.
        pretrained: path to a backbone ``state_dict`` file (e.g. torchvision's ``resnet50-*.pth`` or Cadene's
            ``bn_inception-*.pth``); the ImageNet classifier keys are ignored.
        freeze_bn: keep backbone BatchNorm layers in eval mode with frozen affine parameters.
        **kw: ``pool`` ("avg" | "max" | "avgmax", CNNs), ``downsample`` ("poolfirst" | "maxpool" | "stride", smallcnn; see
            :class:`SmallCNN`),
            ``channels_last`` (bool, smallcnn, default True),
            ``in_dim`` and ``batchnorm`` (mlp), ``seed`` (int: initialize under ``torch.manual_seed(seed)``
            inside a forked RNG, leaving the global RNG untouched).

    Raises:
        ValueError: invalid argument (the message names the valid choices) or weights that do not fit.
        FileNotFoundError: ``pretrained`` path does not exist.
    """
    _validate(arch, head, embed_dim, in_channels, image_size, width, pretrained, freeze_bn, kw)
    seed = kw.get("seed")

    def _make() -> EmbeddingNet:
        backbone = _build_backbone(arch, in_channels, width, kw)
        if pretrained is not None:
            load_backbone_weights(backbone, pretrained, _CLASSIFIER_PREFIXES.get(arch, ()))
        return EmbeddingNet(backbone, head, embed_dim, arch=arch, freeze_bn=freeze_bn)

    if seed is None:
        return _make()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return _make()


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of parameter elements (all, or only those with ``requires_grad``)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
