"""Glyphs: a zero-shot image benchmark rendered offline from the fonts that ship with matplotlib.

Why: the paper's benchmarks (CUB, Cars, SOP, In-Shop) cannot be downloaded here, and training an
ImageNet backbone on them does not fit on 2 CPU cores. "Glyphs" keeps the *structure* of those
benchmarks - many classes, few instances per class, evaluation on classes never seen in training
(the zero-shot split of Oh Song et al., CVPR 2016, used by the SEC paper) - at a size a small CNN
learns in minutes. It is in the spirit of Omniglot (Lake et al., Science 2015): a class is a
character, an instance is one drawing of it; here the "drawers" are font designs plus a seeded
random affine/stroke/blur augmentation.

Classes (the committed list ``glyph_classes.txt`` / ``glyph_classes.json`` next to this file;
rebuild it with ``python -m sec_lib.data.glyphs --rebuild-classes``; this is never done at build time):

1. Fonts: the TrueType files in ``matplotlib/mpl-data/fonts/ttf`` that are distinct text designs:
   DejaVu Sans / Sans Mono / Serif (4 styles each), STIXGeneral (4 styles) and the Computer Modern
   (BaKoMa) text fonts. Left out: ``LastResortHE`` (placeholder glyphs for every code point),
   ``STIXNonUni*`` (private-use code points only), ``STIXSiz*`` and ``DejaVu*Display`` (size
   variants of delimiters/dashes, not separate designs), ``cmex10`` (TeX extension font, its cmap
   is not Unicode). The Computer Modern fonts use TeX's own encodings, so each contributes only the
   code points where that encoding agrees with Unicode (:data:`CM_WHITELIST`).
2. Candidate code points: every code point in those cmaps except combining marks (Mn, Mc, Me),
   separators/whitespace (Z*), control/format/private/surrogate/unassigned (C*).
3. A font *renders* a code point if its cmap maps it to a glyph other than ``.notdef`` and the
   rendered glyph has ink (at least :data:`MIN_INK` pixels above half intensity when rasterised
   with its longer side at about the analysis size, 32 px).
4. Homoglyphs are merged: each rendered glyph is cropped to its ink, scaled to fit a 32 x 32 box
   (aspect kept, centred) and binarised at half intensity. Two code points are "the same shape in
   font f" if their binarised renders differ in at most :data:`DUP_MAX_PIXELS` pixels (of 1024).
   They are homoglyphs if that holds in at least half of the fonts that render both (and in at
   least two fonts). Homoglyph groups are the connected components of that relation; a group is
   represented by the member rendered by the most fonts (ties: lowest code point), so Latin "A"
   stands for Greek Alpha and Cyrillic A. Renders are size-normalised, so small-capital /
   superscript / positional variants of one shape merge too (o, omicron, small capital o; the
   Braille cells with the same dot pattern in different positions): a class is a shape.
5. A representative becomes a class if at least :data:`MIN_FONTS` fonts render it and the fonts do
   not all draw it alike: among the regular upright member of each font family that renders it
   (:data:`REGULAR_FONTS`) there must be at least :data:`MIN_DESIGNS` renders more than
   :data:`DESIGN_MAX_PIXELS` pixels apart, both for the aspect-kept renders of rule 4 and for the
   renders stretched to fill the square (so a mere change of width does not count). This drops
   e.g. box-drawing and block characters, which every family draws alike; bold/oblique variants
   alone do not count as different designs.
6. Order: sorted by code point, then shuffled with ``numpy.random.default_rng(CLASS_ORDER_SEED)``
   so that both halves of the zero-shot split mix scripts. The first half is "train", the second "test".

With matplotlib 3.11.2's fonts this gives 2,784 classes (1,392 train + 1,392 test) out of 3,206
candidate code points; ``glyph_classes.json`` records the per-class fonts and merged homoglyphs,
the rule parameters, font versions and counts.

Instances: instance ``j`` of a class is drawn by font ``fonts[perm[j % n]]`` where ``perm`` is a
seeded permutation of the ``n`` fonts that render the class (every font appears once
``instances_per_class >= n``), then augmented with a rotation, anisotropic scale, shear and shift, a
stroke-weight change (Min/Max filters) and a Gaussian blur, all drawn from
``numpy.random.default_rng([seed, codepoint, j])``. Images are grayscale uint8, ink bright (255) on a
dark (0) background, ``image_size`` pixels square. The random state depends only on (seed,
code point, j), so a pool with ``max_classes`` is exactly a subset of the full pool.

The pool is rendered once and cached under ``<data dir>/glyphs/`` (``<data dir>`` = ``$SEC_DATA_DIR``
or the repository's ``data/`` folder) as one ``torch.save`` file plus a JSON manifest with the
font files and versions, library versions, class list, parameters and the file's sha256. A cache
that fails any check is regenerated with a logged warning.

Modules: :mod:`sec_lib.data.glyph_render` (fonts, rendering, augmentation),
:mod:`sec_lib.data.glyph_pool` (class list, pool, cache); this one holds the dataset, its loader and the
command line, and re-exports the names of both: ``sec_lib.data.glyphs`` is the glyphs API.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import time
from typing import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from ..params import Number
from .glyph_pool import (  # noqa: F401 - re-exported: the glyphs API
    ANALYSIS_SIZE, CLASS_JSON, CLASS_ORDER_SEED, CLASS_TXT, DEFAULT_IMAGE_SIZE, DEFAULT_INSTANCES_PER_CLASS,
    DEFAULT_SEED, DESIGN_MAX_PIXELS, DUP_MAX_PIXELS, GENERATOR_VERSION, MIN_DESIGNS, MIN_FONTS, PACKAGE_DIR, SPLITS,
    SPLIT_CHOICE, GlyphClass, atomic_write_bytes, num_designs, pair_distances, cache_paths, compute_classes,
    default_cache_dir, default_data_dir, glyph_classes, load_pool, rebuild_classes, render_pool, split_classes,
)
from .glyph_render import (  # noqa: F401 - re-exported: the glyphs API
    ASPECT_JITTER, BLUR_MAX, CM_WHITELIST, EXCLUDED_CATEGORIES, FILL, FONT_FILES, MIN_INK, REGULAR_FONTS,
    ROTATION_DEG, SCALE_RANGE, SHEAR, SHIFT, centered, stretched_render, char_name, font_dir, font_versions, render_glyph,
)

_COUNT = Number(1, 10**6, integer=True)


# =============================================================================================
# Dataset
# =============================================================================================

class GlyphDataset(Dataset):
    """In-memory glyph images of one split.

    Attributes: ``x`` (float32 N x 1 x S x S in [0, 1], ink bright), ``labels`` (LongTensor N, 0..C-1
    within the split), ``num_classes``, ``class_names`` (``"U+0041 LATIN CAPITAL LETTER A"``),
    ``codepoints``, ``font_index`` (LongTensor N, index into ``font_files``), ``font_files``,
    ``manifest``. ``ds[i]`` returns ``(x[i], labels[i])``."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, classes: Sequence[GlyphClass],
                 font_index: torch.Tensor, split: str, manifest: dict | None = None):
        self.x = images.to(torch.float32).div_(255.0).unsqueeze(1)
        self.labels = labels.to(torch.long)
        self.classes = list(classes)
        self.class_names = [c.label for c in self.classes]
        self.codepoints = [c.codepoint for c in self.classes]
        self.num_classes = len(self.classes)
        self.font_index = font_index.to(torch.long)
        self.font_files = list(FONT_FILES)
        self.split = split
        self.manifest = manifest or {}

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def __getitem__(self, i):
        return self.x[i], self.labels[i]

    def __repr__(self) -> str:
        return (f"GlyphDataset(split={self.split!r}, n={len(self)}, classes={self.num_classes}, "
                f"image_size={self.x.shape[-1]})")


