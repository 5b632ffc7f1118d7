"""Pretraining glyphs: classes that no split of the benchmark uses, disjoint from it by code point and by look.

The paper fine-tunes a backbone pretrained on other images (ImageNet). Here the backbone is pretrained on glyph
classes the benchmark never uses: every one of the 2,784 committed classes (:mod:`sec_lib.data.glyphs`)
is in the train half (whose last classes are the held-out classes of every profile) or the test half, so the
pretraining classes come from the code points the same 23 font files render but the benchmark does not use.

The rule (the committed list is ``glyph_pretrain_classes.json`` next to this module; rebuild it with
``python -m sec_lib.data.glyph_pretrain --rebuild``, about a minute; never done at build time):

1. **Code points.** A candidate is a code point that is neither the representative nor a merged homoglyph
   member of any committed class (train, held-out or test), passes the benchmark's rules 1-3 (the same fonts,
   the same excluded Unicode categories and Computer Modern whitelists, ink in the render), and is rendered by at
   least :data:`PRETRAIN_MIN_FONTS` of the 23 fonts. (The benchmark needs 8 fonts and 2 designs; most
   candidates are drawn only by the four DejaVu Sans styles.)
2. **Homoglyphs among them** are merged as in the benchmark's rule 4 (binarised 32 x 32 size-normalised renders
   at most ``DUP_MAX_PIXELS`` = 8 pixels apart in at least half of the fonts drawing both); a group is
   represented by the member drawn by the most fonts (ties: lowest code point).
3. **Disjoint by look.** A group is dropped if any render of any of its members, in any font, lies within
   :data:`NEAR_MAX_PIXELS` pixels (Hamming distance of the binarised 32 x 32 renders, of 1,024) of any render of
   any committed class (its representative or a merged member), in any font: every pair of fonts is compared,
   not only the same font. The renders are cropped to their ink and scaled to fit the square, so position and
   size do not separate shapes (an em dash matches a low line, Cyrillic "о" matches Latin "o"). The threshold is
   12 times the benchmark's own homoglyph threshold; at it, e.g. Cyrillic "Ҏ" (er with tick) and Latin "Ᵽ"
   (56 px), "ᐸ" and "<" (71 px) or "❖" and "◆" (91 px) are excluded.
4. **Order:** by code point. The instances of a class are drawn like the benchmark's (fonts cycled in a seeded
   order, the same augmentation), from the fonts that render its representative.

:func:`pixel_disjointness` recomputes step 3 for a list of classes (tests/runs/test_pretrain.py runs it on the
committed list); :func:`load_pretrain_glyphs` renders (once, cached beside the benchmark's pool) the images.
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import io
import json
import logging
import os
import time
import unicodedata
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..params import Number
from ..tempfiles import atomic_write_bytes
from .glyph_pool import (
    ANALYSIS_SIZE, CLASS_JSON, DUP_MAX_PIXELS, GENERATOR_VERSION, PACKAGE_DIR, GlyphClass, default_cache_dir,
    glyph_classes, homoglyph_groups, render_pool, try_load,
)
from .glyph_render import (
    EXCLUDED_CATEGORIES, FONT_FILES, MIN_INK, allowed_codepoints, centered, char_name, font_library_versions,
    font_versions, render_glyph,
)
from .glyphs import GlyphDataset

logger = logging.getLogger(__name__)

#: A pretraining class must be rendered by at least this many of the 23 fonts (rule 1).
PRETRAIN_MIN_FONTS = 4
#: Rule 3: a pretraining class is dropped when one of its renders lies within this many pixels (of 1,024) of a
#: render of a committed class, over every pair of fonts.
NEAR_MAX_PIXELS = 96
#: Instances per pretraining class (a class drawn by 4 fonts has 8 instances of each).
PRETRAIN_INSTANCES_PER_CLASS = 32
PRETRAIN_JSON = PACKAGE_DIR / "glyph_pretrain_classes.json"

_INSTANCES = Number(1, 10000, integer=True)
_SIZE = Number(8, 1024, integer=True)
_SEED = Number(0, 2**63 - 1, integer=True)


def benchmark_codepoints() -> set[int]:
    """Every code point the benchmark uses: the representative and the merged members of each committed class."""
    used: set[int] = set()
    for c in glyph_classes():
        used.add(c.codepoint)
        used.update(c.members)
    return used


def _analysis_render(font: str, cp: int) -> np.ndarray | None:
    g = render_glyph(font, cp, ANALYSIS_SIZE)
    return None if g is None else centered(g, ANALYSIS_SIZE).ravel() > 0.5


def _benchmark_renders(cache: bool = True) -> tuple[torch.Tensor, list[int]]:
    """(binarised renders float32 (M, 1024), the committed class (representative code point) of each row): every
    representative and member of every committed class in every font whose allowed set has it and draws ink,
    each distinct render once (the first class that has it).

    With ``cache`` they are kept (bit-packed, about 4 MB) in ``<cache>/benchmark_renders_<key>.npz``, the key
    hashing the committed class list, the font and library versions and the analysis size: rendering them takes
    10-40 s on the 2-core machine, and a changed font or class list makes a new key."""
    key = hashlib.sha256(json.dumps({"classes": hashlib.sha256(Path(CLASS_JSON).read_bytes()).hexdigest(),
                                     "fonts": font_versions(), "versions": font_library_versions(),
                                     "analysis_size": ANALYSIS_SIZE, "min_ink": MIN_INK, "format": 1},
                                    sort_keys=True).encode()).hexdigest()[:16]
    path = default_cache_dir() / f"benchmark_renders_{key}.npz"
    if cache and path.exists():
        try:
            with np.load(path) as z:
                bits, owner = z["bits"], z["owner"]
            rows = np.unpackbits(bits, axis=1, count=ANALYSIS_SIZE * ANALYSIS_SIZE).astype(np.float32)
            return torch.from_numpy(rows), [int(o) for o in owner]
        except Exception as exc:  # noqa: BLE001 - any failure means "render again"
            logger.warning("benchmark render cache %s is unusable (%s); rendering again", path, exc)
    allowed = {f: allowed_codepoints(f) for f in FONT_FILES}
    rows, owner = [], []
    for c in glyph_classes():
        for cp in (c.codepoint,) + tuple(c.members):
            for f in FONT_FILES:
                if cp in allowed[f]:
                    r = _analysis_render(f, cp)
                    if r is not None:
                        rows.append(r)
                        owner.append(c.codepoint)
    # identical renders (a class in two styles that draw it alike, a member drawn like its representative) once
    packed = np.packbits(np.stack(rows), axis=1)
    _, first = np.unique(packed, axis=0, return_index=True)
    first = np.sort(first)
    if cache:
        buf = io.BytesIO()
        np.savez(buf, bits=packed[first], owner=np.asarray([owner[i] for i in first], np.int64))
        atomic_write_bytes(path, buf.getvalue())
    return torch.from_numpy(np.stack([rows[i] for i in first])).to(torch.float32), [owner[i] for i in first]


def _nearest(a: torch.Tensor, b: torch.Tensor, window: int, exact: bool = True,
             chunk: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """For each row of ``a`` (binary float32), the Hamming distance to the nearest row of ``b`` and its index.

    Exact, with pruning: ``|ink(x) - ink(y)|`` is a lower bound of the distance, so a chunk of rows of ``a``
    (sorted by ink, within ``[lo, hi]``) is first compared only with the rows of ``b`` whose ink lies in
    ``[lo - window, hi + window]``; every row of ``b`` outside is more than ``window`` away, so a best distance of
    at most ``window`` is exact. With ``exact`` the rows left above it are compared with the whole of ``b``;
    without, their distance is returned as inf (known only to exceed ``window``)."""
    na, nb = a.sum(1), b.sum(1)
    order_b = torch.argsort(nb, stable=True)
    nb_sorted = nb[order_b]
    best = torch.full((a.shape[0],), float("inf"))
    arg = torch.zeros(a.shape[0], dtype=torch.long)
    order_a = torch.argsort(na, stable=True)
    for i in range(0, a.shape[0], chunk):
        rows = order_a[i:i + chunk]
        lo, hi = float(na[rows].min()) - window, float(na[rows].max()) + window
        s, e = int(torch.searchsorted(nb_sorted, lo)), int(torch.searchsorted(nb_sorted, hi, right=True))
        cols = order_b[s:e]
        if len(cols):
            d = na[rows, None] + nb[None, cols] - 2 * a[rows] @ b[cols].T
            m, j = d.min(1)
            best[rows], arg[rows] = m, cols[j]
    rest = torch.nonzero(best.round() > window).flatten()
    if not exact:
        best[rest] = float("inf")
        rest = rest[:0]
    for i in range(0, len(rest), chunk):
        rows = rest[i:i + chunk]
        d = na[rows, None] + nb[None, :] - 2 * a[rows] @ b.T
        m, j = d.min(1)
        best[rows], arg[rows] = m, j
    return best.round(), arg


def pixel_disjointness(classes: Sequence[GlyphClass], threshold: int = NEAR_MAX_PIXELS,
                       include_members: bool = True, exact: bool = True) -> list[dict]:
    """Rule 3 for ``classes``: per class, the smallest Hamming distance (pixels of 1,024, binarised 32 x 32
    size-normalised renders, over every pair of fonts) between a render of the class (its representative and, with
    ``include_members``, its merged members, in every font that draws them) and a render of any committed benchmark
    class; the nearest committed class; and whether it is disjoint (distance > ``threshold``).

    Returns one dict per class: ``codepoint``, ``distance``, ``nearest`` (code point of the committed class),
    ``font`` (the class's font in that nearest pair), ``disjoint``. ``exact=False`` is the quick check (a test):
    distances above ``threshold`` are not computed (``distance``, ``nearest`` and ``font`` None, ``disjoint``
    True), which skips most of the comparisons."""
    threshold = int(Number(0, 1024, integer=True).check("threshold", threshold))
    allowed = {f: allowed_codepoints(f) for f in FONT_FILES}
    rows, owner = [], []
    for k, c in enumerate(classes):
        cps = (c.codepoint,) + (tuple(c.members) if include_members else ())
        for cp in cps:
            for f in FONT_FILES:
                if cp in allowed[f]:
                    r = _analysis_render(f, cp)
                    if r is not None:
                        rows.append(r)
                        owner.append((k, f))
    if not rows:
        raise ValueError("pixel_disjointness: none of the given classes has a render")
    bench, bench_owner = _benchmark_renders()
    dist, arg = _nearest(torch.from_numpy(np.stack(rows)).to(torch.float32), bench, window=threshold, exact=exact)
    out = [{"codepoint": c.codepoint, "distance": None, "nearest": None, "font": None} for c in classes]
    seen = set()
    for row, (k, f) in enumerate(owner):
        seen.add(k)
        if not torch.isfinite(dist[row]):
            continue
        d = int(dist[row])
        if out[k]["distance"] is None or d < out[k]["distance"]:
            out[k].update(distance=d, nearest=bench_owner[int(arg[row])], font=f)
    for k, o in enumerate(out):
        if k not in seen:
            raise ValueError(f"pixel_disjointness: U+{o['codepoint']:04X} has no render in any font")
        o["disjoint"] = o["distance"] is None or o["distance"] > threshold
    return out


def compute_pretrain_classes(progress: bool = False) -> tuple[list[GlyphClass], dict, list[dict]]:
    """Apply rules 1-4 of the module docstring to the installed fonts.

    Returns (classes by code point, statistics, the pixel check of every kept class)."""
    t0 = time.perf_counter()
    used = benchmark_codepoints()
    allowed = {f: allowed_codepoints(f) for f in FONT_FILES}
    counts: dict[int, int] = {}
    for f in FONT_FILES:
        for cp in allowed[f]:
            if cp not in used:
                counts[cp] = counts.get(cp, 0) + 1
    candidates = sorted(cp for cp, n in counts.items() if n >= PRETRAIN_MIN_FONTS)
    renders = {f: {} for f in FONT_FILES}
    for f in FONT_FILES:
        for cp in candidates:
            if cp in allowed[f]:
                r = _analysis_render(f, cp)
                if r is not None:
                    renders[f][cp] = r
    fonts_of = {cp: [f for f in FONT_FILES if cp in renders[f]] for cp in candidates}
    visible = [cp for cp in candidates if len(fonts_of[cp]) >= PRETRAIN_MIN_FONTS]
    if progress:
        print(f"  {len(candidates)} candidate code points, {len(visible)} drawn by >= {PRETRAIN_MIN_FONTS} fonts "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    # rule 2: homoglyphs among the candidates (the benchmark's rule 4)
    groups, _ = homoglyph_groups(visible, renders)
    merged = []
    for members in groups:
        members = sorted(members)
        rep = min(members, key=lambda cp: (-len(fonts_of[cp]), cp))
        merged.append(GlyphClass(rep, char_name(rep), tuple(fonts_of[rep]), tuple(m for m in members if m != rep)))
    merged.sort(key=lambda c: c.codepoint)
    # rule 3: disjoint by look from every committed class
    check = pixel_disjointness(merged)
    classes = [c for c, ok in zip(merged, check) if ok["disjoint"]]
    kept = [ok for ok in check if ok["disjoint"]]
    n_fonts = np.array([len(c.fonts) for c in classes])
    stats = {"candidates": len(candidates), "drawn_by_min_fonts": len(visible), "homoglyph_groups": len(merged),
             "dropped_near_benchmark": len(merged) - len(classes), "classes": len(classes),
             "fonts_per_class": {"min": int(n_fonts.min()), "median": float(np.median(n_fonts)),
                                 "max": int(n_fonts.max())},
             "min_distance_to_benchmark": min(ok["distance"] for ok in kept),
             "seconds": round(time.perf_counter() - t0, 1)}
    return classes, stats, kept


def rebuild_pretrain_classes(path: Path = PRETRAIN_JSON, progress: bool = True) -> dict:
    """Recompute the pretraining class list and write ``glyph_pretrain_classes.json`` (atomically)."""
    classes, stats, kept = compute_pretrain_classes(progress=progress)
    scripts: dict[str, int] = {}
    for c in classes:
        s = c.name.split()[0]
        scripts[s] = scripts.get(s, 0) + 1
    meta = {
        "description": "sec_lib glyph pretraining classes: code points no benchmark class uses, disjoint by look "
                       "(sec_lib.data.glyph_pretrain)",
        "rule": {"min_fonts": PRETRAIN_MIN_FONTS, "near_max_pixels": NEAR_MAX_PIXELS,
                 "dup_max_pixels": DUP_MAX_PIXELS, "analysis_size": ANALYSIS_SIZE, "min_ink": MIN_INK,
                 "excluded_categories": list(EXCLUDED_CATEGORIES), "compared_with": "every committed class "
                 "(train, held-out and test; representatives and merged members), every pair of fonts"},
        "fonts": font_versions(),
        "versions": {**font_library_versions(), "unicodedata": unicodedata.unidata_version},
        "stats": {k: v for k, v in stats.items() if k != "seconds"},
        "first_words": dict(sorted(scripts.items(), key=lambda kv: (-kv[1], kv[0]))),
    }
    entries = [{"cp": f"U+{c.codepoint:04X}", "name": c.name, "fonts": [FONT_FILES.index(f) for f in c.fonts],
                "members": [f"U+{m:04X}" for m in c.members], "nearest": f"U+{ok['nearest']:04X}",
                "distance": ok["distance"]} for c, ok in zip(classes, kept)]
    head = json.dumps(meta, indent=1, ensure_ascii=False)[:-2]
    body = ",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in entries)
    atomic_write_bytes(Path(path), (head + ',\n "classes": [\n' + body + "\n ]\n}\n").encode("utf-8"))
    _load.cache_clear()
    return stats


@functools.lru_cache(maxsize=2)
def _load(path: str) -> tuple[dict, tuple[GlyphClass, ...]]:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist; build it with `python -m sec_lib.data.glyph_pretrain --rebuild`")
    meta = json.loads(p.read_text(encoding="utf-8"))
    classes = tuple(GlyphClass(int(e["cp"][2:], 16), e["name"], tuple(FONT_FILES[i] for i in e["fonts"]),
                               tuple(int(m[2:], 16) for m in e["members"])) for e in meta["classes"])
    return meta, classes


def pretrain_classes(path: Path = PRETRAIN_JSON) -> list[GlyphClass]:
    """The committed pretraining classes, by code point."""
    return list(_load(str(path))[1])


def pretrain_manifest(path: Path = PRETRAIN_JSON) -> dict:
    """The committed list's header and entries (rule, fonts, statistics, and per class its nearest committed
    benchmark class and pixel distance)."""
    return json.loads(json.dumps(_load(str(path))[0]))


def load_pretrain_glyphs(image_size: int = 32, instances_per_class: int = PRETRAIN_INSTANCES_PER_CLASS,
                         seed: int = 0, cache_dir: str | os.PathLike | None = None, regenerate: bool = False):
    """The pretraining images as a :class:`~sec_lib.data.glyphs.GlyphDataset` (``split="pretrain"``), rendered
    like the benchmark's (:func:`~sec_lib.data.glyph_pool.render_pool`) and cached as
    ``<cache>/pretrain_<size>px_<ipc>ipc_seed<seed>.pt`` with a JSON manifest whose ``sha256`` is the data hash."""
    image_size = _SIZE.check("image_size", image_size)
    instances_per_class = _INSTANCES.check("instances_per_class", instances_per_class)
    seed = _SEED.check("seed", seed)
    classes = pretrain_classes()
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    stem = f"pretrain_{image_size}px_{instances_per_class}ipc_seed{seed}"
    pt, js = cache_dir / f"{stem}.pt", cache_dir / f"{stem}.json"
    expected = {"format": "sec_lib.data.glyph_pretrain pool", "generator_version": GENERATOR_VERSION,
                "image_size": image_size, "instances_per_class": instances_per_class, "seed": seed,
                "classes": [c.label for c in classes],
                "class_fonts": [[FONT_FILES.index(f) for f in c.fonts] for c in classes],
                "fonts": font_versions(), "versions": font_library_versions()}
    pool = None if regenerate else try_load(pt, js, expected)
    if pool is not None:
        manifest = json.loads(js.read_text(encoding="utf-8"))
    else:
        t0 = time.perf_counter()
        pool = render_pool(classes, image_size, instances_per_class, seed)
        buf = io.BytesIO()
        torch.save(pool, buf)
        data = buf.getvalue()
        manifest = {**expected, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "tensor_file": pt.name,
                    "num_images": int(pool["images"].shape[0]),
                    "generation_seconds": round(time.perf_counter() - t0, 3)}
        atomic_write_bytes(pt, data)
        atomic_write_bytes(js, (json.dumps(manifest, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
        logger.info("rendered %d pretraining glyph images into %s", manifest["num_images"], pt)
    return GlyphDataset(pool["images"], pool["labels"], classes, pool["fonts"], "pretrain", manifest)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sec_lib.data.glyph_pretrain", description=__doc__.split("\n")[0])
    ap.add_argument("--rebuild", action="store_true", help=f"recompute {PRETRAIN_JSON.name} from the installed fonts")
    args = ap.parse_args(argv)
    if not args.rebuild:
        ap.print_help()
        return 2
    torch.set_num_threads(1)
    print(json.dumps(rebuild_pretrain_classes(), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
