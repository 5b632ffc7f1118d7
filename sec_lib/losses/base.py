"""The shared pieces of :mod:`sec_lib.losses`: input checks, pair masks and the :class:`MetricLoss` base class
that every loss derives from (it validates ``(embeddings, labels)`` and calls ``compute``)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# cosines are clamped to this open interval before acos (d acos/dc is infinite at +-1)
ACOS_EPS = 1e-7


def check_inputs(embeddings, labels) -> None:
    if not isinstance(embeddings, torch.Tensor) or embeddings.ndim != 2 or embeddings.shape[0] < 1:
        shape = tuple(embeddings.shape) if isinstance(embeddings, torch.Tensor) else type(embeddings).__name__
        raise ValueError(f"embeddings must be a 2-D tensor (B, D) with B >= 1; got {shape}")
    if not embeddings.is_floating_point():
        raise ValueError(f"embeddings must be floating point; got dtype {embeddings.dtype}")
    if not isinstance(labels, torch.Tensor) or labels.ndim != 1 or labels.shape[0] != embeddings.shape[0]:
        shape = tuple(labels.shape) if isinstance(labels, torch.Tensor) else type(labels).__name__
        raise ValueError(f"labels must be a 1-D tensor with one label per embedding ({embeddings.shape[0]}); got {shape}")
    if labels.is_floating_point() or labels.is_complex():
        raise ValueError(f"labels must be an integer tensor; got dtype {labels.dtype}")


def sync_free(t: torch.Tensor) -> bool:
    """Whether a loss on ``t`` takes its branch-free, fixed-shape form: off the CPU (a GPU) a branch on a tensor's
    value (``if mask.any()``) or a boolean index (``x[mask]``) makes the host wait for the device, which stalls a
    training step that could otherwise run ahead. The two forms compute the same loss; on the CPU, where reading
    a value costs nothing, the original form is kept, so CPU runs keep their numbers to the bit."""
    return t.device.type != "cpu"


def zero_loss(embeddings: torch.Tensor) -> torch.Tensor:
    """A zero loss that stays attached to the graph (so ``.backward()`` works)."""
    return embeddings.sum() * 0.0


def squared_distances(embeddings: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean distances of the l2-normalized embeddings, 2 - 2 cos (B x B)."""
    x = F.normalize(embeddings, dim=1)
    return (2.0 - 2.0 * x @ x.T).clamp_min(0.0)


def pair_masks(labels: torch.Tensor):
    """(positive, negative) boolean B x B masks; positives exclude the diagonal."""
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    return same & ~eye, ~same


class MetricLoss(nn.Module):
    """Base: validates ``(embeddings, labels)`` and calls :meth:`compute`."""

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        check_inputs(embeddings, labels)
        return self.compute(embeddings, labels.to(embeddings.device))

    def compute(self, embeddings, labels):  # pragma: no cover - abstract
        raise NotImplementedError

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={getattr(self, k)!r}" for k in self._hp_names)

    _hp_names: tuple = ()
