"""Loaders for the real deep-metric-learning benchmarks, from their standard on-disk layouts.

Nothing is downloaded: pass the folder you extracted the dataset into. Each loader checks the layout
(and parses the index files) before anything else and raises ``FileNotFoundError`` / ``ValueError``
with the expected folder tree. Images are read lazily with PIL and converted to RGB.

Zero-shot splits (Oh Song et al., CVPR 2016; used by the SEC paper, Sec. 5):

* CUB-200-2011: classes 1-100 train, 101-200 test (in general: the first half of the sorted class ids).
* Cars196: classes 1-98 train, 99-196 test (first half of the sorted class ids; the official
  train/test image flag is ignored, as in the DML literature).
* Stanford Online Products: the official ``Ebay_train.txt`` / ``Ebay_test.txt`` (11,318 / 11,316 products).
* In-Shop Clothes Retrieval: ``list_eval_partition.txt``; splits "train", "query", "gallery" (and
  "test" = query + gallery). Query and gallery share one label mapping over the test items.
* CIFAR-10/100 (the python pickle version): ``split_by="class"`` (default) = training-file images of
  the first half of the classes vs. test-file images of the second half; ``split_by="file"`` = the
  standard train/test files with all classes.

Labels are re-numbered 0..C-1 within a split (in sorted original id order); ``class_names`` keeps the
original names. ``max_classes`` keeps the first N classes of a split.

Transforms (torch/PIL only, no torchvision), following the authors' code (Resize 256 / crop 227):

* ``"test"``: resize the shorter side to ``resize`` (default ``round(image_size * 256 / 227)``), centre
  crop ``image_size``;
* ``"train"``: random resized crop (area 8-100 %, aspect 3/4-4/3, the Inception recipe) to
  ``image_size`` and a horizontal flip with probability 1/2, drawn from torch's global RNG (so
  DataLoader worker seeding applies);
* then ``[0, 1]`` scaling and ImageNet mean/std normalisation (``normalize=None`` to skip).

``convention`` names the input a pretrained backbone's public weights expect (:data:`CONVENTIONS`):
``"imagenet"`` (the default: RGB in [0, 1], ImageNet mean/std; torchvision's ResNet-50) or
``"bninception"`` (BGR in [0, 255] minus the mean (104, 117, 128), std 1: Cadene's BN-Inception,
:data:`sec_lib.models.PRETRAINED_INPUT`). ``crop_scale`` sets the area range of the training crop (the
authors' code uses (0.16, 1); the default is the Inception recipe's (0.08, 1)).
"""
from __future__ import annotations

import math
import os
import pickle
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from ..models import PRETRAINED_INPUT
from ..params import Choice, Number, OptionalParam

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
DEFAULT_IMAGE_SIZE = 227
#: Input conventions of pretrained weights: name -> (channel order, value range, mean, std), mean and std
#: in the output channel order. "imagenet" is torchvision's; "bninception" Cadene's pretrainedmodels port
#: (models.PRETRAINED_INPUT, the weights the paper's BN-Inception starts from).
CONVENTIONS = {
    "imagenet": ("RGB", 1.0, IMAGENET_MEAN, IMAGENET_STD),
    "bninception": (PRETRAINED_INPUT["bninception"]["space"], PRETRAINED_INPUT["bninception"]["range"][1],
                    PRETRAINED_INPUT["bninception"]["mean"], PRETRAINED_INPUT["bninception"]["std"]),
}

