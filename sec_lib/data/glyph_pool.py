"""Glyphs benchmark, classes and pool: the committed class list, the rendered pool of instances and its
cache under ``<data dir>/glyphs/`` (the rules: see :mod:`sec_lib.data.glyphs`)."""
from __future__ import annotations

import functools
import hashlib
import io
import json
import logging
import multiprocessing
import os
import time
import unicodedata
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..params import Choice, Number, OptionalParam
from ..tempfiles import atomic_write_bytes
from .glyph_render import (
    OVERSAMPLE, EXCLUDED_CATEGORIES, FILL, FONT_FILES, MIN_INK, REGULAR_FONTS, allowed_codepoints, augment_glyph, centered,
    font_library_versions, stretched_render, char_name, font_versions, render_glyph,
)

logger = logging.getLogger(__name__)

#: Version of the rendering recipe; bump it when the images would change (invalidates caches).
GENERATOR_VERSION = 1
DEFAULT_IMAGE_SIZE = 32
DEFAULT_INSTANCES_PER_CLASS = 12
DEFAULT_SEED = 0
SPLITS = ("train", "test")

# --- class-list rule parameters (see the module docstring of sec_lib.data.glyphs; MIN_INK and
# EXCLUDED_CATEGORIES are in glyph_render) ---
MIN_FONTS = 8
MIN_DESIGNS = 2
ANALYSIS_SIZE = 32
DUP_MAX_PIXELS = 8
DESIGN_MAX_PIXELS = 8
CLASS_ORDER_SEED = 2020

PACKAGE_DIR = Path(__file__).resolve().parent
CLASS_TXT = PACKAGE_DIR / "glyph_classes.txt"
CLASS_JSON = PACKAGE_DIR / "glyph_classes.json"

# --- argument checks ---
SPLIT_CHOICE = Choice(SPLITS)
_IMAGE_SIZE = Number(8, 1024, integer=True)
_INSTANCES = Number(1, 10000, integer=True)
_SEED = Number(0, 2**63 - 1, integer=True)
_WORKERS = Number(0, 256, integer=True)
_MAX_CLASSES = OptionalParam(Number(1, 10**9, integer=True))


# =============================================================================================
# The committed class list
# =============================================================================================

@dataclass(frozen=True)
class GlyphClass:
    """One class: a code point (the representative of its homoglyph group) and the fonts that render it."""
    codepoint: int
    name: str
    fonts: tuple[str, ...]
    members: tuple[int, ...] = ()

    @property
    def char(self) -> str:
        return chr(self.codepoint)

    @property
    def label(self) -> str:
        """``"U+0041 LATIN CAPITAL LETTER A"``."""
        return f"U+{self.codepoint:04X} {self.name}"


class UnionFind:
    def __init__(self, items):
        self.parent = {i: i for i in items}

    def find(self, a):
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def pair_distances(v: torch.Tensor) -> torch.Tensor:
    """Hamming distances between the rows of ``v`` binarised at 0.5 (number of differing pixels)."""
    b = (v.to(torch.float32) > 0.5).to(torch.float32)
    n = b.sum(1)
    return (n[:, None] + n[None, :] - 2 * b @ b.T).round()


def homoglyph_groups(visible: list[int], renders: dict) -> tuple[list[list[int]], int]:
    """Code points of one look, merged: two are homoglyphs when their analysis renders differ in at most
    ``DUP_MAX_PIXELS`` pixels in >= 2 fonts and in >= half of the fonts that draw both; groups are the
    connected components. ``renders``: font -> {code point: boolean analysis render}. Returns the groups (lists
    of code points, in the order of their first member in ``visible``) and the number of homoglyph pairs."""
    index = {cp: i for i, cp in enumerate(visible)}
    n = len(visible)
    presence = torch.zeros(n, len(FONT_FILES))
    dup_count: dict[tuple[int, int], int] = {}
    for j, f in enumerate(FONT_FILES):
        cps = [cp for cp in visible if cp in renders[f]]
        if not cps:
            continue
        ids = torch.tensor([index[cp] for cp in cps])
        presence[ids, j] = 1
        d = pair_distances(torch.from_numpy(np.stack([renders[f][cp] for cp in cps])))
        a, b = torch.nonzero(torch.triu(d <= DUP_MAX_PIXELS, diagonal=1), as_tuple=True)
        for x, y in zip(ids[a].tolist(), ids[b].tolist()):
            dup_count[(x, y)] = dup_count.get((x, y), 0) + 1
    co = presence @ presence.T
    uf = UnionFind(range(n))
    n_pairs = 0
    for (x, y), c in dup_count.items():
        if c >= 2 and c >= 0.5 * float(co[x, y]):
            uf.union(x, y)
            n_pairs += 1
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(uf.find(i), []).append(visible[i])
    return list(groups.values()), n_pairs


