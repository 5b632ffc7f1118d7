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
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import io
import json
import logging
import math
import os
import tempfile
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

logger = logging.getLogger(__name__)

#: Version of the rendering recipe; bump it when the images would change (invalidates caches).
GENERATOR_VERSION = 1
DEFAULT_IMAGE_SIZE = 32
DEFAULT_INSTANCES_PER_CLASS = 12
DEFAULT_SEED = 0
SPLITS = ("train", "test")

#: Font files used, in a fixed order (the font index stored with every instance refers to this list).
FONT_FILES: tuple[str, ...] = (
    "DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf", "DejaVuSans-BoldOblique.ttf",
    "DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf", "DejaVuSansMono-Oblique.ttf",
    "DejaVuSansMono-BoldOblique.ttf",
    "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf", "DejaVuSerif-Italic.ttf", "DejaVuSerif-BoldItalic.ttf",
    "STIXGeneral.ttf", "STIXGeneralBol.ttf", "STIXGeneralItalic.ttf", "STIXGeneralBolIta.ttf",
    "cmr10.ttf", "cmb10.ttf", "cmss10.ttf", "cmti10.ttf", "cmtt10.ttf", "cmmi10.ttf", "cmsy10.ttf",
)

_UPPER = set(range(0x41, 0x5B))
_LOWER = set(range(0x61, 0x7B))
_DIGITS = set(range(0x30, 0x3A))
# OT1 (cmr/cmb/cmss/cmti) agrees with ASCII on letters, digits and this punctuation (not on
# " < > \ _ { | } ^ and the quotes); cmti10 draws '$' as a pound sign, so it is left out everywhere.
_OT1_PUNCT = {ord(c) for c in "!%&()*+,-./:;=?@[]"}
#: Code points each Computer Modern font may contribute (TeX encodings differ from Unicode elsewhere).
CM_WHITELIST: dict[str, frozenset[int]] = {
    "cmr10.ttf": frozenset(_UPPER | _LOWER | _DIGITS | _OT1_PUNCT),
    "cmb10.ttf": frozenset(_UPPER | _LOWER | _DIGITS | _OT1_PUNCT),
    "cmss10.ttf": frozenset(_UPPER | _LOWER | _DIGITS | _OT1_PUNCT),
    "cmti10.ttf": frozenset(_UPPER | _LOWER | _DIGITS | _OT1_PUNCT),
    "cmtt10.ttf": frozenset(range(0x21, 0x7F)),        # typewriter encoding = printable ASCII
    "cmmi10.ttf": frozenset(_UPPER | _LOWER | _DIGITS),  # math italic letters, old-style digits
    "cmsy10.ttf": frozenset(_UPPER),                     # calligraphic capitals
}

#: The regular upright member of each font family (one per design) used by the variety check.
REGULAR_FONTS: tuple[str, ...] = ("DejaVuSans.ttf", "DejaVuSansMono.ttf", "DejaVuSerif.ttf", "STIXGeneral.ttf",
                                  "cmr10.ttf", "cmss10.ttf", "cmtt10.ttf", "cmmi10.ttf", "cmsy10.ttf")

