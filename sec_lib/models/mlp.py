"""The MLP backbone for low-dimensional toy data."""
from __future__ import annotations

import torch
import torch.nn as nn


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