LAYOUTS = {
    "cub": """\
<root>/                      (or <root> = the CUB_200_2011 folder itself)
  CUB_200_2011/
    images.txt               "<image_id> <relative image path>" per line
    image_class_labels.txt   "<image_id> <class_id 1..200>" per line
    classes.txt              "<class_id> <class name>" per line (optional)
    images/
      001.Black_footed_Albatross/Black_Footed_Albatross_0001_796111.jpg
      ...""",
    "cars": """\
<root>/                      (devkit layout; or <root>/cars196/ with the same content)
  cars_annos.mat             struct 'annotations' (relative_im_path, class 1..196, test, bbox_*),
                             'class_names'
  car_ims/
    000001.jpg
    ...
or the alternative layout:
<root>/
  devkit/cars_meta.mat                     'class_names'
  devkit/cars_train_annos.mat              struct 'annotations' (fname, class, bbox_*)
  cars_test_annos_withlabels.mat           (in <root>/ or <root>/devkit/)
  cars_train/00001.jpg ...
  cars_test/00001.jpg ...""",
    "sop": """\
<root>/                      (or <root> = the Stanford_Online_Products folder itself)
  Stanford_Online_Products/
    Ebay_train.txt           header "image_id class_id super_class_id path", then one image per line
    Ebay_test.txt            same columns
    bicycle_final/111085122871_0.JPG
    ...""",
    "inshop": """\
<root>/                      (or <root>/inshop/ or <root>/In-shop/ with the same content)
  list_eval_partition.txt    line 1: number of images; line 2: "image_name item_id evaluation_status";
                             then "img/WOMEN/Dresses/id_00000002/02_1_front.jpg id_00000002 train|query|gallery"
                             (also accepted at <root>/Eval/list_eval_partition.txt)
  img/WOMEN/Dresses/id_00000002/02_1_front.jpg   (also accepted under <root>/Img/img/...)
  ...""",
    "cifar10": """\
<root>/                      (or <root> = the cifar-10-batches-py folder itself)
  cifar-10-batches-py/
    data_batch_1 ... data_batch_5, test_batch   python pickles with 'data' (N x 3072 uint8), 'labels'
    batches.meta                                pickle with 'label_names'""",
    "cifar100": """\
<root>/                      (or <root> = the cifar-100-python folder itself)
  cifar-100-python/
    train, test              python pickles with 'data' (N x 3072 uint8), 'fine_labels'
    meta                     pickle with 'fine_label_names'""",
}

DISPLAY_NAMES = {"cub": "CUB-200-2011", "cars": "Cars196", "sop": "Stanford Online Products",
                 "inshop": "In-Shop Clothes Retrieval", "cifar10": "CIFAR-10", "cifar100": "CIFAR-100"}


def _layout_error(name: str, root, problem: str, exc=FileNotFoundError):
    return exc(f"{DISPLAY_NAMES[name]}: {problem} (root={str(root)!r}). Expected layout:\n{LAYOUTS[name]}")


# =============================================================================================
# Transforms
# =============================================================================================

def _to_tensor(img, normalize, bgr: bool = False, value_range: float = 1.0) -> torch.Tensor:
    a = torch.from_numpy(np.array(img, dtype=np.uint8, copy=True)).permute(2, 0, 1).float().div_(255.0)
    if bgr:
        a = a.flip(0)
    if value_range != 1.0:
        a = a.mul_(value_range)
    if normalize is not None:
        mean, std = normalize
        a = (a - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)
    return a