def compute_classes(progress: bool = False) -> tuple[list[GlyphClass], dict]:
    """Apply the class rule of the module docstring to the installed fonts.

    Returns (classes in the committed order, statistics dict). Takes about a minute."""
    t0 = time.perf_counter()
    allowed = {f: allowed_codepoints(f) for f in FONT_FILES}
    counts: dict[int, int] = {}
    for f in FONT_FILES:
        for cp in allowed[f]:
            counts[cp] = counts.get(cp, 0) + 1
    candidates = sorted(cp for cp, n in counts.items() if n >= MIN_FONTS)
    cand_set = set(candidates)

    # 1. render every (font, candidate) pair at the analysis size; keep binarised renders (aspect kept,
    #    and for the regular upright fonts also stretched to the full square)
    renders: dict[str, dict[int, np.ndarray]] = {}
    stretched: dict[str, dict[int, np.ndarray]] = {}
    for i, f in enumerate(FONT_FILES):
        r, st = {}, {}
        for cp in sorted(cand_set & allowed[f].keys()):
            g = render_glyph(f, cp, ANALYSIS_SIZE)
            if g is not None:
                r[cp] = centered(g, ANALYSIS_SIZE).ravel() > 0.5
                if f in REGULAR_FONTS:
                    st[cp] = stretched_render(render_glyph(f, cp, 4 * ANALYSIS_SIZE), ANALYSIS_SIZE).ravel() > 0.5
        renders[f], stretched[f] = r, st
        if progress:
            print(f"  rendered {f}: {len(r)} glyphs ({time.perf_counter() - t0:.0f} s)", flush=True)
    fonts_of: dict[int, list[str]] = {cp: [f for f in FONT_FILES if cp in renders[f]] for cp in candidates}
    visible = [cp for cp in candidates if len(fonts_of[cp]) >= MIN_FONTS]

    # 2. homoglyph pairs: same shape in >= half of the fonts rendering both (and >= 2 fonts)
    groups, n_pairs = homoglyph_groups(visible, renders)

    # 3. representatives, variety check
    classes = []
    dropped_same = []
    for members in groups:
        members = sorted(members)
        rep = min(members, key=lambda cp: (-len(fonts_of[cp]), cp))
        fonts = fonts_of[rep]
        upright = [f for f in REGULAR_FONTS if f in fonts]
        if len(upright) < MIN_DESIGNS or min(
                num_designs(pair_distances(torch.from_numpy(np.stack([r[f][rep] for f in upright]))),
                             DESIGN_MAX_PIXELS) for r in (renders, stretched)) < MIN_DESIGNS:
            dropped_same.append(rep)
            continue
        classes.append(GlyphClass(rep, char_name(rep), tuple(fonts), tuple(m for m in members if m != rep)))
    classes.sort(key=lambda c: c.codepoint)
    order = np.random.default_rng(CLASS_ORDER_SEED).permutation(len(classes))
    classes = [classes[i] for i in order]
    stats = {"candidates": len(candidates), "visible_in_min_fonts": len(visible),
             "homoglyph_pairs": n_pairs, "homoglyph_groups": len(groups),
             "dropped_near_identical_across_fonts": len(dropped_same), "classes": len(classes),
             "seconds": round(time.perf_counter() - t0, 1)}
    return classes, stats


