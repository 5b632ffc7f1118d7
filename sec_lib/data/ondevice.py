"""A tensor dataset's images (and labels) on a device, copied once per process: the GPU path's batches are gathered
there (:func:`sec_lib.runs.train.batch_source`, :class:`sec_lib.data.augment.ViewBatches`) instead of being copied
from the host at every step."""
from __future__ import annotations

import torch

__all__ = ["on_device"]

#: (id of the host tensor, device) -> (host tensor, its copy on the device).
_ON_DEVICE: dict = {}


def _copy(t, device: torch.device) -> torch.Tensor:
    key = (id(t), str(device))
    if key not in _ON_DEVICE or _ON_DEVICE[key][0] is not t:
        _ON_DEVICE[key] = (t, torch.as_tensor(t).to(device))
    return _ON_DEVICE[key][1]


def on_device(ds, device: torch.device, labels: bool = True):
    """``(x, labels)`` of a tensor dataset (one with ``.x`` and ``.labels``) on ``device``, each copied once per
    process (runs that share a process and a dataset share the copies). ``labels=False``: ``(x, None)``, the labels
    not read (the self-supervised views never read them)."""
    return _copy(ds.x, device), (_copy(ds.labels, device) if labels else None)