class ImageTransform:
    """PIL RGB image -> float tensor (3, size, size); ``train=True`` for the random resized crop + flip,
    ``False`` for resize + centre crop (see the module docstring). ``convention`` (a key of
    :data:`CONVENTIONS`) sets the channel order, value range and normalisation; an explicit ``normalize``
    (mean, std) or None overrides its mean and std."""

    def __init__(self, train: bool, image_size: int = DEFAULT_IMAGE_SIZE, resize: int | None = None,
                 scale: tuple[float, float] = (0.08, 1.0), ratio: tuple[float, float] = (3 / 4, 4 / 3),
                 normalize: "tuple | None | str" = "convention", convention: str = "imagenet"):
        Number(1, 100000, integer=True).check("image_size", image_size)
        Choice(tuple(CONVENTIONS)).check("convention", convention)
        _check_scale(scale)
        self.train = bool(train)
        self.image_size = int(image_size)
        self.resize = int(round(image_size * 256 / 227)) if resize is None else int(resize)
        Number(self.image_size, 100000, integer=True).check("resize", self.resize)
        space, self.value_range, mean, std = CONVENTIONS[convention]
        self.convention, self.bgr = convention, space == "BGR"
        self.scale, self.ratio = tuple(scale), ratio
        self.normalize = (mean, std) if isinstance(normalize, str) and normalize == "convention" else normalize

    def _random_crop_box(self, w: int, h: int) -> tuple[int, int, int, int]:
        area = w * h
        log_r = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(10):
            target = area * float(torch.empty(1).uniform_(*self.scale))
            ar = math.exp(float(torch.empty(1).uniform_(*log_r)))
            cw, ch = int(round(math.sqrt(target * ar))), int(round(math.sqrt(target / ar)))
            if 0 < cw <= w and 0 < ch <= h:
                x0 = int(torch.randint(0, w - cw + 1, (1,)))
                y0 = int(torch.randint(0, h - ch + 1, (1,)))
                return x0, y0, x0 + cw, y0 + ch
        # fallback: central crop with the aspect clamped to the allowed range
        in_ratio = w / h
        if in_ratio < self.ratio[0]:
            cw, ch = w, int(round(w / self.ratio[0]))
        elif in_ratio > self.ratio[1]:
            ch, cw = h, int(round(h * self.ratio[1]))
        else:
            cw, ch = w, h
        x0, y0 = (w - cw) // 2, (h - ch) // 2
        return x0, y0, x0 + cw, y0 + ch

    def __call__(self, img) -> torch.Tensor:
        s = self.image_size
        if self.train:
            box = self._random_crop_box(*img.size)
            img = img.resize((s, s), Image.Resampling.BILINEAR, box=box)
            if float(torch.rand(1)) < 0.5:
                img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        else:
            w, h = img.size
            r = self.resize / min(w, h)
            nw, nh = max(s, int(round(w * r))), max(s, int(round(h * r)))
            if (nw, nh) != (w, h):
                img = img.resize((nw, nh), Image.Resampling.BILINEAR)
            x0, y0 = (nw - s) // 2, (nh - s) // 2
            img = img.crop((x0, y0, x0 + s, y0 + s))
        return _to_tensor(img, self.normalize, self.bgr, self.value_range)

    def __repr__(self) -> str:
        kind = (f"train: random resized crop (area {self.scale[0]:g}-{self.scale[1]:g}) + flip" if self.train
                else f"test: resize {self.resize} + centre crop")
        return f"ImageTransform({kind}, size={self.image_size}, convention={self.convention!r})"


def _check_scale(scale) -> tuple[float, float]:
    """A crop area range (lo, hi) with 0 < lo <= hi <= 1."""
    try:
        lo, hi = (float(v) for v in scale)
    except (TypeError, ValueError):
        raise ValueError(f"crop_scale = {scale!r} is not valid; expected (lo, hi) with 0 < lo <= hi <= 1") from None
    if not 0 < lo <= hi <= 1:
        raise ValueError(f"crop_scale = {scale!r} is not valid; expected (lo, hi) with 0 < lo <= hi <= 1")
    return lo, hi


def make_transform(transform, split: str, image_size: int, resize: int | None = None, convention: str = "imagenet",
                   crop_scale=None) -> Callable | None:
    """``transform`` = "train" | "test" | None (default: "train" for the train split, else "test") |
    "none" (return the PIL image) | a callable. ``convention``: a key of :data:`CONVENTIONS`;
    ``crop_scale``: the training crop's area range (None: (0.08, 1))."""
    if callable(transform):
        return transform
    if transform is None:
        transform = "train" if split == "train" else "test"
    if transform == "none":
        return None
    if transform not in ("train", "test"):
        raise ValueError(f"transform={transform!r} is not valid; valid: 'train', 'test', 'none', None or a callable")
    scale = (0.08, 1.0) if crop_scale is None else _check_scale(crop_scale)
    return ImageTransform(transform == "train", image_size, resize, scale=scale, convention=convention)


