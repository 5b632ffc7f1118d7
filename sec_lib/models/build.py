"""``build_model``: an :class:`~.net.EmbeddingNet` from an (arch, head) choice, with the argument checks."""
from __future__ import annotations

import os

import torch
import torch.nn as nn

from ..params import Choice
from .bninception import BNInception
from .layers import check_int
from .mlp import MLPBackbone
from .net import HEADS, EmbeddingNet
from .resnet import ResNet18S, ResNet50
from .smallcnn import SmallCNN
from .weights import CLASSIFIER_PREFIXES, load_backbone_weights

ARCHS = ("smallcnn", "resnet18s", "mlp", "resnet50", "bninception")
POOLS = ("avg", "max", "avgmax")
SMALLCNN_LAYOUTS = ("maxpool", "poolfirst", "stride")

#: Smallest image side each convolutional backbone accepts (forward pass checked in tests/models/test_models.py).
MIN_IMAGE_SIZE = {"smallcnn": 16, "resnet18s": 8, "resnet50": 32, "bninception": 32}

_ARCH_KWARGS = {
    "smallcnn": ("pool", "downsample", "channels_last"),
    "resnet18s": ("pool",),
    "mlp": ("in_dim", "batchnorm"),
    "resnet50": ("pool",),
    "bninception": ("pool",),
}
_COMMON_KWARGS = ("seed",)


def _validate(arch, head, embed_dim, in_channels, image_size, width, pretrained, freeze_bn, kw) -> None:
    Choice(ARCHS).check("arch", arch)
    Choice(HEADS).check("head", head)
    check_int("embed_dim", embed_dim, 1)
    check_int("in_channels", in_channels, 1)
    check_int("width", width, 1)
    if arch != "mlp":
        check_int("image_size", image_size, MIN_IMAGE_SIZE[arch])
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
        check_int("in_dim", kw["in_dim"], 1)
    for flag in ("batchnorm", "channels_last"):
        if flag in kw and not isinstance(kw[flag], bool):
            raise ValueError(f"{flag} must be True or False; got {kw[flag]!r}")
    if kw.get("seed") is not None:
        check_int("seed", kw["seed"], 0)
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
            load_backbone_weights(backbone, pretrained, CLASSIFIER_PREFIXES.get(arch, ()))
        return EmbeddingNet(backbone, head, embed_dim, arch=arch, freeze_bn=freeze_bn)

    if seed is None:
        return _make()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return _make()


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of parameter elements (all, or only those with ``requires_grad``)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
