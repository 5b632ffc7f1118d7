"""P x K batch sampling for deep metric learning.

Every batch holds ``p`` distinct classes and ``k`` instances of each, the batch construction of the
SEC paper (batch 120 = P x K with K = 3/2/5/4 for T, SHT/NNP/MS/TML) and of FaceNet-style training
in general. It plays the role of pytorch-metric-learning's ``MPerClassSampler``, but yields whole
batches (lists of indices), so it can be iterated directly or passed to a DataLoader as
``batch_sampler``.

Rules (per batch):

* the ``p`` classes are drawn uniformly **without** replacement from the classes that have at least
  one instance;
* the ``k`` instances of a class are drawn **without** replacement when the class has at least ``k``
  instances; a class with fewer than ``k`` instances contributes all of them plus instances drawn
  **with** replacement to fill up to ``k`` (so a batch can repeat an index only in that case);
* the batch is ordered class by class (``k`` consecutive indices per class).

Determinism: the i-th call of ``iter()`` on a sampler uses ``numpy.random.default_rng([seed, i])``,
so two samplers with the same labels and seed yield the same batches, and re-iterating a finite
sampler (a new "epoch") gives new batches. :meth:`PKSampler.set_epoch` sets ``i`` explicitly.
"""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import torch


class PKSampler:
    """Yield lists of ``p * k`` dataset indices: ``p`` classes x ``k`` instances each.

    Args:
        labels: class label of every dataset item (LongTensor, array or list of ints).
        p: classes per batch.
        k: instances per class.
        seed: random seed.
        num_batches: batches per iteration; None = infinite.
    """

    def __init__(self, labels: torch.Tensor | np.ndarray | Sequence[int], p: int, k: int, seed: int = 0,
                 num_batches: int | None = None):
        for name, value, lo in (("p", p, 1), ("k", k, 1), ("seed", seed, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
                raise ValueError(f"{name}={value!r} is not valid; expected an integer >= {lo}")
        if num_batches is not None and (isinstance(num_batches, bool) or not isinstance(num_batches, (int, np.integer))
                                        or num_batches < 1):
            raise ValueError(f"num_batches={num_batches!r} is not valid; expected None (infinite) or an integer >= 1")
        lab = labels.detach().cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
        if lab.ndim != 1 or (lab.size and not np.issubdtype(lab.dtype, np.integer)):
            raise ValueError(f"labels must be a 1-D sequence of integers, got shape {lab.shape} dtype {lab.dtype}")
        self.classes, inverse = np.unique(lab, return_inverse=True)
        if len(self.classes) < p:
            raise ValueError(f"p={p} classes per batch requested but the labels contain only "
                             f"{len(self.classes)} classes with any instances; use p <= {len(self.classes)}")
        order = np.argsort(inverse, kind="stable")
        counts = np.bincount(inverse, minlength=len(self.classes))
        self._members = np.split(order, np.cumsum(counts)[:-1])
        self.p, self.k, self.seed, self.num_batches = int(p), int(k), int(seed), num_batches
        self.batch_size = self.p * self.k
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter()`` use ``default_rng([seed, epoch])``."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        if self.num_batches is None:
            raise TypeError("PKSampler with num_batches=None is infinite and has no len()")
        return self.num_batches

    def __iter__(self) -> Iterator[list[int]]:
        rng = np.random.default_rng([self.seed, self.epoch])
        self.epoch += 1
        n = 0
        while self.num_batches is None or n < self.num_batches:
            yield self._batch(rng)
            n += 1

    def _batch(self, rng: np.random.Generator) -> list[int]:
        out = []
        for c in rng.choice(len(self.classes), size=self.p, replace=False):
            members = self._members[c]
            if len(members) >= self.k:
                pick = rng.choice(members, size=self.k, replace=False)
            else:
                extra = rng.choice(members, size=self.k - len(members), replace=True)
                pick = np.concatenate([rng.permutation(members), extra])
            out.extend(int(i) for i in pick)
        return out