# =============================================================================================
# Dataset classes
# =============================================================================================

class ImageListDataset(Dataset):
    """Images listed by path, loaded lazily with PIL (RGB). ``ds[i]`` -> ``(transform(img), label)``.

    Attributes: ``paths``, ``labels`` (LongTensor), ``num_classes``, ``class_names``, ``split``, ``root``."""

    def __init__(self, paths: Sequence[str], labels: Sequence[int], class_names: Sequence[str], split: str,
                 root: str, transform: Callable | None = None, name: str = ""):
        self.paths = list(paths)
        self.labels = torch.as_tensor(np.asarray(labels, dtype=np.int64))
        self.class_names = list(class_names)
        self.num_classes = len(self.class_names)
        self.split, self.root, self.transform, self.name = split, str(root), transform, name

    def __len__(self) -> int:
        return len(self.paths)

    def load_image(self, i: int):
        p = self.paths[i]
        if not os.path.exists(p):
            raise FileNotFoundError(f"{self.name}: image {p} listed in the index files is missing")
        with Image.open(p) as im:
            return im.convert("RGB")

    def __getitem__(self, i):
        img = self.load_image(int(i))
        if self.transform is not None:
            img = self.transform(img)
        return img, self.labels[i]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, split={self.split!r}, n={len(self)}, classes={self.num_classes})"


class ArrayImageDataset(ImageListDataset):
    """Images held in memory as a uint8 array (N, H, W, 3) (CIFAR)."""

    def __init__(self, images: np.ndarray, labels, class_names, split, root, transform=None, name=""):
        super().__init__([""] * len(images), labels, class_names, split, root, transform, name)
        self.images = images

    def load_image(self, i: int):
        return Image.fromarray(self.images[i])


# =============================================================================================
# Helpers
# =============================================================================================

_MAX_CLASSES = OptionalParam(Number(1, 10**9, integer=True))


def _check_root(name: str, root) -> Path:
    if root is None:
        raise ValueError(f"{DISPLAY_NAMES[name]} needs root= (the folder holding the extracted dataset); "
                         f"expected layout:\n{LAYOUTS[name]}")
    p = Path(root).expanduser()
    if not p.is_dir():
        raise _layout_error(name, root, "root folder does not exist")
    return p


def _locate(root: Path, marker: str, subdirs: Sequence[str]) -> Path | None:
    """The folder containing ``marker``: root itself or one of root/<subdir>."""
    for d in (root, *(root / s for s in subdirs)):
        if (d / marker).exists():
            return d
    return None


