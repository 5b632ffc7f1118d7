"""Toy: many Gaussian clusters in a low-dimensional input space, for an MLP that trains in seconds.

Each class ``c`` has a centre ``m_c`` drawn uniformly on the unit sphere of R^d (a normalised
Gaussian vector) and its own anisotropic noise scales ``a_c`` (per-dimension standard deviations
``noise * exp(N(0, anisotropy^2))``). An instance is

    x = r * (m_c + a_c * z),   z ~ N(0, I_d),   r ~ LogNormal(0, scale_sigma^2),

so its *direction* carries the class while its *norm* varies by a random per-sample factor ``r``.
That factor is what makes raw embedding norms differ inside a batch (the situation the SEC paper
studies) even for a network without input normalisation.

Split by class, like the zero-shot image benchmarks: the first ``num_classes // 2`` classes are
"train", the rest "test" (disjoint classes). Everything is drawn from
``numpy.random.default_rng(seed)`` in a fixed order, so a dataset is the same on every machine;
``max_classes`` keeps the first N classes of a split without changing the others.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

SPLITS = ("train", "test")


class ToyDataset(Dataset):
    """In-memory toy data of one split: ``x`` (float32 N x d), ``labels`` (LongTensor N, 0..C-1 within
    the split), ``num_classes``, ``class_names``, ``scales`` (the per-sample factor r), ``centers``
    (C x d). ``ds[i]`` returns ``(x[i], labels[i])``."""

    def __init__(self, x: torch.Tensor, labels: torch.Tensor, class_names: list[str], scales: torch.Tensor,
                 centers: torch.Tensor, split: str):
        self.x = x
        self.labels = labels
        self.class_names = class_names
        self.num_classes = len(class_names)
        self.scales = scales
        self.centers = centers
        self.split = split

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def __getitem__(self, i):
        return self.x[i], self.labels[i]

    def __repr__(self) -> str:
        return f"ToyDataset(split={self.split!r}, n={len(self)}, classes={self.num_classes}, dim={self.x.shape[1]})"


def _check(name, value, lo, hi, integer):
    ok = isinstance(value, (int, np.integer)) if integer else isinstance(value, (int, float, np.floating))
    if isinstance(value, bool) or not ok or not (lo <= value <= hi):
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{name}={value!r} is not valid; expected {kind} in [{lo}, {hi}]")


def make_toy(split: str = "train", num_classes: int = 200, per_class: int = 20, dim: int = 32,
             noise: float = 0.25, anisotropy: float = 0.5, scale_sigma: float = 0.5, seed: int = 0,
             max_classes: int | None = None) -> ToyDataset:
    """One split of the toy dataset (see the module docstring).

    Args:
        split: "train" (classes 0 .. num_classes//2 - 1) or "test" (the rest).
        num_classes: total number of classes (both splits), at least 2.
        per_class: instances per class.
        dim: input dimension d.
        noise: typical per-dimension noise standard deviation (the centres have norm 1).
        anisotropy: spread of the log per-dimension noise scales (0 = isotropic).
        scale_sigma: standard deviation of log r, the per-sample scale (0 = all norms comparable).
        seed: random seed.
        max_classes: keep only the first N classes of the split.
    """
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is not valid for toy; valid splits: {', '.join(SPLITS)}")
    _check("num_classes", num_classes, 2, 10**6, True)
    _check("per_class", per_class, 1, 10**6, True)
    _check("dim", dim, 1, 10**5, True)
    _check("noise", noise, 0.0, 1e6, False)
    _check("anisotropy", anisotropy, 0.0, 10.0, False)
    _check("scale_sigma", scale_sigma, 0.0, 10.0, False)
    _check("seed", seed, 0, 2**63 - 1, True)
    if max_classes is not None:
        _check("max_classes", max_classes, 1, 10**9, True)

    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((num_classes, dim))
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    sd = noise * np.exp(anisotropy * rng.standard_normal((num_classes, dim)))
    z = rng.standard_normal((num_classes, per_class, dim))
    r = np.exp(scale_sigma * rng.standard_normal((num_classes, per_class)))
    x = r[..., None] * (centers[:, None, :] + sd[:, None, :] * z)

    half = num_classes // 2
    cls = np.arange(half) if split == "train" else np.arange(half, num_classes)
    if max_classes is not None:
        cls = cls[:max_classes]
    xs = x[cls].reshape(-1, dim)
    labels = np.repeat(np.arange(len(cls)), per_class)
    return ToyDataset(
        x=torch.from_numpy(xs.astype(np.float32)),
        labels=torch.from_numpy(labels.astype(np.int64)),
        class_names=[f"toy_{c:04d}" for c in cls],
        scales=torch.from_numpy(r[cls].reshape(-1).astype(np.float32)),
        centers=torch.from_numpy(centers[cls].astype(np.float32)),
        split=split,
    )
