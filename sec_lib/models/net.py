"""The embedding head and :class:`EmbeddingNet`, a backbone followed by a head."""
from __future__ import annotations

from typing import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

from .layers import check_int
from .weights import PRETRAINED_INPUT

HEADS = ("paper", "nobn", "bn_before_norm", "weightnorm", "normalize")


class EmbeddingHead(nn.Module):
    """Maps the pooled feature to the embedding; ``kind`` is one of :data:`HEADS` (see the module docstring).

    ``forward(h) -> (emb, prenorm)``; ``prenorm is emb`` for every kind except ``"normalize"``.
    """

    def __init__(self, kind: str, feature_dim: int, embed_dim: int):
        super().__init__()
        if kind not in HEADS:
            raise ValueError(f"head={kind!r} is not valid; choose one of {HEADS}")
        check_int("feature_dim", feature_dim, 1)
        check_int("embed_dim", embed_dim, 1)
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
