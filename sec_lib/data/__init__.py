"""Datasets and batch sampling for sec-book.

``get_dataset(name, split, root=None, **kw)`` returns a torch ``Dataset`` with ``.labels``
(LongTensor N, 0..C-1 within the split), ``.num_classes`` and ``.class_names``; the in-memory ones
("glyphs", "toy") also have ``.x``. Splits are zero-shot (train and test classes are disjoint).

========== ============================================ ==========================================
name       what                                         splits / root
========== ============================================ ==========================================
glyphs     characters rendered from matplotlib's fonts  train, test; ``root`` = cache folder (optional)
           (:mod:`sec_lib.data.glyphs`, the default)
toy        Gaussian clusters for an MLP                 train, test; no root
           (:mod:`sec_lib.data.toy`)
cub        CUB-200-2011                                 train, test
cars       Cars196                                      train, test
sop        Stanford Online Products                     train, test
inshop     In-Shop Clothes Retrieval                    train, query, gallery, test (= query+gallery)
cifar10    CIFAR-10 (python pickles)                    train, test (``split_by="class"|"file"``)
cifar100   CIFAR-100 (python pickles)                   train, test (``split_by="class"|"file"``)
========== ============================================ ==========================================

The real benchmarks need ``root=`` (the folder holding the extracted files) or the environment
variable ``SEC_DATA_ROOT``; see :mod:`sec_lib.data.benchmarks` for the expected layouts. Nothing is
ever downloaded.
"""
from __future__ import annotations

import os

from .benchmarks import LAYOUTS, ImageTransform, load_cars, load_cifar, load_cub, load_inshop, load_sop
from .sampler import PKSampler
from .toy import ToyDataset, make_toy

DATASET_NAMES = ("glyphs", "toy", "cub", "cars", "sop", "inshop", "cifar10", "cifar100")
REAL_DATASETS = ("cub", "cars", "sop", "inshop", "cifar10", "cifar100")
SPLITS = {"glyphs": ("train", "test"), "toy": ("train", "test"), "cub": ("train", "test"),
          "cars": ("train", "test"), "sop": ("train", "test"), "inshop": ("train", "query", "gallery", "test"),
          "cifar10": ("train", "test"), "cifar100": ("train", "test")}
ROOT_ENV = "SEC_DATA_ROOT"

__all__ = ["get_dataset", "PKSampler", "DATASET_NAMES", "SPLITS", "load_glyphs", "sample_grid", "make_toy",
           "load_cub", "load_cars", "load_sop", "load_inshop", "load_cifar", "GlyphDataset", "ToyDataset",
           "ImageTransform", "LAYOUTS"]


def _glyphs():
    """The glyphs module, imported on first use."""
    from . import glyphs  # local: `python -m sec_lib.data.glyphs` runs cleanly only if its package has not imported it
    return glyphs


def __getattr__(attr):
    if attr in ("GlyphDataset", "load_glyphs", "sample_grid"):
        return getattr(_glyphs(), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


def get_dataset(name: str, split: str, root: str | os.PathLike | None = None, **kw):
    """Load one split of a dataset by name.

    Args:
        name: one of :data:`DATASET_NAMES`.
        split: one of ``SPLITS[name]``.
        root: for the real benchmarks, the folder holding the extracted dataset (default
            ``$SEC_DATA_ROOT``); for "glyphs", the cache folder (default ``<data dir>/glyphs``);
            must be None for "toy".
        **kw: passed to the loader: :func:`~sec_lib.data.glyphs.load_glyphs` (image_size,
            instances_per_class, seed, max_classes, ...), :func:`~sec_lib.data.toy.make_toy`
            (num_classes, per_class, dim, noise, seed, max_classes, ...), or the benchmark loaders
            (image_size — ``size`` is accepted as an alias —, transform, resize, max_classes, convention — the
            pretrained backbone's input, "imagenet" or "bninception" —, crop_scale; CIFAR also split_by).
    """
    if name not in DATASET_NAMES:
        raise ValueError(f"unknown dataset name={name!r}; valid names: {', '.join(DATASET_NAMES)}")
    if split not in SPLITS[name]:
        raise ValueError(f"split={split!r} is not valid for {name}; valid splits: {', '.join(SPLITS[name])}")
    if name == "glyphs":
        if root is not None:
            kw.setdefault("cache_dir", root)
        return _glyphs().load_glyphs(split, **kw)
    if name == "toy":
        if root is not None:
            raise ValueError(f"root={str(root)!r} is not valid for toy (it is generated in memory); pass root=None")
        return make_toy(split, **kw)
    if "size" in kw:
        if "image_size" in kw:
            raise ValueError("pass either image_size or its alias size, not both")
        kw["image_size"] = kw.pop("size")
    if root is None:
        root = os.environ.get(ROOT_ENV) or None
    if root is None:
        raise ValueError(
            f"dataset {name!r} is read from disk and needs its folder: call get_dataset({name!r}, {split!r}, "
            f"root='/path/to/folder') or set the environment variable {ROOT_ENV}=/path/to/folder "
            f"(nothing is downloaded). Expected layout:\n{LAYOUTS[name]}")
    if name == "cub":
        return load_cub(root, split, **kw)
    if name == "cars":
        return load_cars(root, split, **kw)
    if name == "sop":
        return load_sop(root, split, **kw)
    if name == "inshop":
        return load_inshop(root, split, **kw)
    return load_cifar(root, split, num_classes=10 if name == "cifar10" else 100, **kw)
