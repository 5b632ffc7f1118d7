"""Evaluation splits built from a loaded dataset: a query/gallery pair (In-Shop), a subset of classes
relabelled from 0, and the held-out classes used to choose η without the test classes."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch

from ..params import ParameterError

__all__ = ["QueryGallery", "ClassSubset", "holdout_split"]


@dataclass
class QueryGallery:
    """An evaluation set split into queries and a gallery (In-Shop): Recall@K of each query against
    the gallery, nothing left out; the two share one label space."""
    query: Any
    gallery: Any


class ClassSubset(torch.utils.data.Dataset):
    """The samples of a dataset whose labels lie in [lo, hi), relabelled from 0."""

    def __init__(self, ds, lo: int, hi: int):
        keep = (ds.labels >= lo) & (ds.labels < hi)
        self.base, self.index = ds, torch.nonzero(keep).flatten()
        self.labels = ds.labels[self.index] - lo
        self.num_classes = hi - lo
        self.class_names = list(ds.class_names[lo:hi])
        if hasattr(ds, "x"):
            self.x = ds.x[self.index]

    def __len__(self):
        return len(self.index)

    def __getitem__(self, i):
        x, _ = self.base[int(self.index[i])]
        return x, self.labels[i]


@functools.lru_cache(maxsize=4)
def _holdout(ds, h):
    n = int(ds.num_classes)
    if not 2 <= h <= n - 2:
        raise ParameterError(f"parameter 'holdout_classes' = {h} is not valid: the training split has {n} classes; "
                             f"hold out between 2 and {n - 2}")
    return ClassSubset(ds, 0, n - h), ClassSubset(ds, n - h, n)


def holdout_split(ds, h: int):
    """(training part, held-out part): the last ``h`` classes of ``ds`` are held out."""
    return _holdout(ds, int(h))
