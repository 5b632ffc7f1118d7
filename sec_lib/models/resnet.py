"""ResNets: ResNet-18 for small images and ResNet-50 with torchvision's module names."""
from __future__ import annotations

import torch
import torch.nn as nn

from .layers import global_pool, kaiming_init


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


def make_layer(block, cin: int, planes: int, blocks: int, stride: int) -> tuple[nn.Sequential, int]:
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
        self.layer1, c = make_layer(BasicBlock, c, width, 2, 1)
        self.layer2, c = make_layer(BasicBlock, c, 2 * width, 2, 2)
        self.layer3, c = make_layer(BasicBlock, c, 4 * width, 2, 2)
        self.layer4, c = make_layer(BasicBlock, c, 8 * width, 2, 2)
        self.feature_dim = c
        kaiming_init(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return global_pool(x, self.pool)


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
        self.layer1, c = make_layer(Bottleneck, c, width, 3, 1)
        self.layer2, c = make_layer(Bottleneck, c, 2 * width, 4, 2)
        self.layer3, c = make_layer(Bottleneck, c, 4 * width, 6, 2)
        self.layer4, c = make_layer(Bottleneck, c, 8 * width, 3, 2)
        self.feature_dim = c
        kaiming_init(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return global_pool(x, self.pool)