def _read_table(name: str, root, path: Path, ncols: int, skip: int = 0, int_cols: Sequence[int] = ()) -> list[list[str]]:
    """Whitespace-separated rows with at least ``ncols`` columns (extra columns are joined into the last)."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if lineno <= skip or not line.strip():
                continue
            parts = line.split()
            if len(parts) < ncols:
                raise _layout_error(name, root, f"{path.name} line {lineno} has {len(parts)} columns, "
                                                f"expected {ncols}: {line.strip()!r}", ValueError)
            if len(parts) > ncols:
                parts = parts[:ncols - 1] + [" ".join(parts[ncols - 1:])]
            for c in int_cols:
                if not parts[c].lstrip("-").isdigit():
                    raise _layout_error(name, root, f"{path.name} line {lineno} column {c + 1} is not an "
                                                    f"integer: {line.strip()!r}", ValueError)
            rows.append(parts)
    if not rows:
        raise _layout_error(name, root, f"{path.name} is empty", ValueError)
    return rows


def _half_split(class_ids: Sequence, split: str) -> list:
    """Sorted class ids of the zero-shot half: first half "train", second half "test"."""
    ids = sorted(set(class_ids))
    half = len(ids) // 2
    return ids[:half] if split == "train" else ids[half:]


def _select(name, root, split, paths, raw_labels, kept_ids, names_of, transform, max_classes):
    """Keep items whose raw label is in ``kept_ids`` (ordered), relabel 0..C-1, apply max_classes."""
    kept_ids = list(kept_ids)
    max_classes = _MAX_CLASSES.check("max_classes", max_classes)
    if max_classes is not None:
        kept_ids = kept_ids[:max_classes]
    index = {c: i for i, c in enumerate(kept_ids)}
    sel = [i for i, c in enumerate(raw_labels) if c in index]
    if not sel:
        raise _layout_error(name, root, f"split {split!r} has no images", ValueError)
    return ImageListDataset([paths[i] for i in sel], [index[raw_labels[i]] for i in sel],
                            [names_of(c) for c in kept_ids], split, str(root), transform, DISPLAY_NAMES[name])


def _check_first_image(name, root, path: str):
    if not os.path.exists(path):
        raise _layout_error(name, root, f"image {path} listed in the index files does not exist")


# =============================================================================================
# Loaders
# =============================================================================================

def load_cub(root, split: str = "train", image_size: int = DEFAULT_IMAGE_SIZE, transform=None,
             resize: int | None = None, max_classes: int | None = None, convention: str = "imagenet",
             crop_scale=None) -> ImageListDataset:
    """CUB-200-2011 (Wah et al., 2011), zero-shot split: first 100 classes train, last 100 test."""
    Choice(("train", "test")).check("split", split)
    root = _check_root("cub", root)
    d = _locate(root, "images.txt", ("CUB_200_2011",))
    if d is None or not (d / "image_class_labels.txt").exists():
        raise _layout_error("cub", root, "images.txt / image_class_labels.txt not found")
    if not (d / "images").is_dir():
        raise _layout_error("cub", root, f"image folder {d / 'images'} not found")
    images = _read_table("cub", root, d / "images.txt", 2, int_cols=(0,))
    labels = _read_table("cub", root, d / "image_class_labels.txt", 2, int_cols=(0, 1))
    path_of = {int(i): p for i, p in images}
    label_of = {int(i): int(c) for i, c in labels}
    if set(path_of) != set(label_of):
        raise _layout_error("cub", root, "images.txt and image_class_labels.txt list different image ids",
                            ValueError)
    names = {}
    if (d / "classes.txt").exists():
        names = {int(c): n for c, n in _read_table("cub", root, d / "classes.txt", 2, int_cols=(0,))}
    ids = sorted(path_of)
    paths = [str(d / "images" / path_of[i]) for i in ids]
    raw = [label_of[i] for i in ids]
    _check_first_image("cub", root, paths[0])
    folder = {c: Path(path_of[i]).parts[0] for i, c in zip(ids, raw)}
    return _select("cub", root, split, paths, raw, _half_split(raw, split),
                   lambda c: names.get(c, folder.get(c, str(c))),
                   make_transform(transform, split, image_size, resize, convention, crop_scale), max_classes)


def _mat_field(struct, field: str) -> list:
    """One field of a loadmat(squeeze_me=True) struct array as a python list."""
    vals = np.atleast_1d(struct[field])
    out = []
    for v in vals.ravel():
        v = np.asarray(v).squeeze()
        out.append(v.item() if v.ndim == 0 else v.tolist())
    return out


def _load_mat(name, root, path: Path) -> dict:
    from scipy.io import loadmat  # local: scipy.io takes about 0.6 s to import (measured) and only Cars needs it
    try:
        return loadmat(str(path), squeeze_me=True)
    except Exception as exc:  # noqa: BLE001
        raise _layout_error(name, root, f"cannot read {path.name} ({type(exc).__name__}: {exc})", ValueError)


def load_cars(root, split: str = "train", image_size: int = DEFAULT_IMAGE_SIZE, transform=None,
              resize: int | None = None, max_classes: int | None = None, convention: str = "imagenet",
              crop_scale=None) -> ImageListDataset:
    """Cars196 (Krause et al., 2013), zero-shot split: classes 1-98 train, 99-196 test."""
    Choice(("train", "test")).check("split", split)
    root = _check_root("cars", root)
    d = _locate(root, "cars_annos.mat", ("cars196", "CARS196", "stanford_cars", "cars"))
    paths, raw, names = [], [], []
    if d is not None:
        if not (d / "car_ims").is_dir():
            raise _layout_error("cars", root, f"image folder {d / 'car_ims'} not found")
        m = _load_mat("cars", root, d / "cars_annos.mat")
        if "annotations" not in m or "class_names" not in m:
            raise _layout_error("cars", root, "cars_annos.mat lacks 'annotations' or 'class_names'", ValueError)
        ann = m["annotations"]
        try:
            rel, cls = _mat_field(ann, "relative_im_path"), _mat_field(ann, "class")
        except (ValueError, KeyError, IndexError) as exc:
            raise _layout_error("cars", root, f"cars_annos.mat 'annotations' lacks a field ({exc})", ValueError)
        paths = [str(d / str(r)) for r in rel]
        raw = [int(c) for c in cls]
        names = [str(n) for n in np.atleast_1d(m["class_names"]).ravel()]
    else:
        d = _locate(root, "devkit/cars_meta.mat", ("cars196", "CARS196", "stanford_cars", "cars"))
        if d is None:
            raise _layout_error("cars", root, "neither cars_annos.mat nor devkit/cars_meta.mat found")
        test_mat = next((p for p in (d / "devkit" / "cars_test_annos_withlabels.mat",
                                     d / "cars_test_annos_withlabels.mat") if p.exists()), None)
        train_mat = d / "devkit" / "cars_train_annos.mat"
        if test_mat is None or not train_mat.exists():
            raise _layout_error("cars", root, "devkit/cars_train_annos.mat or cars_test_annos_withlabels.mat missing")
        for mat, folder in ((train_mat, "cars_train"), (test_mat, "cars_test")):
            if not (d / folder).is_dir():
                raise _layout_error("cars", root, f"image folder {d / folder} not found")
            m = _load_mat("cars", root, mat)
            if "annotations" not in m:
                raise _layout_error("cars", root, f"{mat.name} lacks 'annotations'", ValueError)
            try:
                fn, cls = _mat_field(m["annotations"], "fname"), _mat_field(m["annotations"], "class")
            except (ValueError, KeyError, IndexError) as exc:
                raise _layout_error("cars", root, f"{mat.name} 'annotations' lacks a field ({exc})", ValueError)
            paths += [str(d / folder / str(f)) for f in fn]
            raw += [int(c) for c in cls]
        meta = _load_mat("cars", root, d / "devkit" / "cars_meta.mat")
        if "class_names" not in meta:
            raise _layout_error("cars", root, "cars_meta.mat lacks 'class_names'", ValueError)
        names = [str(n) for n in np.atleast_1d(meta["class_names"]).ravel()]
    if not paths:
        raise _layout_error("cars", root, "the annotations list no images", ValueError)
    if min(raw) < 1 or max(raw) > max(len(names), 1):
        raise _layout_error("cars", root, f"class ids must lie in 1..{len(names)} (the class_names)", ValueError)
    _check_first_image("cars", root, paths[0])
    return _select("cars", root, split, paths, raw, _half_split(raw, split), lambda c: names[c - 1],
                   make_transform(transform, split, image_size, resize, convention, crop_scale), max_classes)


def load_sop(root, split: str = "train", image_size: int = DEFAULT_IMAGE_SIZE, transform=None,
             resize: int | None = None, max_classes: int | None = None, convention: str = "imagenet",
             crop_scale=None) -> ImageListDataset:
    """Stanford Online Products (Oh Song et al., 2016): the official Ebay_train / Ebay_test split."""
    Choice(("train", "test")).check("split", split)
    root = _check_root("sop", root)
    fname = "Ebay_train.txt" if split == "train" else "Ebay_test.txt"
    d = _locate(root, fname, ("Stanford_Online_Products",))
    if d is None:
        raise _layout_error("sop", root, f"{fname} not found")
    rows = _read_table("sop", root, d / fname, 4, skip=1, int_cols=(0, 1, 2))
    paths = [str(d / r[3]) for r in rows]
    raw = [int(r[1]) for r in rows]
    _check_first_image("sop", root, paths[0])
    folder = {int(r[1]): Path(r[3]).parts[0] for r in rows}
    return _select("sop", root, split, paths, raw, sorted(set(raw)), lambda c: f"{folder[c]}/{c}",
                   make_transform(transform, split, image_size, resize, convention, crop_scale), max_classes)


def load_inshop(root, split: str = "train", image_size: int = DEFAULT_IMAGE_SIZE, transform=None,
                resize: int | None = None, max_classes: int | None = None, convention: str = "imagenet",
                crop_scale=None) -> ImageListDataset:
    """In-Shop Clothes Retrieval (Liu et al., DeepFashion, 2016). Splits: "train", "query", "gallery",
    and "test" (query + gallery). The paper's protocol retrieves gallery images for each query."""
    Choice(("train", "query", "gallery", "test")).check("split", split)
    root = _check_root("inshop", root)
    d = _locate(root, "list_eval_partition.txt", ("Eval", "inshop", "In-shop", "inshop/Eval", "In-shop/Eval"))
    if d is None:
        raise _layout_error("inshop", root, "list_eval_partition.txt not found")
    part = d / "list_eval_partition.txt"
    base_candidates = [d, d.parent, d / "Img", d.parent / "Img"]
    rows = _read_table("inshop", root, part, 3, skip=2)
    status_ok = {"train", "query", "gallery"}
    bad = next((r for r in rows if r[2] not in status_ok), None)
    if bad is not None:
        raise _layout_error("inshop", root, f"{part.name}: evaluation_status {bad[2]!r} is not one of "
                                            f"train/query/gallery", ValueError)
    base = next((b for b in base_candidates if (b / rows[0][0]).exists()), None)
    if base is None:
        raise _layout_error("inshop", root, f"image {rows[0][0]} not found under {d} or {d / 'Img'}")
    wanted = {"train": {"train"}, "query": {"query"}, "gallery": {"gallery"}, "test": {"query", "gallery"}}[split]
    mapping_status = {"train"} if split == "train" else {"query", "gallery"}
    item_ids = sorted({r[1] for r in rows if r[2] in mapping_status})
    sel = [r for r in rows if r[2] in wanted]
    paths = [str(base / r[0]) for r in sel]
    raw = [r[1] for r in sel]
    return _select("inshop", root, split, paths, raw, item_ids, str,
                   make_transform(transform, split, image_size, resize, convention, crop_scale), max_classes)