# --- class-list rule parameters (see the module docstring) ---
MIN_FONTS = 8
MIN_DESIGNS = 2
MIN_INK = 4
ANALYSIS_SIZE = 32
DUP_MAX_PIXELS = 8
DESIGN_MAX_PIXELS = 8
CLASS_ORDER_SEED = 2020
EXCLUDED_CATEGORIES = ("Mn", "Mc", "Me", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn")

# --- augmentation parameters ---
FILL = 0.72           # longest side of the (unaugmented) glyph, as a fraction of image_size
ROTATION_DEG = 12.0
SCALE_RANGE = (0.85, 1.1)
ASPECT_JITTER = 0.08  # log-uniform anisotropic scale
SHEAR = 0.12
SHIFT = 0.08          # fraction of image_size
BLUR_MAX = 0.6        # Gaussian blur radius at output resolution, uniform in [0, BLUR_MAX]
_OVERSAMPLE = 2       # glyphs are transformed at 2x and box-downsampled

PACKAGE_DIR = Path(__file__).resolve().parent
CLASS_TXT = PACKAGE_DIR / "glyph_classes.txt"
CLASS_JSON = PACKAGE_DIR / "glyph_classes.json"


# =============================================================================================
# Fonts and rendering
# =============================================================================================

@functools.lru_cache(maxsize=1)
def font_dir() -> Path:
    """matplotlib's bundled TrueType folder (``mpl-data/fonts/ttf``)."""
    import matplotlib
    return Path(matplotlib.get_data_path()) / "fonts" / "ttf"


@functools.lru_cache(maxsize=None)
def _font_meta(path: str) -> tuple[dict[int, str], str, str]:
    """(cmap code point -> glyph name, family+style name, version string) read with fontTools."""
    from fontTools.ttLib import TTFont
    with TTFont(path, lazy=True) as tt:
        cmap = dict(tt.getBestCmap() or {})
        name = tt["name"]
        full = name.getDebugName(4) or Path(path).stem
        version = name.getDebugName(5) or "unknown"
    return cmap, full, version


def font_versions(files: Sequence[str] = FONT_FILES) -> list[dict]:
    """``[{"file", "name", "version"}]`` for the given font files (from each font's name table)."""
    out = []
    for f in files:
        p = font_dir() / f
        if not p.exists():
            raise FileNotFoundError(f"font file {p} not found (matplotlib {_mpl_version()} does not ship it)")
        _, full, version = _font_meta(str(p))
        out.append({"file": f, "name": full, "version": version})
    return out


def _mpl_version() -> str:
    import matplotlib
    return matplotlib.__version__


def _library_versions() -> dict:
    import PIL
    from PIL import features
    return {"matplotlib": _mpl_version(), "pillow": PIL.__version__,
            "freetype": features.version("freetype2") or "unknown"}


@functools.lru_cache(maxsize=512)
def _pil_font(path: str, size: int):
    from PIL import ImageFont
    # BASIC layout: no shaping engine, so a single code point always maps to its cmap glyph.
    return ImageFont.truetype(path, size, layout_engine=ImageFont.Layout.BASIC)


def _render_ink(path: str, ch: str, size: int):
    """The glyph of ``ch`` at font size ``size`` cropped to its ink (PIL 'L' image, ink=255) or None."""
    from PIL import Image, ImageDraw
    font = _pil_font(path, size)
    left, top, right, bottom = font.getbbox(ch)
    pad = max(4, size // 4)
    w, h = max(1, right - left) + 2 * pad, max(1, bottom - top) + 2 * pad
    im = Image.new("L", (w, h), 0)
    ImageDraw.Draw(im).text((pad - left, pad - top), ch, font=font, fill=255)
    box = im.getbbox()
    return im.crop(box) if box else None


def render_glyph(font_file: str, codepoint: int, target: int):
    """Render ``codepoint`` with ``font_file`` cropped to its ink and resized so that its longer side is
    ``target`` pixels (aspect kept). The font size is chosen from the glyph's bounding box so that the
    ink is rasterised at about ``target`` pixels (small glyphs such as "." get a large font size), then
    a LANCZOS resize makes the fit exact. Returns a PIL 'L' image (ink 255) or None if the glyph has
    no ink (fewer than :data:`MIN_INK` pixels above half intensity)."""
    from PIL import Image
    path = str(font_dir() / font_file)
    ch = chr(codepoint)
    ref = 4 * target
    left, top, right, bottom = _pil_font(path, ref).getbbox(ch)
    longest = max(right - left, bottom - top)
    if longest <= 0:
        return None
    size = max(4, min(64 * target, math.ceil(ref * target / longest)))
    ink = _render_ink(path, ch, size)
    if ink is None or int((np.asarray(ink) > 127).sum()) < MIN_INK:
        return None
    w, h = ink.size
    s = target / max(w, h)
    if abs(s - 1) < 1e-9:
        return ink
    return ink.resize((max(1, round(w * s)), max(1, round(h * s))), Image.Resampling.LANCZOS)


def _centered(img, size: int) -> np.ndarray:
    """Paste a PIL image centred on a size x size black canvas; float32 array in [0, 1]."""
    out = np.zeros((size, size), np.float32)
    a = np.asarray(img, np.float32) / 255.0
    h, w = a.shape
    y0, x0 = (size - h) // 2, (size - w) // 2
    out[y0:y0 + h, x0:x0 + w] = a
    return out


def _stretched(img, size: int) -> np.ndarray:
    """Box-resize a (larger) PIL image to fill a size x size square (aspect not kept); float32 in [0, 1]."""
    from PIL import Image
    return np.asarray(img.resize((size, size), Image.Resampling.BOX), np.float32) / 255.0


def _allowed_codepoints(font_file: str) -> dict[int, str]:
    """Candidate code points a font may contribute -> glyph name (rules 1-2 of the module docstring)."""
    cmap, _, _ = _font_meta(str(font_dir() / font_file))
    white = CM_WHITELIST.get(font_file)
    out = {}
    for cp, gname in cmap.items():
        if gname == ".notdef" or (white is not None and cp not in white):
            continue
        if unicodedata.category(chr(cp)) in EXCLUDED_CATEGORIES:
            continue
        out[cp] = gname
    return out


def char_name(cp: int) -> str:
    return unicodedata.name(chr(cp), f"<unnamed U+{cp:04X}>")


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


class _UnionFind:
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


def _pair_distances(v: torch.Tensor) -> torch.Tensor:
    """Hamming distances between the rows of ``v`` binarised at 0.5 (number of differing pixels)."""
    b = (v.to(torch.float32) > 0.5).to(torch.float32)
    n = b.sum(1)
    return (n[:, None] + n[None, :] - 2 * b @ b.T).round()


def compute_classes(progress: bool = False) -> tuple[list[GlyphClass], dict]:
    """Apply the class rule of the module docstring to the installed fonts.

    Returns (classes in the committed order, statistics dict). Takes about a minute."""
    t0 = time.perf_counter()
    allowed = {f: _allowed_codepoints(f) for f in FONT_FILES}
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
                r[cp] = _centered(g, ANALYSIS_SIZE).ravel() > 0.5
                if f in REGULAR_FONTS:
                    st[cp] = _stretched(render_glyph(f, cp, 4 * ANALYSIS_SIZE), ANALYSIS_SIZE).ravel() > 0.5
        renders[f], stretched[f] = r, st
        if progress:
            print(f"  rendered {f}: {len(r)} glyphs ({time.perf_counter() - t0:.0f} s)", flush=True)
    fonts_of: dict[int, list[str]] = {cp: [f for f in FONT_FILES if cp in renders[f]] for cp in candidates}
    visible = [cp for cp in candidates if len(fonts_of[cp]) >= MIN_FONTS]
    index = {cp: i for i, cp in enumerate(visible)}

    # 2. homoglyph pairs: same shape in >= half of the fonts rendering both (and >= 2 fonts)
    n = len(visible)
    presence = torch.zeros(n, len(FONT_FILES))
    dup_count: dict[tuple[int, int], int] = {}
    for j, f in enumerate(FONT_FILES):
        cps = [cp for cp in visible if cp in renders[f]]
        if not cps:
            continue
        ids = torch.tensor([index[cp] for cp in cps])
        presence[ids, j] = 1
        v = torch.from_numpy(np.stack([renders[f][cp] for cp in cps]))
        d = _pair_distances(v)
        a, b = torch.nonzero(torch.triu(d <= DUP_MAX_PIXELS, diagonal=1), as_tuple=True)
        for x, y in zip(ids[a].tolist(), ids[b].tolist()):
            dup_count[(x, y)] = dup_count.get((x, y), 0) + 1
    co = presence @ presence.T
    uf = _UnionFind(range(n))
    n_pairs = 0
    for (x, y), c in dup_count.items():
        if c >= 2 and c >= 0.5 * float(co[x, y]):
            uf.union(x, y)
            n_pairs += 1
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(uf.find(i), []).append(visible[i])

    # 3. representatives, variety check
    classes = []
    dropped_same = []
    for members in groups.values():
        members = sorted(members)
        rep = min(members, key=lambda cp: (-len(fonts_of[cp]), cp))
        fonts = fonts_of[rep]
        upright = [f for f in REGULAR_FONTS if f in fonts]
        if len(upright) < MIN_DESIGNS or min(
                _num_designs(_pair_distances(torch.from_numpy(np.stack([r[f][rep] for f in upright]))),
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


def _num_designs(d: torch.Tensor, thr: float) -> int:
    """Number of groups of renders when renders at most ``thr`` pixels apart are linked (connected components)."""
    n = d.shape[0]
    uf = _UnionFind(range(n))
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
        "versions": {**_library_versions(), "unicodedata": unicodedata.unidata_version},
        "stats": {k: v for k, v in stats.items() if k != "seconds"},
        "classes": [{"cp": f"U+{c.codepoint:04X}", "name": c.name,
                     "fonts": [FONT_FILES.index(f) for f in c.fonts],
                     "members": [f"U+{m:04X}" for m in c.members]} for c in classes],
    }
    entries = meta.pop("classes")
    head = json.dumps(meta, indent=1, ensure_ascii=False)[:-2]  # drop the closing "\n}"
    body = ",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in entries)
    _atomic_write_bytes(Path(txt_path), txt.encode("utf-8"))
    _atomic_write_bytes(Path(json_path), (head + ',\n "classes": [\n' + body + "\n ]\n}\n").encode("utf-8"))
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
    _check_split(split)
    _check_max_classes(max_classes)
    allc = glyph_classes()
    half = len(allc) // 2
    cls = allc[:half] if split == "train" else allc[half:2 * half]
    return cls if max_classes is None else cls[:max_classes]


# =============================================================================================
# Instance rendering
# =============================================================================================

def _augment(base, size: int, rng: np.random.Generator) -> np.ndarray:
    """One augmented instance (uint8 size x size) from a fitted glyph rendered at 2x resolution.

    Stroke weight (erode / keep / dilate with probabilities 1/4, 1/2, 1/4 by a k x k Min/Max filter at 2x,
    k = 3 at 32 px; erosion is skipped if it would remove half of the ink), then a random affine
    map about the centre (rotation, scale, aspect, shear, shift) at 2x, a 2x box downsample and a
    Gaussian blur."""
    from PIL import Image, ImageFilter
    big = size * _OVERSAMPLE
    k = 2 * max(1, size // 32) + 1  # 3 at 32 px, 5 at 64 px: the same relative stroke change
    u = rng.random()
    if u < 0.25:
        thin = base.filter(ImageFilter.MinFilter(k))
        if np.asarray(thin, np.float32).sum() >= 0.5 * np.asarray(base, np.float32).sum():
            base = thin
    elif u >= 0.75:
        base = base.filter(ImageFilter.MaxFilter(k))
    theta = math.radians(rng.uniform(-ROTATION_DEG, ROTATION_DEG))
    s = rng.uniform(*SCALE_RANGE)
    asp = math.exp(rng.uniform(-ASPECT_JITTER, ASPECT_JITTER))
    sh = rng.uniform(-SHEAR, SHEAR)
    dx, dy = rng.uniform(-SHIFT, SHIFT, size=2) * big
    # forward map (output pixel of the big canvas <- base pixel): y = A (x - c_base) + c_out + shift,
    # A = R(theta) @ Shear(sh) @ diag(s*asp, s/asp). PIL wants the inverse: x = A^-1 (y - c_out - shift) + c_base.
    c, si = math.cos(theta), math.sin(theta)
    sx, sy = s * asp, s / asp
    a00, a01, a10, a11 = c * sx, (c * sh - si) * sy, si * sx, (si * sh + c) * sy
    det = a00 * a11 - a01 * a10
    i00, i01, i10, i11 = a11 / det, -a01 / det, -a10 / det, a00 / det
    ox, oy = big / 2 + dx, big / 2 + dy
    bx, by = base.size[0] / 2, base.size[1] / 2
    data = (i00, i01, bx - i00 * ox - i01 * oy, i10, i11, by - i10 * ox - i11 * oy)
    out = base.transform((big, big), Image.Transform.AFFINE, data, resample=Image.Resampling.BILINEAR,
                         fillcolor=0)
    out = out.reduce(_OVERSAMPLE)
    r = rng.uniform(0.0, BLUR_MAX)
    if r > 0.05:
        out = out.filter(ImageFilter.GaussianBlur(r))
    return np.asarray(out, np.uint8)


def _render_classes(classes: Sequence[GlyphClass], image_size: int, instances_per_class: int,
                    seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Worker: (images uint8 (n*ipc, S, S), font indices int16) for a chunk of classes."""
    n = len(classes) * instances_per_class
    images = np.zeros((n, image_size, image_size), np.uint8)
    fonts = np.zeros(n, np.int16)
    target = max(1, int(round(FILL * image_size * _OVERSAMPLE)))
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
            images[k] = _augment(bases[f], image_size, np.random.default_rng([seed, cls.codepoint, j]))
            fonts[k] = FONT_FILES.index(f)
            k += 1
    return images, fonts


def _auto_workers(n_classes: int) -> int:
    import multiprocessing
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
    _check_int("image_size", image_size, 8, 1024)
    _check_int("instances_per_class", instances_per_class, 1, 10000)
    _check_int("seed", seed, 0, 2**63 - 1)
    classes = list(classes)
    workers = _auto_workers(len(classes)) if num_workers is None else num_workers
    _check_int("num_workers", workers, 0, 256)
    if workers <= 1:
        images, fonts = _render_classes(classes, image_size, instances_per_class, seed)
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
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


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; these are ordinary shared files
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
        "versions": _library_versions(),
    }


def _try_load(pt: Path, js: Path, expected: dict) -> dict | None:
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
    _check_int("image_size", image_size, 8, 1024)
    _check_int("instances_per_class", instances_per_class, 1, 10000)
    _check_int("seed", seed, 0, 2**63 - 1)
    _check_max_classes(max_classes)
    train, test = split_classes("train", max_classes), split_classes("test", max_classes)
    classes = train + test
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    pt, js = cache_paths(cache_dir, image_size, instances_per_class, seed, max_classes)
    expected = _expected_manifest(classes, image_size, instances_per_class, seed, max_classes)
    expected["num_train_classes"], expected["num_test_classes"] = len(train), len(test)
    if not regenerate:
        pool = _try_load(pt, js, expected)
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
    _atomic_write_bytes(pt, data)
    _atomic_write_bytes(js, (json.dumps(manifest, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
    logger.info("rendered %d glyph images in %.1f s into %s", manifest["num_images"], seconds, pt)
    return pool, manifest


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
    _check_split(split)
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
    _check_int("n_classes", n_classes, 1, 10**6)
    _check_int("n_per_class", n_per_class, 1, 10**6)
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


# =============================================================================================
# Validation helpers
# =============================================================================================

def _check_split(split):
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is not valid for glyphs; valid splits: {', '.join(SPLITS)}")


def _check_int(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not (lo <= value <= hi):
        raise ValueError(f"{name}={value!r} is not valid; expected an integer in [{lo}, {hi}]")


def _check_max_classes(max_classes):
    if max_classes is not None:
        _check_int("max_classes", max_classes, 1, 10**9)


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
