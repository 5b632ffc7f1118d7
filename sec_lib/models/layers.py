"""The pieces the backbones and the head share: global pooling, He initialization, the conv blocks, and the
integer check of a layer size."""
from __future__ import annotations

import torch
import torch.nn as nn


def global_pool(x: torch.Tensor, pool: str) -> torch.Tensor:
    """Global pooling of a (B, C, H, W) map to (B, C)."""
    if pool == "avg":
        return x.mean(dim=(2, 3))
    if pool == "max":
        return x.amax(dim=(2, 3))
    return x.mean(dim=(2, 3)) + x.amax(dim=(2, 3))  # "avgmax", as used by several DML code bases


def kaiming_init(module: nn.Module) -> None:
    """He-normal (fan_out) conv init and BN weight 1 / bias 0, as torchvision's ResNet."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def conv_pool_bn_relu(cin: int, cout: int) -> nn.Sequential:
    """conv3x3 -> max-pool 2 -> BN -> ReLU: the conv runs at full resolution, BN/ReLU on the 4x smaller map."""
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False),
        nn.MaxPool2d(2),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


def conv_bn_relu(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


def check_int(name: str, value, minimum: int) -> None:
    """Raise ValueError unless ``value`` is an int >= ``minimum``: stricter than ``params.Number(integer=True)``,
    which accepts 2.0, since a layer size must be an int."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