def num_designs(d: torch.Tensor, thr: float) -> int:
    """Number of groups of renders when renders at most ``thr`` pixels apart are linked (connected components)."""
    n = d.shape[0]
    uf = UnionFind(range(n))
    a, b = torch.nonzero(d <= thr, as_tuple=True)
    for x, y in zip(a.tolist(), b.tolist()):
        uf.union(x, y)
    return len({uf.find(i) for i in range(n)})


def rebuild_classes(txt_path: Path = CLASS_TXT, json_path: Path = CLASS_JSON, progress: bool = True) -> dict:
    """Recompute the class list from the installed fonts and write the committed files."""
    classes, stats = compute_classes(progress=progress)
    txt = "".join(c.label + "\n" for c in classes)
    meta = {
        "description": "sec_lib glyphs benchmark classes; order = train half then test half",
        "rule": {"min_fonts": MIN_FONTS, "min_designs": MIN_DESIGNS, "min_ink": MIN_INK,
                 "analysis_size": ANALYSIS_SIZE, "dup_max_pixels": DUP_MAX_PIXELS,
                 "design_max_pixels": DESIGN_MAX_PIXELS, "order_seed": CLASS_ORDER_SEED,
                 "excluded_categories": list(EXCLUDED_CATEGORIES)},
        "fonts": font_versions(),
        "versions": {**font_library_versions(), "unicodedata": unicodedata.unidata_version},
        "stats": {k: v for k, v in stats.items() if k != "seconds"},
        "classes": [{"cp": f"U+{c.codepoint:04X}", "name": c.name,
                     "fonts": [FONT_FILES.index(f) for f in c.fonts],
                     "members": [f"U+{m:04X}" for m in c.members]} for c in classes],
    }
    entries = meta.pop("classes")
    head = json.dumps(meta, indent=1, ensure_ascii=False)[:-2]  # drop the closing "\n}"
    body = ",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in entries)
    atomic_write_bytes(Path(txt_path), txt.encode("utf-8"))
    atomic_write_bytes(Path(json_path), (head + ',\n "classes": [\n' + body + "\n ]\n}\n").encode("utf-8"))
    return stats


@functools.lru_cache(maxsize=4)
def _load_classes(txt_path: str, json_path: str) -> tuple[GlyphClass, ...]:
    txt = Path(txt_path).read_text(encoding="utf-8").splitlines()
    meta = json.loads(Path(json_path).read_text(encoding="utf-8"))
    entries = meta["classes"]
    if len(txt) != len(entries):
        raise ValueError(f"{txt_path} has {len(txt)} lines but {json_path} lists {len(entries)} classes; "
                         "rebuild both with `python -m sec_lib.data.glyphs --rebuild-classes`")
    out = []
    for line, e in zip(txt, entries):
        cp = int(line.split()[0][2:], 16)
        if f"U+{cp:04X}" != e["cp"]:
            raise ValueError(f"{txt_path} and {json_path} disagree at {line!r}")
        out.append(GlyphClass(cp, e["name"], tuple(FONT_FILES[i] for i in e["fonts"]),
                              tuple(int(m[2:], 16) for m in e["members"])))
    return tuple(out)


def glyph_classes() -> list[GlyphClass]:
    """All committed classes, in the committed order (train half first, then test half)."""
    return list(_load_classes(str(CLASS_TXT), str(CLASS_JSON)))


def split_classes(split: str, max_classes: int | None = None) -> list[GlyphClass]:
    """The classes of one zero-shot split: "train" = first half of the committed list, "test" = second."""
    SPLIT_CHOICE.check("split", split)
    max_classes = _MAX_CLASSES.check("max_classes", max_classes)
    allc = glyph_classes()
    half = len(allc) // 2
    cls = allc[:half] if split == "train" else allc[half:2 * half]
    return cls if max_classes is None else cls[:max_classes]


# =============================================================================================
# Instance rendering
# =============================================================================================