# The only globals a CIFAR pickle needs: numpy arrays, dtypes and scalars (any numpy version and
# pickle protocol), and ``_codecs.encode``, which protocol-2 pickles use for byte strings.
_PICKLE_GLOBALS = {("numpy", "ndarray"), ("numpy", "dtype"), ("multiarray", "_reconstruct"),
                   ("multiarray", "scalar"), ("numeric", "_frombuffer"), ("_codecs", "encode")}


class _CifarUnpickler(pickle.Unpickler):
    """Unpickles plain containers, strings, numbers and numpy arrays; refuses every other global
    (a pickle can otherwise run any code, e.g. ``os.system``, while it loads)."""

    def find_class(self, module: str, name: str):
        numpy_core = module.startswith(("numpy.core.", "numpy._core."))
        if ((module.rsplit(".", 1)[-1] if numpy_core else module), name) not in _PICKLE_GLOBALS:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in a CIFAR file "
                                         "(only numpy arrays, dtypes and plain containers are)")
        if numpy_core and hasattr(np, "_core"):         # numpy >= 2 names the numpy 1 modules numpy._core
            module = "numpy._core." + module.split(".", 2)[2]
        return super().find_class(module, name)


def _unpickle(name, root, path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            out = _CifarUnpickler(fh, encoding="latin1").load()
    except Exception as exc:  # noqa: BLE001
        raise _layout_error(name, root, f"cannot unpickle {path.name} ({type(exc).__name__}: {exc})", ValueError)
    if not isinstance(out, dict):
        raise _layout_error(name, root, f"{path.name} holds a {type(out).__name__}, not a dict", ValueError)
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in out.items()}