def load_glyphs(split: str = "train", image_size: int = DEFAULT_IMAGE_SIZE,
                instances_per_class: int = DEFAULT_INSTANCES_PER_CLASS, seed: int = DEFAULT_SEED,
                max_classes: int | None = None, cache_dir: str | os.PathLike | None = None,
                regenerate: bool = False, num_workers: int | None = None) -> GlyphDataset:
    """One split of the glyphs benchmark (rendered once, then loaded from the cache).

    Args:
        split: "train" (first half of the committed classes) or "test" (second half).
        image_size: image side in pixels (32 for the CPU profile, 64 for the GPU profile).
        instances_per_class: instances per class; fonts are cycled so that every font that renders a
            class appears once this is at least the number of such fonts.
        seed: augmentation seed.
        max_classes: keep only the first N classes of each split (None: all).
        cache_dir: cache folder (default :func:`default_cache_dir`).
        regenerate: ignore an existing cache.
        num_workers: rendering processes when the pool has to be rendered (see :func:`render_pool`).
    """
    SPLIT_CHOICE.check("split", split)
    pool, manifest = load_pool(image_size, instances_per_class, seed, max_classes, cache_dir, regenerate,
                               num_workers)
    n_train = manifest["num_train_classes"]
    train, test = split_classes("train", max_classes), split_classes("test", max_classes)
    if split == "train":
        mask, classes, offset = pool["labels"] < n_train, train, 0
    else:
        mask, classes, offset = pool["labels"] >= n_train, test, n_train
    return GlyphDataset(pool["images"][mask], pool["labels"][mask] - offset, classes, pool["fonts"][mask],
                        split, manifest)