def _render_classes(classes: Sequence[GlyphClass], image_size: int, instances_per_class: int,
                    seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Worker: (images uint8 (n*ipc, S, S), font indices int16) for a chunk of classes."""
    n = len(classes) * instances_per_class
    images = np.zeros((n, image_size, image_size), np.uint8)
    fonts = np.zeros(n, np.int16)
    target = max(1, int(round(FILL * image_size * OVERSAMPLE)))
    k = 0
    for cls in classes:
        perm = np.random.default_rng([seed, cls.codepoint, 1 << 20]).permutation(len(cls.fonts))
        bases = {}
        for j in range(instances_per_class):
            f = cls.fonts[perm[j % len(cls.fonts)]]
            if f not in bases:
                g = render_glyph(f, cls.codepoint, target)
                if g is None:
                    raise RuntimeError(f"font {f} renders no ink for {cls.label}; the committed class list "
                                       "does not match the installed fonts (rebuild it)")
                bases[f] = g
            images[k] = augment_glyph(bases[f], image_size, np.random.default_rng([seed, cls.codepoint, j]))
            fonts[k] = FONT_FILES.index(f)
            k += 1
    return images, fonts


def _auto_workers(n_classes: int) -> int:
    if n_classes < 400 or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return min(cpus, 8) if cpus > 1 else 0


def render_pool(classes: Sequence[GlyphClass], image_size: int = DEFAULT_IMAGE_SIZE,
                instances_per_class: int = DEFAULT_INSTANCES_PER_CLASS, seed: int = DEFAULT_SEED,
                num_workers: int | None = None) -> dict:
    """Render ``instances_per_class`` augmented instances of every class (no caching).

    ``num_workers``: processes to render with (forked, so nothing is re-imported; they only run
    PIL/numpy code); None = one per available CPU (at most 8) for 400 classes or more where the
    "fork" start method exists (Linux), else 0 = in this process. The result does not depend on it.
    Returns ``{"images": uint8 (N, S, S), "labels": int64 (N,), "fonts": int16 (N,)}`` with labels
    = position in ``classes`` and fonts = index into :data:`FONT_FILES`."""
    image_size = _IMAGE_SIZE.check("image_size", image_size)
    instances_per_class = _INSTANCES.check("instances_per_class", instances_per_class)
    seed = _SEED.check("seed", seed)
    classes = list(classes)
    workers = _auto_workers(len(classes)) if num_workers is None else num_workers
    workers = _WORKERS.check("num_workers", workers)
    if workers <= 1:
        images, fonts = _render_classes(classes, image_size, instances_per_class, seed)
    else:
        n_chunks = 4 * workers
        bounds = np.linspace(0, len(classes), n_chunks + 1).round().astype(int)
        chunks = [classes[a:b] for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as ex:
            parts = list(ex.map(_render_classes, chunks, [image_size] * len(chunks),
                                [instances_per_class] * len(chunks), [seed] * len(chunks)))
        images = np.concatenate([p[0] for p in parts])
        fonts = np.concatenate([p[1] for p in parts])
    labels = np.repeat(np.arange(len(classes), dtype=np.int64), instances_per_class)
    return {"images": torch.from_numpy(images), "labels": torch.from_numpy(labels),
            "fonts": torch.from_numpy(fonts)}


# =============================================================================================
# Cache
# =============================================================================================

def default_data_dir() -> Path:
    """``$SEC_DATA_DIR`` if set, else ``<repo>/data`` (repo = the checkout holding this package, found
    by its ``pyproject.toml``), else ``./data`` in the current working directory."""
    env = os.environ.get("SEC_DATA_DIR")
    if env:
        return Path(env).expanduser()
    repo = PACKAGE_DIR.parent.parent
    if (repo / "pyproject.toml").exists():
        return repo / "data"
    return Path.cwd() / "data"


def default_cache_dir() -> Path:
    """Where glyph pools are cached: ``default_data_dir() / "glyphs"`` (not created here)."""
    return default_data_dir() / "glyphs"


def cache_paths(cache_dir: Path, image_size: int, instances_per_class: int, seed: int,
                max_classes: int | None) -> tuple[Path, Path]:
    tag = "all" if max_classes is None else f"{max_classes}cls"
    stem = f"glyphs_{image_size}px_{instances_per_class}ipc_seed{seed}_{tag}"
    return Path(cache_dir) / f"{stem}.pt", Path(cache_dir) / f"{stem}.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _expected_manifest(classes: Sequence[GlyphClass], image_size, instances_per_class, seed, max_classes) -> dict:
    return {
        "format": "sec_lib.data.glyphs pool",
        "generator_version": GENERATOR_VERSION,
        "image_size": image_size,
        "instances_per_class": instances_per_class,
        "seed": seed,
        "max_classes": max_classes,
        "classes": [c.label for c in classes],
        "class_fonts": [[FONT_FILES.index(f) for f in c.fonts] for c in classes],
        "fonts": font_versions(),
        "versions": font_library_versions(),
    }


def try_load(pt: Path, js: Path, expected: dict) -> dict | None:
    """Load a cached pool; None (with a logged warning) if anything is missing, corrupt or stale."""
    if not pt.exists() and not js.exists():
        return None
    try:
        manifest = json.loads(js.read_text(encoding="utf-8"))
        for key, val in expected.items():
            if manifest.get(key) != val:
                raise ValueError(f"manifest field {key!r} differs from the current settings")
        if pt.stat().st_size != manifest.get("bytes"):
            raise ValueError(f"{pt.name} has {pt.stat().st_size} bytes, manifest says {manifest.get('bytes')}")
        if _sha256(pt) != manifest.get("sha256"):
            raise ValueError(f"sha256 of {pt.name} does not match the manifest")
        pool = torch.load(pt, map_location="cpu", weights_only=True)
        n = len(expected["classes"]) * expected["instances_per_class"]
        s = expected["image_size"]
        if (tuple(pool["images"].shape) != (n, s, s) or pool["images"].dtype != torch.uint8
                or tuple(pool["labels"].shape) != (n,) or tuple(pool["fonts"].shape) != (n,)):
            raise ValueError("tensor shapes do not match the manifest")
        return pool
    except Exception as exc:  # noqa: BLE001 - any failure means "regenerate"
        logger.warning("glyph cache %s is unusable (%s: %s); regenerating it", pt, type(exc).__name__, exc)
        return None


def load_pool(image_size: int = DEFAULT_IMAGE_SIZE, instances_per_class: int = DEFAULT_INSTANCES_PER_CLASS,
              seed: int = DEFAULT_SEED, max_classes: int | None = None, cache_dir: str | os.PathLike | None = None,
              regenerate: bool = False, num_workers: int | None = None) -> tuple[dict, dict]:
    """The rendered pool of both splits (train classes first), from the cache or freshly rendered.

    With ``max_classes=m`` the pool holds the first ``m`` classes of each split. Returns
    ``(pool, manifest)``; ``pool`` as in :func:`render_pool` (labels = position in ``manifest["classes"]``).
    """
    image_size = _IMAGE_SIZE.check("image_size", image_size)
    instances_per_class = _INSTANCES.check("instances_per_class", instances_per_class)
    seed = _SEED.check("seed", seed)
    max_classes = _MAX_CLASSES.check("max_classes", max_classes)
    train, test = split_classes("train", max_classes), split_classes("test", max_classes)
    classes = train + test
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    pt, js = cache_paths(cache_dir, image_size, instances_per_class, seed, max_classes)
    expected = _expected_manifest(classes, image_size, instances_per_class, seed, max_classes)
    expected["num_train_classes"], expected["num_test_classes"] = len(train), len(test)
    if not regenerate:
        pool = try_load(pt, js, expected)
        if pool is not None:
            return pool, json.loads(js.read_text(encoding="utf-8"))
    t0 = time.perf_counter()
    pool = render_pool(classes, image_size, instances_per_class, seed, num_workers=num_workers)
    seconds = time.perf_counter() - t0
    buf = io.BytesIO()
    torch.save(pool, buf)
    data = buf.getvalue()
    manifest = {**expected, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                "tensor_file": pt.name, "num_images": int(pool["images"].shape[0]),
                "generation_seconds": round(seconds, 3)}
    # tensor first, manifest second (each via temp file + os.replace): a reader never sees a manifest
    # that describes a half-written tensor file.
    atomic_write_bytes(pt, data)
    atomic_write_bytes(js, (json.dumps(manifest, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
    logger.info("rendered %d glyph images in %.1f s into %s", manifest["num_images"], seconds, pt)
    return pool, manifest