def load_cifar(root, split: str = "train", num_classes: int = 10, split_by: str = "class", image_size: int = 32,
               transform=None, resize: int | None = None, max_classes: int | None = None, convention: str = "imagenet",
               crop_scale=None) -> ArrayImageDataset:
    """CIFAR-10 / CIFAR-100 (Krizhevsky, 2009) from the python pickles.

    ``split_by="class"``: train = training-file images of the first half of the classes, test =
    test-file images of the second half (zero-shot). ``split_by="file"``: the standard files, all classes.
    ``image_size`` defaults to the native 32 (``resize`` defaults to ``image_size`` here, so the test
    transform is the identity at 32 px)."""
    Choice((10, 100)).check("num_classes", num_classes)
    name = f"cifar{num_classes}"
    Choice(("train", "test")).check("split", split)
    Choice(("class", "file")).check("split_by", split_by)
    root = _check_root(name, root)
    if num_classes == 10:
        d = _locate(root, "batches.meta", ("cifar-10-batches-py",))
        files = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"]
        meta_file, label_key, names_key = "batches.meta", "labels", "label_names"
    else:
        d = _locate(root, "meta", ("cifar-100-python",))
        files = ["train"] if split == "train" else ["test"]
        meta_file, label_key, names_key = "meta", "fine_labels", "fine_label_names"
    if d is None:
        raise _layout_error(name, root, f"{meta_file} not found")
    missing = [f for f in files if not (d / f).exists()]
    if missing:
        raise _layout_error(name, root, f"missing {', '.join(missing)}")
    meta = _unpickle(name, root, d / meta_file)
    if names_key not in meta:
        raise _layout_error(name, root, f"{meta_file} lacks {names_key!r}", ValueError)
    class_names = [str(n) for n in meta[names_key]]
    data, labels = [], []
    for f in files:
        b = _unpickle(name, root, d / f)
        if "data" not in b or label_key not in b:
            raise _layout_error(name, root, f"{f} lacks 'data' or {label_key!r}", ValueError)
        x = np.asarray(b["data"], dtype=np.uint8)
        if x.ndim != 2 or x.shape[1] != 3072 or len(b[label_key]) != x.shape[0]:
            raise _layout_error(name, root, f"{f}: 'data' must be N x 3072 with N labels, got {x.shape}", ValueError)
        data.append(x)
        labels += list(b[label_key])
    images = np.concatenate(data).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    raw = np.asarray(labels, dtype=np.int64)
    all_ids = list(range(len(class_names)))
    kept = all_ids if split_by == "file" else (all_ids[:len(all_ids) // 2] if split == "train"
                                              else all_ids[len(all_ids) // 2:])
    max_classes = _MAX_CLASSES.check("max_classes", max_classes)
    if max_classes is not None:
        kept = kept[:max_classes]
    index = np.full(len(class_names), -1, dtype=np.int64)
    index[kept] = np.arange(len(kept))
    sel = np.nonzero(index[raw] >= 0)[0]
    tf = make_transform(transform, split, image_size, image_size if resize is None else resize, convention,
                        crop_scale)
    return ArrayImageDataset(np.ascontiguousarray(images[sel]), index[raw[sel]], [class_names[c] for c in kept],
                             split, str(root), tf, DISPLAY_NAMES[name])