def sample_grid(n_classes: int = 8, n_per_class: int = 8, split: str = "train", seed: int = 0,
                dataset: GlyphDataset | None = None, **load_kw):
    """A small grid of examples for the book's data page.

    Picks ``n_classes`` random classes of ``dataset`` (default ``load_glyphs(split, **load_kw)``) and
    their first ``n_per_class`` instances. Returns ``(images (n_classes*n_per_class, 1, S, S) float,
    labels (LongTensor, 0..n_classes-1, row-major by class), class_names (list of n_classes))``."""
    n_classes = _COUNT.check("n_classes", n_classes)
    n_per_class = _COUNT.check("n_per_class", n_per_class)
    ds = dataset if dataset is not None else load_glyphs(split, **load_kw)
    if n_classes > ds.num_classes:
        raise ValueError(f"n_classes={n_classes} exceeds the {ds.num_classes} classes of the dataset")
    rng = np.random.default_rng(seed)
    chosen = sorted(rng.choice(ds.num_classes, size=n_classes, replace=False).tolist())
    imgs, labels = [], []
    for new, c in enumerate(chosen):
        idx = torch.nonzero(ds.labels == c).flatten()[:n_per_class]
        imgs.append(ds.x[idx])
        labels.append(torch.full((len(idx),), new, dtype=torch.long))
    return torch.cat(imgs), torch.cat(labels), [ds.class_names[c] for c in chosen]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sec_lib.data.glyphs", description=__doc__.split("\n")[0])
    ap.add_argument("--rebuild-classes", action="store_true",
                    help="recompute glyph_classes.txt/.json from the installed matplotlib fonts")
    ap.add_argument("--render", action="store_true", help="render (or verify) the default cache")
    ap.add_argument("--image-size", type=int, default=DEFAULT_IMAGE_SIZE)
    ap.add_argument("--instances-per-class", type=int, default=DEFAULT_INSTANCES_PER_CLASS)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--cache-dir", default=None)
    args = ap.parse_args(argv)
    if not (args.rebuild_classes or args.render):
        ap.print_help()
        return 2
    if args.rebuild_classes:
        stats = rebuild_classes()
        print(json.dumps(stats, indent=1))
    if args.render:
        logging.basicConfig(level=logging.INFO)
        t0 = time.perf_counter()
        pool, man = load_pool(args.image_size, args.instances_per_class, args.seed, cache_dir=args.cache_dir)
        print(f"{man['num_images']} images, {man['num_train_classes']}+{man['num_test_classes']} classes, "
              f"{man['bytes'] / 1e6:.1f} MB, {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
