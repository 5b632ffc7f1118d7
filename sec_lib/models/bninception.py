"""BN-Inception, the backbone of the SEC paper, with the module names of Cadene's pretrained port."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .layers import global_pool, kaiming_init


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
        kaiming_init(self)

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
        return global_pool(self.forward_features(x), self.pool)
