"""Figures of the data page: a grid of glyph images per class."""
from __future__ import annotations

from typing import Sequence

import matplotlib
import numpy as np

from .style import BOOK_WIDTH, figure, style


def _short_name(name: str, width: int = 40) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def glyph_grid(images, labels, class_names: Sequence[str], max_per_class: int | None = None):
    """A grid of images: one row per class (labelled with its name), its instances across the row.

    ``images``: (N, 1, S, S) or (N, S, S) array/tensor in [0, 1] (ink bright); ``labels``: N class
    indices into ``class_names``. Drawn as one mosaic (ink dark on white for print).
    """
    imgs = np.asarray(images.detach().cpu() if hasattr(images, "detach") else images, dtype=float)
    if imgs.ndim == 4:
        if imgs.shape[1] != 1:
            raise ValueError(f"images must have one channel, got shape {imgs.shape}")
        imgs = imgs[:, 0]
    if imgs.ndim != 3:
        raise ValueError(f"images must have shape (N, 1, S, S) or (N, S, S), got {imgs.shape}")
    labels = np.asarray(labels.cpu() if hasattr(labels, "cpu") else labels).astype(int)
    if len(labels) != len(imgs):
        raise ValueError(f"labels has {len(labels)} entries for {len(imgs)} images")
    if labels.min() < 0 or labels.max() >= len(class_names):
        raise ValueError(f"labels must index class_names (0..{len(class_names) - 1})")
    rows = list(dict.fromkeys(labels.tolist()))
    per = [np.flatnonzero(labels == c) for c in rows]
    ncols = max(len(p) for p in per) if max_per_class is None else min(max_per_class, max(len(p) for p in per))
    s = imgs.shape[-1]
    gap = max(1, s // 8)
    mosaic = np.full((len(rows) * (s + gap) - gap, ncols * (s + gap) - gap), np.nan)
    for i, idx in enumerate(per):
        for j, k in enumerate(idx[:ncols]):
            mosaic[i * (s + gap): i * (s + gap) + s, j * (s + gap): j * (s + gap) + s] = imgs[k]
    with style():
        cell = min(0.55, (BOOK_WIDTH - 2.6) / ncols)
        fig = figure(BOOK_WIDTH, max(1.5, cell * len(rows) + 0.6))
        ax = fig.subplots()
        cmap = matplotlib.colormaps["gray_r"].with_extremes(bad="white")
        ax.imshow(np.ma.masked_invalid(mosaic), cmap=cmap, vmin=0, vmax=1)
        ax.set_yticks([i * (s + gap) + s / 2 for i in range(len(rows))], [_short_name(class_names[c]) for c in rows])
        ax.set_xticks([j * (s + gap) + s / 2 for j in range(ncols)], [str(j) for j in range(ncols)])
        ax.set_xlabel("instance (font design × random augmentation)")
        ax.grid(False)
        for sp in ax.spines.values():
            sp.set_visible(False)
        ax.tick_params(length=0)
        ax.set_title(f"{len(rows)} classes × {ncols} instances")
    return fig
